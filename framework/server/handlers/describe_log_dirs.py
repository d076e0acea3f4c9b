"""DescribeLogDirs (35): this broker's log directory and the replicas it holds there (what
``kafka-log-dirs --describe`` and kafka-python's ``describe_log_dirs`` show).

One broker has one log directory (``log.dirs``). For each replica held here, as Kafka's
``ReplicaManager.describeLogDirs``: its size on disk (every segment), ``is_future_key`` false
(replicas never move between directories here) and ``offset_lag``: 0 on the leader; on a
follower the leader's high watermark at its last fetch minus its own log end (0 when caught up
or before its first fetch; Kafka reports max(HW - LEO, 0) of the local log, which is 0 for
every current replica). v4+: the file system's total and usable bytes. A log dir that is gone
or unreadable answers KAFKA_STORAGE_ERROR (Kafka's offline log dir).

``topics`` null asks for every replica; otherwise only the partitions named, and a partition
not held here is left out (as Kafka does). With an authorizer: Describe on the cluster, else
an empty answer with CLUSTER_AUTHORIZATION_FAILED (v3+; earlier versions have no error field).
"""

from __future__ import annotations

import shutil

from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.describe_log_dirs import (
    DescribeLogDirsPartition,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    DescribeLogDirsResult,
    DescribeLogDirsTopic,
)
from framework.replication.partition import Partition
from framework.security.authorizer import AclOperation
from framework.server import authz
from framework.server.context import RequestContext
from framework.server.errors import kafka_error


def offset_lag(p: Partition) -> int:
    """How far a replica is behind what its leader has committed (0 on the leader)."""
    if p.is_leader or p.leader_high_watermark < 0:
        return 0
    return max(0, p.leader_high_watermark - p.log_end_offset)


async def handle(ctx: RequestContext, req: DescribeLogDirsRequest) -> DescribeLogDirsResponse:
    if not authz.cluster_allowed(ctx, AclOperation.DESCRIBE):
        return DescribeLogDirsResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    wanted: set[tuple[str, int]] | None = None
    if req.topics is not None:
        wanted = {(t.topic, i) for t in req.topics for i in t.partitions}
    log_dir = ctx.partitions.log_dir.resolve()
    result = DescribeLogDirsResult(error_code=ErrorCode.NONE, log_dir=str(log_dir))
    by_topic: dict[str, list[DescribeLogDirsPartition]] = {}
    for p in sorted(ctx.partitions.all_partitions(), key=lambda p: (p.topic, p.index)):
        if p.deleted or (wanted is not None and (p.topic, p.index) not in wanted):
            continue
        by_topic.setdefault(p.topic, []).append(
            DescribeLogDirsPartition(
                partition_index=p.index,
                partition_size=p.log.size_bytes,
                offset_lag=offset_lag(p),
                is_future_key=False,
            )
        )
    result.topics = [DescribeLogDirsTopic(name=t, partitions=ps) for t, ps in by_topic.items()]
    try:
        usage = shutil.disk_usage(log_dir)
    except OSError as exc:  # the directory is gone or unreadable: Kafka's offline log dir
        named = kafka_error(exc)
        assert named is not None
        result = DescribeLogDirsResult(error_code=named[0], log_dir=str(log_dir))
    else:
        result.total_bytes, result.usable_bytes = usage.total, usage.free  # sent from v4
    return DescribeLogDirsResponse(error_code=ErrorCode.NONE, results=[result])


def error_response(req: DescribeLogDirsRequest, code: int, message: str) -> DescribeLogDirsResponse:
    return DescribeLogDirsResponse(error_code=code)
