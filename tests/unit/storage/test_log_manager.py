"""LogManager: the data directory — lock, clean-shutdown marker, checkpoints, partition dirs."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from framework.errors import StoreError
from framework.storage.log_manager import (
    CLEAN_SHUTDOWN,
    RECOVERY_CHECKPOINT,
    START_CHECKPOINT,
    LogManager,
    read_checkpoint,
    write_checkpoint,
)
from tests.support.storage import NOW, SMALL, append, batch, cfg, log_files, offsets, read_records


@pytest.fixture
def managers() -> Iterator[Callable[[Path], LogManager]]:
    """Started LogManagers, shut down at the end unless the test did (or crashed them)."""
    made: list[LogManager] = []

    def start(d: Path) -> LogManager:
        m = LogManager(d)
        m.start()
        made.append(m)
        return m

    yield start
    for m in made:
        if m._lock_fd >= 0:
            m.shutdown()


def crashed(d: Path, work: Callable[[LogManager], None]) -> None:
    """Run ``work`` on a LogManager in a child process that then dies without shutting down,
    as a killed broker does (the lock goes with the process; no marker, no final flush)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        code = 1
        try:
            m = LogManager(d)
            m.start()
            work(m)
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


# -- checkpoint files -----------------------------------------------------------------------
def test_checkpoint_round_trip_in_kafka_text_format(tmp_path: Path) -> None:
    path = tmp_path / RECOVERY_CHECKPOINT
    entries = {("sensors.speed", 0): 120, ("my-topic-with-dashes", 11): 0, ("a_b", 3): 2**40}
    write_checkpoint(path, entries)
    assert read_checkpoint(path) == entries
    lines = path.read_text().splitlines()
    assert lines[:2] == ["0", "3"]
    assert sorted(lines[2:]) == sorted(f"{t} {p} {o}" for (t, p), o in entries.items())
    assert [p.name for p in tmp_path.iterdir()] == [RECOVERY_CHECKPOINT]  # no temp file left


def test_checkpoint_of_nothing(tmp_path: Path) -> None:
    path = tmp_path / START_CHECKPOINT
    write_checkpoint(path, {})
    assert path.read_text() == "0\n0\n"
    assert read_checkpoint(path) == {}


def test_missing_checkpoint_reads_as_empty(tmp_path: Path) -> None:
    assert read_checkpoint(tmp_path / "nope") == {}


@pytest.mark.parametrize(
    "text",
    ["", "1\n1\nt 0 5\n", "0\nx\n", "0\n1\nt zero 5\n", "0\n1\nt 0 five\n", "0\n1\nonlyone\n"],
)
def test_unreadable_checkpoint_is_ignored_not_fatal(tmp_path: Path, text: str) -> None:
    path = tmp_path / RECOVERY_CHECKPOINT
    path.write_text(text)
    assert read_checkpoint(path) == {}  # recovery then starts from 0: slower, never wrong


def test_rewriting_a_checkpoint_replaces_it_whole(tmp_path: Path) -> None:
    path = tmp_path / RECOVERY_CHECKPOINT
    write_checkpoint(path, {(f"t{i}", 0): i for i in range(50)})
    write_checkpoint(path, {("t", 0): 1})
    assert read_checkpoint(path) == {("t", 0): 1}


# -- the lock -------------------------------------------------------------------------------
def test_a_second_manager_on_the_same_dir_is_refused(tmp_path: Path, managers) -> None:
    first = managers(tmp_path)
    second = LogManager(tmp_path)
    with pytest.raises(StoreError, match="is in use by another broker; give each broker its own --data-dir"):
        second.start()
    assert second._lock_fd == -1
    first.shutdown()
    second.start()  # free once the first has stopped
    second.shutdown()


def test_the_lock_is_released_when_the_process_dies(tmp_path: Path, managers) -> None:
    crashed(tmp_path, lambda m: None)
    managers(tmp_path)  # no StoreError


def test_an_uncreatable_data_dir_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(StoreError, match="cannot create data dir"):
        LogManager(blocker / "data").start()


# -- clean shutdown and recovery ------------------------------------------------------------
def test_clean_shutdown_writes_marker_and_checkpoints_and_skips_recovery(tmp_path: Path, managers) -> None:
    m = managers(tmp_path)
    assert not m.clean_shutdown  # a brand-new directory has no marker
    lg = m.open_log("events", 0, SMALL)
    for i in range(30):
        append(lg, batch(1, tag=i))
    lg.delete_records_before(3)
    m.shutdown()
    assert (tmp_path / CLEAN_SHUTDOWN).exists()
    assert read_checkpoint(tmp_path / RECOVERY_CHECKPOINT) == {("events", 0): 30}
    assert read_checkpoint(tmp_path / START_CHECKPOINT) == {("events", 0): 3}

    m2 = managers(tmp_path)
    assert m2.clean_shutdown
    assert not (tmp_path / CLEAN_SHUTDOWN).exists()  # consumed: a crash from here on is unclean
    lg = m2.open_log("events", 0, SMALL)
    report = m2.load_reports[("events", 0)]
    assert report.recovered_segments == 0 and report.segments > 1
    assert lg.log_start_offset == 3  # from the checkpoint
    assert offsets(read_records(lg)) == list(range(3, 30))


