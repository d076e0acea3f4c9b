"""``__consumer_offsets``: committed offsets and group metadata as records of a compacted topic.

Record formats are Kafka's (``GroupCoordinatorRecordSerde``), so tools that read the topic
understand them. Keys::

    offset key   int16 version (1) | string group | string topic | int32 partition
    group key    int16 version (2) | string group

Values (a null value is a tombstone: the offset or group was deleted)::

    offset value int16 version (3) | int64 offset | int32 leader epoch | string metadata |
                 int64 commit timestamp
    group value  int16 version (3) | string protocol type | int32 generation |
                 nullable string protocol | nullable string leader | int64 state timestamp |
                 int32 count × ( string member id | nullable string instance id |
                 string client id | string client host | int32 rebalance timeout |
                 int32 session timeout | bytes subscription | bytes assignment )

Strings are int16-length UTF-8 (-1 = null), bytes int32-length. The group's partition is
``abs(javaHashCode(group)) % offsets.topic.num.partitions``, as in Kafka. The topic is
compacted, so only the latest value per key survives cleaning and the log stays bounded.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from framework.clock import Clock
from framework.coordinator.groups import CommittedOffset, Group, GroupCoordinator, Member
from framework.protocol import records as rb
from framework.protocol.control import EndTxnMarker, InvalidControlRecord, read_marker
from framework.storage.log import AppendInfo, Log

TOPIC = "__consumer_offsets"
log = logging.getLogger("sftraffic.groups")


class OffsetsPartition(Protocol):
    """What the store needs of a ``__consumer_offsets`` partition (the replication layer's Partition)."""

    @property
    def log(self) -> Log: ...

    @property
    def replicated(self) -> bool: ...

    @property
    def high_watermark(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    def append_records(
        self, payload: memoryview, acks: int, now_ms: int, transactional: bool = False
    ) -> AppendInfo: ...

    def wait_replicated(self, end_offset: int) -> asyncio.Future[None] | None: ...


class OffsetsPartitions(Protocol):
    """Where the partitions are (the replica manager)."""

    def replica(self, topic: str, index: int) -> OffsetsPartition: ...

    def topic_partitions(self, topic: str) -> Sequence[OffsetsPartition | None] | None: ...


async def in_sync_replicas(fut: asyncio.Future[None], timeout_s: float = 30.0) -> None:
    """Await a ``wait_replicated`` future, for at most ``timeout_s`` (then TimeoutError, the
    wait given up). With ``asyncio.wait``, not ``asyncio.timeout``: a request handler awaits
    this before it runs in a Task (framework.server.router)."""
    try:
        done, _ = await asyncio.wait((fut,), timeout=timeout_s)
    except asyncio.CancelledError:
        fut.cancel()
        raise
    if not done:
        fut.cancel()
        raise TimeoutError(f"the in-sync replicas did not have the records within {timeout_s:g} s")
    fut.result()


def java_string_hash(s: str) -> int:
    h = 0
    for unit in struct.unpack(f"<{len(s.encode('utf-16-le')) // 2}H", s.encode("utf-16-le")):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - 0x100000000 if h >= 0x80000000 else h


def partition_for(group_id: str, partitions: int) -> int:
    h = java_string_hash(group_id)
    return (0 if h == -(2**31) else abs(h)) % partitions


class _W:
    def __init__(self) -> None:
        self.b = bytearray()

    def i16(self, v: int) -> _W:
        self.b += struct.pack(">h", v)
        return self

    def i32(self, v: int) -> _W:
        self.b += struct.pack(">i", v)
        return self

    def i64(self, v: int) -> _W:
        self.b += struct.pack(">q", v)
        return self

    def s(self, v: str | None) -> _W:
        if v is None:
            return self.i16(-1)
        e = v.encode()
        self.i16(len(e))
        self.b += e
        return self

    def bytes_(self, v: bytes) -> _W:
        self.i32(len(v))
        self.b += v
        return self


class _R:
    def __init__(self, data: bytes) -> None:
        self.d = data
        self.p = 0

    def i16(self) -> int:
        v = struct.unpack_from(">h", self.d, self.p)[0]
        self.p += 2
        return int(v)

    def i32(self) -> int:
        v = struct.unpack_from(">i", self.d, self.p)[0]
        self.p += 4
        return int(v)

    def i64(self) -> int:
        v = struct.unpack_from(">q", self.d, self.p)[0]
        self.p += 8
        return int(v)

    def s(self) -> str | None:
        n = self.i16()
        if n < 0:
            return None
        v = self.d[self.p : self.p + n].decode()
        self.p += n
        return v

    def bytes_(self) -> bytes:
        n = self.i32()
        v = self.d[self.p : self.p + max(n, 0)]
        self.p += max(n, 0)
        return v


def offset_key(group: str, topic: str, partition: int) -> bytes:
    return bytes(_W().i16(1).s(group).s(topic).i32(partition).b)


def offset_value(o: CommittedOffset) -> bytes:
    return bytes(_W().i16(3).i64(o.offset).i32(o.leader_epoch).s(o.metadata).i64(o.commit_ms).b)


def group_key(group: str) -> bytes:
    return bytes(_W().i16(2).s(group).b)


def group_value(g: Group) -> bytes:
    w = (
        _W()
        .i16(3)
        .s(g.protocol_type or "")
        .i32(g.generation)
        .s(g.protocol_name)
        .s(g.leader_id)
        .i64(g.state_ms)
    )
    w.i32(len(g.members))
    for m in g.members.values():
        w.s(m.member_id).s(m.group_instance_id).s(m.client_id).s(m.client_host)
        w.i32(m.rebalance_timeout_ms).i32(m.session_timeout_ms)
        w.bytes_(m.metadata_for(g.protocol_name or "")).bytes_(m.assignment)
    return bytes(w.b)


@dataclass(slots=True)
class OffsetRecord:
    group: str
    topic: str
    partition: int
    value: CommittedOffset | None


@dataclass(slots=True)
class GroupRecord:
    group: str
    protocol_type: str | None = None
    generation: int = 0
    protocol: str | None = None
    leader: str | None = None
    state_ms: int = 0
    members: list[Member] | None = None  # None = tombstone


def parse(key: bytes, value: bytes | None) -> OffsetRecord | GroupRecord | None:
    r = _R(key)
    version = r.i16()
    if version in (0, 1):
        group, topic, part = r.s() or "", r.s() or "", r.i32()
        if value is None:
            return OffsetRecord(group, topic, part, None)
        v = _R(value)
        vv = v.i16()
        off = v.i64()
        epoch = v.i32() if vv >= 3 else -1
        meta = v.s() or ""
        ts = v.i64()
        return OffsetRecord(group, topic, part, CommittedOffset(off, epoch, meta, ts))
    if version == 2:
        group = r.s() or ""
        if value is None:
            return GroupRecord(group)
        v = _R(value)
        vv = v.i16()
        ptype = v.s()
        gen = v.i32()
        proto = v.s()
        leader = v.s()
        state_ms = v.i64() if vv >= 2 else 0
        members = []
        for _ in range(v.i32()):
            mid = v.s() or ""
            iid = v.s() if vv >= 3 else None
            cid = v.s() or ""
            host = v.s() or ""
            rto = v.i32() if vv >= 1 else 0
            sto = v.i32()
            sub = v.bytes_()
            asg = v.bytes_()
            members.append(
                Member(
                    mid,
                    iid,
                    cid,
                    host,
                    sto,
                    rto or sto,
                    ptype or "",
                    [(proto or "", sub)],
                    assignment=asg,
                )
            )
        return GroupRecord(group, ptype, gen, proto, leader, state_ms, members)
    return None  # unknown record type (e.g. written by a newer Kafka): ignored


class OffsetsTopicStore:
    """The coordinator's OffsetStore: appends to the group's ``__consumer_offsets`` partition."""

    def __init__(self, where: OffsetsPartitions, partition_count: Callable[[], int], clock: Clock) -> None:
        self.where = where
        self.partition_count = partition_count
        self.clock = clock  # the records' timestamps

    @property
    def partitions(self) -> int:
        return self.partition_count()

    async def _append(self, group_id: str, recs: list[tuple[bytes, bytes | None]]) -> None:
        """Append to the group's partition; with replicas, return once every ISR member has it."""
        if not recs:
            return
        part = self.where.replica(TOPIC, partition_for(group_id, self.partitions))
        now = self.clock.wall_ms()
        end = -1
        for i in range(0, len(recs), 500):
            batch = bytearray(rb.build_batch(recs[i : i + 500], timestamp_ms=now))
            end = part.append_records(memoryview(batch), -1 if part.replicated else 1, now).last_offset + 1
        fut = part.wait_replicated(end) if part.replicated else None
        if fut is not None:
            await in_sync_replicas(fut)

    async def write_offsets(self, group_id: str, offsets: dict[tuple[str, int], CommittedOffset]) -> None:
        await self._append(
            group_id,
            [(offset_key(group_id, t, p), offset_value(o)) for (t, p), o in offsets.items()],
        )

    async def write_txn_offsets(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        offsets: dict[tuple[str, int], CommittedOffset],
    ) -> None:
        """TxnOffsetCommit: the offsets as a transactional batch of the producer (its next
        sequence on this partition), so they survive a coordinator failover and the
        transaction's COMMIT/ABORT marker decides them when the partition is loaded."""
        if not offsets:
            return
        part = self.where.replica(TOPIC, partition_for(group_id, self.partitions))
        entry = part.log.producer_state.producers.get(producer_id)
        seq = entry.last_seq + 1 if entry is not None and entry.epoch == producer_epoch else 0
        now = self.clock.wall_ms()
        recs = [(offset_key(group_id, t, p), offset_value(o)) for (t, p), o in offsets.items()]
        batch = bytearray(
            rb.build_batch(
                recs,
                timestamp_ms=now,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                base_sequence=seq,
                transactional=True,
            )
        )
        end = part.append_records(memoryview(batch), -1 if part.replicated else 1, now, True).last_offset + 1
        fut = part.wait_replicated(end) if part.replicated else None
        if fut is not None:
            await in_sync_replicas(fut)

    async def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]]) -> None:
        await self._append(group_id, [(offset_key(group_id, t, p), None) for t, p in partitions])

    async def write_group(self, group: Group) -> None:
        await self._append(group.group_id, [(group_key(group.group_id), group_value(group))])

    async def delete_group(self, group_id: str) -> None:
        await self._append(group_id, [(group_key(group_id), None)])

    def unload_partition(self, coordinator: GroupCoordinator, index: int) -> None:
        """This broker no longer leads ``index``: forget its groups (their members move on)."""
        n = self.partitions
        pending = {g for by_group in coordinator.pending_txn.values() for g in by_group}
        for gid in [g for g in {*coordinator.groups, *pending} if partition_for(g, n) == index]:
            coordinator.unload_group(gid)

    def load_partition(self, coordinator: GroupCoordinator, index: int) -> tuple[int, int]:
        """This broker now leads ``index``: replay it (to its log end) into the coordinator."""
        p = self.where.replica(TOPIC, index)
        return self.load_into(coordinator, [(p, p.log_end_offset)])

    def load_into(
        self, coordinator: GroupCoordinator, parts: list[tuple[OffsetsPartition, int]] | None = None
    ) -> tuple[int, int]:
        """Replay partitions of the topic (default: all) into the coordinator; (groups, offsets) restored."""
        groups: dict[str, GroupRecord] = {}
        offsets: dict[tuple[str, str, int], CommittedOffset | None] = {}
        if parts is None:
            parts = [(p, p.high_watermark) for p in self.where.topic_partitions(TOPIC) or [] if p is not None]
        for p, upper in parts:
            # TxnOffsetCommit records per producer, until its transaction's marker decides them
            in_txn: dict[int, list[OffsetRecord]] = {}
            for pid, rec in _records(p.log, upper):
                if isinstance(rec, EndTxnMarker):
                    for r in in_txn.pop(rec.producer_id, []) if rec.commit else []:
                        offsets[(r.group, r.topic, r.partition)] = r.value
                    in_txn.pop(rec.producer_id, None)
                elif pid >= 0 and isinstance(rec, OffsetRecord):
                    in_txn.setdefault(pid, []).append(rec)
                elif isinstance(rec, OffsetRecord):
                    offsets[(rec.group, rec.topic, rec.partition)] = rec.value
                elif isinstance(rec, GroupRecord):
                    groups[rec.group] = rec
            for pid, recs in in_txn.items():  # still open: pending until the marker comes
                for r in recs:
                    if r.value is not None:
                        coordinator.restore_txn_offset(pid, r.group, (r.topic, r.partition), r.value)
        n_off = 0
        for (g, t, part), value in offsets.items():
            if value is not None:
                coordinator.restore_offset(g, (t, part), value)
                n_off += 1
        n_groups = 0
        for gid, gr in groups.items():
            if gr.members is None:
                if not coordinator.groups.get(gid) or not coordinator.groups[gid].offsets:
                    coordinator.forget_group(gid)
                continue
            coordinator.restore_group(
                gid,
                gr.protocol_type,
                gr.generation,
                gr.protocol,
                gr.leader,
                gr.state_ms,
                gr.members,
            )
            n_groups += 1
        return n_groups, n_off


