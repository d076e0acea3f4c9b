"""Metadata (3): brokers, topics, partitions and leaders; auto-creates topics when allowed.

With an authorizer, as Kafka: a topic the principal may not Describe is left out of an
all-topics answer and answered TOPIC_AUTHORIZATION_FAILED (without its id) when asked for by
name, so its existence is not disclosed; an unknown topic is auto-created only with Create on
the cluster or the topic (else TOPIC_AUTHORIZATION_FAILED). The authorized-operations fields
are the principal's (the cluster's only with Describe on it, else 0).
"""

from __future__ import annotations

import logging

from framework.metadata.store import TopicInfo
from framework.protocol.error_codes import ErrorCode
from framework.protocol.fields import ZERO_UUID
from framework.protocol.messages.metadata import (
    MetadataRequest,
    MetadataRequestTopic,
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from framework.security.authorizer import CLUSTER_NAME, AclOperation, ResourceType
from framework.server import authz
from framework.server.context import RequestContext
from framework.server.errors import answer_errors

log = logging.getLogger("sftraffic.server")

NOT_REQUESTED = -2147483648
_DESCRIBE, _TOPIC = AclOperation.DESCRIBE, ResourceType.TOPIC


def cluster_operations(ctx: RequestContext) -> int:
    """The cluster's authorized operations: the principal's with Describe on it, else none."""
    if not authz.cluster_allowed(ctx, AclOperation.DESCRIBE):
        return 0
    return authz.operations(ctx, ResourceType.CLUSTER, CLUSTER_NAME)


def topic_metadata(ctx: RequestContext, t: TopicInfo, include_ops: bool) -> MetadataResponseTopic:
    cluster = ctx.cluster
    out = []
    for i, ps in enumerate(cluster.partition_states(t)):
        replicas = t.assignments[i]
        out.append(
            MetadataResponsePartition(
                error_code=ErrorCode.NONE if ps.leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE,
                partition_index=i,
                leader_id=ps.leader,
                leader_epoch=ps.leader_epoch,
                replica_nodes=list(replicas),
                isr_nodes=list(ps.isr),
                offline_replicas=[r for r in replicas if not cluster.is_live(r)],
            )
        )
    return MetadataResponseTopic(
        error_code=ErrorCode.NONE,
        name=t.name,
        topic_id=t.id_bytes,
        is_internal=t.internal,
        partitions=out,
        topic_authorized_operations=authz.operations(ctx, _TOPIC, t.name) if include_ops else NOT_REQUESTED,
    )


def _missing(name: str | None, code: int) -> MetadataResponseTopic:
    return MetadataResponseTopic(
        error_code=code, name=name, topic_id=ZERO_UUID, topic_authorized_operations=NOT_REQUESTED
    )


def _requested(
    ctx: RequestContext, rt: MetadataRequestTopic, auto: bool, include_ops: bool
) -> MetadataResponseTopic:
    name = rt.name
    if name is None:
        t = ctx.cluster.topic_by_id(rt.topic_id)
        if t is None:
            return MetadataResponseTopic(
                error_code=ErrorCode.UNKNOWN_TOPIC_ID,
                name=None,
                topic_id=rt.topic_id,
                topic_authorized_operations=NOT_REQUESTED,
            )
        if not authz.allowed(ctx, _DESCRIBE, _TOPIC, t.name):  # the id is no secret, the name is
            return MetadataResponseTopic(
                error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                name=None,
                topic_id=rt.topic_id,
                topic_authorized_operations=NOT_REQUESTED,
            )
        return topic_metadata(ctx, t, include_ops)
    if not authz.allowed(ctx, _DESCRIBE, _TOPIC, name):
        return _missing(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    t = ctx.cluster.topics.get(name)
    if t is None and auto:
        if not authz.cluster_allowed(ctx, AclOperation.CREATE) and not authz.allowed(
            ctx, AclOperation.CREATE, _TOPIC, name
        ):
            return _missing(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        result = _missing(name, ErrorCode.NONE)
        with answer_errors(result):
            created = ctx.admin.create_topic(name)
            log.info("auto-created topic %s for %s", name, ctx.peer)
            if created.committed is None:
                return topic_metadata(ctx, created.result, include_ops)
            # proposed to the quorum: the client asks again, as with Kafka
            created.detach()
            result.error_code = ErrorCode.LEADER_NOT_AVAILABLE
        return result
    if t is None:
        return _missing(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    return topic_metadata(ctx, t, include_ops)


async def handle(ctx: RequestContext, req: MetadataRequest) -> MetadataResponse:
    v = ctx.version
    include_ops = req.include_topic_authorized_operations
    if req.topics is None or (v == 0 and not req.topics):
        topics = [
            topic_metadata(ctx, t, include_ops)
            for t in list(ctx.cluster.topics.values())
            if authz.allowed(ctx, _DESCRIBE, _TOPIC, t.name)
        ]
    else:
        auto = (v < 4 or req.allow_auto_topic_creation) and ctx.config.bool("auto.create.topics.enable")
        topics = [_requested(ctx, rt, auto, include_ops) for rt in req.topics]
    return MetadataResponse(
        brokers=[
            MetadataResponseBroker(node_id=n.node_id, host=n.host, port=n.port, rack=n.rack)
            for n in ctx.cluster.nodes(ctx.listener)
        ],
        cluster_id=ctx.cluster.cluster_id,
        controller_id=ctx.cluster.controller_id,
        topics=topics,
        cluster_authorized_operations=(
            cluster_operations(ctx) if req.include_cluster_authorized_operations else NOT_REQUESTED
        ),
    )


def error_response(req: MetadataRequest, code: int, message: str) -> MetadataResponse:
    return MetadataResponse(error_code=code)
