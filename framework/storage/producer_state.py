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

Transactions (KIP-98; Kafka's ``ProducerAppendInfo``): a transactional data batch (attributes
bit 4) of a producer with no open transaction opens one at its base offset
(``current_txn_first_offset``); the producer's COMMIT or ABORT marker (a control batch, see
``framework/protocol/control.py``) closes it and yields a :class:`CompletedTxn`. Checks, as
Kafka: a non-transactional batch from a producer with an open transaction is refused with
INVALID_TXN_STATE; a marker with an older producer epoch than the partition knows with
INVALID_PRODUCER_EPOCH, one from an older coordinator epoch with TRANSACTION_COORDINATOR_FENCED.
A marker for a producer that never wrote here is accepted (the coordinator writes markers to
every partition added to the transaction, written to or not) and completes an empty
transaction at the marker. The *first unstable offset* is the smallest first offset of the
open transactions; the log's last stable offset is min(it, high watermark). A producer with
an open transaction never expires.

Snapshot file ``<offset, 20 digits>.snapshot`` in the partition directory, taken when a
segment rolls, periodically and at clean shutdown: the state as of ``offset``::

    version int16 (2) | crc32c int32 (of everything after it) | count int32 |
    count × ( pid int64 | epoch int16 | last_append_ms int64 |
              coordinator_epoch int32 | current_txn_first_offset int64 (-1: none) | n int8 |
              n × ( first_seq int32 | last_seq int32 | first_offset int64 | last_offset int64 ) )

Version 1 (before transactions) lacks ``coordinator_epoch`` and ``current_txn_first_offset``
and still loads (no open transactions, coordinator epoch -1).

On start the newest snapshot at or below the log end is loaded and the batches after it are
replayed (producer id, epoch, sequences and the transactional flag are in every batch header;
for a control batch the log also decodes its marker), so state survives restarts and a retry
arriving after a restart is still recognised as a duplicate. A snapshot whose CRC does not
match is ignored (the replay starts earlier).

Invariant: ``ongoing`` maps exactly the producers whose ``current_txn_first_offset >= 0`` to
it. Not thread-safe: owned by one partition's log.
"""

from __future__ import annotations

import logging
import os
import struct
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import crc32c

from framework.errors import StoreError
from framework.protocol import records as rb
from framework.protocol.control import EndTxnMarker
from framework.protocol.error_codes import ErrorCode

log = logging.getLogger("sftraffic.storage")

MAX_BATCHES = 5
INT32_MAX = 0x7FFFFFFF
SNAPSHOT_VERSION = 2
_HEAD = struct.Struct(">hIi")
_ENTRY_V1 = struct.Struct(">qhqb")
_ENTRY = struct.Struct(">qhqiqb")
_BATCH = struct.Struct(">iiqq")


class OutOfOrderSequence(StoreError):
    code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


class InvalidProducerEpoch(StoreError):
    code = ErrorCode.INVALID_PRODUCER_EPOCH


class UnknownProducerId(StoreError):
    code = ErrorCode.UNKNOWN_PRODUCER_ID


class InvalidTxnState(StoreError):
    code = ErrorCode.INVALID_TXN_STATE


class TransactionCoordinatorFenced(StoreError):
    code = ErrorCode.TRANSACTION_COORDINATOR_FENCED


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
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1  # first offset of the open transaction; -1: none

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1


@dataclass(slots=True)
class Duplicate:
    first_offset: int
    last_offset: int


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction ended by a marker at ``last_offset``; ``first_offset`` is where it began."""

    producer_id: int
    first_offset: int
    last_offset: int
    aborted: bool


@dataclass(slots=True)
class Pending:
    """Checked updates for one append, applied once the batches are in the log."""

    # (pid, epoch, first_seq, last_seq, transactional) per batch, or pid -1
    items: list[tuple[int, int, int, int, bool]]


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (last_seq == INT32_MAX and next_seq == 0)


