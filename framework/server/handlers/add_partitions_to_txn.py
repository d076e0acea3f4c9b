"""AddPartitionsToTxn (24): add partitions to a producer's transaction (opening it).

v0-v3 (clients): one transaction; the answer is per partition. Partitions of topics the
principal may not Write answer TOPIC_AUTHORIZATION_FAILED, unknown ones
UNKNOWN_TOPIC_OR_PARTITION, and then the others OPERATION_NOT_ATTEMPTED (nothing is added
unless every partition can be). Versions before 2 get INVALID_PRODUCER_EPOCH for
PRODUCER_FENCED.

v4+ (between brokers, ClusterAction on the cluster): several transactions; one with
``verify_only`` adds nothing and answers, per partition, whether it is in the producer's open
transaction (KIP-890 part 1: a partition leader asks before it appends a transactional batch),
INVALID_TXN_STATE when it is not.
"""

from __future__ import annotations

from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnResult,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTopicResult,
    AddPartitionsToTxnTransaction,
)
from framework.security.authorizer import AclOperation, ResourceType
from framework.server import authz, txn
from framework.server.context import RequestContext

TP = tuple[str, int]


def _results(
    topics: list[AddPartitionsToTxnTopic], codes: dict[TP, int]
) -> list[AddPartitionsToTxnTopicResult]:
    return [
        AddPartitionsToTxnTopicResult(
            name=t.name,
            results_by_partition=[
                AddPartitionsToTxnPartitionResult(partition_index=p, partition_error_code=codes[(t.name, p)])
                for p in t.partitions
            ],
        )
        for t in topics
    ]


def _precheck(ctx: RequestContext, topics: list[AddPartitionsToTxnTopic]) -> dict[TP, int]:
    """Errors of partitions that cannot be added (authorization, unknown); {} when none."""
    bad: dict[TP, int] = {}
    for t in topics:
        info = ctx.cluster.topics.get(t.name)
        for p in t.partitions:
            if not authz.allowed(ctx, AclOperation.WRITE, ResourceType.TOPIC, t.name):
                bad[(t.name, p)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif info is None or not 0 <= p < info.partitions:
                bad[(t.name, p)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    return bad


async def _one(ctx: RequestContext, tx: AddPartitionsToTxnTransaction, client: bool) -> dict[TP, int]:
    tps = [(t.name, p) for t in tx.topics for p in t.partitions]
    svc = txn.service(ctx)
    code = svc.coordinator_error(tx.transactional_id)
    if code:
        return dict.fromkeys(tps, code)
    if tx.verify_only:
        return dict(
            svc.coordinator.verify_partitions(tx.transactional_id, tx.producer_id, tx.producer_epoch, tps)
        )
    if client:
        if not authz.allowed(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, tx.transactional_id):
            return dict.fromkeys(tps, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        bad = _precheck(ctx, tx.topics)
        if bad:
            return {tp: bad.get(tp, ErrorCode.OPERATION_NOT_ATTEMPTED) for tp in tps}
    code = await svc.coordinator.add_partitions(tx.transactional_id, tx.producer_id, tx.producer_epoch, tps)
    return dict.fromkeys(tps, txn.for_version(code, ctx.version, 2))


async def _handle(ctx: RequestContext, req: AddPartitionsToTxnRequest) -> AddPartitionsToTxnResponse:
    if ctx.version < 4:
        tx = AddPartitionsToTxnTransaction(
            transactional_id=req.v3_and_below_transactional_id,
            producer_id=req.v3_and_below_producer_id,
            producer_epoch=req.v3_and_below_producer_epoch,
            topics=req.v3_and_below_topics,
        )
        codes = await _one(ctx, tx, client=True)
        return AddPartitionsToTxnResponse(results_by_topic_v3_and_below=_results(tx.topics, codes))
    if not authz.cluster_allowed(ctx, AclOperation.CLUSTER_ACTION):
        return AddPartitionsToTxnResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    results = []
    for tx in req.transactions:
        codes = await _one(ctx, tx, client=False)
        results.append(
            AddPartitionsToTxnResult(
                transactional_id=tx.transactional_id, topic_results=_results(tx.topics, codes)
            )
        )
    return AddPartitionsToTxnResponse(results_by_transaction=results)


async def handle(ctx: RequestContext, req: AddPartitionsToTxnRequest) -> AddPartitionsToTxnResponse:
    return await _handle(ctx, req)


def error_response(req: AddPartitionsToTxnRequest, code: int, message: str) -> AddPartitionsToTxnResponse:
    return AddPartitionsToTxnResponse(
        error_code=code,
        results_by_topic_v3_and_below=_results(
            req.v3_and_below_topics,
            {(t.name, p): code for t in req.v3_and_below_topics for p in t.partitions},
        ),
    )
