"""DescribeTopicPartitions (75, KIP-966): topics and their partitions a page at a time (what
``kafka-topics --describe`` and the Java AdminClient's ``describeTopics`` use since 3.7).

As Kafka's ``DescribeTopicPartitionsRequestHandler``: no topics named means every topic; the
topics are answered in name order, from the cursor's topic and partition on, with at most
``response_partition_limit`` partitions (capped at 2000, at least 1) in the whole answer; when
partitions remain, ``next_cursor`` names the first one left out. A cursor whose topic is not in
the named list, or whose partition is negative, is INVALID_REQUEST. Per partition: leader,
leader epoch, replicas, ISR, offline replicas (unfenced brokers only are online) and
LEADER_NOT_AVAILABLE while it has no leader; eligible leader replicas are empty lists (the
store has no ELR: an ISR member is the only clean leader).

With an authorizer, as Metadata: a topic the principal may not Describe is left out when every
topic is asked for, and answered TOPIC_AUTHORIZATION_FAILED without its id (whether it exists
or not) when named; ``topic_authorized_operations`` are the principal's.
"""

from __future__ import annotations

from framework.errors import InvalidRequest, StoreError
from framework.metadata.store import TopicInfo, validate_topic_name
from framework.protocol.error_codes import ErrorCode
from framework.protocol.fields import ZERO_UUID
from framework.protocol.messages.describe_topic_partitions import (
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
    DescribeTopicPartitionsResponseCursor,
    DescribeTopicPartitionsResponsePartition,
    DescribeTopicPartitionsResponseTopic,
)
from framework.security.authorizer import AclOperation, ResourceType
from framework.server import authz
from framework.server.context import RequestContext

MAX_PARTITIONS = 2000  # Kafka's max.request.partition.size.limit default

_DESCRIBE, _TOPIC = AclOperation.DESCRIBE, ResourceType.TOPIC


def _partitions(
    ctx: RequestContext, t: TopicInfo, start: int, limit: int
) -> list[DescribeTopicPartitionsResponsePartition]:
    cluster = ctx.cluster
    states = cluster.partition_states(t)
    out = []
    for i in range(start, min(len(states), start + limit)):
        ps = states[i]
        replicas = list(t.assignments[i])
        out.append(
            DescribeTopicPartitionsResponsePartition(
                error_code=ErrorCode.NONE if ps.leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE,
                partition_index=i,
                leader_id=ps.leader,
                leader_epoch=ps.leader_epoch,
                replica_nodes=replicas,
                isr_nodes=list(ps.isr),
                eligible_leader_replicas=[],
                last_known_elr=[],
                offline_replicas=[r for r in replicas if not cluster.is_live(r)],
            )
        )
    return out


def _error_topic(name: str, code: int) -> DescribeTopicPartitionsResponseTopic:
    return DescribeTopicPartitionsResponseTopic(error_code=code, name=name, topic_id=ZERO_UUID)


def _missing(name: str) -> DescribeTopicPartitionsResponseTopic:
    try:
        validate_topic_name(name)
    except StoreError as exc:
        return _error_topic(name, exc.code)
    return _error_topic(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)


async def handle(ctx: RequestContext, req: DescribeTopicPartitionsRequest) -> DescribeTopicPartitionsResponse:
    cursor = req.cursor
    after = cursor.topic_name if cursor is not None else ""
    every = not req.topics
    if every:
        names = {n for n in ctx.cluster.topics if n >= after}
    else:
        names = {t.name for t in req.topics if t.name >= after}
        if cursor is not None and cursor.topic_name not in names:
            raise InvalidRequest(f"the topic list must contain the cursor's topic {cursor.topic_name!r}")
    if cursor is not None and cursor.partition_index < 0:
        raise InvalidRequest(f"the cursor's partition must not be negative ({cursor.partition_index})")
    denied: list[DescribeTopicPartitionsResponseTopic] = []
    allowed: list[str] = []
    for name in sorted(names):
        if authz.allowed(ctx, _DESCRIBE, _TOPIC, name):
            allowed.append(name)
        elif not every:  # neither the id nor whether it exists
            denied.append(_error_topic(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
    remaining = max(min(MAX_PARTITIONS, req.response_partition_limit), 1)
    resp = DescribeTopicPartitionsResponse()
    for name in allowed:
        if remaining == 0:  # the next page starts at this topic
            resp.next_cursor = DescribeTopicPartitionsResponseCursor(topic_name=name, partition_index=0)
            break
        t = ctx.cluster.topics.get(name)
        if t is None:
            if not every:
                resp.topics.append(_missing(name))
            continue
        start = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        parts = _partitions(ctx, t, start, remaining)
        resp.topics.append(
            DescribeTopicPartitionsResponseTopic(
                error_code=ErrorCode.NONE,
                name=name,
                topic_id=t.id_bytes,
                is_internal=t.internal,
                partitions=parts,
                topic_authorized_operations=authz.operations(ctx, _TOPIC, name),
            )
        )
        remaining -= len(parts)
        following = start + len(parts)
        if following < t.partitions and remaining == 0:
            resp.next_cursor = DescribeTopicPartitionsResponseCursor(
                topic_name=name, partition_index=following
            )
            break
    resp.topics.extend(denied)
    return resp


def error_response(
    req: DescribeTopicPartitionsRequest, code: int, message: str
) -> DescribeTopicPartitionsResponse:
    return DescribeTopicPartitionsResponse(topics=[_error_topic(t.name, code) for t in req.topics])
