"""DescribeGroups (15): state, protocol and members (with assignments) of groups.

With an authorizer each group needs Describe (else GROUP_AUTHORIZATION_FAILED); the authorized
operations (v3+, when asked) are the principal's on the group.
"""

from __future__ import annotations

from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.describe_groups import (
    DescribedGroup,
    DescribedGroupMember,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
)
from framework.security.authorizer import AclOperation, ResourceType
from framework.server import authz
from framework.server.context import RequestContext

NOT_REQUESTED = -2147483648


async def handle(ctx: RequestContext, req: DescribeGroupsRequest) -> DescribeGroupsResponse:
    coord = ctx.groups.coordinator
    out = []
    for gid in req.groups:
        if not authz.allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, gid):
            out.append(
                DescribedGroup(
                    error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                    group_id=gid,
                    group_state="",
                    protocol_type="",
                    protocol_data="",
                )
            )
            continue
        g = coord.groups.get(gid)
        ops = (
            authz.operations(ctx, ResourceType.GROUP, gid)
            if req.include_authorized_operations
            else NOT_REQUESTED
        )
        code = ctx.groups.coordinator_error(gid)
        if code:
            out.append(
                DescribedGroup(
                    error_code=code, group_id=gid, group_state="", protocol_type="", protocol_data=""
                )
            )
            continue
        if g is None:
            out.append(
                DescribedGroup(
                    error_code=ErrorCode.NONE,
                    group_id=gid,
                    group_state="Dead",
                    protocol_type="",
                    protocol_data="",
                    authorized_operations=ops,
                )
            )
            continue
        proto = g.protocol_name or ""
        out.append(
            DescribedGroup(
                error_code=ErrorCode.NONE,
                group_id=gid,
                group_state=g.state.value,
                protocol_type=g.protocol_type or "",
                protocol_data=proto,
                authorized_operations=ops,
                members=[
                    DescribedGroupMember(
                        member_id=m.member_id,
                        group_instance_id=m.group_instance_id,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        member_metadata=m.metadata_for(proto),
                        member_assignment=m.assignment,
                    )
                    for m in g.members.values()
                ],
            )
        )
    return DescribeGroupsResponse(groups=out)


def error_response(req: DescribeGroupsRequest, code: int, message: str) -> DescribeGroupsResponse:
    return DescribeGroupsResponse(
        groups=[
            DescribedGroup(error_code=code, group_id=g, group_state="", protocol_type="", protocol_data="")
            for g in req.groups
        ]
    )
