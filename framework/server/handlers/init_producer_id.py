"""InitProducerId (22): a new producer id (epoch 0) for an idempotent producer.

As in Kafka, a producer without a transactional id always gets a fresh id, also when it asks
to bump the epoch of its current one (KIP-360): its sequences restart at 0 under the new id.
Transactional ids are refused: sftraffic has no transaction coordinator.

With an authorizer, as Kafka: a transactional id needs Write on it (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an idempotent producer IdempotentWrite on the cluster or
Write on some topic (KIP-679; else CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import logging

from framework.protocol.errors import ErrorCode
from framework.protocol.messages.init_producer_id import (
    InitProducerIdRequest,
    InitProducerIdResponse,
)
from framework.security.authorizer import AclOperation, ResourceType
from framework.server import authz
from framework.server.context import RequestContext

API_KEY = 22
log = logging.getLogger("sftraffic.server")


def handle(ctx: RequestContext, req: InitProducerIdRequest) -> InitProducerIdResponse:
    if req.transactional_id is not None:
        authz.check(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id)
    elif not authz.cluster_allowed(ctx, AclOperation.IDEMPOTENT_WRITE) and not authz.by_resource_type(
        ctx, AclOperation.WRITE, ResourceType.TOPIC
    ):
        authz.check_cluster(ctx, AclOperation.IDEMPOTENT_WRITE)
    if req.transactional_id:
        return InitProducerIdResponse(
            error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            producer_id=-1,
            producer_epoch=-1,
        )
    pid = ctx.services.producer_ids.next_id()
    log.debug("producer id %d for %s (%s)", pid, ctx.peer, ctx.header.client_id)
    return InitProducerIdResponse(error_code=ErrorCode.NONE, producer_id=pid, producer_epoch=0)


def error_response(req: InitProducerIdRequest, code: int, message: str) -> InitProducerIdResponse:
    return InitProducerIdResponse(error_code=code, producer_id=-1, producer_epoch=-1)
