"""DeleteRecords (21): advance a partition's log start offset (offset -1 = high watermark)."""

from __future__ import annotations

from framework.errors import StoreError
from framework.protocol.errors import ErrorCode
from framework.protocol.messages.delete_records import (
    DeleteRecordsPartitionResult,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteRecordsTopicResult,
)
from framework.server.context import RequestContext

API_KEY = 21


def handle(ctx: RequestContext, req: DeleteRecordsRequest) -> DeleteRecordsResponse:
    b = ctx.broker
    topics = []
    for t in req.topics:
        parts = b.partitions.get(t.name)
        out = []
        for p in t.partitions:
            r = DeleteRecordsPartitionResult(
                partition_index=p.partition_index, low_watermark=-1, error_code=0
            )
            out.append(r)
            if parts is None or not 0 <= p.partition_index < len(parts):
                r.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            part = parts[p.partition_index]
            if part is None or not part.is_leader:
                r.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
                continue
            try:
                r.low_watermark = part.log.delete_records_before(p.offset)
            except StoreError as exc:
                r.error_code = exc.code
        topics.append(DeleteRecordsTopicResult(name=t.name, partitions=out))
    return DeleteRecordsResponse(topics=topics)


def error_response(req: DeleteRecordsRequest, code: int, message: str) -> DeleteRecordsResponse:
    return DeleteRecordsResponse(
        topics=[
            DeleteRecordsTopicResult(
                name=t.name,
                partitions=[
                    DeleteRecordsPartitionResult(
                        partition_index=p.partition_index, low_watermark=-1, error_code=code
                    )
                    for p in t.partitions
                ],
            )
            for t in req.topics
        ]
    )
