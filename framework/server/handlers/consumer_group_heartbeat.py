"""ConsumerGroupHeartbeat (68): a member of a KIP-848 consumer group joins, heartbeats, leaves.

The coordinator (:mod:`framework.coordinator.consumer_groups`) speaks topic names; this handler
turns the request's topic ids into names (unknown ids are left out: the topic is gone) and the
assignment's names back into ids. v0: the coordinator names a joining member; v1: the member
brings its own id. With an authorizer: Read on the group.
"""

from __future__ import annotations

from framework.coordinator.consumer_groups import HeartbeatRequest, Partitions
from framework.protocol.messages.consumer_group_heartbeat import (
    Assignment,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    ConsumerGroupHeartbeatResponseTopicPartitions,
)
from framework.security.authorizer import AclOperation, ResourceType
from framework.server import authz
from framework.server.context import RequestContext


async def handle(ctx: RequestContext, req: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResponse:
    authz.check(ctx, AclOperation.READ, ResourceType.GROUP, req.group_id)
    ctx.groups.check_coordinator(req.group_id)
    owned: Partitions | None = None
    if req.topic_partitions is not None:
        owned = {}
        for tp in req.topic_partitions:
            t = ctx.cluster.topic_by_id(tp.topic_id)
            if t is not None:
                owned.setdefault(t.name, set()).update(tp.partitions)
    res = ctx.groups.consumer.heartbeat(
        HeartbeatRequest(
            group_id=req.group_id,
            member_id=req.member_id,
            member_epoch=req.member_epoch,
            instance_id=req.instance_id,
            rack_id=req.rack_id,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            subscribed_topic_names=req.subscribed_topic_names,
            subscribed_topic_regex=req.subscribed_topic_regex if ctx.version >= 1 else None,
            server_assignor=req.server_assignor,
            owned=owned,
            client_id=ctx.header.client_id or "",
            client_host="/" + ctx.peer.rsplit(":", 1)[0],
            generate_member_id=ctx.version == 0,
        )
    )
    assignment = None
    if res.assignment is not None:
        topics = ctx.cluster.topics
        assignment = Assignment(
            topic_partitions=[
                ConsumerGroupHeartbeatResponseTopicPartitions(
                    topic_id=topics[name].id_bytes, partitions=sorted(ps)
                )
                for name, ps in sorted(res.assignment.items())
                if name in topics
            ]
        )
    return ConsumerGroupHeartbeatResponse(
        error_code=res.error_code,
        error_message=res.error_message,
        member_id=res.member_id,
        member_epoch=res.member_epoch,
        heartbeat_interval_ms=res.heartbeat_interval_ms,
        assignment=assignment,
    )


def error_response(
    req: ConsumerGroupHeartbeatRequest, code: int, message: str
) -> ConsumerGroupHeartbeatResponse:
    return ConsumerGroupHeartbeatResponse(error_code=code, error_message=message or None)
