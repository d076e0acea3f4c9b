"""Idempotent-producer state of one partition: per producer id, its epoch and recent batches.

For every producer id (PID) the partition remembers the epoch and the sequence numbers and
offsets of its last five batches (Kafka keeps five, matching the five in-flight requests a
client may have). With it the partition

* appends a batch whose first sequence follows the last one (``check`` then ``apply``);
* answers a retried batch it already holds with the original offsets, writing nothing;
* rejects a gap with OUT_OF_ORDER_SEQUENCE_NUMBER and an older epoch with
  INVALID_PRODUCER_EPOCH (the producer was fenced by a newer instance);
* answers UNKNOWN_PRODUCER_ID when it has no state for a PID and the batch does not start at
  sequence 0: the PID expired (``producer.id.expiration.ms``) or never wrote here. Clients
  recover by asking InitProducerId for a new PID and restarting sequences at 0.

Snapshot file ``<offset, 20 digits>.snapshot`` in the partition directory, taken when a
segment rolls, periodically and at clean shutdown: the state as of ``offset``::

    version int16 (1) | crc32c int32 (of everything after it) | count int32 |
    count × ( pid int64 | epoch int16 | last_append_ms int64 | n int8 |
              n × ( first_seq int32 | last_seq int32 | first_offset int64 | last_offset int64 ) )

On start the newest snapshot at or below the log end is loaded and the batch headers after it
are replayed (producer id, epoch and sequences are in every batch header), so state survives
restarts and a retry arriving after a restart is still recognised as a duplicate. A snapshot
whose CRC does not match is ignored (the replay starts earlier).
"""

from __future__ import annotations

import logging
import os
import struct
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import crc32c

from framework.errors import StoreError
from framework.protocol import records as rb
from framework.protocol.errors import ErrorCode

log = logging.getLogger("sftraffic.storage")

MAX_BATCHES = 5
INT32_MAX = 0x7FFFFFFF
SNAPSHOT_VERSION = 1
_HEAD = struct.Struct(">hIi")
_ENTRY = struct.Struct(">qhqb")
_BATCH = struct.Struct(">iiqq")


class OutOfOrderSequence(StoreError):
    code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


class InvalidProducerEpoch(StoreError):
    code = ErrorCode.INVALID_PRODUCER_EPOCH


class UnknownProducerId(StoreError):
    code = ErrorCode.UNKNOWN_PRODUCER_ID


@dataclass(slots=True)
class BatchMeta:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


@dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int
    last_append_ms: int
    batches: deque[BatchMeta] = field(default_factory=lambda: deque(maxlen=MAX_BATCHES))

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1


@dataclass(slots=True)
class Duplicate:
    first_offset: int
    last_offset: int


@dataclass(slots=True)
class Pending:
    """Checked updates for one append, applied once the batches are in the log."""

    items: list[tuple[int, int, int, int]]  # (pid, epoch, first_seq, last_seq) per batch, or pid -1


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (last_seq == INT32_MAX and next_seq == 0)


