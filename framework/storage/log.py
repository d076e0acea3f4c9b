"""A partition's log: an ordered list of segments with one active (last) segment.

Directory ``<data dir>/<topic>-<partition>/`` holds the segment files (see segment.py). The
log keeps these invariants:

* segments are sorted by base offset, contiguous in offsets (``seg[i].next_offset <=
  seg[i+1].base_offset``) and only the last one is appended to;
* ``log_start_offset <= high_watermark <= log_end_offset``; every offset below
  ``log_start_offset`` is gone (retention, DeleteRecords) and reads below it fail with
  OFFSET_OUT_OF_RANGE;
* a write either appends whole, CRC-checked batches with broker-assigned offsets or changes
  nothing (check in :meth:`validate`, then apply in :meth:`append`);
* the leader epoch cache (``leader-epoch-checkpoint``, see leader_epoch.py) has an entry for
  the epoch of every batch in the log stamped with one (>= 0), each starting at or before the
  first batch of its epoch, and no entry starting past the log end or (after deletions)
  before the log start. Entries are assigned before the data they describe is written.

Transactions (KIP-98): transactional data batches open a transaction per producer (see
producer_state.py) and :meth:`append_txn_marker` writes the COMMIT/ABORT control batch that
ends it. The log keeps two more invariants:

* ``last_stable_offset = min(max(first offset of the open transactions, log start offset),
  high watermark)``: a read_committed consumer reads below it only;
* every ABORT marker in a segment has its entry in that segment's ``.txnindex`` (see
  txn_index.py) once the log is open: on load an index that is missing or damaged, or whose
  segment was recovered, is rebuilt by replaying the producer state over the log (from the log
  start when the snapshot lies past it); entries lost by a crash after the snapshot are
  re-added by the usual replay. :meth:`collect_aborted` answers Fetch at read_committed.

Limit: with no producer snapshot at all, the replay covers only the last two segments, so a
transaction opened before them is not known as open (its records count as stable).

The log knows nothing of sockets, requests or replicas; the partition layer decides the high
watermark. Not thread-safe: used from the broker's event loop.
"""

from __future__ import annotations

import logging
import os
import random
import shutil
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from framework.clock import SYSTEM, Clock
from framework.errors import (
    CorruptRecord,
    InvalidRecord,
    InvalidRequest,
    InvalidTimestamp,
    KafkaStorageError,
    MessageTooLarge,
    OffsetOutOfRange,
    StoreError,
)
from framework.protocol import records as rb
from framework.protocol.control import EndTxnMarker, InvalidControlRecord, build_marker_batch, read_marker
from framework.protocol.error_codes import ErrorCode
from framework.storage.leader_epoch import LeaderEpochCache
from framework.storage.log_config import LogConfig
from framework.storage.producer_state import CompletedTxn, Duplicate, ProducerStateManager
from framework.storage.segment import LogSegment
from framework.storage.txn_index import AbortedTxn

log = logging.getLogger("sftraffic.storage")

INT32_MAX = 2**31 - 1


@dataclass(slots=True)
class AppendInfo:
    first_offset: int
    last_offset: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    records: int
    bytes: int
    batches: list[rb.BatchHeader] = field(default_factory=list)
    duplicate: bool = False


class UnexpectedAppendOffset(InvalidRequest):
    """A replicated batch straddles the log end (Kafka's UnexpectedAppendOffsetException).

    ``first_offset`` is the batch's base offset. Our batches and the leader's should share
    boundaries, so this means the fetch asked for the wrong offset or the logs diverged: the
    replica fetcher should ask OffsetForLeaderEpoch and truncate. (The one legitimate case, an
    empty log starting inside the leader's first batch, is handled by ``append_as_follower``.)
    """

    def __init__(self, message: str, first_offset: int) -> None:
        super().__init__(message)
        self.first_offset = first_offset


@dataclass(slots=True)
class LoadReport:
    segments: int
    recovered_segments: int
    truncated_bytes: int
    rebuilt_indexes: int
    rebuilt_txn_indexes: int = 0


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


