"""OffsetIndex: the sparse offset → position map of one segment, in memory and on disk."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.storage.offset_index import ENTRY_SIZE, CorruptIndex, OffsetIndex

BASE = 1000


def make(tmp_path: Path, entries: list[tuple[int, int]] = (), base: int = BASE) -> OffsetIndex:
    idx = OffsetIndex(tmp_path / f"{base:020d}.index", base)
    for off, pos in entries:
        idx.append(off, pos)
    return idx


def reload(idx: OffsetIndex) -> OffsetIndex:
    fresh = OffsetIndex(idx.path, idx.base_offset)
    fresh.load()
    return fresh


def entries(idx: OffsetIndex) -> list[tuple[int, int]]:
    return [(idx.base_offset + o, p) for o, p in zip(idx.offsets, idx.positions, strict=True)]


def test_file_format_is_big_endian_relative_offset_then_position(tmp_path: Path) -> None:
    idx = make(tmp_path, [(BASE + 5, 4096), (BASE + 70000, 2_000_000)])
    idx.flush()
    assert idx.path.read_bytes() == struct.pack(">ii", 5, 4096) + struct.pack(">ii", 70000, 2_000_000)


def test_flush_then_load_round_trips(tmp_path: Path) -> None:
    idx = make(tmp_path, [(BASE + 3, 120), (BASE + 9, 480), (BASE + 20, 1500)])
    idx.flush()
    assert entries(reload(idx)) == [(BASE + 3, 120), (BASE + 9, 480), (BASE + 20, 1500)]


def test_empty_index_flushes_an_empty_file(tmp_path: Path) -> None:
    idx = make(tmp_path)
    idx.flush()
    assert idx.path.exists() and idx.path.stat().st_size == 0
    assert len(reload(idx)) == 0


def test_incremental_flush_appends_only_new_entries(tmp_path: Path) -> None:
    idx = make(tmp_path, [(BASE + 1, 100)])
    idx.flush()
    idx.append(BASE + 2, 200)
    idx.append(BASE + 3, 300)
    idx.flush()
    assert idx.path.stat().st_size == 3 * ENTRY_SIZE
    assert entries(reload(idx)) == [(BASE + 1, 100), (BASE + 2, 200), (BASE + 3, 300)]


def test_flush_recreates_a_deleted_file(tmp_path: Path) -> None:
    idx = make(tmp_path, [(BASE + 1, 100)])
    idx.flush()
    idx.path.unlink()
    idx.append(BASE + 2, 200)
    idx.flush()
    # the whole index is written again, not a zero-filled hole followed by the new entry
    assert entries(reload(idx)) == [(BASE + 1, 100), (BASE + 2, 200)]


def test_lookup_returns_last_entry_at_or_before_offset(tmp_path: Path) -> None:
    idx = make(tmp_path, [(BASE + 10, 500), (BASE + 20, 900), (BASE + 30, 1400)])
    assert idx.lookup(BASE) == (BASE, 0)  # before the first entry: scan from the start
    assert idx.lookup(BASE + 9) == (BASE, 0)
    assert idx.lookup(BASE + 10) == (BASE + 10, 500)
    assert idx.lookup(BASE + 19) == (BASE + 10, 500)
    assert idx.lookup(BASE + 25) == (BASE + 20, 900)
    assert idx.lookup(BASE + 10**6) == (BASE + 30, 1400)


def test_lookup_on_empty_index_scans_from_segment_start(tmp_path: Path) -> None:
    idx = make(tmp_path)
    assert idx.lookup(BASE + 123) == (BASE, 0)
    assert idx.last_entry() == (BASE, 0)


def test_append_never_breaks_monotonicity(tmp_path: Path) -> None:
    idx = make(tmp_path, [(BASE + 10, 500)])
    idx.append(BASE + 10, 600)  # same offset
    idx.append(BASE + 5, 700)  # offset goes back
    idx.append(BASE + 11, 500)  # same position
    idx.append(BASE + 12, 400)  # position goes back
    assert entries(idx) == [(BASE + 10, 500)]
    idx.sanity_check(1000)


def test_truncate_to_drops_entries_at_and_after_offset_on_disk_too(tmp_path: Path) -> None:
    idx = make(tmp_path, [(BASE + 10, 500), (BASE + 20, 900), (BASE + 30, 1400)])
    idx.flush()
    idx.truncate_to(BASE + 20)
    assert entries(idx) == [(BASE + 10, 500)]
    idx.flush()
    assert idx.path.stat().st_size == ENTRY_SIZE
    assert entries(reload(idx)) == [(BASE + 10, 500)]
    # appends continue after the truncation point
    idx.append(BASE + 15, 700)
    idx.flush()
    assert entries(reload(idx)) == [(BASE + 10, 500), (BASE + 15, 700)]


def test_truncate_to_past_the_end_changes_nothing(tmp_path: Path) -> None:
    idx = make(tmp_path, [(BASE + 10, 500)])
    idx.flush()
    idx.truncate_to(BASE + 11)
    assert entries(idx) == [(BASE + 10, 500)]


def test_reset_empties_memory_and_file(tmp_path: Path) -> None:
    idx = make(tmp_path, [(BASE + 10, 500), (BASE + 20, 900)])
    idx.flush()
    idx.reset()
    idx.flush()
    assert idx.path.stat().st_size == 0
    assert len(reload(idx)) == 0


def test_load_of_missing_file_is_corrupt(tmp_path: Path) -> None:
    with pytest.raises(CorruptIndex, match="missing"):
        make(tmp_path).load()


@pytest.mark.parametrize("size", [1, 7, 9, 15])
def test_load_of_partial_entry_is_corrupt(tmp_path: Path, size: int) -> None:
    idx = make(tmp_path)
    idx.path.write_bytes(b"\x00" * size)
    with pytest.raises(CorruptIndex, match="multiple of 8"):
        idx.load()


def _raw(tmp_path: Path, pairs: list[tuple[int, int]]) -> OffsetIndex:
    idx = make(tmp_path)
    idx.path.write_bytes(b"".join(struct.pack(">ii", o, p) for o, p in pairs))
    idx.load()
    return idx


@pytest.mark.parametrize(
    ("pairs", "log_size", "why"),
    [
        ([(5, 100), (5, 200)], 1000, "not increasing"),
        ([(5, 100), (6, 100)], 1000, "not increasing"),
        ([(5, 100), (4, 200)], 1000, "not increasing"),
        ([(-1, 100)], 1000, "negative"),
        ([(1, -100)], 1000, "negative"),
        ([(5, 100), (6, 1000)], 1000, "past the log end"),
        ([(5, 0)], 0, "past the log end"),
    ],
)
def test_sanity_check_detects_broken_invariants(
    tmp_path: Path, pairs: list[tuple[int, int]], log_size: int, why: str
) -> None:
    with pytest.raises(CorruptIndex, match=why):
        _raw(tmp_path, pairs).sanity_check(log_size)


def test_sanity_check_accepts_a_valid_index(tmp_path: Path) -> None:
    _raw(tmp_path, [(1, 100), (4, 300), (9, 999)]).sanity_check(1000)
    _raw(tmp_path, []).sanity_check(0)


@st.composite
def index_entries(draw: st.DrawFn) -> list[tuple[int, int]]:
    n = draw(st.integers(0, 40))
    offs = sorted(set(draw(st.lists(st.integers(0, 10**6), min_size=n, max_size=n))))
    poss = sorted(set(draw(st.lists(st.integers(0, 10**8), min_size=len(offs), max_size=len(offs)))))
    k = min(len(offs), len(poss))
    return [(BASE + o, p) for o, p in zip(offs[:k], poss[:k], strict=True)]


@settings(max_examples=60, deadline=None)
@given(
    ents=index_entries(),
    probes=st.lists(st.integers(0, 10**6 + 10), max_size=20),
    cut=st.integers(0, 10**6 + 10),
)
def test_lookup_and_truncate_match_a_reference_model(
    tmp_path_factory: pytest.TempPathFactory,
    ents: list[tuple[int, int]],
    probes: list[int],
    cut: int,
) -> None:
    idx = make(tmp_path_factory.mktemp("idx"), ents)
    idx.flush()
    idx = reload(idx)
    assert entries(idx) == ents
    for p in probes:
        before = [e for e in ents if e[0] <= BASE + p]
        assert idx.lookup(BASE + p) == (before[-1] if before else (BASE, 0))
    idx.truncate_to(BASE + cut)
    kept = [e for e in ents if e[0] < BASE + cut]
    assert entries(idx) == kept
    idx.flush()
    assert entries(reload(idx)) == kept
