"""ListGroups (16): groups known to this coordinator, filterable by state and type.

With an authorizer: every group to a principal with Describe on the cluster, otherwise only the
groups it may Describe (the others are not disclosed), as Kafka does.
"""

from __future__ import annotations

from framework.protocol.errors import ErrorCode
from framework.protocol.messages.list_groups import (
    ListedGroup,
    ListGroupsRequest,
    ListGroupsResponse,
)
from framework.security.authorizer import AclOperation, ResourceType
from framework.server import authz
from framework.server.context import RequestContext

API_KEY = 16


def handle(ctx: RequestContext, req: ListGroupsRequest) -> ListGroupsResponse:
    states = {s.lower() for s in req.states_filter}
    types = {t.lower() for t in req.types_filter}
    every = authz.cluster_allowed(ctx, AclOperation.DESCRIBE)
    out = []
    for g in ctx.groups.coordinator.list_groups():
        if not every and not authz.allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id):
            continue
        if states and g.state.value.lower() not in states:
            continue
        if types and "classic" not in types:
            continue
        out.append(
            ListedGroup(
                group_id=g.group_id,
                protocol_type=g.protocol_type or "",
                group_state=g.state.value,
                group_type="classic",
            )
        )
    return ListGroupsResponse(error_code=ErrorCode.NONE, groups=out)


def error_response(req: ListGroupsRequest, code: int, message: str) -> ListGroupsResponse:
    return ListGroupsResponse(error_code=code)
