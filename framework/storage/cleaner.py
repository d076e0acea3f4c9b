"""Log compaction (``cleanup.policy=compact``): keep the latest value of every key.

A cleaning pass over one log:

1. *Plan*: the dirty section runs from the partition's cleaner checkpoint to the base of the
   active segment (the active segment is never cleaned) and, with ``min.compaction.lag.ms``,
   stops before segments holding records younger than the lag. The pass runs when dirty bytes
   / cleanable bytes >= ``min.cleanable.dirty.ratio`` (or when ``max.compaction.lag.ms`` is
   exceeded).
2. *Map*: key → offset of its latest record in the dirty section.
3. *Filter*: every non-active segment up to the dirty end is rewritten keeping a record only
   if no later record has its key; tombstones (null values) are kept until they are older than
   ``delete.retention.ms`` so consumers catching up still see the deletion. Records keep their
   offsets: a batch whose records all survive is copied byte for byte, a partly filtered batch
   is re-encoded with the survivors (offsets as gaps) keeping its base offset, last offset
   delta, producer id/epoch/base sequence and timestamp type (Kafka's
   ``buildRetainedRecordsInto``): it then holds fewer records than offsets, which replicas
   accept (``Log.append_as_follower``); an emptied batch disappears.
   Transactions (Kafka's ``LogCleaner``): the dirty section also stops before the first
   unstable offset (an open transaction may still abort); batches of aborted transactions
   (known from the ``.txnindex`` files, collected in *plan*) neither enter the offset map nor
   survive; control batches never enter the map and are kept, except a COMMIT/ABORT marker
   older than ``delete.retention.ms`` whose transaction has no record left in this pass.
4. *Swap* (on the broker's event loop): the new file ``<base>.log.cleaned`` is fsynced, the
   segment's indexes are removed, the file renamed over ``<base>.log`` and the indexes rebuilt.
   A crash before the rename leaves the original (the stray ``.cleaned`` is deleted on load);
   after it, the missing indexes are rebuilt on load. Offsets never change, the log start
   offset stays, and consumers reading across the swap see either version.

Steps 2-3 only read segment files and run in a worker thread; retention waits while the
cleaner runs (``LogCleaner.running``). If the log changed under the worker anyway (a
truncation, DeleteRecords, a deleted partition), step 4 is skipped for that log and its
checkpoint does not advance (see :func:`changed_under`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from framework.protocol import records as rb
from framework.protocol.control import InvalidControlRecord, read_marker
from framework.storage.log import Log
from framework.storage.log_manager import read_checkpoint, write_checkpoint
from framework.storage.segment import LogSegment

log = logging.getLogger("sftraffic.cleaner")


@dataclass(slots=True)
class TxnFilter:
    """The transactions of one cleaning pass: aborted ranges per producer (from the logs'
    ``.txnindex``, read on the event loop) and, per producer, whether its current
    transaction kept a record so far (filled while filtering, segment after segment)."""

    aborted: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    retained: dict[int, bool] = field(default_factory=dict)

    def is_aborted(self, h: rb.BatchHeader) -> bool:
        if not h.is_transactional or h.is_control:
            return False
        return any(f <= h.base_offset <= last for f, last in self.aborted.get(h.producer_id, ()))


@dataclass(slots=True)
class CleanPlan:
    first_dirty: int
    dirty_end: int  # exclusive: base offset of the first segment not cleaned
    segments: list[LogSegment]
    txns: TxnFilter = field(default_factory=TxnFilter)


@dataclass(slots=True)
class CleanStats:
    segments: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    records_before: int = 0
    records_after: int = 0
    tombstones_dropped: int = 0


def plan(lg: Log, first_dirty: int, now_ms: int, force: bool = False) -> CleanPlan | None:
    cfg = lg.config
    if not cfg.compact:
        return None
    candidates: list[LogSegment] = []
    unstable = lg.first_unstable_offset
    for seg in lg.segments[:-1]:
        if unstable is not None and seg.next_offset > unstable:
            break
        if (
            cfg.min_compaction_lag_ms > 0
            and seg.max_timestamp >= 0
            and now_ms - seg.max_timestamp < cfg.min_compaction_lag_ms
        ):
            break
        candidates.append(seg)
    if not candidates:
        return None
    dirty_end = candidates[-1].next_offset
    first_dirty = max(first_dirty, lg.log_start_offset)
    if first_dirty >= dirty_end:
        return None
    total = sum(s.size for s in candidates)
    dirty = sum(s.size for s in candidates if s.next_offset > first_dirty)
    overdue = any(
        s.next_offset > first_dirty
        and s.max_timestamp >= 0
        and now_ms - s.max_timestamp > cfg.max_compaction_lag_ms
        for s in candidates
    )
    if not force and not overdue and (total == 0 or dirty / total < cfg.min_cleanable_dirty_ratio):
        return None
    txns = TxnFilter()
    for t in lg.collect_aborted(lg.log_start_offset, dirty_end):
        txns.aborted.setdefault(t.producer_id, []).append((t.first_offset, t.last_offset))
    return CleanPlan(first_dirty, dirty_end, candidates, txns)


def _batches(seg: LogSegment) -> list[tuple[bytes, rb.BatchHeader]]:
    data = seg.read_at(0, seg.size)
    return [(data[pos : pos + h.size], h) for pos, h in rb.iter_batches(data)]


class CleaningAborted(Exception):
    """The broker is stopping: the pass ends between two batches (nothing was swapped in)."""


def _never() -> bool:
    return False


def build_offset_map(p: CleanPlan, aborted: Callable[[], bool] = _never) -> dict[bytes, int]:
    latest: dict[bytes, int] = {}
    for seg in p.segments:
        if seg.next_offset <= p.first_dirty:
            continue
        for raw, h in _batches(seg):
            if aborted():
                raise CleaningAborted
            if h.next_offset <= p.first_dirty or h.is_control or p.txns.is_aborted(h):
                continue
            try:
                _, recs = rb.decode_batch(raw)
            except rb.InvalidBatch as exc:
                log.error(
                    "%s: batch at offset %d cannot be decoded (%s); kept uncleaned",
                    seg.path,
                    h.base_offset,
                    exc,
                )
                continue
            for r in recs:
                if r.key is not None and r.offset >= p.first_dirty:
                    latest[r.key] = r.offset
    return latest


def filter_segment(
    seg: LogSegment,
    latest: dict[bytes, int],
    now_ms: int,
    delete_retention_ms: int,
    out_path: Path,
    stats: CleanStats,
    aborted: Callable[[], bool] = _never,
    txns: TxnFilter | None = None,
) -> None:
    """Write the surviving batches of ``seg`` to ``out_path`` (read-only on ``seg``).

    ``txns`` (the plan's) must be shared by the segments of one pass, filtered in order.
    """
    txns = txns if txns is not None else TxnFilter()
    out = bytearray()
    for raw, h in _batches(seg):
        if aborted():
            raise CleaningAborted
        if h.is_control:
            if _marker_removable(raw, h, txns, now_ms, delete_retention_ms):
                stats.records_before += h.records_count
                continue
            stats.records_before += h.records_count
            stats.records_after += h.records_count
            out += raw
            continue
        if txns.is_aborted(h):
            stats.records_before += h.records_count
            continue
        try:
            _, recs = rb.decode_batch(raw)
        except rb.InvalidBatch:
            out += raw  # undecodable: kept as it is rather than lost
            continue
        keep = []
        for r in recs:
            if r.key is None:
                continue  # keyless records cannot be compacted meaningfully: dropped, as Kafka does
            newest = latest.get(r.key)
            if newest is not None and newest != r.offset:
                continue
            if r.value is None and now_ms - r.timestamp > delete_retention_ms:
                stats.tombstones_dropped += 1
                continue
            keep.append(r)
        stats.records_before += len(recs)
        stats.records_after += len(keep)
        if keep and h.is_transactional:
            txns.retained[h.producer_id] = True
        if len(keep) == len(recs):
            out += raw
        elif keep:
            out += _retained_batch(h, keep)
    with open(out_path, "wb") as fh:
        fh.write(out)
        fh.flush()
        os.fsync(fh.fileno())
    stats.bytes_before += seg.size
    stats.bytes_after += len(out)
    stats.segments += 1


def _marker_removable(
    raw: bytes, h: rb.BatchHeader, txns: TxnFilter, now_ms: int, delete_retention_ms: int
) -> bool:
    """Whether the control batch ``h`` goes: a transaction marker past ``delete.retention.ms``
    whose transaction kept no record in this pass (Kafka's rule). Ends the transaction's
    tracking either way; any other control batch stays."""
    try:
        marker = read_marker(raw)
    except (InvalidControlRecord, rb.InvalidBatch):
        return False
    if marker is None:
        return False
    had_data = txns.retained.pop(h.producer_id, False)
    return not had_data and now_ms - h.max_timestamp > delete_retention_ms


def _retained_batch(h: rb.BatchHeader, keep: list[rb.Record]) -> bytes:
    """The survivors of batch ``h`` re-encoded as one batch with the original's identity.

    As Kafka's ``MemoryRecords.buildRetainedRecordsInto``: the base offset and the last
    offset delta stay (so the batch still spans the producer's sequences base..last and a
    replica rebuilding producer state from it learns the right last sequence), and so do
    the producer id/epoch, base sequence, leader epoch, compression, transactional flag and
    timestamp type; a LogAppendTime batch keeps its append time as max timestamp, a
    CreateTime batch gets its survivors' largest timestamp.
    """
    base = h.base_offset
    return rb.build_batch(
        [(r.key, r.value, r.headers) for r in keep],
        base_offset=base,
        timestamps=[r.timestamp for r in keep],
        compression=h.compression,
        producer_id=h.producer_id,
        producer_epoch=h.producer_epoch,
        base_sequence=h.base_sequence,
        leader_epoch=h.partition_leader_epoch,
        transactional=h.is_transactional,
        offset_deltas=[r.offset - base for r in keep],
        last_offset_delta=h.last_offset_delta,
        log_append_time=h.max_timestamp if h.is_log_append_time else None,
    )


def swap_in(lg: Log, seg: LogSegment, cleaned: Path) -> None:
    """Replace a segment's file by its cleaned version (event-loop thread).

    The cleaned file takes the original's modification time (Kafka's cleaner does the same),
    so retention by file age is not reset by cleaning; the directory is fsynced after the
    rename so the swap survives a power loss.
    """
    st = os.stat(seg.path)
    os.utime(cleaned, ns=(st.st_atime_ns, st.st_mtime_ns))
    seg.index.path.unlink(missing_ok=True)
    seg.time_index.path.unlink(missing_ok=True)
    os.replace(cleaned, seg.path)
    _fsync_dir(seg.dir)
    os.close(seg._fd)
    seg._fd = os.open(seg.path, os.O_RDWR)
    seg.size = os.fstat(seg._fd).st_size
    seg.recover()


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def changed_under(lg: Log, p: CleanPlan, truncations: int) -> str | None:
    """Why the segments ``p`` cleaned are no longer ``lg``'s to swap (None if they are).

    The cleaner filters in a thread while the event loop goes on: a truncation (a follower
    diverging from its leader) may have cut or removed a planned segment or made it the
    active one, and retention, DeleteRecords or a deletion may have removed some. Swapping
    then would write data the log no longer holds over a live file, so the pass is
    abandoned (Kafka aborts cleaning on truncation: ``abortAndPauseCleaning``).
    """
    if lg.truncations != truncations:
        return "truncated"
    live = lg.segments[:-1]
    if any(not any(seg is s for s in live) for seg in p.segments):
        return "segments deleted or made active"
    return None


def clean_log(
    lg: Log, first_dirty: int, now_ms: int | None = None, force: bool = False
) -> tuple[int, CleanStats] | None:
    """One synchronous cleaning pass (tests, tools) at ``now_ms`` (default: the log's clock);
    returns (new checkpoint, stats)."""
    now = now_ms if now_ms is not None else lg.clock.wall_ms()
    p = plan(lg, first_dirty, now, force)
    if p is None:
        return None
    latest = build_offset_map(p)
    stats = CleanStats()
    outputs = []
    for seg in p.segments:
        out = seg.path.with_suffix(".log.cleaned")
        filter_segment(seg, latest, now, lg.config.delete_retention_ms, out, stats, txns=p.txns)
        outputs.append((seg, out))
    for seg, out in outputs:
        swap_in(lg, seg, out)
    log.info(
        "%s: compacted %d segment(s): %d -> %d records, %d -> %d bytes",
        lg.name,
        stats.segments,
        stats.records_before,
        stats.records_after,
        stats.bytes_before,
        stats.bytes_after,
    )
    return p.dirty_end, stats


class LogCleaner:
    """Cleans compacted logs in the background; remembers progress in ``cleaner-offset-checkpoint``."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / "cleaner-offset-checkpoint"
        self.checkpoints: dict[tuple[str, int], int] = read_checkpoint(self.path)
        self.running = False
        self.stopping = threading.Event()  # set by the broker: a pass ends at the next batch

    def stop(self) -> None:
        self.stopping.set()

    def save(self) -> None:
        write_checkpoint(self.path, self.checkpoints)

    async def run_once(self, logs: list[Log]) -> CleanStats:
        """One pass over every compacted log that needs it (heavy work in a worker thread)."""
        total = CleanStats()
        before = dict(self.checkpoints)
        self.running = True
        try:
            for lg in logs:
                if self.stopping.is_set():
                    break
                if not lg.config.compact or not lg.segments:
                    continue
                st = await self._clean(lg)
                if st is None:
                    continue
                total.segments += st.segments
                total.records_before += st.records_before
                total.records_after += st.records_after
                total.bytes_before += st.bytes_before
                total.bytes_after += st.bytes_after
            if self.checkpoints != before:
                self.save()
        finally:
            self.running = False
        return total

    async def _clean(self, lg: Log) -> CleanStats | None:
        """Clean one log if it needs it; None if it did not or the pass was abandoned."""
        key = (lg.topic, lg.partition)
        now = lg.clock.wall_ms()
        checkpoint = self.checkpoints.get(key, 0)
        if checkpoint > lg.log_end_offset:
            # ahead of the log (truncated since): clean it all (Kafka's cleanableOffsets)
            checkpoint = self.checkpoints[key] = lg.log_start_offset
        p = plan(lg, checkpoint, now)
        if p is None:
            return None
        truncations = lg.truncations

        def work() -> tuple[list[tuple[LogSegment, Path]], CleanStats]:
            aborted = self.stopping.is_set
            latest = build_offset_map(p, aborted)
            st = CleanStats()
            outs = []
            for seg in p.segments:
                out = seg.path.with_suffix(".log.cleaned")
                outs.append((seg, out))
                filter_segment(seg, latest, now, lg.config.delete_retention_ms, out, st, aborted, p.txns)
            return outs, st

        try:
            outs, st = await asyncio.to_thread(work)
        except CleaningAborted:
            for seg in p.segments:
                seg.path.with_suffix(".log.cleaned").unlink(missing_ok=True)
            return None
        why = changed_under(lg, p, truncations)
        if why is not None:
            for _, out in outs:
                out.unlink(missing_ok=True)
            if lg.truncations != truncations and lg.segments:
                # what was cleaned may be gone (Kafka's maybeTruncateCheckpoint)
                self.checkpoints[key] = min(self.checkpoints.get(key, 0), lg.active.base_offset)
            log.info("%s: log %s while cleaning: pass abandoned", lg.name, why)
            return None
        for seg, out in outs:
            swap_in(lg, seg, out)
        self.checkpoints[key] = p.dirty_end
        log.info(
            "%s: compacted %d segment(s): %d -> %d records, %d -> %d bytes",
            lg.name,
            st.segments,
            st.records_before,
            st.records_after,
            st.bytes_before,
            st.bytes_after,
        )
        return st