class ProducerStateManager:
    def __init__(self, directory: Path, name: str = "") -> None:
        self.dir = directory
        self.name = name
        self.producers: dict[int, ProducerEntry] = {}
        self.last_snapshot_offset = -1
        self.dirty = False

    # -- check, then apply -----------------------------------------------------------------
    def check(self, batches: list[rb.BatchHeader]) -> Pending | Duplicate:
        """Validate the producer fields of batches about to be appended; no side effects."""
        items: list[tuple[int, int, int, int]] = []
        # in-request view: the last sequence per PID as the earlier batches would leave it
        seen: dict[int, tuple[int, int]] = {}
        for h in batches:
            pid = h.producer_id
            if pid < 0:
                items.append((-1, -1, -1, -1))
                continue
            epoch = h.producer_epoch
            first = h.base_sequence
            last = h.last_sequence
            entry = self.producers.get(pid)
            if pid in seen:
                cur_epoch, cur_last = seen[pid]
            elif entry is not None:
                if len(batches) == 1:
                    dup = self._find_duplicate(entry, epoch, first, last)
                    if dup is not None:
                        return dup
                cur_epoch, cur_last = entry.epoch, entry.last_seq
            else:
                cur_epoch, cur_last = -1, -1
            if entry is None and pid not in seen:
                if first != 0:
                    raise UnknownProducerId(
                        f"{self.name}: no state for producer id {pid} (expired or never seen) and "
                        f"its batch starts at sequence {first}; the client must get a new producer id"
                    )
            elif epoch < cur_epoch:
                raise InvalidProducerEpoch(
                    f"{self.name}: producer {pid} epoch {epoch} is older than {cur_epoch} (fenced)"
                )
            elif epoch > cur_epoch:
                if first != 0:
                    raise OutOfOrderSequence(
                        f"{self.name}: producer {pid} new epoch {epoch} must start at sequence 0, got {first}"
                    )
            elif not in_sequence(cur_last, first):
                raise OutOfOrderSequence(
                    f"{self.name}: producer {pid} epoch {epoch}: "
                    f"expected sequence {cur_last + 1}, got {first}"
                )
            seen[pid] = (epoch, last)
            items.append((pid, epoch, first, last))
        return Pending(items)

    @staticmethod
    def _find_duplicate(entry: ProducerEntry, epoch: int, first: int, last: int) -> Duplicate | None:
        if epoch != entry.epoch:
            return None
        for b in entry.batches:
            if b.first_seq == first and b.last_seq == last:
                return Duplicate(b.first_offset, b.last_offset)
        return None

    def apply(self, pending: Pending, batches: list[rb.BatchHeader], now_ms: int) -> None:
        """Record appended batches (``batches`` carry their assigned offsets)."""
        for (pid, epoch, first, last), h in zip(pending.items, batches, strict=True):
            if pid < 0:
                continue
            self._update(pid, epoch, first, last, h.base_offset, h.last_offset, now_ms)

    def _update(
        self,
        pid: int,
        epoch: int,
        first: int,
        last: int,
        first_off: int,
        last_off: int,
        now_ms: int,
    ) -> None:
        entry = self.producers.get(pid)
        if entry is None:
            entry = self.producers[pid] = ProducerEntry(pid, epoch, now_ms)
        elif epoch != entry.epoch:
            entry.epoch = epoch
            entry.batches.clear()
        entry.last_append_ms = now_ms
        entry.batches.append(BatchMeta(first, last, first_off, last_off))
        self.dirty = True

    def replay(self, headers: Iterable[rb.BatchHeader], now_ms: int) -> int:
        """Rebuild state from batch headers already in the log (recovery)."""
        n = 0
        for h in headers:
            if h.producer_id >= 0 and h.base_sequence >= 0:
                self._update(
                    h.producer_id,
                    h.producer_epoch,
                    h.base_sequence,
                    h.last_sequence,
                    h.base_offset,
                    h.last_offset,
                    now_ms,
                )
                n += 1
        return n

    # -- expiry ----------------------------------------------------------------------------
    def remove_expired(self, now_ms: int, expiration_ms: int) -> list[int]:
        gone = [pid for pid, e in self.producers.items() if now_ms - e.last_append_ms > expiration_ms]
        for pid in gone:
            del self.producers[pid]
        if gone:
            self.dirty = True
        return gone

    def truncate_to(self, offset: int) -> None:
        """Forget batches at or above ``offset`` (log truncation); drop emptied producers."""
        for pid in list(self.producers):
            e = self.producers[pid]
            kept = [b for b in e.batches if b.last_offset < offset]
            if len(kept) != len(e.batches):
                e.batches = deque(kept, maxlen=MAX_BATCHES)
                if not kept:
                    del self.producers[pid]
                self.dirty = True
        for p in self.snapshot_files():
            if _snap_offset(p) > offset:
                p.unlink(missing_ok=True)

    def reset(self) -> None:
        """Forget every producer and delete every snapshot (the log was emptied)."""
        self.producers = {}
        self.last_snapshot_offset = -1
        self.dirty = True
        for p in self.snapshot_files():
            p.unlink(missing_ok=True)

    # -- snapshots -------------------------------------------------------------------------
    def snapshot_files(self) -> list[Path]:
        return sorted(self.dir.glob("*.snapshot"), key=_snap_offset)

    def take_snapshot(self, offset: int) -> Path | None:
        if offset == self.last_snapshot_offset and not self.dirty:
            return None
        body = bytearray(struct.pack(">i", len(self.producers)))
        for e in self.producers.values():
            body += _ENTRY.pack(e.producer_id, e.epoch, e.last_append_ms, len(e.batches))
            for b in e.batches:
                body += _BATCH.pack(b.first_seq, b.last_seq, b.first_offset, b.last_offset)
        crc = crc32c.crc32c(bytes(body))
        data = struct.pack(">hI", SNAPSHOT_VERSION, crc) + body
        path = self.dir / f"{offset:020d}.snapshot"
        tmp = path.with_suffix(".snapshot.tmp")
        try:
            with open(tmp, "wb") as fh:
                fh.write(data)
            os.replace(tmp, path)
        except OSError:
            tmp.unlink(missing_ok=True)  # a full disk leaves no partial file behind
            raise
        self.last_snapshot_offset = offset
        self.dirty = False
        # keep the two newest snapshots
        for old in self.snapshot_files()[:-2]:
            old.unlink(missing_ok=True)
        return path

    def load_latest(self, log_end_offset: int) -> int:
        """Load the newest valid snapshot at or below ``log_end_offset``; its offset or -1."""
        for p in reversed(self.snapshot_files()):
            off = _snap_offset(p)
            if off > log_end_offset:
                p.unlink(missing_ok=True)
                continue
            try:
                self.producers = _read_snapshot(p.read_bytes())
            except (ValueError, struct.error) as exc:
                log.warning("%s: ignoring damaged producer snapshot %s: %s", self.name, p.name, exc)
                continue
            self.last_snapshot_offset = off
            return off
        self.producers = {}
        return -1


def _snap_offset(p: Path) -> int:
    try:
        return int(p.name[:20])
    except ValueError:
        return -1


def _read_snapshot(data: bytes) -> dict[int, ProducerEntry]:
    if len(data) < 10:
        raise ValueError("too short")
    version, crc = struct.unpack_from(">hI", data, 0)
    if version != SNAPSHOT_VERSION:
        raise ValueError(f"unknown version {version}")
    body = data[6:]
    if crc32c.crc32c(body) != crc:
        raise ValueError("CRC mismatch")
    (count,) = struct.unpack_from(">i", body, 0)
    pos = 4
    out: dict[int, ProducerEntry] = {}
    for _ in range(count):
        pid, epoch, last_ms, n = _ENTRY.unpack_from(body, pos)
        pos += _ENTRY.size
        e = ProducerEntry(pid, epoch, last_ms)
        for _ in range(n):
            e.batches.append(BatchMeta(*_BATCH.unpack_from(body, pos)))
            pos += _BATCH.size
        out[pid] = e
    return out