class Log:
    def __init__(
        self, directory: Path, topic: str, partition: int, config: LogConfig, clock: Clock = SYSTEM
    ) -> None:
        self.dir = directory
        self.clock = clock  # segment ages, flush times, producer state replays
        self.topic = topic
        self.partition = partition
        self.config = config
        self.segments: list[LogSegment] = []
        self._bases: list[int] = []
        self.log_start_offset = 0
        self.high_watermark = 0
        self.recovery_point = 0
        self.unflushed_messages = 0
        self.last_flush_ms = self.clock.wall_ms()
        self.leader_epoch = 0  # stamped into batches appended as leader (see become_leader)
        # bumped by every truncation: the cleaner abandons a pass that saw one (it filtered
        # segment files that are no longer the log's; Kafka's abortAndPauseCleaning)
        self.truncations = 0
        self.producer_state = ProducerStateManager(directory, f"{topic}-{partition}")
        self.epochs = LeaderEpochCache(directory, f"{topic}-{partition}")
        self.roll_jitter_ms = self._draw_jitter()

    # -- lifecycle -------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        directory: Path,
        topic: str,
        partition: int,
        config: LogConfig,
        *,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        clean_shutdown: bool = False,
        clock: Clock = SYSTEM,
    ) -> tuple[Log, LoadReport]:
        """Load (or create) the log in ``directory``, recovering what a crash may have torn.

        Segments at or after the one holding ``recovery_point`` are fully validated after an
        unclean shutdown; indexes that fail their sanity check are rebuilt from the data.
        """
        directory.mkdir(parents=True, exist_ok=True)
        self = cls(directory, topic, partition, config, clock)
        report = LoadReport(0, 0, 0, 0)
        for stray in (*directory.glob("*.cleaned"), *directory.glob("*.swap")):
            stray.unlink()  # a compaction that did not finish
        bases = sorted(int(p.name[:20]) for p in directory.glob("*.log") if p.name[:20].isdigit())
        recover_from = None
        if not clean_shutdown and bases:
            recover_from = bases[max(bisect_right(bases, recovery_point) - 1, 0)]
        txn_rebuild = self._load_segments(bases, recover_from, report)
        # an empty non-first segment is fine; no segments at all: create one
        if not self.segments:
            self.segments.append(self._new_segment(max(log_start_offset, 0)))
        self._bases = [s.base_offset for s in self.segments]
        self.log_start_offset = max(log_start_offset, self.segments[0].base_offset)
        self.log_start_offset = min(self.log_start_offset, self.log_end_offset)
        self.high_watermark = self.log_end_offset
        self.recovery_point = self.log_end_offset
        report.segments = len(self.segments)
        now = clock.wall_ms()
        for seg in self.segments:
            seg.created_ms = seg.rolling_base_ms(now)
        self._load_leader_epochs(recover_from if report.recovered_segments else None)
        rebuild_from = self._prepare_txn_rebuild([s for s in txn_rebuild if s in self.segments])
        report.rebuilt_txn_indexes = len(txn_rebuild)
        self._load_producer_state(rebuild_from)
        return self, report

    def _load_segments(
        self, bases: list[int], recover_from: int | None, report: LoadReport
    ) -> list[LogSegment]:
        """Open the segment files at ``bases`` into :attr:`segments`, counting into ``report``.

        Segments from ``recover_from`` on, and those whose indexes fail their check, are
        recovered; everything after a segment recovery truncated is deleted (unreliable, as in
        Kafka). Returns the segments whose transaction index must be rebuilt.
        """
        truncated = False
        txn_rebuild: list[LogSegment] = []
        for base in bases:
            seg = LogSegment.open(self.dir, base, self.config.index_interval_bytes)
            if truncated:
                log.warning("%s: deleting segment %s after a truncated one", self.name, base)
                seg.delete()
                continue
            needs_recovery = recover_from is not None and base >= recover_from
            if not needs_recovery and not seg.load_indexes():
                log.warning("%s: rebuilding indexes of segment %d", self.name, base)
                report.rebuilt_indexes += 1
                needs_recovery = True
            if needs_recovery:
                truncated = self._recover_segment(seg, report)
            if not seg.load_txn_index() or needs_recovery:
                txn_rebuild.append(seg)
            self.segments.append(seg)
        return txn_rebuild

    def _recover_segment(self, seg: LogSegment, report: LoadReport) -> bool:
        """Rebuild ``seg``'s indexes from its data (Kafka's ``LogSegment.recover``); True when
        torn or corrupt data at its end was cut off."""
        cut = seg.recover()
        report.recovered_segments += 1
        if cut:
            log.warning(
                "%s: truncated %d bytes of torn or corrupt data at the end of segment %d",
                self.name,
                cut,
                seg.base_offset,
            )
            report.truncated_bytes += cut
        return cut > 0

    def _prepare_txn_rebuild(self, segments: list[LogSegment]) -> int | None:
        """Empty the transaction indexes to rebuild; the base of the first segment whose
        rebuild needs a replay (one holding a control batch), or None."""
        first: int | None = None
        for seg in segments:
            seg.txn_index.entries = []
            seg.txn_index.rewrite()
            if first is None and any(h.is_control for h in seg.iter_headers(seg.base_offset)):
                first = seg.base_offset
        if first is not None:
            log.warning("%s: rebuilding aborted-transaction indexes from offset %d", self.name, first)
        return first

    def _load_leader_epochs(self, recovered_from: int | None) -> None:
        """Load the epoch cache; rebuild it from the batch headers when missing or damaged.

        After recovery the recovered segments' batches are replayed into it too (Kafka's
        ``LogSegment.recover`` does the same), then entries past the log end or before the
        log start are dropped.
        """
        cache = self.epochs
        if not cache.load():
            if self.size_bytes:
                if not cache.assign_all(self._epoch_starts()):
                    cache.flush()  # no batch carries an epoch: a valid empty file from now on
                log.info("%s: rebuilt leader epoch cache from the log: %s", self.name, cache.entries())
            # an empty log needs no file until its first epoch is assigned (no fsync per new
            # partition when topics are created)
        elif recovered_from is not None:
            cache.assign_all(
                (h.partition_leader_epoch, h.base_offset)
                for h in self.iter_headers(recovered_from)
                if h.partition_leader_epoch > cache.latest
            )
        cache.truncate_from_end(self.log_end_offset)
        cache.truncate_from_start(self.log_start_offset)

    def _epoch_starts(self) -> Iterator[tuple[int, int]]:
        """(epoch, base offset) of each batch that starts a new, larger leader epoch.

        Epochs never decrease along a log, so a segment whose first and last batches carry
        the same epoch holds only that epoch: only segments where it changes are scanned.
        """
        latest = -1
        for seg in self.segments:
            if seg.size == 0:
                continue
            first_hdr = seg.read_at(0, rb.HEADER_SIZE)
            last_hdr = seg.read_at(seg.position_of(seg.next_offset - 1), rb.HEADER_SIZE)
            headers: Iterator[rb.BatchHeader]
            if len(first_hdr) == len(last_hdr) == rb.HEADER_SIZE and (
                (first := rb.read_header(first_hdr)).partition_leader_epoch
                == rb.read_header(last_hdr).partition_leader_epoch
            ):
                headers = iter((first,))
            else:
                headers = seg.iter_headers(seg.base_offset)
            for h in headers:
                if h.partition_leader_epoch > latest:
                    latest = h.partition_leader_epoch
                    yield latest, h.base_offset

    def _load_producer_state(self, txn_rebuild_from: int | None = None) -> None:
        ps = self.producer_state
        leo = self.log_end_offset
        start = ps.load_latest(leo)
        if start < 0 and len(self.segments) > 2:
            start = self.segments[-2].base_offset  # no snapshot: recent producers only
        if txn_rebuild_from is not None and start > txn_rebuild_from:
            ps.producers = {}  # the indexes need the transactions' state from further back
            ps.ongoing = {}
            start = self.log_start_offset
        start = max(start, self.log_start_offset)
        if start < leo:
            n = ps.replay(
                self.iter_headers(start),
                self.clock.wall_ms(),
                self._stored_marker,
                self._index_completed,
            )
            if n:
                log.info(
                    "%s: rebuilt producer state from %d batch(es) after offset %d",
                    self.name,
                    n,
                    start,
                )

    def _stored_marker(self, h: rb.BatchHeader) -> EndTxnMarker | None:
        """The transaction marker of the stored control batch ``h`` (None if unreadable)."""
        seg = self.segments[self._segment_for(h.base_offset)]
        raw = seg.read_at(seg.position_of(h.base_offset), h.size)
        try:
            return read_marker(raw)
        except (InvalidControlRecord, rb.InvalidBatch) as exc:
            log.error("%s: control batch at offset %d is unreadable: %s", self.name, h.base_offset, exc)
            return None

    def _index_completed(self, done: CompletedTxn) -> None:
        """Record an aborted transaction in the index of the segment holding its marker."""
        if not done.aborted:
            return
        seg = self.segments[self._segment_for(done.last_offset)]
        seg.txn_index.append(
            AbortedTxn(
                done.producer_id,
                done.first_offset,
                done.last_offset,
                self.producer_state.last_stable_offset(done),
            )
        )

    def iter_headers(self, start_offset: int) -> Iterator[rb.BatchHeader]:
        for seg in self.segments:
            if seg.next_offset > start_offset:
                yield from seg.iter_headers(start_offset)

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def active(self) -> LogSegment:
        return self.segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self.segments[-1].next_offset

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    def close(self) -> None:
        if self.segments:
            try:
                self.producer_state.take_snapshot(self.log_end_offset)
            except OSError as exc:
                log.error("%s: cannot write producer snapshot: %s", self.name, exc)
        for s in self.segments:
            s.close()

    def delete_files(self) -> None:
        for s in self.segments:
            s.delete()
        self.segments = []
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- writes ----------------------------------------------------------------------------
    def _check_batches(self, payload: memoryview) -> list[rb.BatchHeader]:
        """Framing, magic, CRC and record counts of every batch (no policy); no side effects."""
        try:
            return rb.validate_batches(payload)
        except rb.InvalidBatch as exc:
            raise self._refused(exc) from None

    def _refused(self, exc: rb.InvalidBatch, where: str = "") -> StoreError:
        """The StoreError answering a batch that failed validation (its code, its message)."""
        message = f"{self.name}{where}: {exc}"
        code = exc.code
        if code == ErrorCode.CORRUPT_MESSAGE:
            return CorruptRecord(message)
        if code == ErrorCode.INVALID_TIMESTAMP:
            return InvalidTimestamp(message, record_errors=exc.record_errors)
        if code == ErrorCode.INVALID_RECORD:
            return InvalidRecord(message, record_errors=exc.record_errors)
        return StoreError(message, code)

    def _check_replicated(self, payload: memoryview) -> list[rb.BatchHeader]:
        """Framing, magic, CRC and record counts of a leader's batches; no side effects.

        ``payload`` holds whole batches (framed by the caller). Unlike a produced batch, a
        replicated one may hold fewer records than its offset range: the leader's cleaner
        keeps a partly filtered batch's base and last offsets (Kafka checks that count and
        offset range agree only for client appends, in LogValidator).
        """
        out: list[rb.BatchHeader] = []
        pos = 0
        while pos < len(payload):
            h = rb.read_header(payload, pos)
            one = payload[pos : pos + h.size]
            if h.magic == rb.MAGIC_V2 and 0 < h.records_count <= h.last_offset_delta:
                if rb.scan_valid_prefix(one)[0] != h.size:
                    raise CorruptRecord(f"{self.name}: CRC mismatch in replicated batch at {h.base_offset}")
                if h.compression > rb.ZSTD:
                    raise CorruptRecord(f"{self.name}: unknown compression codec {h.compression}")
            else:
                self._check_batches(one)
            out.append(h)
            pos += h.size
        return out

    def validate(
        self,
        payload: memoryview,
        now_ms: int,
        *,
        transactional: bool = False,
        schemas: rb.SchemaCheck | None = None,
    ) -> list[rb.BatchHeader]:
        """Check a producer's record set without side effects; raise a StoreError if bad.

        Kafka's ``LogValidator`` for client appends: every batch's framing, CRC and header
        (count against offset range, no control batch, no LogAppendTime set by the producer, a
        sequence with a producer id), then its records, walked in place or decompressed
        (:func:`records.check_records`: count, offset deltas 0..n-1, lengths and varints, each
        timestamp within ``message.timestamp.before/after.max.ms`` and the batch's max
        timestamp, a key on every record of a compacted topic, with ``schemas`` a registered
        schema id in every key and/or value: Confluent's schema validation, whose ids the
        caller knows). Nothing is written unless every batch passes. Transactional batches are
        refused unless ``transactional`` (the caller vouches for the transaction; they need a
        producer id).
        """
        batches = self._check_batches(payload)
        cfg = self.config
        create_time = not cfg.log_append_time
        lo = now_ms - cfg.timestamp_before_max_ms
        hi = now_ms + cfg.timestamp_after_max_ms
        pos = 0
        for i, h in enumerate(batches):
            where = f" (batch {i} of {len(batches)})" if len(batches) > 1 else ""
            if h.size > cfg.max_message_bytes:
                raise MessageTooLarge(
                    f"{self.name}: batch of {h.size} bytes exceeds max.message.bytes={cfg.max_message_bytes}"
                )
            if h.is_control:
                raise InvalidRequest(f"{self.name}: producers may not write control batches")
            if h.is_transactional and not transactional:
                raise StoreError(  # as Kafka: transactional records need a transactional id
                    f"{self.name}: a transactional batch in a produce request without a transactional id",
                    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                )
            if h.is_transactional and h.producer_id < 0:
                raise InvalidRecord(f"{self.name}{where}: transactional batch without a producer id")
            if h.producer_id >= 0 and h.base_sequence < 0:
                raise InvalidRecord(
                    f"{self.name}{where}: invalid sequence number {h.base_sequence} in a batch "
                    f"of producer id {h.producer_id}"
                )
            if h.is_log_append_time:
                raise InvalidTimestamp(
                    f"{self.name}{where}: producers may not set the LogAppendTime timestamp type"
                )
            if create_time and h.max_timestamp >= 0 and not lo <= h.max_timestamp <= hi:
                raise InvalidTimestamp(
                    f"{self.name}{where}: timestamp {h.max_timestamp} outside the accepted range"
                )
            try:
                rb.check_records(
                    payload,
                    pos,
                    h,
                    require_key=cfg.compact,
                    create_time=create_time,
                    min_timestamp=lo,
                    max_timestamp=hi,
                    schemas=schemas,
                )
            except rb.InvalidBatch as exc:
                raise self._refused(exc, where) from None
            pos += h.size
        return batches

    def append(
        self,
        payload: memoryview,
        batches: list[rb.BatchHeader],
        now_ms: int,
        *,
        assign_offsets: bool = True,
    ) -> AppendInfo:
        """Assign offsets to validated batches (patching them in place) and write them.

        ``payload`` must be writable (a memoryview of the request frame). With
        ``assign_offsets=False`` (replication) the batches keep their offsets, which must
        follow the log end.
        """
        leo = self.log_end_offset
        cfg = self.config
        append_time = -1
        patched: list[rb.BatchHeader] = []
        pos = 0
        nxt = leo
        records = 0
        if assign_offsets:
            if self.epochs.latest < self.leader_epoch:
                self.epochs.assign(self.leader_epoch, leo)
            for h in batches:
                rb.set_base_offset(payload, pos, nxt)
                if h.partition_leader_epoch != self.leader_epoch:
                    rb.set_leader_epoch(payload, pos, self.leader_epoch)
                if cfg.log_append_time:
                    append_time = now_ms
                    rb.set_log_append_time(payload, pos, h.size, now_ms)
                    h = h._replace(max_timestamp=now_ms)
                h = h._replace(base_offset=nxt)
                patched.append(h)
                nxt += h.last_offset_delta + 1
                records += h.records_count
                pos += h.size
        else:
            if batches[0].base_offset < leo:
                raise InvalidRequest(
                    f"{self.name}: replicated batch at {batches[0].base_offset} below end {leo}"
                )
            patched = batches
            records = sum(h.records_count for h in batches)
            epochs = self.epochs
            for h in batches:  # the epochs the leader stamped (assigned before the data is written)
                if h.partition_leader_epoch > epochs.latest:
                    epochs.assign(h.partition_leader_epoch, h.base_offset)
        last = patched[-1].last_offset
        seg = self.active
        if seg.size > 0 and (
            seg.size + len(payload) > cfg.segment_bytes
            or now_ms - seg.created_ms >= cfg.segment_ms - self.roll_jitter_ms
            or len(seg.index.offsets) >= cfg.max_index_entries
            or len(seg.time_index.timestamps) >= cfg.max_time_index_entries
            or last - seg.base_offset > INT32_MAX
        ):
            seg = self.roll(patched[0].base_offset)
        seg.append(payload, patched)
        self.unflushed_messages += records
        if self.unflushed_messages >= cfg.flush_messages:
            self.flush()
        return AppendInfo(patched[0].base_offset, last, append_time, records, len(payload), patched)

    def append_as_leader(
        self,
        payload: memoryview,
        now_ms: int,
        *,
        transactional: bool = False,
        schemas: rb.SchemaCheck | None = None,
    ) -> AppendInfo:
        """Validate a producer's batches, check producer ids/sequences, append, record.

        Check, then apply: nothing is written (and no producer state changes) unless every
        batch passes. A retried batch already in the log is answered with its original
        offsets and not written again. ``transactional`` admits transactional batches (the
        transaction coordinator has the partition in the producer's transaction); ``schemas``:
        the schema ids keys and values must carry (see :meth:`validate`).
        """
        batches = self.validate(payload, now_ms, transactional=transactional, schemas=schemas)
        pending = None
        if batches[0].producer_id >= 0 or len(batches) > 1:
            checked = self.producer_state.check(batches)
            if isinstance(checked, Duplicate):
                return AppendInfo(checked.first_offset, checked.last_offset, -1, 0, 0, [], True)
            pending = checked
        info = self.append(payload, batches, now_ms)
        if pending is not None:
            self.producer_state.apply(pending, info.batches, now_ms)
        return info

    def append_as_follower(self, payload: memoryview, now_ms: int) -> AppendInfo:
        """Append record batches fetched from the leader, keeping their offsets and epochs.

        ``payload`` is the records field of a fetch response for this partition:

        * a partial batch at its end (the leader cut the response at max bytes) is dropped;
        * leading batches wholly below our log end (overlapping data) are skipped;
        * the rest must be whole, CRC-valid v2 batches with increasing offsets, the first at or
          after the log end (offsets may jump forward: a compacted leader log has gaps, and a
          compacted batch may hold fewer records than its offset range, see
          :meth:`_check_replicated`).
          A batch straddling the log end, or offsets going backwards, raise
          :class:`UnexpectedAppendOffset` / :class:`CorruptRecord`; nothing is written then.
          One exception, as in Kafka: an empty log (log start == log end, no data) whose start
          falls inside the first batch (the leader's log start after DeleteRecords) restarts
          its files at that batch's base offset and keeps its log start offset.

        Nothing is re-stamped (leader epoch, timestamps, offsets stay as the leader wrote them)
        and no producer sequence is checked (the leader decided); policy checks of produce
        (max.message.bytes, timestamp window, keys of compacted topics) are not repeated either.
        The batches' epochs go into the epoch cache (before the data is written) and their
        producer ids and sequences into the producer state, so a retry of one of them reaching
        this replica after it became leader is answered as a duplicate.

        Returns what was appended; when nothing was (empty payload, only overlapping or partial
        data), an AppendInfo with ``records == 0``, ``bytes == 0``, no batches and first/last
        offset -1.
        """
        leo = self.log_end_offset
        start, end = self._span_to_append(payload, leo)
        if start == end:
            return AppendInfo(-1, -1, -1, 0, 0, [])
        view = payload[start:end]
        batches = self._check_replicated(view)
        first = batches[0].base_offset
        start_inside = self._check_follows(batches, leo)
        if start_inside:
            # An empty log starting inside the leader's first batch (DeleteRecords moved the
            # leader's log start there): restart the files at the batch, keep the log start
            # (Kafka's Partition does the same on UnexpectedAppendOffsetException).
            log.info("%s: log start %d is inside the leader's batch at %d", self.name, leo, first)
            self.truncate_fully_and_start_at(first)
        info = self.append(view, batches, now_ms, assign_offsets=False)
        if start_inside:
            self.log_start_offset = self.high_watermark = leo
            self.epochs.truncate_from_start(leo)
        markers = self._replicated_markers(view) if any(h.is_control for h in info.batches) else {}
        self.producer_state.replay(
            info.batches, now_ms, lambda h: markers.get(h.base_offset), self._index_completed
        )
        return info

    def _span_to_append(self, payload: memoryview, leo: int) -> tuple[int, int]:
        """The byte range of ``payload`` to append as follower: past the leading batches wholly
        below ``leo`` (already ours), up to the last whole batch (a partial one is dropped)."""
        n = len(payload)
        pos = 0
        start = 0
        while n - pos >= rb.HEADER_SIZE:
            length = rb.read_prefix(payload, pos)[1]
            if length < rb.MIN_BATCH_LENGTH:
                raise CorruptRecord(f"{self.name}: replicated batch length {length} at byte {pos}")
            size = length + rb.LOG_OVERHEAD
            if pos + size > n:
                break  # partial trailing batch
            if start == pos and rb.read_header(payload, pos).next_offset <= leo:
                start = pos + size  # already in our log
            pos += size
        return start, pos

    def _check_follows(self, batches: list[rb.BatchHeader], leo: int) -> bool:
        """Check replicated ``batches`` go forward from the log end ``leo``; True when they
        start inside the first batch of an empty log (the one straddling allowed)."""
        first = batches[0].base_offset
        nxt = first
        for h in batches:
            if h.base_offset < nxt:
                raise CorruptRecord(f"{self.name}: replicated offsets go backwards at {h.base_offset}")
            nxt = h.next_offset
        start_inside = first < leo and leo == self.log_start_offset and self.size_bytes == 0
        if first < leo and not start_inside:
            raise UnexpectedAppendOffset(
                f"{self.name}: replicated batch {first}..{batches[0].last_offset} straddles log end {leo}",
                first,
            )
        return start_inside

    def _replicated_markers(self, view: memoryview) -> dict[int, EndTxnMarker | None]:
        """Base offset -> transaction marker of each control batch in ``view`` (None: unreadable)."""
        markers: dict[int, EndTxnMarker | None] = {}
        for bpos, h in rb.iter_batches(view):
            if h.is_control:
                try:
                    markers[h.base_offset] = read_marker(view[bpos : bpos + h.size])
                except (InvalidControlRecord, rb.InvalidBatch) as exc:
                    log.error("%s: replicated control batch at %d: %s", self.name, h.base_offset, exc)
                    markers[h.base_offset] = None
        return markers

    def append_txn_marker(self, marker: EndTxnMarker, now_ms: int) -> tuple[AppendInfo, CompletedTxn]:
        """Write a COMMIT/ABORT marker ending ``marker.producer_id``'s transaction (leader).

        Check, then apply (Kafka's ``appendAsLeader`` from the coordinator): a stale producer
        epoch raises INVALID_PRODUCER_EPOCH, a stale coordinator epoch
        TRANSACTION_COORDINATOR_FENCED, and nothing is written. Then the control batch is
        appended, the transaction closed in the producer state and, for an ABORT, the
        transaction recorded in the ``.txnindex`` of the segment holding the marker.
        """
        self.producer_state.check_marker(marker)
        batch = bytearray(build_marker_batch(marker, timestamp_ms=now_ms, leader_epoch=self.leader_epoch))
        view = memoryview(batch)
        info = self.append(view, rb.validate_batches(view), now_ms)
        done = self.producer_state.complete_txn(marker, info.first_offset, now_ms)
        self._index_completed(done)
        return info, done

    @property
    def first_unstable_offset(self) -> int | None:
        """First offset of the oldest open transaction (at least the log start: retention or
        DeleteRecords may have removed its beginning, as Kafka's
        ``maybeIncrementFirstUnstableOffset``), or None."""
        fuo = self.producer_state.first_unstable_offset()
        return None if fuo is None else max(fuo, self.log_start_offset)

    @property
    def last_stable_offset(self) -> int:
        """min(first unstable offset, high watermark): read_committed's end."""
        fuo = self.first_unstable_offset
        return self.high_watermark if fuo is None else min(fuo, self.high_watermark)

    def collect_aborted(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping ``[fetch_offset, upper_bound)`` (Kafka's
        ``collectAbortedTransactions``): the indexes of the segment holding ``fetch_offset``
        and the following ones, until an entry's last stable offset reaches ``upper_bound``."""
        out: list[AbortedTxn] = []
        for seg in self.segments[self._segment_for(fetch_offset) :]:
            found, done = seg.txn_index.collect(fetch_offset, upper_bound)
            out += found
            if done:
                break
        return out

    def become_leader(self, epoch: int) -> None:
        """This replica leads from now on in ``epoch``: stamp it on appends, record its start.

        Kafka's ``maybeAssignEpochStartOffset(epoch, logEndOffset)`` on becoming leader, so
        OffsetForLeaderEpoch answers the new epoch (from the log end) before any write in it.
        ``epoch`` must not be older than the cache's latest epoch.
        """
        self.leader_epoch = epoch
        self.epochs.assign(epoch, self.log_end_offset)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(largest epoch <= ``epoch``, its end offset) or (-1, -1): see LeaderEpochCache."""
        return self.epochs.end_offset_for(epoch, self.log_end_offset)

    def roll(self, base_offset: int | None = None) -> LogSegment:
        """Start a new active segment at the log end (Kafka's ``roll``)."""
        base = self.log_end_offset if base_offset is None else base_offset
        old = self.active
        if old.size == 0 and old.base_offset == base:
            return old
        old.roll_close()
        seg = self._new_segment(base)
        self.roll_jitter_ms = self._draw_jitter()
        self.segments.append(seg)
        self._bases.append(base)
        try:
            self.producer_state.take_snapshot(base)
        except OSError as exc:  # only costs a longer replay on restart: the append goes on
            log.warning("%s: cannot write the producer snapshot at %d: %s", self.name, base, exc)
        if old.size:
            upto = old.next_offset

            def flushed() -> None:
                # runs in the flusher thread; an int store is atomic and only moves forward
                self.recovery_point = max(self.recovery_point, upto)

            old.fsync_in_background(flushed)
        return seg

    def _new_segment(self, base_offset: int) -> LogSegment:
        return LogSegment.create(
            self.dir, base_offset, self.config.index_interval_bytes, self.clock.wall_ms()
        )

    def _draw_jitter(self) -> int:
        """The active segment's roll jitter: random in [0, min(segment.jitter.ms, segment.ms))
        (Kafka's randomSegmentJitter), drawn when the segment becomes the active one."""
        c = self.config
        return random.randrange(min(c.segment_jitter_ms, c.segment_ms)) if c.segment_jitter_ms > 0 else 0

    def flush(self) -> None:
        """fsync every segment holding unflushed data; advance the recovery point."""
        try:
            for seg in self.segments:
                if seg.next_offset > self.recovery_point:
                    seg.flush()
        except OSError as exc:
            raise KafkaStorageError(f"{self.name}: fsync failed: {exc.strerror}") from exc
        self.recovery_point = self.log_end_offset
        self.unflushed_messages = 0
        self.last_flush_ms = self.clock.wall_ms()

    def truncate_to(self, offset: int) -> None:
        """Remove every offset >= ``offset`` (a follower diverging from its leader).

        A batch straddling ``offset`` goes whole. The epoch cache loses the entries starting
        at or after the new log end, even when no data goes (an epoch assigned on becoming
        leader but never written to; Kafka does the same).
        """
        if offset >= self.log_end_offset:
            self.epochs.truncate_from_end(self.log_end_offset)
            return
        self.truncations += 1
        while len(self.segments) > 1 and self.segments[-1].base_offset >= offset:
            self.segments.pop().delete()
            self._bases.pop()
        seg = self.active
        if seg.base_offset >= offset:
            seg.delete()
            self.segments[-1] = self._new_segment(offset)
            self._bases[-1] = offset
        else:
            seg.truncate_to(offset)
        self.producer_state.truncate_to(offset)
        if self.producer_state.snapshot_files():
            # a truncated marker reopens its transaction: rebuild from a snapshot (Kafka's
            # rebuildProducerState on truncation)
            self._load_producer_state()
        self.epochs.truncate_from_end(self.log_end_offset)
        self.high_watermark = min(self.high_watermark, self.log_end_offset)
        self.recovery_point = min(self.recovery_point, self.log_end_offset)
        self.log_start_offset = min(self.log_start_offset, self.log_end_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.truncations += 1
        for s in self.segments:
            s.delete()
        self.segments = [self._new_segment(offset)]
        self._bases = [offset]
        self.log_start_offset = self.high_watermark = self.recovery_point = offset
        self.producer_state.reset()  # its batches are gone: no retry may match them
        self.epochs.clear()

    # -- reads -----------------------------------------------------------------------------
    def _segment_for(self, offset: int) -> int:
        return max(bisect_right(self._bases, offset) - 1, 0)

    def decoded_batches(
        self, start: int, upper: int, read_bytes: int = 1 << 20
    ) -> Iterator[tuple[int, list[rb.Record]]]:
        """Per stored batch from the one holding ``start`` up to ``upper``: (its next offset, its
        records at or after ``start``), for readers of internal topics on their local replica.

        A control batch gives no records; a batch that does not decode is logged and gives none
        (its offsets are passed over). Stops early if a read makes no progress.
        """
        offset = start
        while offset < upper:
            data = self.read(offset, read_bytes, upper, True)
            progressed = False
            for pos, h in rb.iter_batches(data):
                if h.next_offset <= offset:
                    continue
                recs: list[rb.Record] = []
                if not h.is_control:
                    try:
                        recs = rb.decode_batch(memoryview(data)[pos : pos + h.size])[1]
                    except rb.InvalidBatch as exc:
                        log.error("%s: skipping undecodable batch at %d: %s", self.name, h.base_offset, exc)
                    recs = [r for r in recs if r.offset >= start]
                offset = h.next_offset
                progressed = True
                yield offset, recs
            if not progressed:
                return

    def read(self, offset: int, max_bytes: int, upper_bound: int, min_one: bool = True) -> bytes:
        """Stored bytes starting at the batch holding ``offset``, below ``upper_bound``.

        Raises OffsetOutOfRange when ``offset`` is below the log start or past the log end.
        """
        leo = self.log_end_offset
        if offset < self.log_start_offset or offset > leo:
            raise OffsetOutOfRange(f"{self.name}: offset {offset} outside [{self.log_start_offset}, {leo}]")
        if offset >= upper_bound:
            return b""
        i = self._segment_for(offset)
        while i < len(self.segments):
            seg = self.segments[i]
            if seg.next_offset > offset:
                max_pos = seg.size if upper_bound >= seg.next_offset else seg.position_of(upper_bound)
                data = seg.read(offset, max_bytes, max_pos, min_one)
                if data:
                    return data
            i += 1
            if i < len(self.segments) and self.segments[i].base_offset >= upper_bound:
                break
        return b""

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= ``timestamp``."""
        for seg in self.segments:
            if seg.max_timestamp >= timestamp:
                found = seg.find_offset_by_timestamp(timestamp, self.log_start_offset)
                if found is not None and found[0] < self.high_watermark:
                    return found
                if found is not None:
                    return None
        return None

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the record with the largest timestamp (ListOffsets -3).

        None when that record is at or above the high watermark (Kafka answers -1 then too).
        """
        best: LogSegment | None = None
        for seg in self.segments:
            if seg.max_timestamp >= 0 and (best is None or seg.max_timestamp > best.max_timestamp):
                best = seg
        if best is None:
            return None
        ts = best.max_timestamp
        found = best.find_offset_by_timestamp(ts, self.log_start_offset)
        if found is None:
            found = (best.offset_of_max_timestamp, ts)
        return found if found[0] < self.high_watermark else None

    # -- retention -------------------------------------------------------------------------
    def delete_retained_segments(self, now_ms: int) -> int:
        """Delete whole segments past ``retention.ms`` / ``retention.bytes``; bytes freed.

        Only segments entirely below the high watermark go. When every segment qualifies the
        log first rolls, so an empty active segment remains at the log end (Kafka's rule). An
        empty active segment stops the scan; an empty older one (emptied by compaction on a
        ``compact,delete`` topic) holds nothing to retain: it neither stops the scan nor is
        deleted on its own, and goes with the next segment that expires (Kafka's
        ``deletableSegments`` stops only at the last segment when it is empty).
        """
        cfg = self.config
        if not cfg.delete:
            return 0
        victims = 0
        total = self.size_bytes
        last = len(self.segments) - 1
        for i, seg in enumerate(self.segments):
            if seg.next_offset > self.high_watermark or (seg.size == 0 and i == last):
                break
            if seg.size == 0:
                continue
            expired = (
                cfg.retention_ms >= 0
                and seg.max_timestamp >= 0
                and (now_ms - seg.max_timestamp > cfg.retention_ms)
            )
            if cfg.retention_ms >= 0 and seg.max_timestamp < 0:
                expired = now_ms - _mtime_ms(seg) > cfg.retention_ms
            too_big = cfg.retention_bytes >= 0 and total - seg.size >= cfg.retention_bytes
            if not (expired or too_big):
                break
            total -= seg.size
            victims = i + 1
        freed = self._delete_first(victims, "retention")
        self.epochs.truncate_from_start(self.log_start_offset)
        return freed

    def _delete_first(self, count: int, reason: str) -> int:
        if count == 0:
            return 0
        if count == len(self.segments):
            self.roll()
        freed = 0
        for seg in self.segments[:count]:
            freed += seg.size
            seg.delete()
        del self.segments[:count]
        del self._bases[:count]
        new_start = self.segments[0].base_offset
        if new_start > self.log_start_offset:
            log.info(
                "%s: %s deleted %d segment(s), %d bytes; log start offset %d -> %d",
                self.name,
                reason,
                count,
                freed,
                self.log_start_offset,
                new_start,
            )
            self.log_start_offset = new_start
        return freed

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start offset to ``offset`` (<= high watermark)."""
        if offset == -1:
            offset = self.high_watermark
        if offset < 0 or offset > self.high_watermark:
            raise OffsetOutOfRange(
                f"{self.name}: cannot delete records up to {offset}; high watermark is {self.high_watermark}"
            )
        self.log_start_offset = max(self.log_start_offset, offset)
        count = 0
        for seg in self.segments[:-1]:
            if seg.next_offset <= offset:
                count += 1
            else:
                break
        self._delete_first(count, "DeleteRecords")
        self.log_start_offset = max(self.log_start_offset, offset)
        self.epochs.truncate_from_start(self.log_start_offset)
        return self.log_start_offset


def _mtime_ms(seg: LogSegment) -> int:
    try:
        return int(os.stat(seg.path).st_mtime * 1000)
    except FileNotFoundError:
        return 0
