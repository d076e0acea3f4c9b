"""OffsetForLeaderEpoch (23): where a leader epoch ends in this leader's log (KIP-101, KIP-279).

For each partition the answer is the largest epoch <= the requested one and the offset where
it ends (the start of the next epoch, or the log end for the current one), from the log's
leader epoch cache (framework/storage/leader_epoch.py); -1/-1 when the epoch is unknown.
Followers (``replica_id`` = their node id, v3+) truncate a divergent log there; consumers
(``replica_id`` -1/-2) validate their position after a leader change (KIP-320). Both are
answered the same way, only by the leader, and after the fencing check of
``current_leader_epoch`` (Kafka checks the epoch first, then leadership).
"""

from __future__ import annotations

from framework.errors import NotLeader, TopicAuthorizationFailed, UnknownTopicOrPartition
from framework.protocol.messages.offset_for_leader_epoch import (
    EpochEndOffset,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderTopicResult,
)
from framework.replication.partition import Partition
from framework.security.authorizer import AclOperation, ResourceType
from framework.server import authz
from framework.server.context import RequestContext
from framework.server.errors import answer_errors


def end_offset(part: Partition, leader_epoch: int) -> tuple[int, int]:
    """(epoch, end offset) the leader answers for ``leader_epoch``.

    A leader whose cache does not have its current epoch yet (no write in it so far) first
    records that the epoch starts at the log end, as Kafka does when a replica becomes
    leader, so the current epoch is answered with the log end even on an empty log.
    """
    lg = part.log
    if lg.epochs.latest < part.leader_epoch:
        lg.become_leader(part.leader_epoch)
    return lg.end_offset_for_epoch(leader_epoch)


async def handle(ctx: RequestContext, req: OffsetForLeaderEpochRequest) -> OffsetForLeaderEpochResponse:
    topics = []
    # a follower needs ClusterAction on the cluster, a consumer Describe on each topic
    replica = ctx.version >= 3 and req.replica_id >= 0
    replica_ok = not replica or authz.cluster_allowed(ctx, AclOperation.CLUSTER_ACTION)
    for t in req.topics:
        out = []
        ok = replica_ok and (
            replica or authz.allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, t.topic)
        )
        for p in t.partitions:
            r = EpochEndOffset(partition=p.partition, leader_epoch=-1, end_offset=-1)
            out.append(r)
            with answer_errors(r):
                if not ok:
                    raise TopicAuthorizationFailed(f"not authorized to Describe topic {t.topic!r}")
                part = ctx.partitions.replica(t.topic, p.partition)
                if part.deleted:
                    raise UnknownTopicOrPartition(f"{t.topic}-{p.partition} was deleted")
                part.check_epoch(p.current_leader_epoch)
                if part.leader_id != ctx.node_id:
                    raise NotLeader(f"broker {ctx.node_id} does not lead {t.topic}-{p.partition}")
                r.leader_epoch, r.end_offset = end_offset(part, p.leader_epoch)
        topics.append(OffsetForLeaderTopicResult(topic=t.topic, partitions=out))
    return OffsetForLeaderEpochResponse(topics=topics)


def error_response(req: OffsetForLeaderEpochRequest, code: int, message: str) -> OffsetForLeaderEpochResponse:
    return OffsetForLeaderEpochResponse(
        topics=[
            OffsetForLeaderTopicResult(
                topic=t.topic,
                partitions=[
                    EpochEndOffset(error_code=code, partition=p.partition, leader_epoch=-1, end_offset=-1)
                    for p in t.partitions
                ],
            )
            for t in req.topics
        ]
    )
