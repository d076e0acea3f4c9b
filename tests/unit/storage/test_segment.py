"""LogSegment: one .log file of whole batches plus its indexes; reads, recovery, truncation."""

from __future__ import annotations

import os
import resource
import signal
import struct
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.errors import KafkaStorageError
from framework.protocol import records as rb
from framework.storage import segment as segmod
from framework.storage.segment import LogSegment, segment_name
from tests.support.storage import NOW, flip_byte

BASE = 100


class Batch:
    def __init__(self, pos: int, data: bytes) -> None:
        self.pos = pos
        self.data = data
        self.h = rb.read_header(data)

    @property
    def end(self) -> int:
        return self.pos + len(self.data)


def add(seg: LogSegment, n: int = 1, *, ts: list[int] | None = None, size: int = 20) -> Batch:
    """Append a batch of ``n`` records at the segment's end (offsets assigned like the log)."""
    base = seg.next_offset
    stamps = ts or [NOW + base + i for i in range(n)]
    recs = [(b"k%d" % (base + i), (b"%d:" % (base + i)).ljust(size, b"x")) for i in range(n)]
    data = rb.build_batch(recs, base_offset=base, timestamps=stamps)
    b = Batch(seg.size, data)
    seg.append(memoryview(data), [b.h])
    return b


def filled(
    tmp_path: Path, counts: list[int], interval: int = 100, base: int = BASE
) -> tuple[LogSegment, list[Batch]]:
    seg = LogSegment.create(tmp_path, base, interval)
    return seg, [add(seg, n) for n in counts]


def reopen(seg: LogSegment) -> LogSegment:
    seg.close()
    again = LogSegment.open(seg.dir, seg.base_offset, seg.index_interval)
    return again


def decoded_offsets(data: bytes) -> list[int]:
    out = []
    for pos, h in rb.iter_batches(data):
        out.extend(r.offset for r in rb.decode_batch(memoryview(data)[pos : pos + h.size])[1])
    return out


# -- files and appends ----------------------------------------------------------------------
def test_create_makes_log_and_index_files_named_by_base_offset(tmp_path: Path) -> None:
    seg = LogSegment.create(tmp_path, 42)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [
        "00000000000000000042.index",
        "00000000000000000042.log",
        "00000000000000000042.timeindex",
        "00000000000000000042.txnindex",
    ]
    assert segment_name(42, ".log") == "00000000000000000042.log"
    assert (seg.size, seg.next_offset, seg.max_timestamp) == (0, 42, -1)
    seg.close()


def test_create_refuses_to_overwrite_an_existing_segment(tmp_path: Path) -> None:
    seg, _ = filled(tmp_path, [3])
    with pytest.raises(FileExistsError):
        LogSegment.create(tmp_path, BASE)
    seg.close()
    assert LogSegment.open(tmp_path, BASE).size > 0  # the data is still there


def test_appended_bytes_are_stored_exactly(tmp_path: Path) -> None:
    seg, batches = filled(tmp_path, [1, 3, 2])
    assert seg.path.read_bytes() == b"".join(b.data for b in batches)
    assert seg.size == batches[-1].end
    assert seg.next_offset == BASE + 6


def test_max_timestamp_tracks_the_largest_batch_timestamp(tmp_path: Path) -> None:
    seg = LogSegment.create(tmp_path, 0)
    add(seg, 2, ts=[500, 900])  # offsets 0-1
    add(seg, 1, ts=[700])  # offset 2
    add(seg, 2, ts=[900, 800])  # 3-4: ties do not move it
    assert seg.max_timestamp == 900
    assert seg.offset_of_max_timestamp == 1  # last offset of the batch that carried it


def test_index_entries_point_at_batch_starts_every_interval_bytes(tmp_path: Path) -> None:
    seg, batches = filled(tmp_path, [1] * 40, interval=150)
    starts = {b.pos: b.h.base_offset for b in batches}
    assert len(seg.index) > 3
    prev = None
    for rel, pos in zip(seg.index.offsets, seg.index.positions, strict=True):
        assert starts[pos] == BASE + rel  # an entry names the batch that starts there
        if prev is not None:
            assert pos - prev > 150  # sparse: at most one per interval
        prev = pos
    # every look-up lands at most one interval (plus a batch) before the wanted batch
    biggest = max(len(b.data) for b in batches)
    for b in batches:
        _, pos = seg.index.lookup(b.h.base_offset)
        assert 0 <= b.pos - pos <= 150 + biggest