class ProducerStateManager:
    def __init__(self, directory: Path, name: str = "") -> None:
        self.dir = directory
        self.name = name
        self.producers: dict[int, ProducerEntry] = {}
        self.last_snapshot_offset = -1
        self.dirty = False
        self.ongoing: dict[int, int] = {}  # pid -> first offset of its open transaction

    # -- check, then apply -----------------------------------------------------------------
    def check(self, batches: list[rb.BatchHeader]) -> Pending | Duplicate:
        """Validate the producer fields of batches about to be appended; no side effects."""
        items: list[tuple[int, int, int, int, bool]] = []
        # in-request view: the last sequence per PID as the earlier batches would leave it
        seen: dict[int, tuple[int, int]] = {}
        in_txn: set[int] = set()  # PIDs whose transaction an earlier batch of the request opened
        for h in batches:
            pid = h.producer_id
            if pid < 0:
                items.append((-1, -1, -1, -1, False))
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
            txn = h.is_transactional
            if not txn and (pid in in_txn or pid in self.ongoing):
                raise InvalidTxnState(
                    f"{self.name}: producer {pid} wrote a non-transactional batch while its "
                    f"transaction (from offset {self.ongoing.get(pid, -1)}) is open"
                )
            if txn:
                in_txn.add(pid)
            seen[pid] = (epoch, last)
            items.append((pid, epoch, first, last, txn))
        return Pending(items)

    def check_marker(self, marker: EndTxnMarker) -> None:
        """Validate a COMMIT/ABORT marker about to be appended; no side effects.

        Kafka's ``ProducerAppendInfo.appendEndTxnMarker``: an older producer epoch than the
        partition's is INVALID_PRODUCER_EPOCH, an older coordinator epoch
        TRANSACTION_COORDINATOR_FENCED. An unknown producer is accepted (empty transaction).
        """
        entry = self.producers.get(marker.producer_id)
        if entry is None:
            return
        if marker.producer_epoch < entry.epoch:
            raise InvalidProducerEpoch(
                f"{self.name}: transaction marker for producer {marker.producer_id} has epoch "
                f"{marker.producer_epoch}, older than {entry.epoch} (fenced)"
            )
        if marker.coordinator_epoch < entry.coordinator_epoch:
            raise TransactionCoordinatorFenced(
                f"{self.name}: transaction marker for producer {marker.producer_id} from "
                f"coordinator epoch {marker.coordinator_epoch}, older than {entry.coordinator_epoch}"
            )

    def complete_txn(self, marker: EndTxnMarker, offset: int, now_ms: int) -> CompletedTxn:
        """Apply a marker appended at ``offset``: close the producer's transaction."""
        pid = marker.producer_id
        entry = self.producers.get(pid)
        if entry is None:
            entry = self.producers[pid] = ProducerEntry(pid, marker.producer_epoch, now_ms)
        elif marker.producer_epoch != entry.epoch:
            if marker.producer_epoch > entry.epoch:
                entry.batches.clear()
            entry.epoch = marker.producer_epoch
        first = entry.current_txn_first_offset
        entry.current_txn_first_offset = -1
        self.ongoing.pop(pid, None)
        entry.coordinator_epoch = max(entry.coordinator_epoch, marker.coordinator_epoch)
        entry.last_append_ms = now_ms
        self.dirty = True
        return CompletedTxn(pid, first if first >= 0 else offset, offset, not marker.commit)

    def first_unstable_offset(self) -> int | None:
        """The smallest first offset of the open transactions; None when none is open."""
        return min(self.ongoing.values()) if self.ongoing else None

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """The LSO right after ``completed`` (already applied) ended: Kafka's rule for the
        aborted-transactions index entry (first unstable offset, else the marker's next)."""
        fuo = self.first_unstable_offset()
        return fuo if fuo is not None else completed.last_offset + 1

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
        for (pid, epoch, first, last, txn), h in zip(pending.items, batches, strict=True):
            if pid < 0:
                continue
            self._update(pid, epoch, first, last, h.base_offset, h.last_offset, now_ms, txn)

    def _update(
        self,
        pid: int,
        epoch: int,
        first: int,
        last: int,
        first_off: int,
        last_off: int,
        now_ms: int,
        transactional: bool = False,
    ) -> None:
        entry = self.producers.get(pid)
        if entry is None:
            entry = self.producers[pid] = ProducerEntry(pid, epoch, now_ms)
        elif epoch != entry.epoch:
            entry.epoch = epoch
            entry.batches.clear()
        entry.last_append_ms = now_ms
        entry.batches.append(BatchMeta(first, last, first_off, last_off))
        if transactional and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = first_off
            self.ongoing[pid] = first_off
        self.dirty = True

    def replay(
        self,
        headers: Iterable[rb.BatchHeader],
        now_ms: int,
        marker_of: Callable[[rb.BatchHeader], EndTxnMarker | None] | None = None,
        on_complete: Callable[[CompletedTxn], None] | None = None,
    ) -> int:
        """Rebuild state from batches already in the log (recovery, replication).

        ``marker_of`` decodes the marker of a control batch (its type is in the record, not
        the header); without it control batches are skipped. ``on_complete`` is called with
        each transaction a marker ends (after the state is updated), so the log can rebuild
        its aborted-transactions index. Returns the number of batches applied.
        """
        n = 0
        for h in headers:
            if h.producer_id < 0:
                continue
            if h.is_control:
                marker = marker_of(h) if marker_of is not None else None
                if marker is not None:
                    done = self.complete_txn(marker, h.base_offset, now_ms)
                    if on_complete is not None:
                        on_complete(done)
                    n += 1
            elif h.base_sequence >= 0:
                self._update(
                    h.producer_id,
                    h.producer_epoch,
                    h.base_sequence,
                    h.last_sequence,
                    h.base_offset,
                    h.last_offset,
                    now_ms,
                    h.is_transactional,
                )
                n += 1
        return n

    # -- expiry ----------------------------------------------------------------------------
    def remove_expired(self, now_ms: int, expiration_ms: int) -> list[int]:
        gone = [
            pid
            for pid, e in self.producers.items()
            if now_ms - e.last_append_ms > expiration_ms and e.current_txn_first_offset < 0
        ]
        for pid in gone:
            del self.producers[pid]
        if gone:
            self.dirty = True
        return gone

    def truncate_to(self, offset: int) -> None:
        """Forget batches at or above ``offset`` (log truncation); drop emptied producers.

        Transactions opened at or above ``offset`` are forgotten. A marker removed by the
        truncation cannot reopen its transaction from memory: the log reloads the state from
        a snapshot and replays the log instead when it can (see ``Log.truncate_to``).
        """
        for pid in list(self.producers):
            e = self.producers[pid]
            if e.current_txn_first_offset >= offset:
                e.current_txn_first_offset = -1
                self.ongoing.pop(pid, None)
                self.dirty = True
            kept = [b for b in e.batches if b.last_offset < offset]
            if len(kept) != len(e.batches):
                e.batches = deque(kept, maxlen=MAX_BATCHES)
                if not kept and e.current_txn_first_offset < 0:
                    del self.producers[pid]
                self.dirty = True
        for p in self.snapshot_files():
            if _snap_offset(p) > offset:
                p.unlink(missing_ok=True)

    def reset(self) -> None:
        """Forget every producer and delete every snapshot (the log was emptied)."""
        self.producers = {}
        self.ongoing = {}
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
            body += _ENTRY.pack(
                e.producer_id,
                e.epoch,
                e.last_append_ms,
                e.coordinator_epoch,
                e.current_txn_first_offset,
                len(e.batches),
            )
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
            self._index_ongoing()
            return off
        self.producers = {}
        self.ongoing = {}
        return -1

    def _index_ongoing(self) -> None:
        self.ongoing = {
            pid: e.current_txn_first_offset
            for pid, e in self.producers.items()
            if e.current_txn_first_offset >= 0
        }


