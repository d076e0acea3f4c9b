"""Log compaction (framework/storage/cleaner.py) over real logs: what survives a cleaning pass
(latest value per key, tombstones until ``delete.retention.ms``, keyless records dropped as
Kafka's LogCleaner does), what never changes (offsets, timestamps, headers, producer fields,
the active segment), when a pass runs (dirty ratio, compaction lags, the cleaner checkpoint),
and the on-disk swap protocol: a crash at any step of it leaves a log that ``Log.open``
recovers with every latest value readable.

Time is explicit: every pass gets ``now_ms``; records carry fixed timestamps.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from framework.errors import CorruptRecord
from framework.protocol import records as rb
from framework.storage import cleaner
from framework.storage.cleaner import LogCleaner, clean_log, plan
from framework.storage.log import Log
from framework.storage.log_config import LogConfig
from tests.support.durable_os import RecordingOs
from tests.support.storage import NOW, append, cfg, headers_of, log_files, open_log

DAY = 86_400_000
HOUR = 3_600_000
COMPACT = cfg(compact=True, delete=False, segment_bytes=1 << 20, delete_retention_ms=DAY)

KV = tuple[bytes | None, bytes | None]
Row = tuple[int, bytes | None, bytes | None, int]  # offset, key, value, timestamp


def kv(*records: KV, ts: int = NOW, timestamps: list[int] | None = None, **kw: Any) -> bytes:
    """One batch of (key, value) records."""
    return rb.build_batch(list(records), timestamp_ms=ts, timestamps=timestamps, **kw)


def write(lg: Log, *batches: bytes, now: int = NOW) -> None:
    """Append each batch as leader (one request each)."""
    for b in batches:
        append(lg, b, now=now)


def read_back(lg: Log) -> list[rb.Record]:
    """Every record from the log start, read as ``support.read_records`` reads (slices, whole
    batches), each served batch checked as a replica or a Kafka client checks it: whole and
    CRC-valid, no more records than offsets. Not ``rb.validate_batches``: its exact count
    (records == last offset delta + 1) is a check of produced batches, and a partly filtered
    batch keeps its offset range with fewer records (Kafka's ``buildRetainedRecordsInto``)."""
    off, upper = lg.log_start_offset, lg.log_end_offset
    out: list[rb.Record] = []
    while off < upper:
        data = memoryview(lg.read(off, 1 << 20, upper))
        progressed = False
        for pos, h in rb.iter_batches(data):
            raw = data[pos : pos + h.size]
            assert rb.scan_valid_prefix(raw)[0] == h.size
            assert 0 < h.records_count <= h.last_offset_delta + 1
            out.extend(r for r in rb.decode_batch(raw)[1] if r.offset >= off)
            off = h.next_offset
            progressed = True
        assert progressed, "a read with min_one must return at least one whole batch"
    return out


def rows(lg: Log) -> list[Row]:
    return [(r.offset, r.key, r.value, r.timestamp) for r in read_back(lg)]


def view(lg: Log) -> dict[bytes, bytes]:
    """What a consumer of the whole partition ends up with: latest value per key, deletes applied."""
    latest: dict[bytes, bytes | None] = {}
    for _, k, v, _ in rows(lg):
        if k is not None:
            latest[k] = v
    return {k: v for k, v in latest.items() if v is not None}


@pytest.fixture
def log(tmp_path: Path) -> Iterator[Log]:
    lg, _ = open_log(tmp_path / "events-0", COMPACT)
    yield lg
    lg.close()


def crash(lg: Log) -> None:
    """The process dies: file descriptors go, nothing is flushed or snapshotted."""
    for seg in lg.segments:
        if seg._fd >= 0:
            os.close(seg._fd)
            seg._fd = -1


def reopen(lg: Log, config: LogConfig = COMPACT) -> Log:
    """Log.open after a crash, everything below the log end flushed (the recovery point)."""
    again, _ = open_log(
        lg.dir, config, recovery_point=lg.log_end_offset, log_start_offset=lg.log_start_offset
    )
    return again


# -- what survives ----------------------------------------------------------------------------
def test_the_latest_value_of_every_key_survives_and_older_ones_go(log: Log) -> None:
    write(log, kv((b"a", b"a1")), kv((b"b", b"b1")), kv((b"a", b"a2")), kv((b"c", b"c1")), kv((b"b", b"b2")))
    log.roll()
    write(log, kv((b"d", b"d1")))
    before = view(log)
    result = clean_log(log, 0, NOW)
    assert result is not None
    checkpoint, stats = result
    assert checkpoint == 5  # the base of the active segment
    assert rows(log) == [
        (2, b"a", b"a2", NOW),
        (3, b"c", b"c1", NOW),
        (4, b"b", b"b2", NOW),
        (5, b"d", b"d1", NOW),
    ]
    assert view(log) == before
    assert (stats.records_before, stats.records_after, stats.segments) == (5, 3, 1)
    assert (log.log_start_offset, log.log_end_offset) == (0, 6)  # offsets never move


def test_a_partly_superseded_batch_keeps_its_survivors_offsets_timestamps_and_headers(log: Log) -> None:
    write(
        log,
        rb.build_batch(
            [(b"a", b"a1", [("h", b"1")]), (b"b", b"b1", [("h", b"2")]), (b"c", b"c1", [("h", None)])],
            timestamps=[NOW + 30, NOW + 10, NOW + 20],
        ),
        kv((b"a", b"a2")),
    )
    log.roll()
    clean_log(log, 0, NOW + 100)
    got = read_back(log)
    assert [(r.offset, r.key, r.value, r.timestamp, r.headers) for r in got] == [
        (1, b"b", b"b1", NOW + 10, [("h", b"2")]),
        (2, b"c", b"c1", NOW + 20, [("h", None)]),
        (3, b"a", b"a2", NOW, []),
    ]


def test_a_batch_whose_records_all_survive_is_copied_byte_for_byte(log: Log) -> None:
    keep = kv((b"x", b"1"), (b"y", b"2"), producer_id=7, producer_epoch=3, base_sequence=0)
    write(log, kv((b"a", b"old")), keep, kv((b"a", b"new")))
    stored = log.segments[0].read_at(0, log.segments[0].size)
    first = rb.read_header(stored).size
    original = stored[first : first + rb.read_header(stored, first).size]
    log.roll()
    clean_log(log, 0, NOW)
    cleaned = log.segments[0].read_at(0, log.segments[0].size)
    assert cleaned.startswith(original)
    rb.validate_batches(cleaned)


def test_a_compressed_batch_stays_compressed_with_its_producer_fields(log: Log) -> None:
    write(
        log,
        kv(
            (b"a", b"1" * 100),
            (b"b", b"2" * 100),
            compression=rb.GZIP,
            producer_id=5,
            producer_epoch=1,
            base_sequence=0,
        ),
    )
    write(log, kv((b"a", b"3")))
    log.roll()
    clean_log(log, 0, NOW)
    h = headers_of(log_files(log.dir)[0])[0]
    assert h.compression == rb.GZIP
    assert (h.producer_id, h.producer_epoch) == (5, 1)
    assert [r[1:3] for r in rows(log)] == [(b"b", b"2" * 100), (b"a", b"3")]


def test_a_partly_filtered_batch_keeps_its_offset_and_sequence_range(log: Log) -> None:
    write(log, kv((b"a", b"1"), (b"b", b"2"), (b"c", b"3"), producer_id=7, producer_epoch=0, base_sequence=0))
    write(log, kv((b"a", b"4")), kv((b"c", b"5")))
    log.roll()
    clean_log(log, 0, NOW)
    h = headers_of(log_files(log.dir)[0])[0]
    assert (h.base_offset, h.last_offset) == (0, 2)
    assert (h.base_sequence, h.last_sequence) == (0, 2)


def test_a_replica_copying_a_cleaned_log_accepts_the_producers_next_sequence(
    log: Log, tmp_path: Path
) -> None:
    write(log, kv((b"a", b"1"), (b"b", b"2"), (b"c", b"3"), producer_id=7, producer_epoch=0, base_sequence=0))
    write(log, kv((b"a", b"4")), kv((b"b", b"5")))  # another producer overwrites a and b
    log.roll()
    clean_log(log, 0, NOW)
    follower, _ = open_log(tmp_path / "follower" / "events-0", COMPACT)
    try:
        data = log.read(0, 1 << 20, log.log_end_offset)
        follower.append_as_follower(memoryview(bytearray(data)), NOW)
        assert follower.log_end_offset == log.log_end_offset
        follower.append_as_leader(
            memoryview(bytearray(kv((b"d", b"6"), producer_id=7, producer_epoch=0, base_sequence=3))), NOW
        )
    finally:
        follower.close()


def test_a_replica_still_refuses_a_damaged_cleaned_batch(log: Log, tmp_path: Path) -> None:
    """Fewer records than offsets is accepted from a leader; a bad CRC still is not."""
    write(log, kv((b"a", b"1"), (b"b", b"2"), (b"c", b"3")), kv((b"a", b"4")))
    log.roll()
    clean_log(log, 0, NOW)
    data = bytearray(log.read(0, 1 << 20, log.log_end_offset))
    h = rb.read_header(data)
    assert (h.records_count, h.last_offset_delta) == (2, 2)
    data[h.size - 1] ^= 0xFF
    follower, _ = open_log(tmp_path / "follower" / "events-0", COMPACT)
    try:
        with pytest.raises(CorruptRecord, match="CRC"):
            follower.append_as_follower(memoryview(data), NOW)
        assert follower.log_end_offset == 0
    finally:
        follower.close()


def test_the_log_append_time_of_a_batch_is_kept(tmp_path: Path) -> None:
    config = cfg(compact=True, delete=False, log_append_time=True)
    lg, _ = open_log(tmp_path / "events-0", config)
    try:
        write(lg, kv((b"a", b"1"), (b"b", b"2"), ts=NOW - 5000), now=NOW)
        write(lg, kv((b"a", b"3"), ts=NOW - 5000), now=NOW + 1)
        lg.roll()
        clean_log(lg, 0, NOW + 10)
        assert [r[1:] for r in rows(lg)] == [(b"b", b"2", NOW), (b"a", b"3", NOW + 1)]
        h = headers_of(log_files(lg.dir)[0])[0]
        assert h.is_log_append_time and h.max_timestamp == NOW
    finally:
        lg.close()


def test_records_without_a_key_are_dropped_as_kafka_does(tmp_path: Path) -> None:
    """Keyless records reach a compacted log only if the topic was not compacted when they
    were written (produce refuses them on a compacted topic). Kafka's LogCleaner drops them
    (``shouldRetainRecord``: no key → invalid message, not retained)."""
    lg, _ = open_log(tmp_path / "events-0", cfg(segment_bytes=1 << 20))
    try:
        write(lg, kv((None, b"n1"), (b"a", b"a1")), kv((None, b"n2")), kv((b"b", b"b1")))
        lg.roll()
        lg.config = COMPACT  # cleanup.policy changed to compact
        clean_log(lg, 0, NOW)
        assert rows(lg) == [(1, b"a", b"a1", NOW), (3, b"b", b"b1", NOW)]
    finally:
        lg.close()


# -- tombstones ---------------------------------------------------------------------------------
def test_a_tombstone_is_kept_until_delete_retention_has_passed_then_removed(log: Log) -> None:
    t = NOW
    write(log, kv((b"gone", b"v")), kv((b"kept", b"k1")), kv((b"gone", None), ts=t))
    log.roll()
    first = clean_log(log, 0, t + DAY)  # exactly delete.retention.ms: kept
    assert first is not None
    assert rows(log) == [(1, b"kept", b"k1", NOW), (2, b"gone", None, t)]
    assert first[1].tombstones_dropped == 0
    write(log, kv((b"other", b"o1")))  # more data: the next pass
    log.roll()
    second = clean_log(log, first[0], t + DAY + 1, force=True)
    assert second is not None
    assert rows(log) == [(1, b"kept", b"k1", NOW), (3, b"other", b"o1", NOW)]
    assert second[1].tombstones_dropped == 1
    assert view(log) == {b"kept": b"k1", b"other": b"o1"}


def test_an_old_tombstone_goes_with_every_older_value_of_its_key(log: Log) -> None:
    write(log, kv((b"k", b"1")), kv((b"k", b"2")))
    log.roll()
    write(log, kv((b"k", None), ts=NOW), kv((b"z", b"z")))
    log.roll()
    clean_log(log, 0, NOW + 2 * DAY)
    assert rows(log) == [(3, b"z", b"z", NOW)]


def test_a_key_written_again_after_its_tombstone_keeps_only_the_new_value(log: Log) -> None:
    write(log, kv((b"k", b"1")), kv((b"k", None)), kv((b"k", b"2")))
    log.roll()
    clean_log(log, 0, NOW)
    assert rows(log) == [(2, b"k", b"2", NOW)]


# -- the active segment, gaps, empty segments ----------------------------------------------------
def test_the_active_segment_is_never_cleaned(log: Log) -> None:
    write(log, kv((b"a", b"1")), kv((b"a", b"2")), kv((b"a", b"3")))
    assert clean_log(log, 0, NOW, force=True) is None  # only the active segment
    log.roll()
    write(log, kv((b"a", b"4")), kv((b"a", b"5")))
    active = log.active.read_at(0, log.active.size)
    clean_log(log, 0, NOW, force=True)
    assert log.active.read_at(0, log.active.size) == active
    assert rows(log) == [(2, b"a", b"3", NOW), (3, b"a", b"4", NOW), (4, b"a", b"5", NOW)]


def test_offsets_keep_their_gaps_and_reads_land_on_the_next_survivor(log: Log) -> None:
    for i in range(6):
        write(log, kv((b"hot", str(i).encode()), (f"k{i}".encode(), b"x")))
    log.roll()
    write(log, kv((b"tail", b"t")))
    clean_log(log, 0, NOW)
    offs = [r[0] for r in rows(log)]
    assert offs == [1, 3, 5, 7, 9, 10, 11, 12]
    assert offs == sorted(set(offs))
    # a consumer positioned on a removed offset gets the next batch holding a survivor
    _, recs = rb.decode_batch(log.read(2, 1 << 20, log.log_end_offset))
    assert recs[0].offset == 3
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (0, 13, 13)


def test_a_segment_emptied_by_cleaning_stays_readable_and_reopens(log: Log) -> None:
    write(log, kv((b"a", b"1")), kv((b"b", b"1")))
    log.roll()
    write(log, kv((b"a", b"2")), kv((b"b", b"2")))
    log.roll()
    write(log, kv((b"c", b"1")))
    clean_log(log, 0, NOW)
    assert log.segments[0].size == 0  # everything in it was superseded
    assert rows(log) == [(2, b"a", b"2", NOW), (3, b"b", b"2", NOW), (4, b"c", b"1", NOW)]
    before = rows(log)
    log.close()
    again, _ = open_log(log.dir, COMPACT, clean=True)
    try:
        assert rows(again) == before
        assert (again.log_start_offset, again.log_end_offset) == (0, 5)
        write(again, kv((b"d", b"1")))
        assert again.log_end_offset == 6
    finally:
        again.close()


def test_a_segment_emptied_by_cleaning_does_not_stop_time_retention(tmp_path: Path) -> None:
    """cleanup.policy=compact,delete: old segments still expire after retention.ms."""
    config = cfg(compact=True, delete=True, segment_bytes=1 << 20, retention_ms=DAY)
    lg, _ = open_log(tmp_path / "events-0", config)
    try:
        write(lg, kv((b"a", b"1"), ts=NOW))
        lg.roll()
        write(lg, kv((b"a", b"2"), ts=NOW + HOUR), kv((b"b", b"1"), ts=NOW + HOUR))
        lg.roll()
        write(lg, kv((b"c", b"1"), ts=NOW + 3 * DAY))
        clean_log(lg, 0, NOW + 2 * HOUR)
        assert lg.segments[0].size == 0
        lg.delete_retained_segments(NOW + 2 * DAY)  # the second segment expired too
        assert rows(lg) == [(3, b"c", b"1", NOW + 3 * DAY)]
        assert lg.log_start_offset == 3
    finally:
        lg.close()


def test_a_segment_emptied_by_cleaning_goes_only_with_an_expired_one_after_it(tmp_path: Path) -> None:
    """It holds nothing to retain, so it neither blocks retention nor moves the log start alone."""
    config = cfg(compact=True, delete=True, segment_bytes=1 << 20, retention_ms=DAY)
    lg, _ = open_log(tmp_path / "events-0", config)
    try:
        write(lg, kv((b"a", b"1"), ts=NOW))
        lg.roll()
        write(lg, kv((b"a", b"2"), ts=NOW + 2 * DAY), kv((b"b", b"1"), ts=NOW + 2 * DAY))
        lg.roll()
        write(lg, kv((b"c", b"1"), ts=NOW + 3 * DAY))
        clean_log(lg, 0, NOW + 2 * DAY)
        assert lg.segments[0].size == 0
        assert lg.delete_retained_segments(NOW + 2 * DAY + 1) == 0
        assert lg.log_start_offset == 0 and len(lg.segments) == 3
        assert [r[0] for r in rows(lg)] == [1, 2, 3]
    finally:
        lg.close()


# -- when a pass runs -----------------------------------------------------------------------------
def test_plan_needs_a_compacted_log_with_a_dirty_non_active_segment(tmp_path: Path, log: Log) -> None:
    lg, _ = open_log(tmp_path / "plain-0", cfg(segment_bytes=1 << 20))
    try:
        write(lg, kv((b"a", b"1")), kv((b"a", b"2")))
        lg.roll()
        assert plan(lg, 0, NOW, force=True) is None  # cleanup.policy=delete
    finally:
        lg.close()
    write(log, kv((b"a", b"1")))
    assert plan(log, 0, NOW, force=True) is None  # only the active segment
    log.roll()
    p = plan(log, 0, NOW)
    assert p is not None and (p.first_dirty, p.dirty_end) == (0, 1)
    assert plan(log, 1, NOW, force=True) is None  # the checkpoint is at the dirty end


def test_the_dirty_ratio_is_measured_from_the_checkpoint(log: Log) -> None:
    for i in range(8):
        write(log, kv((f"k{i}".encode(), b"v" * 50)))
    log.roll()
    write(log, kv((b"k0", b"w" * 50)))
    log.roll()
    write(log, kv((b"tail", b"t")))
    assert plan(log, 8, NOW) is None  # 1 dirty batch of 9 < min.cleanable.dirty.ratio 0.5
    p = plan(log, 8, NOW, force=True)
    assert p is not None and (p.first_dirty, p.dirty_end) == (8, 9)
    assert plan(log, 0, NOW) is not None  # everything dirty


def test_min_compaction_lag_protects_recent_segments(tmp_path: Path) -> None:
    lg, _ = open_log(tmp_path / "events-0", cfg(compact=True, delete=False, min_compaction_lag_ms=HOUR))
    try:
        write(lg, kv((b"a", b"1"), ts=NOW), kv((b"a", b"2"), ts=NOW))
        lg.roll()
        write(lg, kv((b"a", b"3"), ts=NOW + HOUR), kv((b"a", b"4"), ts=NOW + HOUR))
        lg.roll()
        write(lg, kv((b"z", b"z"), ts=NOW + HOUR))
        p = plan(lg, 0, NOW + HOUR + 1)
        assert p is not None and [s.base_offset for s in p.segments] == [0] and p.dirty_end == 2
        clean_log(lg, 0, NOW + HOUR + 1)
        assert [r[:3] for r in rows(lg)] == [
            (1, b"a", b"2"),
            (2, b"a", b"3"),
            (3, b"a", b"4"),
            (4, b"z", b"z"),
        ]
    finally:
        lg.close()


def test_max_compaction_lag_forces_a_pass_below_the_dirty_ratio(tmp_path: Path) -> None:
    config = cfg(compact=True, delete=False, max_compaction_lag_ms=DAY, min_cleanable_dirty_ratio=0.99)
    lg, _ = open_log(tmp_path / "events-0", config)
    try:
        for i in range(4):
            write(lg, kv((f"k{i}".encode(), b"v")))
        lg.roll()
        write(lg, kv((b"k0", b"w")))
        lg.roll()
        write(lg, kv((b"tail", b"t")))
        assert plan(lg, 4, NOW + DAY) is None
        assert plan(lg, 4, NOW + DAY + 1) is not None
    finally:
        lg.close()


def test_the_clean_section_below_the_checkpoint_is_trusted(log: Log) -> None:
    """The offset map covers the dirty section only (Kafka's firstDirtyOffset): what lies
    below the checkpoint is taken as already clean and only loses keys written again later."""
    write(log, kv((b"a", b"1")), kv((b"a", b"2")), kv((b"b", b"1")))
    log.roll()
    write(log, kv((b"b", b"2")))
    log.roll()
    write(log, kv((b"tail", b"t")))
    result = clean_log(log, 3, NOW, force=True)
    assert result is not None and result[0] == 4
    assert [r[:3] for r in rows(log)] == [
        (0, b"a", b"1"),
        (1, b"a", b"2"),
        (3, b"b", b"2"),
        (4, b"tail", b"t"),
    ]


def test_the_log_cleaner_keeps_its_checkpoint_across_restarts(tmp_path: Path) -> None:
    lg, _ = open_log(tmp_path / "events-0", COMPACT)
    try:
        write(lg, kv((b"a", b"1")), kv((b"a", b"2")), kv((b"b", b"1")))
        lg.roll()
        write(lg, kv((b"tail", b"t")))
        first = LogCleaner(tmp_path)
        stats = asyncio.run(first.run_once([lg]))
        assert stats.segments == 1 and stats.records_after == 2
        assert first.checkpoints == {("events", 0): 3}
        assert (tmp_path / "cleaner-offset-checkpoint").read_text() == "0\n1\nevents 0 3\n"
        assert not list(lg.dir.glob("*.cleaned"))

        again = LogCleaner(tmp_path)  # a restarted broker
        assert again.checkpoints == {("events", 0): 3}
        assert asyncio.run(again.run_once([lg])).segments == 0  # nothing new to clean
        write(lg, kv((b"b", b"2")), kv((b"c", b"1")))
        lg.roll()
        write(lg, kv((b"tail2", b"t")))
        assert asyncio.run(again.run_once([lg])).segments == 2
        assert again.checkpoints == {("events", 0): 6}
        assert [r[:3] for r in rows(lg)] == [
            (1, b"a", b"2"),
            (3, b"tail", b"t"),
            (4, b"b", b"2"),
            (5, b"c", b"1"),
            (6, b"tail2", b"t"),
        ]
    finally:
        lg.close()


def test_a_truncation_while_the_cleaner_works_is_not_undone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lg, _ = open_log(tmp_path / "events-0", COMPACT)
    try:
        write(lg, kv((b"a", b"1")), kv((b"a", b"2")), kv((b"b", b"1")), kv((b"c", b"1")))
        lg.roll()
        write(lg, kv((b"d", b"1")))

        async def worker_then_truncate(fn: Callable[[], Any]) -> Any:
            result = fn()  # the cleaner's thread reads and filters the segments
            lg.truncate_to(2)  # meanwhile, on the event loop: the follower diverged at 2
            return result

        monkeypatch.setattr(asyncio, "to_thread", worker_then_truncate)
        asyncio.run(LogCleaner(tmp_path).run_once([lg]))
        assert lg.log_end_offset == 2
        assert all(r[0] < 2 for r in rows(lg))
    finally:
        lg.close()


def test_a_pass_over_a_log_that_changed_meanwhile_is_abandoned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DeleteRecords removes a planned segment while the worker filters: nothing is swapped,
    no ``.cleaned`` file stays and the checkpoint does not move; the next pass cleans."""
    lg, _ = open_log(tmp_path / "events-0", COMPACT)
    try:
        write(lg, kv((b"a", b"1")), kv((b"a", b"2")))
        lg.roll()
        write(lg, kv((b"b", b"1")), kv((b"b", b"2")))
        lg.roll()
        write(lg, kv((b"tail", b"t")))
        real = asyncio.to_thread

        async def worker_then_delete(fn: Callable[[], Any]) -> Any:
            result = fn()
            lg.delete_records_before(2)
            return result

        monkeypatch.setattr(asyncio, "to_thread", worker_then_delete)
        lc = LogCleaner(tmp_path)
        assert asyncio.run(lc.run_once([lg])).segments == 0
        assert lc.checkpoints == {} and not list(lg.dir.glob("*.cleaned"))
        assert [r[:3] for r in rows(lg)] == [(2, b"b", b"1"), (3, b"b", b"2"), (4, b"tail", b"t")]
        monkeypatch.setattr(asyncio, "to_thread", real)
        assert asyncio.run(lc.run_once([lg])).segments == 1
        assert lc.checkpoints == {("events", 0): 4}
        assert [r[:3] for r in rows(lg)] == [(3, b"b", b"2"), (4, b"tail", b"t")]
    finally:
        lg.close()


def test_a_checkpoint_past_the_log_end_is_reset_to_the_log_start(tmp_path: Path) -> None:
    """After a truncation below it (Kafka's cleanableOffsets: clean everything again)."""
    lg, _ = open_log(tmp_path / "events-0", COMPACT)
    try:
        write(lg, kv((b"a", b"1")), kv((b"a", b"2")))
        lg.roll()
        write(lg, kv((b"tail", b"t")))
        lc = LogCleaner(tmp_path)
        lc.checkpoints[("events", 0)] = 50
        assert asyncio.run(lc.run_once([lg])).segments == 1
        assert lc.checkpoints == {("events", 0): 2}
        assert [r[:3] for r in rows(lg)] == [(1, b"a", b"2"), (2, b"tail", b"t")]
    finally:
        lg.close()


def test_the_swap_keeps_the_file_age_and_fsyncs_the_directory(
    log: Log, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(log, kv((b"a", b"1")), kv((b"a", b"2")))
    log.roll()
    write(log, kv((b"tail", b"t")))
    seg = log.segments[0]
    os.utime(seg.path, (1_600_000_000, 1_600_000_000))
    recording = RecordingOs()
    monkeypatch.setattr(cleaner, "os", recording)
    clean_log(log, 0, NOW)
    assert recording.calls == ["fsync file", "replace", "fsync dir"]
    assert seg.path.stat().st_mtime == 1_600_000_000


# -- crashes during the swap ----------------------------------------------------------------------
def _tombstoned_log(lg: Log) -> None:
    """Three segments to clean (the second holds an expired tombstone for a key of the first,
    whose value must not come back) and an active one."""
    write(lg, kv((b"a", b"1")), kv((b"gone", b"g")), kv((b"b", b"1")))
    lg.roll()
    write(lg, kv((b"a", b"2")), kv((b"gone", None), ts=NOW), kv((b"c", b"1")))
    lg.roll()
    write(lg, kv((b"b", b"2")), kv((b"c", b"2")))
    lg.roll()
    write(lg, kv((b"d", b"1")))


class Crash(Exception):
    pass


def _crash_on(calls: int, *, after: bool) -> Callable[[Any, Any], None]:
    """os.replace that crashes at its ``calls``-th use (before or after renaming)."""
    seen = [0]

    def replace(src: Any, dst: Any) -> None:
        seen[0] += 1
        if seen[0] == calls and not after:
            raise Crash
        os.replace(src, dst)
        if seen[0] == calls:
            raise Crash

    return replace


class _Os:
    """The cleaner's ``os`` with a crashing ``replace``."""

    def __init__(self, replace: Callable[[Any, Any], None]) -> None:
        self.replace = replace

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)


CRASH_POINTS = {
    # every .cleaned file written and fsynced, nothing swapped (indexes of segment 1 removed)
    "before the first rename": (1, False),
    # segment 1 renamed over, its indexes not rebuilt yet
    "after the first rename": (1, True),
    # segment 1 swapped and re-indexed; segment 2 renamed, not re-indexed; segment 3 untouched
    "after the second rename": (2, True),
    # segments 1 and 2 done; segment 3's indexes removed, not renamed
    "before the third rename": (3, False),
}


@pytest.mark.parametrize("point", list(CRASH_POINTS))
def test_a_crash_during_the_swap_leaves_a_log_with_every_latest_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, point: str
) -> None:
    lg, _ = open_log(tmp_path / "events-0", COMPACT)
    _tombstoned_log(lg)
    before = view(lg)
    end = lg.log_end_offset
    assert b"gone" not in before
    calls, after = CRASH_POINTS[point]
    monkeypatch.setattr(cleaner, "os", _Os(_crash_on(calls, after=after)))
    with pytest.raises(Crash):
        clean_log(lg, 0, NOW + 2 * DAY)
    monkeypatch.setattr(cleaner, "os", os)
    crash(lg)
    again = reopen(lg)
    try:
        assert not list(again.dir.glob("*.cleaned"))
        assert view(again) == before  # nothing lost, nothing deleted comes back
        assert again.log_end_offset == end
        offs = [r[0] for r in rows(again)]
        assert offs == sorted(set(offs))
        for seg in again.segments:  # every index is consistent with its (old or new) file
            assert seg.index.path.exists() and seg.time_index.path.exists()
        # and a later pass finishes the job
        assert clean_log(again, 0, NOW + 2 * DAY) is not None
        assert view(again) == before
        assert [r[1] for r in rows(again)] == [b"a", b"b", b"c", b"d"]
    finally:
        again.close()


def test_a_crash_while_writing_the_cleaned_files_leaves_the_log_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lg, _ = open_log(tmp_path / "events-0", COMPACT)
    _tombstoned_log(lg)
    before = rows(lg)
    real = cleaner.filter_segment
    done = [0]

    def filter_then_die(
        seg: Any, latest: Any, now: int, retention: int, out: Path, stats: Any, **kw: Any
    ) -> None:
        if done[0] == 1:
            out.write_bytes(b"\x00" * 37)  # a torn, unsynced output
            raise Crash
        real(seg, latest, now, retention, out, stats, **kw)
        done[0] += 1

    monkeypatch.setattr(cleaner, "filter_segment", filter_then_die)
    with pytest.raises(Crash):
        clean_log(lg, 0, NOW + 2 * DAY)
    assert len(list(lg.dir.glob("*.cleaned"))) == 2
    crash(lg)
    again = reopen(lg)
    try:
        assert not list(again.dir.glob("*.cleaned"))
        assert rows(again) == before
    finally:
        again.close()


def test_a_completed_pass_survives_a_crash(tmp_path: Path) -> None:
    lg, _ = open_log(tmp_path / "events-0", COMPACT)
    _tombstoned_log(lg)
    clean_log(lg, 0, NOW + 2 * DAY)
    after = rows(lg)
    crash(lg)
    again = reopen(lg)
    try:
        assert rows(again) == after
        assert b"gone" not in view(again)
    finally:
        again.close()


# -- transactions ---------------------------------------------------------------------------
def _txn(lg: Log, pid: int, seq: int, *records: KV, ts: int = NOW) -> None:
    data = kv(*records, ts=ts, producer_id=pid, producer_epoch=0, base_sequence=seq, transactional=True)
    lg.append_as_leader(memoryview(bytearray(data)), ts, transactional=True)
    lg.high_watermark = lg.log_end_offset


def _end(lg: Log, pid: int, commit: bool, ts: int = NOW) -> None:
    from framework.protocol.control import EndTxnMarker

    lg.append_txn_marker(EndTxnMarker(pid, 0, commit, 0), ts)
    lg.high_watermark = lg.log_end_offset


def _markers(lg: Log) -> list[int]:
    return [h.base_offset for h in lg.iter_headers(lg.log_start_offset) if h.is_control]


def _data(lg: Log) -> dict[bytes, bytes]:
    """Latest value per key of the data records (markers left out)."""
    control = set(_markers(lg))
    return {k: v for o, k, v, _ in rows(lg) if o not in control and k is not None and v is not None}


def test_aborted_records_go_and_never_shadow_a_committed_value(tmp_path: Path) -> None:
    lg, _ = open_log(tmp_path / "events-0", COMPACT)
    write(lg, kv((b"a", b"a1"), (b"b", b"b1")))  # 0-1 plain
    _txn(lg, 7, 0, (b"a", b"a-aborted"), (b"c", b"c-aborted"))  # 2-3
    _end(lg, 7, commit=False)  # 4
    _txn(lg, 7, 2, (b"b", b"b-committed"))  # 5
    _end(lg, 7, commit=True)  # 6
    lg.roll()
    write(lg, kv((b"z", b"z")))
    assert clean_log(lg, 0, NOW + HOUR, force=True) is not None
    assert _data(lg) == {b"a": b"a1", b"b": b"b-committed", b"z": b"z"}
    assert _markers(lg) == [4, 6]  # younger than delete.retention.ms: kept
    lg.close()


def test_markers_go_after_delete_retention_once_their_data_is_gone(tmp_path: Path) -> None:
    lg, _ = open_log(tmp_path / "events-0", COMPACT)
    _txn(lg, 7, 0, (b"a", b"gone"))  # 0: aborted, removed by the pass
    _end(lg, 7, commit=False)  # 1
    _txn(lg, 7, 1, (b"b", b"kept"))  # 2: committed, survives
    _end(lg, 7, commit=True)  # 3
    lg.roll()
    write(lg, kv((b"z", b"z")))
    clean_log(lg, 0, NOW + 2 * DAY, force=True)
    assert _markers(lg) == [3]  # the abort's data is gone: its marker too; the commit's stays
    assert _data(lg) == {b"b": b"kept", b"z": b"z"}
    lg.close()


def test_an_open_transaction_is_never_cleaned(tmp_path: Path) -> None:
    lg, _ = open_log(tmp_path / "events-0", COMPACT)
    write(lg, kv((b"a", b"1")))
    lg.roll()
    _txn(lg, 7, 0, (b"a", b"open"))  # may still abort
    lg.roll()
    write(lg, kv((b"a", b"3")))
    lg.roll()
    write(lg, kv((b"z", b"z")))
    p = plan(lg, 0, NOW + HOUR, force=True)
    assert p is not None and p.dirty_end == 1  # stops at the first unstable offset
    lg.close()
