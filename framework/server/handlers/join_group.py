"""JoinGroup (11): enter a group; the response waits for the rebalance to complete."""

from __future__ import annotations

from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.join_group import (
    JoinGroupRequest,
    JoinGroupResponse,
    JoinGroupResponseMember,
)
from framework.security.authorizer import AclOperation, ResourceType
from framework.server import authz
from framework.server.context import RequestContext


async def _join(ctx: RequestContext, req: JoinGroupRequest) -> JoinGroupResponse:
    v = ctx.version
    res = await ctx.groups.coordinator.join(
        req.group_id,
        req.member_id,
        req.group_instance_id if v >= 5 else None,
        ctx.header.client_id or "",
        "/" + ctx.peer.rsplit(":", 1)[0],
        req.session_timeout_ms,
        req.rebalance_timeout_ms if v >= 1 else req.session_timeout_ms,
        req.protocol_type,
        [(p.name, bytes(p.metadata)) for p in req.protocols],
        require_known_member_id=v >= 4,
        reason=req.reason,
        supports_skip_assignment=v >= 9,
    )
    return JoinGroupResponse(
        error_code=res.error,
        generation_id=res.generation,
        protocol_type=res.protocol_type,
        protocol_name=res.protocol_name if res.protocol_name is not None or v >= 7 else "",
        leader=res.leader,
        skip_assignment=res.skip_assignment,
        member_id=res.member_id or req.member_id,
        members=[
            JoinGroupResponseMember(member_id=m, group_instance_id=i, metadata=meta)
            for m, i, meta in res.members
        ],
    )


async def handle(ctx: RequestContext, req: JoinGroupRequest) -> JoinGroupResponse:
    authz.check(ctx, AclOperation.READ, ResourceType.GROUP, req.group_id)
    ctx.groups.check_coordinator(req.group_id)
    if ctx.groups.consumer.is_consumer_group(req.group_id) or ctx.groups.share.is_share_group(req.group_id):
        # a KIP-848 consumer group of that id has members (as Kafka: no mixed membership)
        return error_response(req, ErrorCode.INCONSISTENT_GROUP_PROTOCOL, "")
    return await _join(ctx, req)


def error_response(req: JoinGroupRequest, code: int, message: str) -> JoinGroupResponse:
    return JoinGroupResponse(
        error_code=code, generation_id=-1, protocol_name="", leader="", member_id=req.member_id
    )
