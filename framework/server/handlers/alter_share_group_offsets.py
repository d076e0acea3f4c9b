"""AlterShareGroupOffsets (91): start an empty share group over at given offsets.

``kafka-share-groups --reset-offsets``. The group must exist here and have no members
(NON_EMPTY_GROUP otherwise); each partition named starts again at its offset with nothing in
flight. The share state is kept by each partition's leader: a partition led by another broker
is NOT_LEADER_OR_FOLLOWER here. With an authorizer: Read on the group and on each topic.
"""

from __future__ import annotations

from framework.protocol.error_codes import ErrorCode
from framework.protocol.fields import ZERO_UUID
from framework.protocol.messages.alter_share_group_offsets import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsResponse,
    AlterShareGroupOffsetsResponsePartition,
    AlterShareGroupOffsetsResponseTopic,
)
from framework.security.authorizer import AclOperation, ResourceType
from framework.server import authz
from framework.server.context import RequestContext
from framework.server.shares import leader_partition, not_here, offsets_refusal, share_manager


async def handle(ctx: RequestContext, req: AlterShareGroupOffsetsRequest) -> AlterShareGroupOffsetsResponse:
    shares = share_manager(ctx)
    code, message = offsets_refusal(ctx, req.group_id, AclOperation.READ)
    if code:
        return AlterShareGroupOffsetsResponse(error_code=code, error_message=message)
    out: list[AlterShareGroupOffsetsResponseTopic] = []
    for rt in req.topics:
        info = ctx.cluster.topics.get(rt.topic_name)
        t = AlterShareGroupOffsetsResponseTopic(
            topic_name=rt.topic_name, topic_id=info.id_bytes if info is not None else ZERO_UUID
        )
        out.append(t)
        allowed = authz.allowed(ctx, AclOperation.READ, ResourceType.TOPIC, rt.topic_name)
        for rp in rt.partitions:
            p = AlterShareGroupOffsetsResponsePartition(partition_index=rp.partition_index)
            t.partitions.append(p)
            if not allowed:
                p.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif info is None or not 0 <= rp.partition_index < info.partitions:
                p.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                p.error_code, p.error_message = not_here(ctx, rt.topic_name, rp.partition_index)
                part, _ = leader_partition(ctx, rt.topic_name, rp.partition_index)
                if part is not None:
                    key = (req.group_id, rt.topic_name, rp.partition_index)
                    lg = part.log
                    offset = min(max(rp.start_offset, lg.log_start_offset), lg.high_watermark)
                    shares.get(key, (part.topic_id, part.leader_epoch), lambda: 0).reset_to(offset)
    return AlterShareGroupOffsetsResponse(responses=out)


def error_response(
    req: AlterShareGroupOffsetsRequest, code: int, message: str
) -> AlterShareGroupOffsetsResponse:
    return AlterShareGroupOffsetsResponse(error_code=code, error_message=message or None)
