"""``__transaction_state``: the transaction coordinators' state as records of a compacted topic.

Record formats are Kafka's (``TransactionLog``, key and value version 0), so Kafka's tools
read the topic::

    key    int16 version (0) | string transactional id
    value  int16 version (0) | int64 producer id | int16 producer epoch |
           int32 transaction timeout ms | int8 state (see TxnState) |
           int32 count (-1: null) × ( string topic | int32 count × int32 partition ) |
           int64 last update timestamp ms | int64 transaction start timestamp ms

Strings are int16-length UTF-8. A null value (tombstone) removes the id (it expired). The
id's partition is ``abs(javaHashCode(id)) % transaction.state.log.num.partitions``, as in
Kafka. The topic is compacted, so only the latest state per id survives cleaning.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Iterator

from framework.clock import Clock
from framework.coordinator.offsets_topic import (
    _R,
    _W,
    OffsetsPartition,
    OffsetsPartitions,
    in_sync_replicas,
    partition_for,
)
from framework.coordinator.transactions import TxnRecord, TxnState
from framework.protocol import records as rb
from framework.storage.log import Log

TOPIC = "__transaction_state"
log = logging.getLogger("sftraffic.transactions")


def txn_key(transactional_id: str) -> bytes:
    return bytes(_W().i16(0).s(transactional_id).b)


def txn_value(r: TxnRecord) -> bytes | None:
    if r.state is TxnState.DEAD:
        return None
    w = _W().i16(0).i64(r.producer_id).i16(r.producer_epoch).i32(r.timeout_ms)
    w.b += bytes([r.state.value])
    by_topic: dict[str, list[int]] = {}
    for t, p in sorted(r.partitions):
        by_topic.setdefault(t, []).append(p)
    w.i32(len(by_topic))
    for t, ps in by_topic.items():
        w.s(t).i32(len(ps))
        for p in ps:
            w.i32(p)
    w.i64(r.update_ms).i64(r.start_ms)
    return bytes(w.b)


def parse(key: bytes, value: bytes | None) -> TxnRecord | str | None:
    """The record (a str: the tombstone of that id); None for a key this broker does not know."""
    k = _R(key)
    if k.i16() != 0:
        return None
    tid = k.s() or ""
    if value is None:
        return tid
    v = _R(value)
    if v.i16() != 0:  # version 1 (flexible, transaction version 2) is not written by this broker
        return None
    pid, epoch, timeout = v.i64(), v.i16(), v.i32()
    state = TxnState(v.d[v.p])
    v.p += 1
    parts: set[tuple[str, int]] = set()
    n = v.i32()
    for _ in range(max(n, 0)):
        topic = v.s() or ""
        for _ in range(v.i32()):
            parts.add((topic, v.i32()))
    update_ms, start_ms = v.i64(), v.i64()
    return TxnRecord(tid, pid, epoch, timeout, state, frozenset(parts), update_ms, start_ms)


class TxnLogStore:
    """The coordinator's TxnLog: appends to the id's ``__transaction_state`` partition."""

    def __init__(self, where: OffsetsPartitions, partition_count: Callable[[], int], clock: Clock) -> None:
        self.where = where
        self.partition_count = partition_count
        self.clock = clock  # the records' timestamps

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.partition_count())

    async def write(self, record: TxnRecord) -> None:
        part = self.where.replica(TOPIC, self.partition_for(record.transactional_id))
        now = self.clock.wall_ms()
        batch = bytearray(
            rb.build_batch([(txn_key(record.transactional_id), txn_value(record))], timestamp_ms=now)
        )
        end = part.append_records(memoryview(batch), -1 if part.replicated else 1, now).last_offset + 1
        fut = part.wait_replicated(end) if part.replicated else None
        if fut is not None:
            await in_sync_replicas(fut)

    def read_partition(self, index: int) -> tuple[OffsetsPartition, list[TxnRecord | str]]:
        """Every record of partition ``index`` up to its log end, in order."""
        p = self.where.replica(TOPIC, index)
        return p, list(_records(p.log, p.log_end_offset))


def _records(lg: Log, upper: int) -> Iterator[TxnRecord | str]:
    for _next, recs in lg.decoded_batches(lg.log_start_offset, upper):
        for r in recs:
            if r.key is None:
                continue
            try:
                parsed = parse(r.key, r.value)
            except (ValueError, IndexError, struct.error) as exc:
                log.error("%s: skipping unreadable record at %d: %s", lg.name, r.offset, exc)
                continue
            if parsed is not None:
                yield parsed
