"""DeleteGroups (42): delete empty groups and their committed offsets (share groups: their
start offsets on this broker)."""

from __future__ import annotations

from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.delete_groups import (
    DeletableGroupResult,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
)
from framework.security.authorizer import AclOperation, ResourceType
from framework.server import authz
from framework.server.context import RequestContext


async def _delete(ctx: RequestContext, req: DeleteGroupsRequest) -> DeleteGroupsResponse:
    out = []
    for gid in req.groups_names:
        if not authz.allowed(ctx, AclOperation.DELETE, ResourceType.GROUP, gid):
            out.append(DeletableGroupResult(group_id=gid, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED))
            continue
        code: int = ctx.groups.coordinator_error(gid)
        if not code and ctx.groups.share.is_share_group(gid):
            code = ctx.groups.share.delete(gid)  # share groups: their state on this broker too
            if code == ErrorCode.NONE and ctx.services.shares is not None:
                ctx.services.shares.forget(gid)
        elif not code:
            code = await ctx.groups.coordinator.delete_group(gid)
        out.append(DeletableGroupResult(group_id=gid, error_code=code))
    return DeleteGroupsResponse(results=out)


async def handle(ctx: RequestContext, req: DeleteGroupsRequest) -> DeleteGroupsResponse:
    return await _delete(ctx, req)


def error_response(req: DeleteGroupsRequest, code: int, message: str) -> DeleteGroupsResponse:
    return DeleteGroupsResponse(
        results=[DeletableGroupResult(group_id=g, error_code=code) for g in req.groups_names]
    )
