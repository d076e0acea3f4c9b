"""ListGroups (16): groups known to this coordinator, filterable by state and type (classic
groups, KIP-848 consumer groups as type "consumer", KIP-932 share groups as type "share").

With an authorizer: every group to a principal with Describe on the cluster, otherwise only the
groups it may Describe (the others are not disclosed), as Kafka does.
"""

from __future__ import annotations

from typing import Any

from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.list_groups import (
    ListedGroup,
    ListGroupsRequest,
    ListGroupsResponse,
)
from framework.security.authorizer import AclOperation, ResourceType
from framework.server import authz
from framework.server.context import RequestContext


async def handle(ctx: RequestContext, req: ListGroupsRequest) -> ListGroupsResponse:
    states = {s.lower() for s in req.states_filter}
    types = {t.lower() for t in req.types_filter}
    every = authz.cluster_allowed(ctx, AclOperation.DESCRIBE)
    out = []
    consumer = ctx.groups.consumer
    for g in ctx.groups.coordinator.list_groups():
        if consumer.is_consumer_group(g.group_id):
            continue  # its offsets are kept here; listed as the consumer group below
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
    kinds: list[tuple[str, list[Any]]] = [
        ("consumer", list(ctx.groups.consumer.list_groups())),
        ("share", list(ctx.groups.share.list_groups())),
    ]
    for kind, cg in ((k, g) for k, gs in kinds for g in gs):
        if not every and not authz.allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, cg.group_id):
            continue
        if states and cg.state.value.lower() not in states:
            continue
        if types and kind not in types:
            continue
        out.append(
            ListedGroup(
                group_id=cg.group_id,
                protocol_type=kind,
                group_state=cg.state.value,
                group_type=kind,
            )
        )
    return ListGroupsResponse(error_code=ErrorCode.NONE, groups=out)


def error_response(req: ListGroupsRequest, code: int, message: str) -> ListGroupsResponse:
    return ListGroupsResponse(error_code=code)
