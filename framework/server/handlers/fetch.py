"""Fetch (1): serve stored batches up to the high watermark, long-polling when asked.

The records of a partition are one ``pread`` of the segment file, passed to the socket
untouched. When fewer than ``min_bytes`` are available and ``max_wait_ms`` > 0 the request
waits (without blocking its connection's peers) until an append wakes it or time runs out.
Fetch sessions (KIP-227) are not kept: the broker answers session id 0 and clients send full
requests, as Kafka allows. Every answer carries the partition's last stable offset; a consumer
at ``isolation_level`` 1 (read_committed) reads only below it and gets the aborted
transactions overlapping what it may read (from the logs' ``.txnindex``), so it can drop
their records. With an authorizer a consumer needs Read on each topic, a follower
(replica id set) ClusterAction on the cluster; else TOPIC_AUTHORIZATION_FAILED.

Replication throttle (leader side, ``leader.replication.throttled.*``): a follower out of the
ISR fetching a throttled partition gets it without records while the leader's quota is
exceeded (Kafka's shouldLeaderThrottle), and the bytes it does get are recorded.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from framework.clock import SYSTEM, Clock
from framework.errors import OffsetOutOfRange
from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.fetch import (
    AbortedTransaction,
    FetchableTopicResponse,
    FetchRequest,
    FetchResponse,
    PartitionData,
)
from framework.replication.partition import Partition
from framework.replication.quota import ReplicationQuota
from framework.security.authorizer import AclOperation, ResourceType
from framework.security.quotas import CONSUMER_BYTE_RATE
from framework.server import authz, metrics
from framework.server.context import RequestContext
from framework.server.errors import answer_errors, resolve_replica

_Target = tuple[int, Any, Partition | None, int]  # (topic slot, FetchPartition, partition, error)


def _resolve(ctx: RequestContext, req: FetchRequest) -> tuple[list[FetchableTopicResponse], list[_Target]]:
    v = ctx.version
    # a follower needs ClusterAction on the cluster, a consumer Read on each topic
    replica = _replica_id(req, v) >= 0
    replica_ok = not replica or authz.cluster_allowed(ctx, AclOperation.CLUSTER_ACTION)
    topics: list[FetchableTopicResponse] = []
    targets: list[_Target] = []
    for ft in req.topics:
        name: str | None = ft.topic
        if v >= 13:
            info = ctx.cluster.topic_by_id(ft.topic_id)
            name = info.name if info is not None else None
        slot = len(topics)
        topics.append(FetchableTopicResponse(topic_id=ft.topic_id, topic=ft.topic, partitions=[]))
        for fp in ft.partitions:
            if name is None:
                targets.append((slot, fp, None, ErrorCode.UNKNOWN_TOPIC_ID))
            elif not replica_ok or (
                not replica and not authz.allowed(ctx, AclOperation.READ, ResourceType.TOPIC, name)
            ):
                targets.append((slot, fp, None, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            else:
                targets.append((slot, fp, *resolve_replica(ctx.partitions, name, fp.partition)))
    return topics, targets


def _replica_id(req: FetchRequest, v: int) -> int:
    return req.replica_state.replica_id if v >= 15 else req.replica_id


def _read(
    req: FetchRequest,
    v: int,
    topics: list[FetchableTopicResponse],
    targets: list[_Target],
    quota: ReplicationQuota | None = None,
    clock: Clock = SYSTEM,
) -> tuple[FetchResponse, int, bool]:
    budget = req.max_bytes if req.max_bytes > 0 else 0x7FFFFFFF
    total = 0
    error = False
    committed = req.isolation_level == 1
    replica = _replica_id(req, v)
    now = clock.wall_ms() if replica >= 0 else 0
    for t in topics:
        t.partitions = []
    for slot, fp, part, code in targets:
        pd = PartitionData(
            partition_index=fp.partition,
            high_watermark=-1,
            last_stable_offset=-1,
            log_start_offset=-1,
            aborted_transactions=[] if committed else None,
            records=b"",
        )
        topics[slot].partitions.append(pd)
        if part is None or part.deleted:
            pd.error_code = code or ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            error = True
            continue
        lg = part.log
        with answer_errors(pd):
            if not part.is_leader:
                part.check_leader()  # no fetching from followers (KIP-392) yet
            if v >= 9:
                part.check_epoch(fp.current_leader_epoch)
            # check the offset before anything is recorded (Kafka updates a follower's state
            # only after a successful read); the answer still carries the log start and high
            # watermark, from which a replica fetcher tells "behind" from "diverged"
            in_range = lg.log_start_offset <= fp.fetch_offset <= lg.log_end_offset
            if replica >= 0 and in_range:
                # a follower: what it asks for is what it has; it may read past the high
                # watermark, up to the log end
                part.follower_fetched(replica, fp.fetch_offset, now)
            hw = lg.high_watermark
            lso = lg.last_stable_offset
            pd.high_watermark = hw
            pd.last_stable_offset = lso
            pd.log_start_offset = lg.log_start_offset
            if not in_range:
                raise OffsetOutOfRange(
                    f"{part.topic}-{part.index}: offset {fp.fetch_offset} outside "
                    f"[{lg.log_start_offset}, {lg.log_end_offset}]"
                )
            upper = lg.log_end_offset if replica >= 0 else (lso if committed else hw)
            # over the leader's replication throttle, a throttled replica gets no records this time
            throttled = _throttled(quota, part, replica)
            if budget > 0 and fp.partition_max_bytes > 0 and not (throttled and _held_back(quota)):
                data = lg.read(fp.fetch_offset, min(fp.partition_max_bytes, budget), upper, total == 0)
                if data:
                    pd.records = data
                    if committed and replica < 0:
                        pd.aborted_transactions = [
                            AbortedTransaction(producer_id=t.producer_id, first_offset=t.first_offset)
                            for t in lg.collect_aborted(fp.fetch_offset, upper)
                        ]
                    n = len(data)
                    budget -= n
                    total += n
                    if replica < 0:
                        metrics.child(metrics.BYTES_OUT, part.topic).inc(n)
                    else:
                        metrics.REPLICATION_BYTES_OUT.inc(n)
                        _record(quota if throttled else None, n)
        if pd.error_code:
            error = True
    return FetchResponse(session_id=0, responses=topics), total, error


def _cap_to_quota(ctx: RequestContext, req: FetchRequest, v: int) -> None:
    """A consumer with a consumer_byte_rate gets at most what its quota allows in one window
    (Kafka's getMaxValueInQuotaWindow), so one answer cannot overshoot it many times over; the
    listener records the answer's size and throttles."""
    quotas = ctx.services.quotas
    if quotas is None or not quotas.active or _replica_id(req, v) >= 0:
        return
    cap = quotas.max_in_window(CONSUMER_BYTE_RATE, ctx.principal.name, ctx.header.client_id or "")
    if cap is not None:
        req.max_bytes = min(req.max_bytes, cap) if req.max_bytes > 0 else cap


def _throttled(quota: ReplicationQuota | None, part: Partition, replica: int) -> bool:
    """Kafka's shouldLeaderThrottle, less the rate: an out-of-sync follower of a throttled partition."""
    return (
        quota is not None
        and replica >= 0
        and quota.active
        and replica not in part.isr
        and quota.is_throttled(part.topic, part.index)
    )


def _held_back(quota: ReplicationQuota | None) -> bool:
    return quota is not None and quota.exceeded(time.monotonic())


def _record(quota: ReplicationQuota | None, n: int) -> None:
    if quota is not None:
        quota.record(n, time.monotonic())


async def handle(ctx: RequestContext, req: FetchRequest) -> FetchResponse:
    v = ctx.version
    if v >= 7 and req.session_id != 0:
        return FetchResponse(error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND, session_id=0)
    topics, targets = _resolve(ctx, req)
    _cap_to_quota(ctx, req, v)
    resp, total, error = _read(req, v, topics, targets, ctx.partitions.leader_quota, ctx.services.clock)
    if error or total >= req.min_bytes or req.max_wait_ms <= 0 or not targets:
        return resp
    return await _delayed(ctx, req, topics, targets)


async def _delayed(
    ctx: RequestContext,
    req: FetchRequest,
    topics: list[FetchableTopicResponse],
    targets: list[_Target],
) -> FetchResponse:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + req.max_wait_ms / 1000
    parts = {id(p): p for _, _, p, _ in targets if p is not None}
    while True:
        remaining = deadline - loop.time()
        if remaining <= 0 or ctx.services.stopping.is_set():
            break
        fut: asyncio.Future[None] = loop.create_future()
        for p in parts.values():
            p.add_waiter(fut)
        timer = loop.call_later(remaining, _wake, fut)
        try:
            await fut
        finally:
            timer.cancel()
        quota, clock = ctx.partitions.leader_quota, ctx.services.clock
        resp, total, error = _read(req, ctx.version, topics, targets, quota, clock)
        if error or total >= req.min_bytes:
            return resp
    return _read(req, ctx.version, topics, targets, ctx.partitions.leader_quota, ctx.services.clock)[0]


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def error_response(req: FetchRequest, code: int, message: str) -> FetchResponse:
    return FetchResponse(error_code=code, session_id=0)
