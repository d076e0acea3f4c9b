"""DescribeProducers (61): the active producers of partitions led here (Kafka's
``kafka-transactions describe-producers``): id, epoch, last sequence and timestamp, the
coordinator epoch of its last marker and the first offset of its open transaction (-1: none).
With an authorizer: Read on the topic (else TOPIC_AUTHORIZATION_FAILED)."""

from __future__ import annotations

from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.describe_producers import (
    DescribeProducersRequest,
    DescribeProducersResponse,
    PartitionResponse,
    ProducerState,
    TopicResponse,
)
from framework.security.authorizer import AclOperation, ResourceType
from framework.server import authz
from framework.server.context import RequestContext
from framework.server.errors import answer_errors


def _partition(ctx: RequestContext, topic: str, index: int) -> PartitionResponse:
    r = PartitionResponse(partition_index=index)
    if not authz.allowed(ctx, AclOperation.READ, ResourceType.TOPIC, topic):
        r.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        return r
    with answer_errors(r):
        part = ctx.partitions.leader(topic, index)
        ps = part.log.producer_state
        r.active_producers = [
            ProducerState(
                producer_id=e.producer_id,
                producer_epoch=e.epoch,
                last_sequence=e.last_seq,
                last_timestamp=e.last_append_ms,
                coordinator_epoch=e.coordinator_epoch,
                current_txn_start_offset=e.current_txn_first_offset,
            )
            for e in sorted(ps.producers.values(), key=lambda e: e.producer_id)
        ]
    return r


async def handle(ctx: RequestContext, req: DescribeProducersRequest) -> DescribeProducersResponse:
    return DescribeProducersResponse(
        topics=[
            TopicResponse(name=t.name, partitions=[_partition(ctx, t.name, p) for p in t.partition_indexes])
            for t in req.topics
        ]
    )


def error_response(req: DescribeProducersRequest, code: int, message: str) -> DescribeProducersResponse:
    return DescribeProducersResponse(
        topics=[
            TopicResponse(
                name=t.name,
                partitions=[
                    PartitionResponse(partition_index=p, error_code=code, error_message=message)
                    for p in t.partition_indexes
                ],
            )
            for t in req.topics
        ]
    )
