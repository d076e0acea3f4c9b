"""ListOffsets (2): earliest, latest, max-timestamp and by-timestamp look-ups (seek by time).

``isolation_level`` (v2+) as Kafka's ``Partition.fetchOffsetForTimestamp``: at 1
(read_committed) "latest" is the last stable offset and a look-up finding an offset at or past
it answers nothing; at 0 the high watermark plays that part.

A leader elected a moment ago may not know the high watermark yet (it learns it from its
followers' next fetches): until its high watermark reaches the start of its epoch a client's
"latest", and a look-up that finds nothing below it, are answered OFFSET_NOT_AVAILABLE (retriable,
and clients retry it) rather than an offset lower than one already acknowledged, as Kafka does.
"""

from __future__ import annotations

from framework.errors import OffsetNotAvailable, StoreError
from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.list_offsets import (
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from framework.replication.partition import Partition
from framework.security.authorizer import AclOperation, ResourceType
from framework.server import authz
from framework.server.context import RequestContext
from framework.server.errors import answer_errors

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5


def lookup(part: Partition, timestamp: int, isolation_level: int = 0) -> tuple[int, int]:
    """(offset, timestamp) answering a client's ListOffsets query; (-1, -1) when nothing matches."""
    lg = part.log
    limit = lg.last_stable_offset if isolation_level == 1 else part.high_watermark
    if timestamp == LATEST:
        _check_caught_up(part)
        return limit, -1
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return lg.log_start_offset, -1
    if timestamp == LATEST_TIERED:
        return -1, -1
    if timestamp == MAX_TIMESTAMP:
        found = lg.max_timestamp_offset()
    elif timestamp < 0:
        raise StoreError(f"unknown special timestamp {timestamp}", ErrorCode.INVALID_REQUEST)
    else:
        found = lg.offset_for_timestamp(timestamp)
    if found and found[0] < limit:
        return found[0], found[1]
    _check_caught_up(part)
    return -1, -1


def _check_caught_up(part: Partition) -> None:
    if part.epoch_start_offset > part.high_watermark:
        raise OffsetNotAvailable(
            f"{part.topic}-{part.index}: the leader's high watermark ({part.high_watermark}) has not "
            f"reached the start of its epoch ({part.epoch_start_offset}) since its election; retry"
        )


async def handle(ctx: RequestContext, req: ListOffsetsRequest) -> ListOffsetsResponse:
    v = ctx.version
    topics = []
    for t in req.topics:
        out = []
        described = authz.allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, t.name)
        for p in t.partitions:
            r = ListOffsetsPartitionResponse(
                partition_index=p.partition_index, timestamp=-1, offset=-1, leader_epoch=-1
            )
            out.append(r)
            if not described:
                r.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            with answer_errors(r):
                part = ctx.partitions.leader(t.name, p.partition_index)
                if v >= 4:
                    part.check_epoch(p.current_leader_epoch)
                level = req.isolation_level if v >= 2 else 0
                r.offset, r.timestamp = lookup(part, p.timestamp, level)
                r.leader_epoch = part.leader_epoch
        topics.append(ListOffsetsTopicResponse(name=t.name, partitions=out))
    return ListOffsetsResponse(topics=topics)


def error_response(req: ListOffsetsRequest, code: int, message: str) -> ListOffsetsResponse:
    return ListOffsetsResponse(
        topics=[
            ListOffsetsTopicResponse(
                name=t.name,
                partitions=[
                    ListOffsetsPartitionResponse(
                        partition_index=p.partition_index, error_code=code, timestamp=-1, offset=-1
                    )
                    for p in t.partitions
                ],
            )
            for t in req.topics
        ]
    )
