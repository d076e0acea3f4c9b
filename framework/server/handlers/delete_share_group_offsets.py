"""DeleteShareGroupOffsets (92): forget an empty share group's position in some topics.

``kafka-share-groups --delete-offsets``. The group must have no members (NON_EMPTY_GROUP); a
topic the group holds no state for here is UNKNOWN_TOPIC_OR_PARTITION. Next time the group
reads the topic it starts at ``share.auto.offset.reset``. With an authorizer: Delete on the
group, Read on each topic.
"""

from __future__ import annotations

from framework.protocol.error_codes import ErrorCode
from framework.protocol.fields import ZERO_UUID
from framework.protocol.messages.delete_share_group_offsets import (
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsResponseTopic,
)
from framework.security.authorizer import AclOperation, ResourceType
from framework.server import authz
from framework.server.context import RequestContext
from framework.server.shares import offsets_refusal, share_manager


async def handle(ctx: RequestContext, req: DeleteShareGroupOffsetsRequest) -> DeleteShareGroupOffsetsResponse:
    shares = share_manager(ctx)
    code, message = offsets_refusal(ctx, req.group_id, AclOperation.DELETE)
    if code:
        return DeleteShareGroupOffsetsResponse(error_code=code, error_message=message)
    out: list[DeleteShareGroupOffsetsResponseTopic] = []
    for rt in req.topics:
        info = ctx.cluster.topics.get(rt.topic_name)
        t = DeleteShareGroupOffsetsResponseTopic(
            topic_name=rt.topic_name, topic_id=info.id_bytes if info is not None else ZERO_UUID
        )
        out.append(t)
        if not authz.allowed(ctx, AclOperation.READ, ResourceType.TOPIC, rt.topic_name):
            t.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif not shares.forget(req.group_id, rt.topic_name):
            t.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            t.error_message = "There is no offset information to delete."
    return DeleteShareGroupOffsetsResponse(responses=out)


def error_response(
    req: DeleteShareGroupOffsetsRequest, code: int, message: str
) -> DeleteShareGroupOffsetsResponse:
    return DeleteShareGroupOffsetsResponse(error_code=code, error_message=message or None)