# -- position_of and read -------------------------------------------------------------------
def test_position_of_every_offset_is_its_batch_start(tmp_path: Path) -> None:
    seg, batches = filled(tmp_path, [1, 4, 2, 5, 1, 3] * 3)
    for b in batches:
        for off in range(b.h.base_offset, b.h.next_offset):
            assert seg.position_of(off) == b.pos
    assert seg.position_of(0) == 0  # below the base: the first batch
    assert seg.position_of(seg.next_offset) == seg.size
    assert seg.position_of(seg.next_offset + 1000) == seg.size


def test_read_from_a_mid_batch_offset_starts_at_that_batch(tmp_path: Path) -> None:
    seg, batches = filled(tmp_path, [3, 3, 3])
    data = seg.read(BASE + 4, 10**6, seg.size, min_one=True)
    assert data == batches[1].data + batches[2].data
    assert decoded_offsets(data) == list(range(BASE + 3, BASE + 9))


def test_read_slices_at_max_bytes_without_min_one(tmp_path: Path) -> None:
    seg, batches = filled(tmp_path, [2, 2])
    data = seg.read(BASE, 30, seg.size, min_one=False)
    assert data == batches[0].data[:30]  # a partial batch, dropped by clients
    assert decoded_offsets(data) == []


def test_read_with_min_one_returns_the_whole_first_batch_above_max_bytes(tmp_path: Path) -> None:
    """KIP-74: a consumer with a small fetch size must still make progress."""
    seg, batches = filled(tmp_path, [5, 1])
    data = seg.read(BASE, 10, seg.size, min_one=True)
    assert data == batches[0].data
    assert decoded_offsets(data) == list(range(BASE, BASE + 5))


def test_read_never_returns_bytes_at_or_past_max_position(tmp_path: Path) -> None:
    seg, batches = filled(tmp_path, [1, 1, 1, 1])
    limit = batches[2].pos  # e.g. the high watermark's batch
    assert seg.read(BASE, 10**6, limit, min_one=True) == batches[0].data + batches[1].data
    assert seg.read(BASE + 2, 10**6, limit, min_one=True) == b""
    assert seg.read(BASE + 2, 1, limit, min_one=True) == b""


def test_read_at_or_past_the_end_is_empty(tmp_path: Path) -> None:
    seg, _ = filled(tmp_path, [2])
    assert seg.read(seg.next_offset, 10**6, seg.size, min_one=True) == b""
    assert LogSegment.create(tmp_path, 9999).read(9999, 100, 10**9, True) == b""


@settings(max_examples=40, deadline=None)
@given(
    counts=st.lists(st.integers(1, 6), min_size=1, max_size=25),
    window=st.integers(rb.LOG_OVERHEAD, 400),
)
def test_position_of_is_exact_whatever_the_scan_window(
    tmp_path_factory: pytest.TempPathFactory, counts: list[int], window: int
) -> None:
    """Batches straddling the scan window (and headers cut by it) are still found."""
    seg, batches = filled(tmp_path_factory.mktemp("seg"), counts, interval=10**6)
    saved = segmod.SCAN_WINDOW
    segmod.SCAN_WINDOW = window
    try:
        for b in batches:
            assert seg.position_of(b.h.base_offset) == b.pos
            assert seg.position_of(b.h.last_offset) == b.pos
        assert seg.position_of(seg.next_offset) == seg.size
    finally:
        segmod.SCAN_WINDOW = saved
        seg.close()


def test_iter_headers_starts_at_the_batch_holding_the_offset(tmp_path: Path) -> None:
    seg, batches = filled(tmp_path, [2, 3, 1, 4])
    assert list(seg.iter_headers(BASE)) == [b.h for b in batches]
    assert [h.base_offset for h in seg.iter_headers(BASE + 3)] == [BASE + 2, BASE + 5, BASE + 6]
    assert list(seg.iter_headers(seg.next_offset)) == []