def test_without_the_marker_logs_are_recovered_from_the_checkpointed_point(tmp_path: Path, managers) -> None:
    m = managers(tmp_path)
    lg = m.open_log("events", 0, SMALL)
    for i in range(30):
        append(lg, batch(1, tag=i))
    m.shutdown()

    def work(m: LogManager) -> None:
        lg = m.open_log("events", 0, SMALL)
        for i in range(30, 40):
            append(lg, batch(1, tag=i))
        lg.flush()
        m.checkpoint()  # the periodic checkpoint: recovery point = 40
        for i in range(40, 45):
            append(lg, batch(1, tag=i))  # never flushed, and the process dies

    crashed(tmp_path, work)
    assert not (tmp_path / CLEAN_SHUTDOWN).exists()
    assert read_checkpoint(tmp_path / RECOVERY_CHECKPOINT) == {("events", 0): 40}
    # the crash tore the last batch
    active = log_files(tmp_path / "events-0")[-1]
    os.truncate(active, active.stat().st_size - 5)
    bases = [int(p.name[:20]) for p in log_files(tmp_path / "events-0")]
    from_rp = [b for b in bases if b >= max(b for b in bases if b <= 40)]
    assert len(from_rp) < len(bases)
    m3 = managers(tmp_path)
    assert not m3.clean_shutdown
    lg = m3.open_log("events", 0, SMALL)
    report = m3.load_reports[("events", 0)]
    # segments below the recovery point are trusted; the rest are checked batch by batch
    assert report.recovered_segments == len(from_rp)
    assert report.truncated_bytes > 0
    assert lg.log_end_offset == 44
    assert offsets(read_records(lg)) == list(range(44))
    assert append(lg, batch(1)).first_offset == 44


def test_a_crash_right_after_a_clean_start_still_triggers_recovery(tmp_path: Path, managers) -> None:
    m = managers(tmp_path)
    append(m.open_log("events", 0, SMALL), batch(1))
    m.shutdown()
    crashed(tmp_path, lambda m: None)  # started (marker consumed), then killed
    m3 = managers(tmp_path)
    assert not m3.clean_shutdown
    m3.open_log("events", 0, SMALL)
    assert m3.load_reports[("events", 0)].recovered_segments == 1


# -- partitions -----------------------------------------------------------------------------
def test_open_log_returns_the_same_log_twice(tmp_path: Path, managers) -> None:
    m = managers(tmp_path)
    assert m.open_log("t", 0, SMALL) is m.open_log("t", 0, SMALL)
    assert (tmp_path / "t-0").is_dir()


def test_partition_dirs_lists_only_partition_logs(tmp_path: Path, managers) -> None:
    m = managers(tmp_path)
    for name in [
        "my-topic-3",
        "t-0",
        "__metadata",
        "x-1.ab12cd34-delete",
        "y-2.stray",
        "nopartition",
        "z-",
    ]:
        (tmp_path / name).mkdir()
    (tmp_path / "file-1").write_text("not a dir")
    found = sorted((t, p) for t, p, _ in m.partition_dirs())
    assert found == [("my-topic", 3), ("t", 0)]


def test_remove_log_takes_the_partition_away_at_once(tmp_path: Path, managers) -> None:
    m = managers(tmp_path)
    lg = m.open_log("gone", 0, SMALL)
    append(lg, batch(1))
    m.remove_log("gone", 0)
    assert not (tmp_path / "gone-0").exists()
    assert ("gone", 0) not in m.logs
    assert all(t != "gone" for t, _, _ in m.partition_dirs())
    # a fresh log of that name starts empty
    assert m.open_log("gone", 0, SMALL).log_end_offset == 0


def test_leftover_deleted_dirs_are_removed_at_start(tmp_path: Path, managers) -> None:
    left = tmp_path / "old-0.deadbeef-delete"
    left.mkdir(parents=True)
    (left / "00000000000000000000.log").write_bytes(b"x")
    managers(tmp_path)
    assert not left.exists()


def test_quarantine_moves_a_dir_aside(tmp_path: Path, managers) -> None:
    m = managers(tmp_path)
    d = tmp_path / "unknown-0"
    d.mkdir()
    m.quarantine(d)
    assert not d.exists() and (tmp_path / "unknown-0.stray").is_dir()
    assert m.partition_dirs() == []


def test_enforce_retention_runs_over_every_log(tmp_path: Path, managers) -> None:
    m = managers(tmp_path)
    day = 86_400_000
    total = 0
    for p in range(2):
        lg = m.open_log("old", p, cfg(retention_ms=day))
        for _ in range(20):
            append(lg, batch(1, ts=NOW - 2 * day))
        total += lg.size_bytes
    assert m.enforce_retention(NOW) == total
    assert all(lg.log_start_offset == lg.log_end_offset == 20 for lg in m.logs.values())


def test_flush_due_flushes_only_logs_past_flush_ms(tmp_path: Path, managers) -> None:
    m = managers(tmp_path)
    lazy = m.open_log("lazy", 0, cfg(flush_ms=60_000))
    eager = m.open_log("eager", 0, cfg(flush_ms=1_000))
    append(lazy, batch(1))
    append(eager, batch(1))
    now = max(lazy.last_flush_ms, eager.last_flush_ms) + 1_000
    m.flush_due(now)
    assert eager.recovery_point == 1 and eager.unflushed_messages == 0
    assert lazy.recovery_point == 0 and lazy.unflushed_messages == 1
