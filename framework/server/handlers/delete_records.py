"""DeleteRecords (21): advance a partition's log start offset (offset -1 = high watermark); with
an authorizer it needs Delete on the topic (else TOPIC_AUTHORIZATION_FAILED)."""

from __future__ import annotations

from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.delete_records import (
    DeleteRecordsPartitionResult,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteRecordsTopicResult,
)
from framework.security.authorizer import AclOperation, ResourceType
from framework.server import authz
from framework.server.context import RequestContext
from framework.server.errors import answer_errors


async def handle(ctx: RequestContext, req: DeleteRecordsRequest) -> DeleteRecordsResponse:
    topics = []
    for t in req.topics:
        out = []
        deletable = authz.allowed(ctx, AclOperation.DELETE, ResourceType.TOPIC, t.name)
        for p in t.partitions:
            r = DeleteRecordsPartitionResult(
                partition_index=p.partition_index, low_watermark=-1, error_code=ErrorCode.NONE
            )
            out.append(r)
            if not deletable:
                r.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            with answer_errors(r):
                part = ctx.partitions.leader(t.name, p.partition_index)
                r.low_watermark = part.log.delete_records_before(p.offset)
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
