"""SyncGroup (14): the leader hands out assignments; every member gets its own.

From v5 on, protocol_type and protocol_name are mandatory: without them Kafka answers
INCONSISTENT_GROUP_PROTOCOL before it looks at the group (``KafkaApis.handleSyncGroupRequest``,
``SyncGroupRequest.areMandatoryProtocolTypeAndNamePresent``), and so do we."""

from __future__ import annotations

from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.sync_group import SyncGroupRequest, SyncGroupResponse
from framework.security.authorizer import AclOperation, ResourceType
from framework.server import authz
from framework.server.context import RequestContext


async def _sync(ctx: RequestContext, req: SyncGroupRequest) -> SyncGroupResponse:
    v = ctx.version
    res = await ctx.groups.coordinator.sync(
        req.group_id,
        req.generation_id,
        req.member_id,
        req.group_instance_id if v >= 3 else None,
        req.protocol_type if v >= 5 else None,
        req.protocol_name if v >= 5 else None,
        {a.member_id: bytes(a.assignment) for a in req.assignments},
    )
    return SyncGroupResponse(
        error_code=res.error,
        protocol_type=res.protocol_type,
        protocol_name=res.protocol_name,
        assignment=res.assignment,
    )


async def handle(ctx: RequestContext, req: SyncGroupRequest) -> SyncGroupResponse:
    if ctx.version >= 5 and (req.protocol_type is None or req.protocol_name is None):
        return SyncGroupResponse(error_code=ErrorCode.INCONSISTENT_GROUP_PROTOCOL, assignment=b"")
    authz.check(ctx, AclOperation.READ, ResourceType.GROUP, req.group_id)
    ctx.groups.check_coordinator(req.group_id)
    return await _sync(ctx, req)


def error_response(req: SyncGroupRequest, code: int, message: str) -> SyncGroupResponse:
    return SyncGroupResponse(error_code=code, assignment=b"")
