"""AddOffsetsToTxn (25): add the group's ``__consumer_offsets`` partition to the transaction,
so the offsets the producer then sends with TxnOffsetCommit commit or abort with it.

With an authorizer: Write on the transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
and Read on the group (else GROUP_AUTHORIZATION_FAILED). Versions before 2 get
INVALID_PRODUCER_EPOCH for PRODUCER_FENCED.
"""

from __future__ import annotations

from framework.coordinator.offsets_topic import TOPIC as OFFSETS_TOPIC
from framework.coordinator.offsets_topic import partition_for
from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse
from framework.security.authorizer import AclOperation, ResourceType
from framework.server import authz, txn
from framework.server.context import RequestContext


async def _add(
    ctx: RequestContext, req: AddOffsetsToTxnRequest, svc: txn.TransactionDirectory
) -> AddOffsetsToTxnResponse:
    offsets = ctx.cluster.topics.get(OFFSETS_TOPIC)
    if offsets is None:
        return AddOffsetsToTxnResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
    tp = (OFFSETS_TOPIC, partition_for(req.group_id, offsets.partitions))
    code = await svc.coordinator.add_partitions(
        req.transactional_id, req.producer_id, req.producer_epoch, [tp]
    )
    return AddOffsetsToTxnResponse(error_code=txn.for_version(code, ctx.version, 2))


async def handle(ctx: RequestContext, req: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse:
    authz.check(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id)
    authz.check(ctx, AclOperation.READ, ResourceType.GROUP, req.group_id)
    if not req.group_id:
        return AddOffsetsToTxnResponse(error_code=ErrorCode.INVALID_GROUP_ID)
    svc = txn.check_coordinator(ctx, req.transactional_id)
    return await _add(ctx, req, svc)


def error_response(req: AddOffsetsToTxnRequest, code: int, message: str) -> AddOffsetsToTxnResponse:
    return AddOffsetsToTxnResponse(error_code=code)
