"""LeaderEpochCache: Kafka's LeaderEpochFileCache semantics (cases from Kafka's
LeaderEpochFileCacheTest), the ``leader-epoch-checkpoint`` file format, and damaged files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from framework.storage.leader_epoch import (
    CHECKPOINT_FILE,
    DamagedCheckpoint,
    EpochEntry,
    LeaderEpochCache,
    parse_checkpoint,
)

Op = tuple[object, ...]
Query = tuple[int, int, tuple[int, int]]  # requested epoch, log end offset, expected answer


def run(cache: LeaderEpochCache, ops: list[Op]) -> None:
    for op in ops:
        name, *args = op
        if name == "assign":
            cache.assign(*args)  # type: ignore[arg-type]
        elif name == "end":
            cache.truncate_from_end(*args)  # type: ignore[arg-type]
        elif name == "start":
            cache.truncate_from_start(*args)  # type: ignore[arg-type]
        elif name == "clear":
            cache.clear()
        else:
            raise AssertionError(name)


@pytest.fixture
def cache(tmp_path: Path) -> LeaderEpochCache:
    return LeaderEpochCache(tmp_path, "t-0")


def A(epoch: int, start: int) -> Op:
    return ("assign", epoch, start)


# (case, operations, entries afterwards, end_offset_for queries)
CASES: list[tuple[str, list[Op], list[tuple[int, int]], list[Query]]] = [
    ("empty", [], [], [(0, 0, (-1, -1)), (7, 0, (-1, -1)), (-1, 73, (-1, -1))]),
    ("first assign", [A(2, 10)], [(2, 10)], [(2, 11, (2, 11))]),
    ("latest epoch answers the log end", [A(2, 11), A(2, 12)], [(2, 11)], [(2, 14, (2, 14))]),
    ("undefined epoch requested", [A(2, 11), A(3, 12)], [(2, 11), (3, 12)], [(-1, 0, (-1, -1))]),
    ("same epoch at a later offset is a no-op", [A(2, 9), A(2, 10)], [(2, 9)], []),
    ("new epoch at the same start replaces", [A(2, 9), A(3, 9)], [(3, 9)], []),
    ("negative epoch is ignored", [A(2, 9), A(-1, 20)], [(2, 9)], []),
    (
        "requested below the first epoch: first start (Kafka)",
        [A(5, 11), A(6, 12), A(7, 13)],
        [(5, 11), (6, 12), (7, 13)],
        [(4, 0, (4, 11))],
    ),
    (
        "same epoch at an earlier offset truncates",
        [A(5, 11), A(6, 12), A(7, 13), A(7, 12)],
        [(5, 11), (7, 12)],
        [(5, 0, (5, 12)), (6, 0, (5, 12))],
    ),
    (
        "previous epoch ends where the next starts",
        [A(1, 11), A(1, 12), A(2, 13), A(2, 14), A(3, 15), A(3, 16)],
        [(1, 11), (2, 13), (3, 15)],
        [(2, 17, (2, 15))],
    ),
    (
        "gap in epochs: largest epoch below the requested one",
        [A(0, 10), A(2, 13), A(4, 17)],
        [(0, 10), (2, 13), (4, 17)],
        [(1, 0, (0, 13)), (2, 0, (2, 17)), (3, 0, (2, 17)), (5, 0, (-1, -1))],
    ),
    ("epoch above every known one", [A(2, 100)], [(2, 100)], [(3, 100, (-1, -1))]),
    (
        "a smaller epoch removes the larger ones",
        [A(1, 5), A(2, 6), A(1, 7)],
        [(1, 7)],
        [(1, 8, (1, 8)), (2, 8, (-1, -1))],
    ),
    ("a smaller start offset removes later entries", [A(2, 6), A(3, 5)], [(3, 5)], []),
    (
        "leaders change many times",
        [A(0, 0), A(1, 0), A(2, 5)],
        [(1, 0), (2, 5)],
        [(2, 10, (2, 10)), (1, 10, (1, 5)), (0, 10, (0, 0))],
    ),
    (
        "follower receives many batches",
        [A(0, 0), A(0, 1), A(0, 2), A(1, 3), A(1, 4), A(1, 5), A(2, 6), A(2, 7), A(2, 8)],
        [(0, 0), (1, 3), (2, 6)],
        [(2, 9, (2, 9)), (0, 9, (0, 3)), (1, 9, (1, 6))],
    ),
    ("truncate end on an epoch boundary", [A(2, 6), A(3, 8), A(4, 11), ("end", 8)], [(2, 6)], []),
    ("truncate end between boundaries", [A(2, 6), A(3, 8), A(4, 11), ("end", 9)], [(2, 6), (3, 8)], []),
    ("truncate end past the last start", [A(2, 6), A(3, 8), ("end", 20)], [(2, 6), (3, 8)], []),
    ("truncate end -1 is ignored", [A(2, 6), A(3, 8), ("end", -1)], [(2, 6), (3, 8)], []),
    ("truncate start on a boundary", [A(2, 6), A(3, 8), A(4, 11), ("start", 8)], [(3, 8), (4, 11)], []),
    (
        "truncate start too early",
        [A(2, 6), A(3, 8), A(4, 11), ("start", 1)],
        [(2, 6), (3, 8), (4, 11)],
        [],
    ),
    (
        "truncate start at the first offset",
        [A(2, 6), A(3, 8), A(4, 11), ("start", 6)],
        [(2, 6), (3, 8), (4, 11)],
        [],
    ),
    ("truncate start at the last entry", [A(2, 6), A(3, 8), A(4, 11), ("start", 11)], [(4, 11)], []),
    (
        "truncate start between boundaries moves the first start",
        [A(2, 6), A(3, 8), A(4, 11), ("start", 9)],
        [(3, 9), (4, 11)],
        [(3, 12, (3, 11))],
    ),
    (
        "truncate start inside the first epoch",
        [A(0, 0), A(1, 7), A(2, 10), ("start", 5)],
        [(0, 5), (1, 7), (2, 10)],
        [],
    ),
    ("truncate start past everything keeps the latest", [A(2, 6), A(3, 8), ("start", 15)], [(3, 15)], []),
    ("truncate start -1 is ignored", [A(2, 6), ("start", -1)], [(2, 6)], []),
    ("clear", [A(2, 6), A(3, 8), ("clear",)], [], [(3, 9, (-1, -1))]),
    ("truncations of an empty cache", [("start", 7), ("end", 7)], [], []),
]


@pytest.mark.parametrize(("ops", "entries", "queries"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_kafka_semantics(
    cache: LeaderEpochCache, ops: list[Op], entries: list[tuple[int, int]], queries: list[Query]
) -> None:
    run(cache, ops)
    assert cache.entries() == [EpochEntry(*e) for e in entries]
    assert cache.latest_epoch() == (entries[-1][0] if entries else -1)
    assert cache.latest == cache.latest_epoch()
    assert cache.latest_entry() == (EpochEntry(*entries[-1]) if entries else None)
    for requested, leo, expected in queries:
        assert cache.end_offset_for(requested, leo) == expected, (requested, leo)
    # what is on disk is what is in memory (every change is persisted)
    again = LeaderEpochCache(cache.path.parent, "t-0")
    assert again.load() == cache.path.exists()
    assert again.entries() == cache.entries()


def test_negative_start_offset_is_a_bug(cache: LeaderEpochCache) -> None:
    with pytest.raises(ValueError, match="negative start offset"):
        cache.assign(1, -5)


def test_epoch_for_offset(cache: LeaderEpochCache) -> None:
    run(cache, [A(1, 10), A(3, 20)])
    assert [cache.epoch_for_offset(o) for o in (5, 10, 19, 20, 99)] == [-1, 1, 1, 3, 3]


def test_file_is_kafkas_checkpoint_format(cache: LeaderEpochCache, tmp_path: Path) -> None:
    cache.assign(0, 0)
    cache.assign(3, 1500)
    assert (tmp_path / CHECKPOINT_FILE).read_text() == "0\n2\n0 0\n3 1500\n"
    cache.clear()
    assert (tmp_path / CHECKPOINT_FILE).read_text() == "0\n0\n"
    assert [p.name for p in tmp_path.iterdir()] == [CHECKPOINT_FILE]  # no temp file left


def test_a_file_written_by_kafka_loads(tmp_path: Path) -> None:
    (tmp_path / CHECKPOINT_FILE).write_text("0\n3\n0 0\n4 120\n9 7000\n")
    c = LeaderEpochCache(tmp_path)
    assert c.load()
    assert c.entries() == [EpochEntry(0, 0), EpochEntry(4, 120), EpochEntry(9, 7000)]
    assert c.latest == 9


def test_unchanged_assign_does_not_rewrite_the_file(cache: LeaderEpochCache) -> None:
    cache.assign(1, 10)
    os.utime(cache.path, ns=(0, 0))
    cache.assign(1, 20)
    cache.truncate_from_end(30)
    cache.truncate_from_start(5)
    assert cache.path.stat().st_mtime_ns == 0


def test_missing_file_loads_empty_and_reports_it(cache: LeaderEpochCache) -> None:
    assert not cache.load()
    assert cache.entries() == []
    assert cache.latest == -1


def test_leftover_temp_file_is_removed_on_load(tmp_path: Path) -> None:
    (tmp_path / (CHECKPOINT_FILE + ".tmp")).write_text("0\n1\n")
    (tmp_path / CHECKPOINT_FILE).write_text("0\n1\n2 5\n")
    c = LeaderEpochCache(tmp_path)
    assert c.load()
    assert c.entries() == [EpochEntry(2, 5)]
    assert not (tmp_path / (CHECKPOINT_FILE + ".tmp")).exists()


DAMAGED = {
    "empty": "",
    "garbage": "\x00\x01garbage\xff",
    "bad version": "1\n1\n0 0\n",
    "count above the lines": "0\n3\n0 0\n1 5\n",
    "count below the lines": "0\n1\n0 0\n1 5\n",
    "truncated line": "0\n2\n0 0\n1\n",
    "non-integer": "0\n1\nzero 0\n",
    "three fields": "0\n1\n0 0 0\n",
    "epochs not increasing": "0\n2\n3 0\n3 5\n",
    "epochs decreasing": "0\n2\n3 0\n2 5\n",
    "offsets decreasing": "0\n2\n1 9\n2 5\n",
    "negative": "0\n1\n-1 0\n",
    "only a version": "0\n",
}


@pytest.mark.parametrize("text", DAMAGED.values(), ids=DAMAGED.keys())
def test_damaged_file_is_reported_and_never_raises(
    tmp_path: Path, text: str, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / CHECKPOINT_FILE).write_bytes(text.encode("latin-1"))
    c = LeaderEpochCache(tmp_path, "t-0")
    assert not c.load()
    assert c.entries() == []
    assert c.latest == -1
    assert str(tmp_path / CHECKPOINT_FILE) in caplog.text


@pytest.mark.parametrize("text", DAMAGED.values(), ids=DAMAGED.keys())
def test_parse_rejects_damage(text: str) -> None:
    with pytest.raises(DamagedCheckpoint):
        parse_checkpoint(text)


def test_parse_accepts_a_missing_final_newline() -> None:
    assert parse_checkpoint("0\n1\n2 5") == [EpochEntry(2, 5)]
