"""DescribeQuorum (55): the metadata quorum, as ``kafka-metadata-quorum describe --status`` and
kafka-python's ``describe_metadata_quorum`` ask for it (Kafka's ``__cluster_metadata``
partition 0; any other topic or partition is UNKNOWN_TOPIC_OR_PARTITION, as KRaft answers).

The store's quorum is Raft by pysyncobj, not KRaft; the answer maps it: the leader is the Raft
leader (the controller), the leader epoch the Raft term, the high watermark the commit index,
each voter's log end offset its last Raft log index. The Raft leader knows every voter's
progress (match index, when it last answered: the last fetch time; when its match index last
reached the leader's log end: the last caught-up time). The observers are the registered
brokers that are not voters (they follow the log read-only): on the leader each with the log
index its last heartbeat reported applied and that heartbeat's time as the last fetch time
(last caught-up time -1); an observer knows its own log end, and -1 for the rest.
Another broker forwards the request to the Raft leader over the inter-broker listener and
answers with its answer (as a KRaft broker forwards it to the active controller); when that
fails (no leader known, the leader unreachable within 5 s) it answers its own view, as far as
it goes: the leader and term it follows, its commit index and its own log end, and -1 for what
it cannot know (the other voters' progress and times). v2 lists each voter's Raft address as
listener CONTROLLER.

A single node has no quorum: it answers as the only voter and leader, at epoch 0, with
nothing in the log. With an authorizer: Describe on the cluster (else CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import logging

from framework.metadata.quorum import QuorumStatus, VoterState
from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.describe_quorum import (
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    DescribeQuorumResponsePartitionData,
    DescribeQuorumResponseTopicData,
    Listener,
    Node,
    ReplicaState,
)
from framework.replication.fetcher import LINK_ERRORS
from framework.security.authorizer import AclOperation
from framework.server import authz
from framework.server.context import RequestContext
from framework.server.forward import FORWARDED_CLIENT_ID

METADATA_TOPIC = "__cluster_metadata"
FORWARD_TIMEOUT_S = 5.0
log = logging.getLogger("sftraffic.server")


def _single_node(ctx: RequestContext) -> QuorumStatus:
    now = ctx.services.clock.wall_ms()
    return QuorumStatus(ctx.node_id, 0, 0, True, [VoterState(ctx.node_id, 0, now, now)])


def _replica(v: VoterState) -> ReplicaState:
    return ReplicaState(
        replica_id=v.node_id,
        log_end_offset=v.log_end_offset,
        last_fetch_timestamp=v.last_fetch_ms,
        last_caught_up_timestamp=v.last_caught_up_ms,
    )


async def handle(ctx: RequestContext, req: DescribeQuorumRequest) -> DescribeQuorumResponse:
    authz.check_cluster(ctx, AclOperation.DESCRIBE)
    if (
        len(req.topics) != 1
        or req.topics[0].topic_name != METADATA_TOPIC
        or [p.partition_index for p in req.topics[0].partitions] != [0]
    ):
        return DescribeQuorumResponse(
            error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            error_message=f"the metadata quorum is {METADATA_TOPIC} partition 0, alone",
        )
    status = ctx.cluster.quorum_status()
    if status is None:
        status = _single_node(ctx)
    if not status.is_leader and status.leader_id >= 0 and ctx.header.client_id != FORWARDED_CLIENT_ID:
        forwarder = ctx.services.forwarder
        if forwarder is not None:
            return await _forwarded(ctx, req, status)
    return _answer(status)


async def _forwarded(
    ctx: RequestContext, req: DescribeQuorumRequest, status: QuorumStatus
) -> DescribeQuorumResponse:
    """The Raft leader's answer, or this broker's own view when it cannot be had."""
    assert ctx.services.forwarder is not None
    try:
        return await ctx.services.forwarder.forward(
            status.leader_id, req, ctx.version, DescribeQuorumResponse, FORWARD_TIMEOUT_S
        )
    except LINK_ERRORS as exc:
        log.info(
            "DescribeQuorum: the Raft leader %d did not answer (%s); answering this broker's view",
            status.leader_id,
            exc or type(exc).__name__,
        )
        return _answer(status)


def _answer(status: QuorumStatus) -> DescribeQuorumResponse:
    addresses = {}
    for v in status.voters:
        host, _, port = status.addresses.get(v.node_id, "").rpartition(":")
        if host and port.isdigit():
            addresses[v.node_id] = (host, int(port))
    partition = DescribeQuorumResponsePartitionData(
        partition_index=0,
        error_code=ErrorCode.NONE,
        leader_id=status.leader_id,
        leader_epoch=status.epoch,
        high_watermark=status.high_watermark,
        current_voters=[_replica(v) for v in status.voters],
        observers=[_replica(v) for v in status.observers],
    )
    return DescribeQuorumResponse(
        error_code=ErrorCode.NONE,
        topics=[DescribeQuorumResponseTopicData(topic_name=METADATA_TOPIC, partitions=[partition])],
        nodes=[
            Node(node_id=i, listeners=[Listener(name="CONTROLLER", host=h, port=p)])
            for i, (h, p) in sorted(addresses.items())
        ],
    )


def error_response(req: DescribeQuorumRequest, code: int, message: str) -> DescribeQuorumResponse:
    return DescribeQuorumResponse(error_code=code, error_message=message)
