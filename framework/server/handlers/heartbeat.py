"""Heartbeat (12): keep a member alive; learn about rebalances."""

from __future__ import annotations

from framework.protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from framework.server.context import RequestContext

API_KEY = 12


def handle(ctx: RequestContext, req: HeartbeatRequest) -> HeartbeatResponse:
    code = ctx.broker.coordinator_error(req.group_id)
    if code:  # cluster: another broker coordinates this group (or none does right now)
        return error_response(req, code, "not this group's coordinator")
    code = ctx.broker.groups.heartbeat(
        req.group_id,
        req.generation_id,
        req.member_id,
        req.group_instance_id if ctx.version >= 3 else None,
    )
    return HeartbeatResponse(error_code=code)


def error_response(req: HeartbeatRequest, code: int, message: str) -> HeartbeatResponse:
    return HeartbeatResponse(error_code=code)
