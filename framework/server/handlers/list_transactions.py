"""ListTransactions (66): the transactional ids this broker coordinates (admin clients ask every
broker and merge), filtered by state names, producer ids and (v1) how long the transaction has
been open. Unknown state names are echoed in ``unknown_state_filters``. With an authorizer only
ids the principal may Describe are listed, as in Kafka."""

from __future__ import annotations

from framework.coordinator.transactions import TxnState
from framework.protocol.messages.list_transactions import (
    ListTransactionsRequest,
    ListTransactionsResponse,
    TransactionState,
)
from framework.security.authorizer import AclOperation, ResourceType
from framework.server import authz, txn
from framework.server.context import RequestContext


async def handle(ctx: RequestContext, req: ListTransactionsRequest) -> ListTransactionsResponse:
    svc = txn.service(ctx)
    states = {s for s in (TxnState.by_name(n) for n in req.state_filters) if s is not None}
    unknown = [n for n in req.state_filters if TxnState.by_name(n) is None]
    if unknown and not states:
        return ListTransactionsResponse(unknown_state_filters=unknown)
    found = svc.coordinator.list_transactions(
        states or None,
        set(req.producer_id_filters) or None,
        req.duration_filter if ctx.version >= 1 else -1,
    )
    return ListTransactionsResponse(
        unknown_state_filters=unknown,
        transaction_states=[
            TransactionState(
                transactional_id=m.record.transactional_id,
                producer_id=m.producer_id,
                transaction_state=m.state.display,
            )
            for m in sorted(found, key=lambda m: m.record.transactional_id)
            if authz.allowed(
                ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, m.record.transactional_id
            )
        ],
    )


def error_response(req: ListTransactionsRequest, code: int, message: str) -> ListTransactionsResponse:
    return ListTransactionsResponse(error_code=code)
