"""ConsumerGroupDescribe (69): epochs, assignor and members (assignment and target) of
KIP-848 consumer groups.

A group this coordinator does not know, or a classic group, is GROUP_ID_NOT_FOUND (as Kafka).
With an authorizer each group needs Describe (else GROUP_AUTHORIZATION_FAILED); the authorized
operations, when asked, are the principal's on the group.
"""

from __future__ import annotations

from framework.coordinator.consumer_groups import Partitions
from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.consumer_group_describe import (
    Assignment,
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    DescribedGroup,
    Member,
    TopicPartitions,
)
from framework.security.authorizer import AclOperation, ResourceType
from framework.server import authz
from framework.server.context import RequestContext

NOT_REQUESTED = -2147483648
CONSUMER_MEMBER_TYPE = 1  # v1: a member of the consumer protocol (0: classic, upgraded)


def _assignment(ctx: RequestContext, parts: Partitions) -> Assignment:
    topics = ctx.cluster.topics
    return Assignment(
        topic_partitions=[
            TopicPartitions(topic_id=topics[name].id_bytes, topic_name=name, partitions=sorted(ps))
            for name, ps in sorted(parts.items())
            if name in topics
        ]
    )


def _describe(ctx: RequestContext, req: ConsumerGroupDescribeRequest, gid: str) -> DescribedGroup:
    if not authz.allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, gid):
        return DescribedGroup(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, group_id=gid)
    code = ctx.groups.coordinator_error(gid)
    if code:
        return DescribedGroup(error_code=code, group_id=gid)
    g = ctx.groups.consumer.describe(gid)
    if g is None:
        return DescribedGroup(
            error_code=ErrorCode.GROUP_ID_NOT_FOUND,
            error_message=f"Group {gid} not found.",
            group_id=gid,
        )
    return DescribedGroup(
        group_id=gid,
        group_state=g.state.value,
        group_epoch=g.group_epoch,
        assignment_epoch=g.assignment_epoch,
        assignor_name=g.assignor,
        authorized_operations=(
            authz.operations(ctx, ResourceType.GROUP, gid)
            if req.include_authorized_operations
            else NOT_REQUESTED
        ),
        members=[
            Member(
                member_id=m.member_id,
                instance_id=m.instance_id,
                rack_id=m.rack_id,
                member_epoch=m.member_epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=list(m.topic_names),
                subscribed_topic_regex=m.topic_regex,
                assignment=_assignment(ctx, m.assigned),
                target_assignment=_assignment(ctx, g.target.get(m.member_id, {})),
                member_type=CONSUMER_MEMBER_TYPE,
            )
            for m in g.members.values()
        ],
    )


async def handle(ctx: RequestContext, req: ConsumerGroupDescribeRequest) -> ConsumerGroupDescribeResponse:
    return ConsumerGroupDescribeResponse(groups=[_describe(ctx, req, gid) for gid in req.group_ids])


def error_response(
    req: ConsumerGroupDescribeRequest, code: int, message: str
) -> ConsumerGroupDescribeResponse:
    return ConsumerGroupDescribeResponse(
        groups=[
            DescribedGroup(error_code=code, error_message=message or None, group_id=g) for g in req.group_ids
        ]
    )