# -- timestamps -----------------------------------------------------------------------------
def test_find_offset_by_timestamp_returns_first_record_at_or_after_target(tmp_path: Path) -> None:
    seg = LogSegment.create(tmp_path, 0, 60)
    add(seg, 3, ts=[1000, 3000, 2000])  # 0-2
    add(seg, 2, ts=[2500, 2600])  # 3-4
    add(seg, 2, ts=[5000, 4000])  # 5-6
    assert seg.find_offset_by_timestamp(0, 0) == (0, 1000)
    assert seg.find_offset_by_timestamp(1001, 0) == (1, 3000)  # first in offset order
    assert seg.find_offset_by_timestamp(2000, 0) == (1, 3000)
    assert seg.find_offset_by_timestamp(3001, 0) == (5, 5000)
    assert seg.find_offset_by_timestamp(4500, 0) == (5, 5000)
    assert seg.find_offset_by_timestamp(5001, 0) is None
    # records below the log start offset are invisible
    assert seg.find_offset_by_timestamp(1001, 2) == (2, 2000)
    assert seg.find_offset_by_timestamp(2001, 2) == (3, 2500)
    assert seg.find_offset_by_timestamp(1001, 4) == (4, 2600)


@settings(max_examples=40, deadline=None)
@given(
    stamps=st.lists(st.lists(st.integers(0, 1000), min_size=1, max_size=4), min_size=1, max_size=20),
    target=st.integers(0, 1001),
    start=st.integers(0, 80),
    reopen_first=st.booleans(),
)
def test_find_offset_by_timestamp_matches_a_linear_scan(
    tmp_path_factory: pytest.TempPathFactory,
    stamps: list[list[int]],
    target: int,
    start: int,
    reopen_first: bool,
) -> None:
    seg = LogSegment.create(tmp_path_factory.mktemp("seg"), 0, 60)
    flat: list[int] = []
    for ts in stamps:
        add(seg, len(ts), ts=ts)
        flat.extend(ts)
    if reopen_first:
        seg = reopen(seg)
        assert seg.load_indexes()
    expected = next(((o, t) for o, t in enumerate(flat) if t >= target and o >= start), None)
    assert seg.find_offset_by_timestamp(target, start) == expected
    seg.close()


# -- close, open, load_indexes --------------------------------------------------------------
def test_clean_reopen_loads_indexes_without_recovery(tmp_path: Path) -> None:
    seg, batches = filled(tmp_path, [1, 2, 3] * 10)
    before = (
        seg.next_offset,
        seg.size,
        seg.max_timestamp,
        seg.offset_of_max_timestamp,
        len(seg.index),
    )
    again = reopen(seg)
    assert again.load_indexes()
    assert (
        again.next_offset,
        again.size,
        again.max_timestamp,
        again.offset_of_max_timestamp,
        len(again.index),
    ) == before
    for b in batches:
        assert again.position_of(b.h.base_offset) == b.pos
    assert again.read(BASE, 10**6, again.size, True) == b"".join(b.data for b in batches)
    # appends continue where they stopped
    b = add(again, 2)
    assert b.h.base_offset == before[0] and b.pos == before[1]


def test_reopen_of_an_empty_segment(tmp_path: Path) -> None:
    seg = LogSegment.create(tmp_path, 7)
    again = reopen(seg)
    assert again.load_indexes()
    assert (again.next_offset, again.size, again.max_timestamp) == (7, 0, -1)


def _damage(seg: LogSegment, how: str, batches: list[Batch]) -> None:
    if how == "no index":
        seg.index.path.unlink()
    elif how == "no timeindex":
        seg.time_index.path.unlink()
    elif how == "partial index entry":
        with open(seg.index.path, "ab") as fh:
            fh.write(b"\x00\x00\x00")
    elif how == "index past log end":
        with open(seg.index.path, "ab") as fh:
            fh.write(struct.pack(">ii", 10**6, seg.size + 10))
    elif how == "index offset disagrees with its batch":
        # the last entry still points at a real batch start, but names a later offset
        raw = bytearray(seg.index.path.read_bytes())
        rel, pos = struct.unpack_from(">ii", raw, len(raw) - 8)
        struct.pack_into(">ii", raw, len(raw) - 8, rel + 20, pos)
        seg.index.path.write_bytes(bytes(raw))
    elif how == "timeindex past log end":
        with open(seg.time_index.path, "ab") as fh:
            fh.write(struct.pack(">qi", 10**15, seg.next_offset - BASE + 5))
    elif how == "torn tail":
        os.truncate(seg.path, seg.size - 7)
    elif how == "garbage tail":
        with open(seg.path, "ab") as fh:
            fh.write(b"\xde\xad\xbe\xef" * 30)
    elif how == "short garbage tail":
        with open(seg.path, "ab") as fh:
            fh.write(b"\x01\x02\x03")
    else:  # pragma: no cover
        raise AssertionError(how)


