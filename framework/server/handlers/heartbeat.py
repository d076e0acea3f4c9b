"""Heartbeat (12): keep a member alive; learn about rebalances."""

from __future__ import annotations

from framework.protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from framework.security.authorizer import AclOperation, ResourceType
from framework.server import authz
from framework.server.context import RequestContext


async def handle(ctx: RequestContext, req: HeartbeatRequest) -> HeartbeatResponse:
    authz.check(ctx, AclOperation.READ, ResourceType.GROUP, req.group_id)
    ctx.groups.check_coordinator(req.group_id)
    code = ctx.groups.coordinator.heartbeat(
        req.group_id,
        req.generation_id,
        req.member_id,
        req.group_instance_id if ctx.version >= 3 else None,
    )
    return HeartbeatResponse(error_code=code)


def error_response(req: HeartbeatRequest, code: int, message: str) -> HeartbeatResponse:
    return HeartbeatResponse(error_code=code)
