"""OffsetCommit (8): store a group's consumed positions in __consumer_offsets."""

from __future__ import annotations

from framework.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from framework.server.context import RequestContext

API_KEY = 8


async def _commit(ctx: RequestContext, req: OffsetCommitRequest) -> OffsetCommitResponse:
    v = ctx.version
    offsets = {
        (t.name, p.partition_index): (
            p.committed_offset,
            p.committed_leader_epoch if v >= 6 else -1,
            p.committed_metadata,
        )
        for t in req.topics
        for p in t.partitions
    }
    res = await ctx.groups.coordinator.commit(
        req.group_id,
        req.generation_id_or_member_epoch,
        req.member_id,
        req.group_instance_id if v >= 7 else None,
        offsets,
    )
    return OffsetCommitResponse(
        topics=[
            OffsetCommitResponseTopic(
                name=t.name,
                partitions=[
                    OffsetCommitResponsePartition(
                        partition_index=p.partition_index,
                        error_code=res[(t.name, p.partition_index)],
                    )
                    for p in t.partitions
                ],
            )
            for t in req.topics
        ]
    )


def handle(ctx: RequestContext, req: OffsetCommitRequest) -> object:
    ctx.groups.check_coordinator(req.group_id)
    return _commit(ctx, req)


def error_response(req: OffsetCommitRequest, code: int, message: str) -> OffsetCommitResponse:
    return OffsetCommitResponse(
        topics=[
            OffsetCommitResponseTopic(
                name=t.name,
                partitions=[
                    OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code)
                    for p in t.partitions
                ],
            )
            for t in req.topics
        ]
    )
