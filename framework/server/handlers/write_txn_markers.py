"""WriteTxnMarkers (27): a transaction coordinator's COMMIT/ABORT markers for partitions led here.

Sent between brokers (ClusterAction on the cluster, else CLUSTER_AUTHORIZATION_FAILED for every
partition). Each marker is written to each partition's log as a control batch, answered once
every in-sync replica has it; for a ``__consumer_offsets`` partition the group coordinator then
stores (commit) or drops (abort) the offsets the producer sent with TxnOffsetCommit. A partition not led here
answers NOT_LEADER_OR_FOLLOWER, a stale producer epoch INVALID_PRODUCER_EPOCH, a deposed
coordinator TRANSACTION_COORDINATOR_FENCED (see server/txn_markers.py).
"""

from __future__ import annotations

from framework.coordinator.offsets_topic import TOPIC as OFFSETS_TOPIC
from framework.coordinator.transactions import TxnMarker
from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.write_txn_markers import (
    WritableTxnMarker,
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopicResult,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from framework.security.authorizer import AclOperation
from framework.server import authz
from framework.server.context import RequestContext
from framework.server.txn_markers import write_local


def _result(m: WritableTxnMarker, codes: dict[tuple[str, int], int]) -> WritableTxnMarkerResult:
    return WritableTxnMarkerResult(
        producer_id=m.producer_id,
        topics=[
            WritableTxnMarkerTopicResult(
                name=t.name,
                partitions=[
                    WritableTxnMarkerPartitionResult(partition_index=p, error_code=codes[(t.name, p)])
                    for p in t.partition_indexes
                ],
            )
            for t in m.topics
        ],
    )


async def _write(ctx: RequestContext, req: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
    def offsets_partitions() -> int:
        t = ctx.cluster.topics.get(OFFSETS_TOPIC)
        return t.partitions if t is not None else 1

    out = []
    for m in req.markers:
        tps = [(t.name, p) for t in m.topics for p in t.partition_indexes]
        marker = TxnMarker(
            m.producer_id, m.producer_epoch, m.transaction_result, m.coordinator_epoch, tuple(tps)
        )
        coordinator, now = ctx.groups.coordinator, ctx.services.clock.wall_ms()
        codes = await write_local(ctx.partitions, coordinator, offsets_partitions, marker, tps, now)
        out.append(_result(m, codes))
    return WriteTxnMarkersResponse(markers=out)


async def handle(ctx: RequestContext, req: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
    if not authz.cluster_allowed(ctx, AclOperation.CLUSTER_ACTION):
        return error_response(req, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "ClusterAction needed")
    return await _write(ctx, req)


def error_response(req: WriteTxnMarkersRequest, code: int, message: str) -> WriteTxnMarkersResponse:
    return WriteTxnMarkersResponse(
        markers=[
            _result(m, {(t.name, p): code for t in m.topics for p in t.partition_indexes})
            for m in req.markers
        ]
    )