def _records(lg: Log, upper: int) -> Iterable[tuple[int, OffsetRecord | GroupRecord | EndTxnMarker]]:
    """(producer id of a transactional batch, else -1; record or transaction marker) in order."""
    offset = lg.log_start_offset
    while offset < upper:
        data = lg.read(offset, 1 << 20, upper, True)
        progressed = False
        for pos, h in rb.iter_batches(data):
            if h.next_offset <= offset:
                continue
            raw = memoryview(data)[pos : pos + h.size]
            if h.is_control:
                try:
                    marker = read_marker(raw)
                except (rb.InvalidBatch, InvalidControlRecord) as exc:
                    log.error("%s: skipping unreadable control batch at %d: %s", lg.name, h.base_offset, exc)
                    marker = None
                if marker is not None:
                    yield h.producer_id, marker
                offset = h.next_offset
                progressed = True
                continue
            try:
                _, recs = rb.decode_batch(raw)
            except rb.InvalidBatch as exc:
                log.error("%s: skipping undecodable batch at %d: %s", lg.name, h.base_offset, exc)
                recs = []
            pid = h.producer_id if h.is_transactional else -1
            for r in recs:
                if r.offset >= offset and r.key is not None:
                    parsed = parse(r.key, r.value)
                    if parsed is not None:
                        yield pid, parsed
            offset = h.next_offset
            progressed = True
        if not progressed:
            break