DAMAGE = [
    "no index",
    "no timeindex",
    "partial index entry",
    "index past log end",
    "index offset disagrees with its batch",
    "timeindex past log end",
    "torn tail",
    "garbage tail",
    "short garbage tail",
]


@pytest.mark.parametrize("how", DAMAGE)
def test_load_indexes_refuses_damaged_segments_and_recover_repairs_them(tmp_path: Path, how: str) -> None:
    seg, batches = filled(tmp_path, [1, 2, 1] * 10)
    next_offset, size = seg.next_offset, seg.size
    seg.close()
    _damage(seg, how, batches)
    again = LogSegment.open(tmp_path, BASE, 100)
    assert not again.load_indexes()
    cut = again.recover()
    if how == "torn tail":
        survivors = batches[:-1]  # the torn batch is cut off, everything before it stays
        assert cut == size - 7 - batches[-1].pos
    elif how in ("garbage tail", "short garbage tail"):
        survivors = batches
        assert cut == (120 if how == "garbage tail" else 3)
    else:
        survivors = batches
        assert cut == 0
    assert again.size == survivors[-1].end == again.path.stat().st_size
    assert again.next_offset == survivors[-1].h.next_offset
    assert again.read(BASE, 10**6, again.size, True) == b"".join(b.data for b in survivors)
    # the rebuilt indexes are on disk and pass their checks on the next open
    again.close()
    third = LogSegment.open(tmp_path, BASE, 100)
    assert third.load_indexes()
    assert third.next_offset == (next_offset if how != "torn tail" else batches[-1].h.base_offset)
    for b in survivors:
        assert third.position_of(b.h.base_offset) == b.pos


def test_recover_stops_at_a_batch_with_a_bad_crc(tmp_path: Path) -> None:
    seg, batches = filled(tmp_path, [1] * 10)
    seg.close()
    flip_byte(seg.path, batches[6].pos + rb.HEADER_SIZE + 2)  # inside a record
    again = LogSegment.open(tmp_path, BASE)
    cut = again.recover()
    assert cut == batches[-1].end - batches[6].pos
    assert again.next_offset == batches[6].h.base_offset
    assert decoded_offsets(again.read(BASE, 10**6, again.size, True)) == list(range(BASE, BASE + 6))


def test_recover_stops_where_offsets_go_backwards(tmp_path: Path) -> None:
    seg, _batches = filled(tmp_path, [2, 2])
    stale = rb.build_batch([(b"k", b"old")], base_offset=BASE + 1, timestamp_ms=NOW)
    seg.append(memoryview(stale), [rb.read_header(stale)])
    seg.close()
    again = LogSegment.open(tmp_path, BASE)
    assert again.recover() == len(stale)
    assert again.next_offset == BASE + 4


def test_recover_stops_at_a_header_with_an_impossible_length(tmp_path: Path) -> None:
    seg, batches = filled(tmp_path, [1, 1, 1])
    seg.close()
    data = bytearray(seg.path.read_bytes())
    struct.pack_into(">i", data, batches[1].pos + 8, 10)  # batch_length below the minimum
    seg.path.write_bytes(bytes(data))
    again = LogSegment.open(tmp_path, BASE)
    again.recover()
    assert again.size == batches[1].pos
    assert again.next_offset == BASE + 1


