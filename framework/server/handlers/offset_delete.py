"""OffsetDelete (47): delete a group's committed offsets for partitions it no longer consumes."""

from __future__ import annotations

from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)
from framework.security.authorizer import AclOperation, ResourceType
from framework.server import authz
from framework.server.context import RequestContext


async def _delete(ctx: RequestContext, req: OffsetDeleteRequest) -> OffsetDeleteResponse:
    readable = {
        t.name for t in req.topics if authz.allowed(ctx, AclOperation.READ, ResourceType.TOPIC, t.name)
    }
    tps = [(t.name, p.partition_index) for t in req.topics if t.name in readable for p in t.partitions]
    top, res = await ctx.groups.coordinator.delete_offsets(req.group_id, tps)
    if top:
        return OffsetDeleteResponse(error_code=top)
    return OffsetDeleteResponse(
        error_code=ErrorCode.NONE,
        topics=[
            OffsetDeleteResponseTopic(
                name=t.name,
                partitions=[
                    OffsetDeleteResponsePartition(
                        partition_index=p.partition_index,
                        error_code=res.get((t.name, p.partition_index), ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                    )
                    for p in t.partitions
                ],
            )
            for t in req.topics
        ],
    )


async def handle(ctx: RequestContext, req: OffsetDeleteRequest) -> OffsetDeleteResponse:
    authz.check(ctx, AclOperation.DELETE, ResourceType.GROUP, req.group_id)
    ctx.groups.check_coordinator(req.group_id)
    return await _delete(ctx, req)


def error_response(req: OffsetDeleteRequest, code: int, message: str) -> OffsetDeleteResponse:
    return OffsetDeleteResponse(error_code=code)
