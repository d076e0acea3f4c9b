"""ShareGroupDescribe (77): epoch, assignor and members (with their assignment) of share groups.

A group this coordinator does not know, or one of another kind, is GROUP_ID_NOT_FOUND (as
Kafka). With an authorizer each group needs Describe (else GROUP_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from framework.coordinator.share_groups import Partitions
from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.share_group_describe import (
    Assignment,
    DescribedGroup,
    Member,
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
    TopicPartitions,
)
from framework.security.authorizer import AclOperation, ResourceType
from framework.server import authz
from framework.server.context import RequestContext

NOT_REQUESTED = -2147483648


def _assignment(ctx: RequestContext, parts: Partitions) -> Assignment:
    topics = ctx.cluster.topics
    return Assignment(
        topic_partitions=[
            TopicPartitions(topic_id=topics[name].id_bytes, topic_name=name, partitions=sorted(ps))
            for name, ps in sorted(parts.items())
            if name in topics
        ]
    )


def _describe(ctx: RequestContext, req: ShareGroupDescribeRequest, gid: str) -> DescribedGroup:
    if not authz.allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, gid):
        return DescribedGroup(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, group_id=gid)
    code = ctx.groups.coordinator_error(gid)
    if code:
        return DescribedGroup(error_code=code, group_id=gid)
    g = ctx.groups.share.describe(gid)
    if g is None:
        return DescribedGroup(
            error_code=ErrorCode.GROUP_ID_NOT_FOUND, error_message=f"Group {gid} not found.", group_id=gid
        )
    return DescribedGroup(
        group_id=gid,
        group_state=g.state.value,
        group_epoch=g.group_epoch,
        assignment_epoch=g.group_epoch,
        assignor_name="simple",
        authorized_operations=(
            authz.operations(ctx, ResourceType.GROUP, gid)
            if req.include_authorized_operations
            else NOT_REQUESTED
        ),
        members=[
            Member(
                member_id=m.member_id,
                rack_id=m.rack_id,
                member_epoch=m.member_epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=list(m.subscribed_topics),
                assignment=_assignment(ctx, m.assigned),
            )
            for m in g.members.values()
        ],
    )


async def handle(ctx: RequestContext, req: ShareGroupDescribeRequest) -> ShareGroupDescribeResponse:
    return ShareGroupDescribeResponse(groups=[_describe(ctx, req, gid) for gid in req.group_ids])


def error_response(req: ShareGroupDescribeRequest, code: int, message: str) -> ShareGroupDescribeResponse:
    return ShareGroupDescribeResponse(
        groups=[
            DescribedGroup(error_code=code, error_message=message or None, group_id=g) for g in req.group_ids
        ]
    )
