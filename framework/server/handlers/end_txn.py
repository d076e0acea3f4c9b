"""EndTxn (26): commit or abort the producer's open transaction.

Answered once the coordinator wrote PrepareCommit/PrepareAbort to ``__transaction_state``; the
markers follow (coordinator/transactions.py). With an authorizer: Write on the transactional
id. Versions before 2 get INVALID_PRODUCER_EPOCH for PRODUCER_FENCED. (v5, transaction
version 2, is not served.)
"""

from __future__ import annotations

from framework.protocol.messages.end_txn import EndTxnRequest, EndTxnResponse
from framework.security.authorizer import AclOperation, ResourceType
from framework.server import authz, txn
from framework.server.context import RequestContext


async def _end(ctx: RequestContext, req: EndTxnRequest, svc: txn.TransactionDirectory) -> EndTxnResponse:
    code = await svc.coordinator.end_txn(
        req.transactional_id, req.producer_id, req.producer_epoch, req.committed
    )
    return EndTxnResponse(error_code=txn.for_version(code, ctx.version, 2), producer_id=-1, producer_epoch=-1)


async def handle(ctx: RequestContext, req: EndTxnRequest) -> EndTxnResponse:
    authz.check(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id)
    svc = txn.check_coordinator(ctx, req.transactional_id)
    return await _end(ctx, req, svc)


def error_response(req: EndTxnRequest, code: int, message: str) -> EndTxnResponse:
    return EndTxnResponse(error_code=code, producer_id=-1, producer_epoch=-1)
