"""TxnOffsetCommit (28): a transactional producer's offsets for a group, sent to the group's
coordinator. They are kept aside and become the group's committed offsets only when the
transaction commits (its COMMIT marker reaches the group's ``__consumer_offsets`` partition);
an abort drops them. From v3 (KIP-447) the member and generation are checked as for
OffsetCommit when the request names a member.

With an authorizer: Write on the transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
Read on the group (else GROUP_AUTHORIZATION_FAILED), Read on each topic (else
TOPIC_AUTHORIZATION_FAILED for its partitions).
"""

from __future__ import annotations

from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)
from framework.security.authorizer import AclOperation, ResourceType
from framework.server import authz
from framework.server.context import RequestContext


def _response(
    req: TxnOffsetCommitRequest, codes: dict[tuple[str, int], int], default: int
) -> TxnOffsetCommitResponse:
    return TxnOffsetCommitResponse(
        topics=[
            TxnOffsetCommitResponseTopic(
                name=t.name,
                partitions=[
                    TxnOffsetCommitResponsePartition(
                        partition_index=p.partition_index,
                        error_code=codes.get((t.name, p.partition_index), default),
                    )
                    for p in t.partitions
                ],
            )
            for t in req.topics
        ]
    )


async def handle(ctx: RequestContext, req: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse:
    authz.check(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id)
    authz.check(ctx, AclOperation.READ, ResourceType.GROUP, req.group_id)
    ctx.groups.check_coordinator(req.group_id)
    return await _commit(ctx, req)


async def _commit(ctx: RequestContext, req: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse:
    v = ctx.version
    readable = {
        t.name for t in req.topics if authz.allowed(ctx, AclOperation.READ, ResourceType.TOPIC, t.name)
    }
    offsets = {
        (t.name, p.partition_index): (
            p.committed_offset,
            p.committed_leader_epoch if v >= 2 else -1,
            p.committed_metadata,
        )
        for t in req.topics
        if t.name in readable
        for p in t.partitions
    }
    codes = await ctx.groups.coordinator.txn_commit(
        req.group_id,
        req.producer_id,
        req.producer_epoch,
        req.generation_id if v >= 3 else -1,
        req.member_id if v >= 3 else "",
        req.group_instance_id if v >= 3 else None,
        offsets,
    )
    return _response(req, codes, ErrorCode.TOPIC_AUTHORIZATION_FAILED)


def error_response(req: TxnOffsetCommitRequest, code: int, message: str) -> TxnOffsetCommitResponse:
    return _response(req, {}, code)
