"""DescribeTransactions (65): state, producer, timeout, start time and partitions of
transactional ids this broker coordinates (NOT_COORDINATOR for the others,
TRANSACTIONAL_ID_NOT_FOUND for unknown ones). With an authorizer: Describe on each id (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED); partitions of topics the principal may not Describe
are left out, as in Kafka."""

from __future__ import annotations

from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.describe_transactions import (
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    TopicData,
    TransactionState,
)
from framework.security.authorizer import AclOperation, ResourceType
from framework.server import authz, txn
from framework.server.context import RequestContext


def _one(ctx: RequestContext, tid: str) -> TransactionState:
    out = TransactionState(transactional_id=tid, producer_id=-1, producer_epoch=-1)
    if not authz.allowed(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, tid):
        out.error_code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        return out
    svc = txn.service(ctx)
    code = svc.coordinator_error(tid)
    if code:
        out.error_code = code
        return out
    code, m = svc.coordinator.describe(tid)
    if m is None:
        out.error_code = code
        return out
    r = m.record
    by_topic: dict[str, list[int]] = {}
    for t, p in sorted(r.partitions):
        if authz.allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, t):
            by_topic.setdefault(t, []).append(p)
    out.transaction_state = m.state.display
    out.transaction_timeout_ms = r.timeout_ms
    out.transaction_start_time_ms = r.start_ms
    out.producer_id = r.producer_id
    out.producer_epoch = r.producer_epoch
    out.topics = [TopicData(topic=t, partitions=ps) for t, ps in by_topic.items()]
    return out


async def handle(ctx: RequestContext, req: DescribeTransactionsRequest) -> DescribeTransactionsResponse:
    return DescribeTransactionsResponse(transaction_states=[_one(ctx, t) for t in req.transactional_ids])


def error_response(req: DescribeTransactionsRequest, code: int, message: str) -> DescribeTransactionsResponse:
    return DescribeTransactionsResponse(
        transaction_states=[
            TransactionState(transactional_id=t, error_code=code, producer_id=-1, producer_epoch=-1)
            for t in req.transactional_ids
        ]
    )
