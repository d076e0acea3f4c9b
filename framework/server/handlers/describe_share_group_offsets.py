"""DescribeShareGroupOffsets (90): a share group's start offset (and lag, v1) per partition.

``kafka-share-groups --describe``. The start offset is where the group's in-flight records
begin; the lag counts the records below the high watermark not yet acknowledged or archived.
A partition the group never read is start offset -1. The share state is kept by each
partition's leader: a partition led by another broker is NOT_LEADER_OR_FOLLOWER here. With an
authorizer: Describe on the group, and topics the principal may not describe are left out of a
request for all topics (TOPIC_AUTHORIZATION_FAILED when named).
"""

from __future__ import annotations

from framework.protocol.error_codes import ErrorCode
from framework.protocol.fields import ZERO_UUID
from framework.protocol.messages.describe_share_group_offsets import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestGroup,
    DescribeShareGroupOffsetsResponse,
    DescribeShareGroupOffsetsResponseGroup,
    DescribeShareGroupOffsetsResponsePartition,
    DescribeShareGroupOffsetsResponseTopic,
)
from framework.security.authorizer import AclOperation, ResourceType
from framework.server import authz
from framework.server.context import RequestContext
from framework.server.shares import group_state_error, leader_partition, not_here, share_manager


def _partition(
    ctx: RequestContext, gid: str, topic: str, index: int
) -> DescribeShareGroupOffsetsResponsePartition:
    out = DescribeShareGroupOffsetsResponsePartition(partition_index=index, start_offset=-1, leader_epoch=-1)
    code, message = not_here(ctx, topic, index)
    if code:
        out.error_code, out.error_message = code, message
        return out
    part, _ = leader_partition(ctx, topic, index)
    sp = share_manager(ctx).find((gid, topic, index))
    if part is None or sp is None:
        return out
    done = sp.settled()
    out.start_offset, out.leader_epoch = sp.start_offset, part.leader_epoch
    out.lag = max(part.log.high_watermark - sp.start_offset - done, 0)
    return out


def _wanted(
    ctx: RequestContext, rg: DescribeShareGroupOffsetsRequestGroup
) -> list[tuple[str, list[int] | None, bool]]:
    """(topic, partitions or None for all, named) to answer for."""
    if rg.topics is not None:
        return [(t.topic_name, list(t.partitions), True) for t in rg.topics]
    topics = {k[1] for k in share_manager(ctx).partitions if k[0] == rg.group_id}
    g = ctx.groups.share.describe(rg.group_id)
    if g is not None:
        topics |= g.subscribed()
    return [(t, None, False) for t in sorted(topics)]


def _group(
    ctx: RequestContext, rg: DescribeShareGroupOffsetsRequestGroup
) -> DescribeShareGroupOffsetsResponseGroup:
    gid = rg.group_id
    out = DescribeShareGroupOffsetsResponseGroup(group_id=gid)
    if not authz.allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, gid):
        out.error_code = ErrorCode.GROUP_AUTHORIZATION_FAILED
        return out
    out.error_code, out.error_message = group_state_error(ctx, gid, empty=False)
    if out.error_code:
        return out
    for topic, parts, named in _wanted(ctx, rg):
        info = ctx.cluster.topics.get(topic)
        allowed = authz.allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, topic)
        if not allowed and not named:
            continue
        t = DescribeShareGroupOffsetsResponseTopic(
            topic_name=topic, topic_id=info.id_bytes if info is not None and allowed else ZERO_UUID
        )
        out.topics.append(t)
        indexes = parts if parts is not None else list(range(info.partitions if info is not None else 0))
        for index in indexes:
            if not allowed:
                t.partitions.append(
                    DescribeShareGroupOffsetsResponsePartition(
                        partition_index=index,
                        start_offset=-1,
                        error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    )
                )
            elif info is None:
                t.partitions.append(
                    DescribeShareGroupOffsetsResponsePartition(partition_index=index, start_offset=-1)
                )
            else:
                t.partitions.append(_partition(ctx, gid, topic, index))
    return out


async def handle(
    ctx: RequestContext, req: DescribeShareGroupOffsetsRequest
) -> DescribeShareGroupOffsetsResponse:
    share_manager(ctx)
    return DescribeShareGroupOffsetsResponse(groups=[_group(ctx, g) for g in req.groups])


def error_response(
    req: DescribeShareGroupOffsetsRequest, code: int, message: str
) -> DescribeShareGroupOffsetsResponse:
    return DescribeShareGroupOffsetsResponse(
        groups=[
            DescribeShareGroupOffsetsResponseGroup(
                group_id=g.group_id, error_code=code, error_message=message or None
            )
            for g in req.groups
        ]
    )