def _snap_offset(p: Path) -> int:
    try:
        return int(p.name[:20])
    except ValueError:
        return -1


def _read_snapshot(data: bytes) -> dict[int, ProducerEntry]:
    if len(data) < 10:
        raise ValueError("too short")
    version, crc = struct.unpack_from(">hI", data, 0)
    if version not in (1, SNAPSHOT_VERSION):
        raise ValueError(f"unknown version {version}")
    body = data[6:]
    if crc32c.crc32c(body) != crc:
        raise ValueError("CRC mismatch")
    (count,) = struct.unpack_from(">i", body, 0)
    pos = 4
    out: dict[int, ProducerEntry] = {}
    for _ in range(count):
        if version == 1:
            pid, epoch, last_ms, n = _ENTRY_V1.unpack_from(body, pos)
            coordinator_epoch, txn_first = -1, -1
            pos += _ENTRY_V1.size
        else:
            pid, epoch, last_ms, coordinator_epoch, txn_first, n = _ENTRY.unpack_from(body, pos)
            pos += _ENTRY.size
        e = ProducerEntry(pid, epoch, last_ms)
        e.coordinator_epoch = coordinator_epoch
        e.current_txn_first_offset = txn_first
        for _ in range(n):
            e.batches.append(BatchMeta(*_BATCH.unpack_from(body, pos)))
            pos += _BATCH.size
        out[pid] = e
    return out
