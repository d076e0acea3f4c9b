"""OffsetCommit (8): store a group's consumed positions in __consumer_offsets.

For a KIP-848 consumer group (v9+; older versions are UNSUPPORTED_VERSION for it, as Kafka)
the generation is the member's epoch: UNKNOWN_MEMBER_ID or STALE_MEMBER_EPOCH otherwise.

With an authorizer: Read on the group (else GROUP_AUTHORIZATION_FAILED for the whole request)
and Read on each topic (else TOPIC_AUTHORIZATION_FAILED for its partitions, the others committed).
"""

from __future__ import annotations

from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from framework.security.authorizer import AclOperation, ResourceType
from framework.server import authz
from framework.server.context import RequestContext


async def _commit(ctx: RequestContext, req: OffsetCommitRequest) -> OffsetCommitResponse:
    v = ctx.version
    readable = {
        t.name for t in req.topics if authz.allowed(ctx, AclOperation.READ, ResourceType.TOPIC, t.name)
    }
    offsets = {
        (t.name, p.partition_index): (
            p.committed_offset,
            p.committed_leader_epoch if v >= 6 else -1,
            p.committed_metadata,
        )
        for t in req.topics
        if t.name in readable
        for p in t.partitions
    }
    res: dict[tuple[str, int], int] = {}
    epoch = req.generation_id_or_member_epoch
    if ctx.groups.consumer.is_consumer_group(req.group_id):
        # KIP-848: the member and its epoch are the consumer group's; the offsets are stored
        # by the group coordinator as for a group without members
        code = (
            ctx.groups.consumer.check_commit(req.group_id, req.member_id, epoch)
            if v >= 9
            else ErrorCode.UNSUPPORTED_VERSION
        )
        if code:
            res = dict.fromkeys(offsets, code)
            offsets = {}
        epoch, member_id, instance_id = -1, "", None
    else:
        member_id, instance_id = req.member_id, req.group_instance_id if v >= 7 else None
    if offsets or (not req.topics and not res):
        res = await ctx.groups.coordinator.commit(
            req.group_id,
            epoch,
            member_id,
            instance_id,
            offsets,
            no_group=ErrorCode.GROUP_ID_NOT_FOUND if v >= 9 else ErrorCode.ILLEGAL_GENERATION,
        )
    return OffsetCommitResponse(
        topics=[
            OffsetCommitResponseTopic(
                name=t.name,
                partitions=[
                    OffsetCommitResponsePartition(
                        partition_index=p.partition_index,
                        error_code=res.get((t.name, p.partition_index), ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                    )
                    for p in t.partitions
                ],
            )
            for t in req.topics
        ]
    )


async def handle(ctx: RequestContext, req: OffsetCommitRequest) -> OffsetCommitResponse:
    authz.check(ctx, AclOperation.READ, ResourceType.GROUP, req.group_id)
    ctx.groups.check_coordinator(req.group_id)
    return await _commit(ctx, req)


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
