"""Metadata (3): brokers, topics, partitions and leaders; auto-creates topics when allowed."""

from __future__ import annotations

import logging

from framework.errors import StoreError
from framework.metadata.store import TopicInfo
from framework.protocol.errors import ErrorCode
from framework.protocol.messages.metadata import (
    MetadataRequest,
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from framework.protocol.schema import ZERO_UUID
from framework.server.context import RequestContext

API_KEY = 3
log = logging.getLogger("sftraffic.server")

# READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS (no ACLs yet)
TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
CLUSTER_OPERATIONS = sum(1 << op for op in (4, 5, 7, 8, 9, 10, 11, 12))
NOT_REQUESTED = -2147483648


def topic_metadata(ctx: RequestContext, t: TopicInfo, include_ops: bool) -> MetadataResponseTopic:
    broker = ctx.broker
    out = []
    cs = broker.cluster
    if cs is None:
        for p in broker.partitions.get(t.name, []):
            if p is not None:
                out.append(
                    MetadataResponsePartition(
                        error_code=0,
                        partition_index=p.index,
                        leader_id=p.leader_id,
                        leader_epoch=p.leader_epoch,
                        replica_nodes=list(p.replicas),
                        isr_nodes=list(p.isr),
                        offline_replicas=[],
                    )
                )
    else:
        states = cs.pstates.get(t.name, [])
        for i, replicas in enumerate(t.assignments):
            if i >= len(states):
                break
            ps = states[i]
            out.append(
                MetadataResponsePartition(
                    error_code=0 if ps.leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE,
                    partition_index=i,
                    leader_id=ps.leader,
                    leader_epoch=ps.leader_epoch,
                    replica_nodes=list(replicas),
                    isr_nodes=list(ps.isr),
                    offline_replicas=[r for r in replicas if not cs.unfenced(r)],
                )
            )
    return MetadataResponseTopic(
        error_code=0,
        name=t.name,
        topic_id=t.id_bytes,
        is_internal=t.internal,
        partitions=out,
        topic_authorized_operations=TOPIC_OPERATIONS if include_ops else NOT_REQUESTED,
    )


def _missing(name: str | None, code: int) -> MetadataResponseTopic:
    return MetadataResponseTopic(
        error_code=code, name=name, topic_id=ZERO_UUID, topic_authorized_operations=NOT_REQUESTED
    )


def handle(ctx: RequestContext, req: MetadataRequest) -> MetadataResponse:
    broker = ctx.broker
    md = broker.metadata
    v = ctx.version
    include_ops = req.include_topic_authorized_operations
    topics: list[MetadataResponseTopic] = []
    if req.topics is None or (v == 0 and not req.topics):
        for every in list(md.topics.values()):
            topics.append(topic_metadata(ctx, every, include_ops))
    else:
        auto = (v < 4 or req.allow_auto_topic_creation) and broker.config["auto.create.topics.enable"]
        for rt in req.topics:
            name = rt.name
            t: TopicInfo | None
            if name is None:
                t = md.topics_by_id.get(rt.topic_id)
                if t is None:
                    topics.append(
                        MetadataResponseTopic(
                            error_code=ErrorCode.UNKNOWN_TOPIC_ID,
                            name=None,
                            topic_id=rt.topic_id,
                            topic_authorized_operations=NOT_REQUESTED,
                        )
                    )
                    continue
                topics.append(topic_metadata(ctx, t, include_ops))
                continue
            t = md.topics.get(name)
            if t is None and auto:
                try:
                    t = broker.create_topic(name)
                    log.info("auto-created topic %s for %s", name, ctx.peer)
                    if broker.cluster is not None:
                        # proposed to the quorum: the client asks again, as with Kafka
                        broker.detach_pending()
                        topics.append(_missing(name, ErrorCode.LEADER_NOT_AVAILABLE))
                        continue
                except StoreError as exc:
                    topics.append(_missing(name, exc.code))
                    continue
            if t is None:
                topics.append(_missing(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            topics.append(topic_metadata(ctx, t, include_ops))
    brokers = [
        MetadataResponseBroker(node_id=n.node_id, host=n.host, port=n.port, rack=n.rack)
        for n in broker.nodes()
    ]
    return MetadataResponse(
        brokers=brokers,
        cluster_id=md.cluster_id,
        controller_id=broker.controller_id,
        topics=topics,
        cluster_authorized_operations=(
            CLUSTER_OPERATIONS if req.include_cluster_authorized_operations else NOT_REQUESTED
        ),
    )


def error_response(req: MetadataRequest, code: int, message: str) -> MetadataResponse:
    return MetadataResponse(error_code=code)
