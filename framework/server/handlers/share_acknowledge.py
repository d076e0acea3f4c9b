"""ShareAcknowledge (79): a share-group member acknowledges records without fetching more.

Each acknowledgement batch is a range of offsets with one type, or one per offset: 0 gap (no
record there), 1 ACCEPT, 2 RELEASE, 3 REJECT, 4 RENEW (KIP-1222: the lock runs again). A
batch whose records are not all acquired by this member (a lock expired meanwhile, say) is
INVALID_RECORD_STATE and changes nothing. The request speaks in the member's open share
session (epoch 0 is INVALID_SHARE_SESSION_EPOCH: only ShareFetch opens one); epoch -1 closes
it after the acknowledgements, giving back what the member still holds. With an authorizer:
Read on the group and on each topic.
"""

from __future__ import annotations

from framework.coordinator.share_groups import FINAL_SESSION_EPOCH
from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.share_acknowledge import (
    PartitionData,
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    ShareAcknowledgeTopicResponse,
)
from framework.security.authorizer import AclOperation, ResourceType
from framework.server import authz
from framework.server.context import RequestContext
from framework.server.shares import acknowledge, resolve_topic, share_manager


async def handle(ctx: RequestContext, req: ShareAcknowledgeRequest) -> ShareAcknowledgeResponse:
    shares = share_manager(ctx)
    if not req.group_id or not req.member_id:
        return ShareAcknowledgeResponse(
            error_code=ErrorCode.INVALID_REQUEST, error_message="GroupId and MemberId are required."
        )
    if not authz.allowed(ctx, AclOperation.READ, ResourceType.GROUP, req.group_id):
        return ShareAcknowledgeResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if req.share_session_epoch == 0:
        return ShareAcknowledgeResponse(error_code=ErrorCode.INVALID_SHARE_SESSION_EPOCH)
    code, session = shares.open_session(req.group_id, req.member_id, req.share_session_epoch)
    if session is None:
        return ShareAcknowledgeResponse(error_code=code)
    topics: list[ShareAcknowledgeTopicResponse] = []
    for at in req.topics:
        name, topic_code = resolve_topic(ctx, at.topic_id)
        t = ShareAcknowledgeTopicResponse(topic_id=at.topic_id, partitions=[])
        topics.append(t)
        for ap in at.partitions:
            pd = PartitionData(partition_index=ap.partition_index)
            t.partitions.append(pd)
            if name is None or topic_code:
                pd.error_code = topic_code
                continue
            pd.error_code = acknowledge(
                ctx,
                shares,
                session,
                name,
                ap.partition_index,
                [(b.first_offset, b.last_offset, b.acknowledge_types) for b in ap.acknowledgement_batches],
            )
    if req.share_session_epoch == FINAL_SESSION_EPOCH:
        shares.close_session(req.group_id, req.member_id)
    return ShareAcknowledgeResponse(responses=topics)


def error_response(req: ShareAcknowledgeRequest, code: int, message: str) -> ShareAcknowledgeResponse:
    return ShareAcknowledgeResponse(error_code=code, error_message=message or None)
