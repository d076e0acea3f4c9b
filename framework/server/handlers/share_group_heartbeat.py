"""ShareGroupHeartbeat (76): a member of a share group (KIP-932) joins, heartbeats, leaves.

The coordinator (:mod:`framework.coordinator.share_groups`) speaks topic names; the assignment
goes back as topic ids. The member names itself (v1). With an authorizer: Read on the group
and Describe on each subscribed topic (else TOPIC_AUTHORIZATION_FAILED), as Kafka.
"""

from __future__ import annotations

from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.share_group_heartbeat import (
    Assignment,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
    TopicPartitions,
)
from framework.security.authorizer import AclOperation, ResourceType
from framework.server import authz
from framework.server.context import RequestContext


async def handle(ctx: RequestContext, req: ShareGroupHeartbeatRequest) -> ShareGroupHeartbeatResponse:
    authz.check(ctx, AclOperation.READ, ResourceType.GROUP, req.group_id)
    for topic in req.subscribed_topic_names or ():
        if not authz.allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, topic):
            return ShareGroupHeartbeatResponse(
                error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                error_message=f"Not authorized to describe topic {topic}.",
            )
    ctx.groups.check_coordinator(req.group_id)
    res = ctx.groups.share.heartbeat(
        req.group_id,
        req.member_id,
        req.member_epoch,
        req.rack_id,
        req.subscribed_topic_names,
        client_id=ctx.header.client_id or "",
        client_host="/" + ctx.peer.rsplit(":", 1)[0],
    )
    assignment = None
    if res.assignment is not None:
        topics = ctx.cluster.topics
        assignment = Assignment(
            topic_partitions=[
                TopicPartitions(topic_id=topics[name].id_bytes, partitions=sorted(ps))
                for name, ps in sorted(res.assignment.items())
                if name in topics
            ]
        )
    return ShareGroupHeartbeatResponse(
        error_code=res.error_code,
        error_message=res.error_message,
        member_id=res.member_id,
        member_epoch=res.member_epoch,
        heartbeat_interval_ms=res.heartbeat_interval_ms,
        assignment=assignment,
    )


def error_response(req: ShareGroupHeartbeatRequest, code: int, message: str) -> ShareGroupHeartbeatResponse:
    return ShareGroupHeartbeatResponse(error_code=code, error_message=message or None)
