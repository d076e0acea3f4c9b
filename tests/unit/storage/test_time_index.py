"""TimeIndex: the sparse timestamp → offset map of one segment, in memory and on disk."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.storage.offset_index import CorruptIndex
from framework.storage.time_index import ENTRY_SIZE, TimeIndex

BASE = 500


def make(tmp_path: Path, pairs: list[tuple[int, int]] = (), base: int = BASE) -> TimeIndex:
    idx = TimeIndex(tmp_path / f"{base:020d}.timeindex", base)
    for ts, off in pairs:
        assert idx.maybe_append(ts, off)
    return idx


def reload(idx: TimeIndex) -> TimeIndex:
    fresh = TimeIndex(idx.path, idx.base_offset)
    fresh.load()
    return fresh


def entries(idx: TimeIndex) -> list[tuple[int, int]]:
    return list(zip(idx.timestamps, idx.offsets, strict=True))


def test_file_format_is_int64_timestamp_then_int32_relative_offset(tmp_path: Path) -> None:
    idx = make(tmp_path, [(1_700_000_000_000, BASE + 7)])
    idx.flush()
    assert idx.path.read_bytes() == struct.pack(">qi", 1_700_000_000_000, 7)


def test_flush_and_load_round_trip(tmp_path: Path) -> None:
    idx = make(tmp_path, [(100, BASE), (200, BASE + 4), (300, BASE + 9)])
    idx.flush()
    again = reload(idx)
    assert entries(again) == [(100, BASE), (200, BASE + 4), (300, BASE + 9)]
    assert again.max_timestamp == 300


def test_empty_index_has_no_max_timestamp(tmp_path: Path) -> None:
    idx = make(tmp_path)
    assert idx.max_timestamp == -1
    assert idx.lookup(12345) == BASE


def test_maybe_append_keeps_only_increasing_timestamps(tmp_path: Path) -> None:
    idx = make(tmp_path, [(100, BASE + 1)])
    assert not idx.maybe_append(-1, BASE + 2)  # no timestamp
    assert not idx.maybe_append(100, BASE + 3)  # not larger
    assert not idx.maybe_append(50, BASE + 3)  # older
    assert not idx.maybe_append(150, BASE)  # offset goes back
    assert idx.maybe_append(150, BASE + 5)
    assert entries(idx) == [(100, BASE + 1), (150, BASE + 5)]


def test_larger_timestamp_for_the_same_offset_replaces_the_entry_on_disk_too(
    tmp_path: Path,
) -> None:
    idx = make(tmp_path, [(100, BASE + 1), (200, BASE + 3)])
    idx.flush()
    assert idx.maybe_append(250, BASE + 3)
    assert entries(idx) == [(100, BASE + 1), (250, BASE + 3)]
    idx.flush()
    assert entries(reload(idx)) == [(100, BASE + 1), (250, BASE + 3)]
    assert idx.path.stat().st_size == 2 * ENTRY_SIZE


def test_lookup_returns_offset_of_last_entry_strictly_before_timestamp(tmp_path: Path) -> None:
    idx = make(tmp_path, [(100, BASE + 2), (200, BASE + 5), (300, BASE + 9)])
    assert idx.lookup(50) == BASE
    assert idx.lookup(100) == BASE  # records at 100 may be at or before offset BASE+2
    assert idx.lookup(101) == BASE + 2
    assert idx.lookup(200) == BASE + 2
    assert idx.lookup(299) == BASE + 5
    assert idx.lookup(10**12) == BASE + 9


def test_truncate_to_drops_entries_at_and_after_offset(tmp_path: Path) -> None:
    idx = make(tmp_path, [(100, BASE + 2), (200, BASE + 5), (300, BASE + 9)])
    idx.flush()
    idx.truncate_to(BASE + 5)
    assert entries(idx) == [(100, BASE + 2)]
    assert idx.max_timestamp == 100
    idx.flush()
    assert entries(reload(idx)) == [(100, BASE + 2)]


def test_truncate_everything_and_reset_leave_an_empty_file(tmp_path: Path) -> None:
    idx = make(tmp_path, [(100, BASE + 2), (200, BASE + 5)])
    idx.flush()
    idx.truncate_to(BASE)
    idx.flush()
    assert idx.path.stat().st_size == 0
    idx.maybe_append(100, BASE + 1)
    idx.flush()
    idx.reset()
    idx.flush()
    assert idx.path.stat().st_size == 0
    assert len(reload(idx)) == 0


def test_flush_recreates_a_deleted_file_whole(tmp_path: Path) -> None:
    idx = make(tmp_path, [(100, BASE + 2)])
    idx.flush()
    idx.path.unlink()
    idx.maybe_append(200, BASE + 4)
    idx.flush()
    assert entries(reload(idx)) == [(100, BASE + 2), (200, BASE + 4)]


def test_load_of_missing_or_partial_file_is_corrupt(tmp_path: Path) -> None:
    idx = make(tmp_path)
    with pytest.raises(CorruptIndex, match="missing"):
        idx.load()
    idx.path.write_bytes(b"\x00" * 13)
    with pytest.raises(CorruptIndex, match="multiple of 12"):
        idx.load()


def _raw(tmp_path: Path, pairs: list[tuple[int, int]]) -> TimeIndex:
    idx = make(tmp_path)
    idx.path.write_bytes(b"".join(struct.pack(">qi", t, o) for t, o in pairs))
    idx.load()
    return idx


@pytest.mark.parametrize(
    ("pairs", "next_offset", "why"),
    [
        ([(100, 1), (100, 2)], BASE + 10, "not increasing"),
        ([(100, 3), (200, 2)], BASE + 10, "not increasing"),
        ([(100, -1)], BASE + 10, "outside"),
        ([(100, 1), (200, 10)], BASE + 10, "outside"),  # offset at the log end
        ([(100, 1)], BASE, "outside"),
    ],
)
def test_sanity_check_detects_broken_invariants(
    tmp_path: Path, pairs: list[tuple[int, int]], next_offset: int, why: str
) -> None:
    with pytest.raises(CorruptIndex, match=why):
        _raw(tmp_path, pairs).sanity_check(next_offset)


def test_sanity_check_accepts_valid_entries(tmp_path: Path) -> None:
    _raw(tmp_path, [(100, 0), (200, 4), (300, 9)]).sanity_check(BASE + 10)
    _raw(tmp_path, []).sanity_check(BASE)


@st.composite
def timestamped_records(draw: st.DrawFn) -> list[int]:
    """Timestamps of consecutive records (offsets BASE, BASE+1, ...), in any order."""
    return draw(st.lists(st.integers(0, 10_000), min_size=1, max_size=60))


@settings(max_examples=80, deadline=None)
@given(ts=timestamped_records(), data=st.data())
def test_lookup_never_skips_a_matching_record(
    tmp_path_factory: pytest.TempPathFactory, ts: list[int], data: st.DataObject
) -> None:
    """Built like a segment builds it (running max at random index points), a look-up for T
    never returns an offset after the first record with timestamp >= T."""
    idx = TimeIndex(tmp_path_factory.mktemp("ti") / "x.timeindex", BASE)
    points = data.draw(st.sets(st.integers(0, len(ts) - 1)))
    running, at = -1, BASE
    for i, t in enumerate(ts):
        if t > running:
            running, at = t, BASE + i
        if i in points:
            idx.maybe_append(running, at)
    idx.maybe_append(running, at)  # the final entry written at roll/close
    assert idx.max_timestamp == max(ts)
    idx.flush()
    idx = reload(idx)
    idx.sanity_check(BASE + len(ts))
    for target in data.draw(st.lists(st.integers(0, 10_001), max_size=15)):
        first = next((BASE + i for i, t in enumerate(ts) if t >= target), None)
        start = idx.lookup(target)
        if first is not None:
            assert start <= first
