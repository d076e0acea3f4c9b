"""InitProducerId (22): a producer id and epoch, for an idempotent or a transactional producer.

Without a transactional id, as in Kafka, a producer always gets a fresh id (epoch 0), also
when it asks to bump the epoch of its current one (KIP-360): its sequences restart at 0 under
the new id. With one, the transaction coordinator answers (coordinator/transactions.py): the
id's producer id with its epoch bumped, fencing older producers; an open transaction is
aborted first (CONCURRENT_TRANSACTIONS until then); ``transaction_timeout_ms`` above
``transaction.max.timeout.ms`` is INVALID_TRANSACTION_TIMEOUT. Versions before 4 get
INVALID_PRODUCER_EPOCH for PRODUCER_FENCED.

With an authorizer, as Kafka: a transactional id needs Write on it (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an idempotent producer IdempotentWrite on the cluster or
Write on some topic (KIP-679; else CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import logging

from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.init_producer_id import (
    InitProducerIdRequest,
    InitProducerIdResponse,
)
from framework.security.authorizer import AclOperation, ResourceType
from framework.server import authz, txn
from framework.server.context import RequestContext

log = logging.getLogger("sftraffic.server")


async def handle(ctx: RequestContext, req: InitProducerIdRequest) -> InitProducerIdResponse:
    tid = req.transactional_id
    if tid is not None:
        authz.check(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, tid)
        if not tid:
            return error_response(req, ErrorCode.INVALID_REQUEST, "empty transactional id")
        svc = txn.check_coordinator(ctx, tid)
        return await _transactional(ctx, req, svc)
    if not authz.cluster_allowed(ctx, AclOperation.IDEMPOTENT_WRITE) and not authz.by_resource_type(
        ctx, AclOperation.WRITE, ResourceType.TOPIC
    ):
        authz.check_cluster(ctx, AclOperation.IDEMPOTENT_WRITE)
    pid = ctx.services.producer_ids.next_id()
    log.debug("producer id %d for %s (%s)", pid, ctx.peer, ctx.header.client_id)
    return InitProducerIdResponse(error_code=ErrorCode.NONE, producer_id=pid, producer_epoch=0)


async def _transactional(
    ctx: RequestContext, req: InitProducerIdRequest, svc: txn.TransactionDirectory
) -> InitProducerIdResponse:
    assert req.transactional_id is not None
    expected = None
    if ctx.version >= 3 and req.producer_id >= 0:
        expected = (req.producer_id, req.producer_epoch)
    r = await svc.coordinator.init_producer_id(req.transactional_id, req.transaction_timeout_ms, expected)
    return InitProducerIdResponse(
        error_code=txn.for_version(r.error, ctx.version, 4),
        producer_id=r.producer_id,
        producer_epoch=r.producer_epoch,
    )


def error_response(req: InitProducerIdRequest, code: int, message: str) -> InitProducerIdResponse:
    return InitProducerIdResponse(error_code=code, producer_id=-1, producer_epoch=-1)
