"""ShareFetch (78): a share-group member acknowledges what it processed and acquires more.

The request speaks in the member's share session (:class:`~framework.coordinator.share_groups.
SharePartitionManager`): epoch 0 opens it with the partitions listed, later epochs add
partitions and forget others, -1 is the last request (its acknowledgements are applied, the
session closes, nothing is fetched). Acknowledgements ride along and are applied first; their
outcome is each partition's ``acknowledge_error_code``.

Then each partition of the session hands out records: the log is read from the lowest offset
that may be handed out (a released record, else the share partition's end), whole batches as
stored, and the records AVAILABLE in them are acquired for the member up to ``max_records``
(whole batches; exactly ``max_records`` with ``share_acquire_mode`` 1, KIP-1206). The answer
holds those batches and the acquired ranges with their delivery counts; the client drops the
records of a batch outside them. Records are read up to the high watermark. When nothing could
be acquired and ``max_wait_ms`` > 0 the request waits for an append or a released record.

A share partition starts at the log end when first read (``share.auto.offset.reset`` latest,
Kafka's default; ``earliest`` through the broker's ``share.auto.offset.reset``). With an
authorizer: Read on the group (else GROUP_AUTHORIZATION_FAILED for the request) and Read on
each topic (else TOPIC_AUTHORIZATION_FAILED for its partitions).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from framework.coordinator.share_groups import FINAL_SESSION_EPOCH, SharePartitionManager, ShareSession
from framework.coordinator.share_partition import SharePartition
from framework.errors import StoreError
from framework.metadata.store import TopicInfo
from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.share_fetch import (
    AcquiredRecords,
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionData,
    ShareFetchableTopicResponse,
    ShareFetchRequest,
    ShareFetchResponse,
)
from framework.protocol.records import iter_batches
from framework.replication.partition import Partition
from framework.security.authorizer import AclOperation, ResourceType
from framework.server import authz, metrics
from framework.server.context import RequestContext
from framework.server.errors import kafka_error
from framework.server.shares import acknowledge, leader_partition, resolve_topic, share_manager, start_offset

RECORD_LIMIT_MODE = 1
DEFAULT_MAX_RECORDS = 500


@dataclass(slots=True)
class _Slot:
    topic: str
    index: int
    data: PartitionData
    part: Partition | None = None
    keep: bool = False  # answered even without records (an error, an acknowledgement)


@dataclass(slots=True)
class _Answer:
    slots: dict[tuple[str, int], _Slot] = field(default_factory=dict)

    def slot(self, topic: str, index: int) -> _Slot:
        s = self.slots.get((topic, index))
        if s is None:
            s = self.slots[(topic, index)] = _Slot(topic, index, PartitionData(partition_index=index))
        return s


def _acquire(
    ctx: RequestContext,
    shares: SharePartitionManager,
    session: ShareSession,
    s: _Slot,
    max_records: int,
    max_bytes: int,
    strict: bool,
) -> tuple[int, int]:
    """Acquire records of one partition into its slot; (records acquired, bytes)."""
    part = s.part
    if part is None or part.deleted or max_records <= 0 or max_bytes <= 0:
        return 0, 0
    key = (session.group_id, s.topic, s.index)
    lg = part.log
    sp: SharePartition = shares.get(key, (part.topic_id, part.leader_epoch), lambda: start_offset(ctx, part))
    sp.truncate_to(lg.log_start_offset)
    if not sp.can_acquire():
        return 0, 0
    offset = max(sp.next_fetch_offset(), lg.log_start_offset)
    upper = lg.high_watermark
    if offset >= upper:
        return 0, 0
    data = lg.read(offset, max_bytes, upper, True)
    batches = [(pos, h) for pos, h in iter_batches(data)]
    if not batches:
        return 0, 0
    now = shares.sched.time()
    acquired = sp.acquire(
        session.member_id,
        [(h.base_offset, h.last_offset) for _, h in batches],
        max_records,
        now,
        strict=strict,
    )
    if not acquired:
        return 0, 0
    lo, hi = acquired[0].first_offset, acquired[-1].last_offset
    used = [(pos, h) for pos, h in batches if h.last_offset >= lo and h.base_offset <= hi]
    start, end = used[0][0], used[-1][0] + used[-1][1].size
    records = data[start:end]
    pd = s.data
    pd.records = records
    pd.acquired_records = [
        AcquiredRecords(
            first_offset=a.first_offset, last_offset=a.last_offset, delivery_count=a.delivery_count
        )
        for a in acquired
    ]
    shares.schedule_expiry(key, now + shares.config.lock_duration_ms / 1000)
    metrics.child(metrics.BYTES_OUT, part.topic).inc(len(records))
    return sum(a.last_offset - a.first_offset + 1 for a in acquired), len(records)


def _fetch_round(
    ctx: RequestContext,
    shares: SharePartitionManager,
    session: ShareSession,
    answer: _Answer,
    req: ShareFetchRequest,
) -> int:
    records_left = req.max_records if req.max_records > 0 else DEFAULT_MAX_RECORDS
    bytes_left = req.max_bytes if req.max_bytes > 0 else 0x7FFFFFFF
    total = 0
    strict = ctx.version >= 2 and req.share_acquire_mode == RECORD_LIMIT_MODE
    for topic, index in sorted(session.partitions):
        s = answer.slot(topic, index)
        if s.data.error_code:
            continue
        if s.part is None:
            s.part, code = leader_partition(ctx, topic, index)
            if s.part is None:
                s.data.error_code, s.keep = code, True
                continue
            s.data.current_leader = LeaderIdAndEpoch(leader_id=ctx.node_id, leader_epoch=s.part.leader_epoch)
        if s.data.acquired_records:
            continue
        try:
            n, size = _acquire(ctx, shares, session, s, records_left, bytes_left, strict)
        except StoreError as exc:
            named = kafka_error(exc)
            assert named is not None
            s.data.error_code, s.keep = named[0], True
            continue
        records_left -= n
        bytes_left -= size
        total += size
    return total


def _response(ctx: RequestContext, answer: _Answer, lock_ms: int) -> ShareFetchResponse:
    topics: dict[str, ShareFetchableTopicResponse] = {}
    endpoints: dict[int, NodeEndpoint] = {}
    known = ctx.cluster.topics
    for (topic, _), s in sorted(answer.slots.items()):
        if not (s.keep or s.data.acquired_records):
            continue
        info = known.get(topic)
        t = topics.get(topic)
        if t is None:
            t = topics[topic] = ShareFetchableTopicResponse(
                topic_id=info.id_bytes if info is not None else b"\0" * 16, partitions=[]
            )
        if s.data.records is None:
            s.data.records = b""
        t.partitions.append(s.data)
        if s.data.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER and info is not None:
            _leader_hint(ctx, info, s, endpoints)
    return ShareFetchResponse(
        acquisition_lock_timeout_ms=lock_ms,
        responses=list(topics.values()),
        node_endpoints=list(endpoints.values()),
    )


def _leader_hint(ctx: RequestContext, info: TopicInfo, s: _Slot, endpoints: dict[int, NodeEndpoint]) -> None:
    states = ctx.cluster.partition_states(info)
    if s.index >= len(states):
        return
    st = states[s.index]
    s.data.current_leader = LeaderIdAndEpoch(leader_id=st.leader, leader_epoch=st.leader_epoch)
    for node in ctx.cluster.nodes(ctx.listener):
        if node.node_id == st.leader:
            endpoints[node.node_id] = NodeEndpoint(
                node_id=node.node_id, host=node.host, port=node.port, rack=None
            )


async def handle(ctx: RequestContext, req: ShareFetchRequest) -> ShareFetchResponse:
    shares = share_manager(ctx)
    if not req.group_id or not req.member_id:
        return ShareFetchResponse(
            error_code=ErrorCode.INVALID_REQUEST, error_message="GroupId and MemberId are required."
        )
    if not authz.allowed(ctx, AclOperation.READ, ResourceType.GROUP, req.group_id):
        return ShareFetchResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    epoch = req.share_session_epoch
    has_acks = any(p.acknowledgement_batches for t in req.topics for p in t.partitions)
    if epoch == 0 and has_acks:
        return ShareFetchResponse(
            error_code=ErrorCode.INVALID_REQUEST,
            error_message="Acknowledgements are not allowed when opening a share session.",
        )
    code, session = shares.open_session(req.group_id, req.member_id, epoch, ctx.peer)
    if session is None:
        return ShareFetchResponse(error_code=code)
    answer = _Answer()
    for ft in req.topics:
        name, topic_code = resolve_topic(ctx, ft.topic_id)
        for fp in ft.partitions:
            if name is None or topic_code:
                s = answer.slot(name or ft.topic_id.hex(), fp.partition_index)
                s.data.error_code, s.keep = topic_code, True
                continue
            if epoch != FINAL_SESSION_EPOCH:
                session.partitions.add((name, fp.partition_index))
            if fp.acknowledgement_batches:
                s = answer.slot(name, fp.partition_index)
                s.keep = True
                s.data.acknowledge_error_code = acknowledge(
                    ctx,
                    shares,
                    session,
                    name,
                    fp.partition_index,
                    [
                        (b.first_offset, b.last_offset, b.acknowledge_types)
                        for b in fp.acknowledgement_batches
                    ],
                )
    for forgotten in req.forgotten_topics_data:
        info = ctx.cluster.topic_by_id(forgotten.topic_id)
        if info is not None:
            for p in forgotten.partitions:
                session.partitions.discard((info.name, p))
    lock_ms = shares.config.lock_duration_ms
    if epoch == FINAL_SESSION_EPOCH:
        shares.close_session(req.group_id, req.member_id)
        return _response(ctx, answer, lock_ms)
    total = _fetch_round(ctx, shares, session, answer, req)
    if total == 0 and req.max_wait_ms > 0 and session.partitions:
        await _wait(ctx, shares, session, answer, req)
    return _response(ctx, answer, lock_ms)


async def _wait(
    ctx: RequestContext,
    shares: SharePartitionManager,
    session: ShareSession,
    answer: _Answer,
    req: ShareFetchRequest,
) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + req.max_wait_ms / 1000
    while not ctx.services.stopping.is_set():
        remaining = deadline - loop.time()
        if remaining <= 0:
            return
        fut: asyncio.Future[None] = loop.create_future()
        for (topic, index), s in answer.slots.items():
            if s.part is not None and (topic, index) in session.partitions:
                s.part.add_waiter(fut)
                shares.add_waiter((session.group_id, topic, index), fut)
        timer = loop.call_later(remaining, _wake, fut)
        try:
            await fut
        finally:
            timer.cancel()
        if shares.sessions.get((session.group_id, session.member_id)) is not session:
            return  # the session was closed meanwhile
        if _fetch_round(ctx, shares, session, answer, req) > 0:
            return


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def error_response(req: ShareFetchRequest, code: int, message: str) -> ShareFetchResponse:
    return ShareFetchResponse(error_code=code, error_message=message or None)