@settings(max_examples=50, deadline=None)
@given(
    counts=st.lists(st.integers(1, 5), min_size=1, max_size=20),
    cut_fraction=st.floats(0, 1),
    window=st.integers(rb.HEADER_SIZE, 500),  # the real window is 4 MiB
    garbage=st.binary(max_size=120),
)
def test_recover_keeps_exactly_the_whole_batches_before_the_damage(
    tmp_path_factory: pytest.TempPathFactory,
    counts: list[int],
    cut_fraction: float,
    window: int,
    garbage: bytes,
) -> None:
    """Random truncation point, random trailing garbage, any read window: every batch that
    ends before the damage survives byte for byte, nothing after it does."""
    d = tmp_path_factory.mktemp("seg")
    seg, batches = filled(d, counts)
    seg.close()
    cut = int(seg.size * cut_fraction)
    os.truncate(seg.path, cut)
    with open(seg.path, "ab") as fh:
        fh.write(garbage)
    whole = [b for b in batches if b.end <= cut]
    saved = segmod.RECOVER_WINDOW
    segmod.RECOVER_WINDOW = window
    try:
        again = LogSegment.open(d, BASE)
        again.recover()
    finally:
        segmod.RECOVER_WINDOW = saved
    # (random garbage carrying a valid CRC-32C and in-order offsets is not a realistic worry)
    assert again.path.read_bytes() == b"".join(b.data for b in whole)
    assert again.size == (whole[-1].end if whole else 0)
    assert again.next_offset == (whole[-1].h.next_offset if whole else BASE)
    again.close()


# -- truncate_to ----------------------------------------------------------------------------
def test_truncate_to_a_batch_boundary(tmp_path: Path) -> None:
    seg, batches = filled(tmp_path, [2] * 20)
    cut_at = batches[12]
    removed = seg.truncate_to(cut_at.h.base_offset)
    assert removed == batches[-1].end - cut_at.pos
    assert seg.size == cut_at.pos == seg.path.stat().st_size
    assert seg.next_offset == cut_at.h.base_offset
    assert all(BASE + rel < cut_at.h.base_offset for rel in seg.index.offsets)
    assert all(pos < seg.size for pos in seg.index.positions)
    nxt = add(seg, 1)
    assert nxt.h.base_offset == cut_at.h.base_offset and nxt.pos == cut_at.pos


def test_truncate_to_mid_batch_removes_the_whole_batch_holding_the_offset(tmp_path: Path) -> None:
    seg, _batches = filled(tmp_path, [3, 3, 3])
    seg.truncate_to(BASE + 4)
    # no offset >= the truncation point may remain
    assert decoded_offsets(seg.read(BASE, 10**6, seg.size, True)) == [BASE, BASE + 1, BASE + 2]
    assert seg.next_offset == BASE + 3


def test_truncate_to_the_base_empties_the_segment_and_its_indexes_on_disk(tmp_path: Path) -> None:
    seg, _ = filled(tmp_path, [1] * 30)
    assert len(seg.index) > 0
    seg.flush()
    seg.truncate_to(BASE)
    assert (seg.size, seg.next_offset, len(seg.index), len(seg.time_index)) == (0, BASE, 0, 0)
    add(seg, 1)  # too small for a new index entry
    seg.close()
    again = LogSegment.open(tmp_path, BASE, 100)
    assert again.load_indexes()  # no stale entries from before the truncation
    assert len(again.index) == 0
    assert again.next_offset == BASE + 1


def test_truncate_to_past_the_end_is_a_no_op(tmp_path: Path) -> None:
    seg, batches = filled(tmp_path, [2])
    assert seg.truncate_to(seg.next_offset) == 0
    assert seg.size == batches[-1].end


# -- failures and deletion ------------------------------------------------------------------
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_FSIZE behaviour is Linux's")
def test_failed_write_leaves_no_partial_batch(tmp_path: Path) -> None:
    seg, _batches = filled(tmp_path, [1, 1])
    before = seg.size
    big = rb.build_batch([(b"k", b"x" * 5000)], base_offset=seg.next_offset, timestamp_ms=NOW)
    old_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (before + 1000, hard))
    try:
        with pytest.raises(KafkaStorageError, match="cannot write"):
            seg.append(memoryview(big), [rb.read_header(big)])
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, old_handler)
    assert seg.size == before == seg.path.stat().st_size
    assert seg.next_offset == BASE + 2
    b = add(seg, 1)  # the segment is still usable
    assert b.h.base_offset == BASE + 2
    seg.close()
    again = LogSegment.open(tmp_path, BASE)
    assert again.recover() == 0


def test_delete_removes_all_three_files(tmp_path: Path) -> None:
    seg, _ = filled(tmp_path, [1, 1])
    seg.delete()
    assert list(tmp_path.iterdir()) == []
    seg.delete()  # twice is harmless
