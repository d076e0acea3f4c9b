"""LeaveGroup (13): members leave (batch with instance ids from v3)."""

from __future__ import annotations

from framework.protocol.messages.leave_group import (
    LeaveGroupRequest,
    LeaveGroupResponse,
    MemberResponse,
)
from framework.security.authorizer import AclOperation, ResourceType
from framework.server import authz
from framework.server.context import RequestContext


async def handle(ctx: RequestContext, req: LeaveGroupRequest) -> LeaveGroupResponse:
    authz.check(ctx, AclOperation.READ, ResourceType.GROUP, req.group_id)
    ctx.groups.check_coordinator(req.group_id)
    if ctx.version >= 3:
        members = [(m.member_id, m.group_instance_id) for m in req.members]
    else:
        members = [(req.member_id, None)]
    top, errors = ctx.groups.coordinator.leave(req.group_id, members)
    return LeaveGroupResponse(
        error_code=top if ctx.version < 3 else 0,
        members=[
            MemberResponse(member_id=m, group_instance_id=i, error_code=e)
            for (m, i), e in zip(members, errors, strict=True)
        ],
    )


def error_response(req: LeaveGroupRequest, code: int, message: str) -> LeaveGroupResponse:
    return LeaveGroupResponse(error_code=code)
