"""Appends the disk refuses (ENOSPC, EIO): KAFKA_STORAGE_ERROR, nothing half-written, and the
log goes on once the disk takes writes again (LogSegment.append, Log.append_as_leader, rolls).

The disk is simulated by wrapping ``os.pwrite``/``os.ftruncate`` for the files of the log
under test: a budget of bytes it still takes (a short write, then ENOSPC), or an errno for
every write. ``tests/integration/test_full_disk.py`` does the same with a real full tmpfs.
"""

from __future__ import annotations

import builtins
import errno
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from framework.errors import KafkaStorageError
from framework.protocol import records as rb
from framework.protocol.error_codes import ErrorCode
from framework.storage.log import Log
from framework.storage.segment import LogSegment
from tests.support.storage import NOW, append, batch, cfg, open_log, read_records, values


class Disk:
    """``os.pwrite``/``os.ftruncate`` for files under ``root``: normal until told otherwise."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, root: Path) -> None:
        self.root = str(root)
        self.budget: int | None = None  # bytes still accepted; None: unlimited
        self.error: int | None = None  # errno of every write when set
        self.truncate_error: int | None = None
        self.real_pwrite, self.real_ftruncate = os.pwrite, os.ftruncate
        monkeypatch.setattr(os, "pwrite", self.pwrite)
        monkeypatch.setattr(os, "ftruncate", self.ftruncate)

    def _ours(self, fd: int) -> bool:
        try:
            return os.readlink(f"/proc/self/fd/{fd}").startswith(self.root)
        except OSError:
            return False

    def pwrite(self, fd: int, data: bytes | memoryview, offset: int) -> int:
        if self._ours(fd):
            if self.error is not None:
                raise OSError(self.error, os.strerror(self.error))
            if self.budget is not None:
                if self.budget <= 0:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                data = memoryview(data)[: self.budget]
                self.budget -= len(data)
        return self.real_pwrite(fd, data, offset)

    def ftruncate(self, fd: int, length: int) -> None:
        if self.truncate_error is not None and self._ours(fd):
            raise OSError(self.truncate_error, os.strerror(self.truncate_error))
        self.real_ftruncate(fd, length)

    def full(self, budget: int = 0) -> None:
        self.budget = budget

    def freed(self) -> None:
        self.budget = self.error = self.truncate_error = None


@pytest.fixture
def disk(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Disk]:
    yield Disk(monkeypatch, tmp_path)


def _segment_state(seg: LogSegment) -> tuple[object, ...]:
    return (
        seg.size,
        seg.path.stat().st_size,
        seg.next_offset,
        seg.max_timestamp,
        list(seg.index.offsets),
        list(seg.index.positions),
        list(seg.time_index.timestamps),
    )


def _big(n: int = 20, tag: bytes = b"x") -> bytes:
    return rb.build_batch([(b"k%d" % i, tag * 400) for i in range(n)], timestamp_ms=NOW + 1)


# -- LogSegment.append -------------------------------------------------------------------------
@pytest.mark.parametrize("budget", [0, 1, 100, 5000])
def test_a_short_write_then_enospc_is_cut_back(tmp_path: Path, disk: Disk, budget: int) -> None:
    seg = LogSegment.create(tmp_path, 0, 100)
    first = rb.build_batch([(b"k", b"v")], timestamp_ms=NOW)
    seg.append(memoryview(first), [rb.read_header(first)])
    before = _segment_state(seg)
    big = rb.build_batch([(b"k", b"x" * 9000)], base_offset=1, timestamp_ms=NOW + 5)
    disk.full(budget)
    with pytest.raises(KafkaStorageError, match=r"disk full \(ENOSPC\)") as ei:
        seg.append(memoryview(big), [rb.read_header(big)])
    assert ei.value.code == ErrorCode.KAFKA_STORAGE_ERROR and ei.value.retriable
    assert _segment_state(seg) == before
    disk.freed()
    seg.append(memoryview(big), [rb.read_header(big)])
    assert seg.next_offset == 2 and seg.path.stat().st_size == seg.size
    seg.close()
    again = LogSegment.open(tmp_path, 0, 100)
    assert again.recover() == 0 and again.next_offset == 2


def test_eio_is_a_storage_error_too(tmp_path: Path, disk: Disk) -> None:
    seg = LogSegment.create(tmp_path, 0)
    disk.error = errno.EIO
    data = rb.build_batch([(b"k", b"v")], timestamp_ms=NOW)
    with pytest.raises(KafkaStorageError, match=r"\(EIO\)"):
        seg.append(memoryview(data), [rb.read_header(data)])
    assert seg.size == 0 and seg.path.stat().st_size == 0


def test_a_failed_cut_is_retried_before_the_next_write(tmp_path: Path, disk: Disk) -> None:
    seg = LogSegment.create(tmp_path, 0)
    data = rb.build_batch([(b"k", b"x" * 2000)], timestamp_ms=NOW)
    disk.full(700)
    disk.truncate_error = errno.EIO
    with pytest.raises(KafkaStorageError, match="disk full"):
        seg.append(memoryview(data), [rb.read_header(data)])
    assert seg.size == 0 and seg.path.stat().st_size == 700  # torn bytes the cut left
    disk.budget = None  # space again, but the cut still fails: nothing written after the tear
    with pytest.raises(KafkaStorageError, match="cannot cut"):
        seg.append(memoryview(data), [rb.read_header(data)])
    assert seg.size == 0
    disk.freed()
    seg.append(memoryview(data), [rb.read_header(data)])
    assert seg.size == len(data) == seg.path.stat().st_size
    assert seg.path.read_bytes() == data


def test_close_cuts_a_torn_tail(tmp_path: Path, disk: Disk) -> None:
    seg = LogSegment.create(tmp_path, 0)
    data = rb.build_batch([(b"k", b"x" * 2000)], timestamp_ms=NOW)
    disk.full(500)
    disk.truncate_error = errno.EIO
    with pytest.raises(KafkaStorageError):
        seg.append(memoryview(data), [rb.read_header(data)])
    disk.freed()
    seg.close()
    assert seg.path.stat().st_size == 0


def test_create_leaves_nothing_behind_when_its_indexes_cannot_be_written(tmp_path: Path, disk: Disk) -> None:
    disk.error = errno.ENOSPC
    with pytest.raises(OSError):
        LogSegment.create(tmp_path, 42)
    assert list(tmp_path.iterdir()) == []
    disk.freed()
    LogSegment.create(tmp_path, 42).close()  # O_EXCL does not trip over a leftover


# -- Log.append_as_leader ------------------------------------------------------------------------
def _log_state(lg: Log) -> tuple[object, ...]:
    return (
        lg.log_end_offset,
        lg.high_watermark,
        [_segment_state(s) for s in lg.segments],
        {pid: (e.epoch, e.last_seq, len(e.batches)) for pid, e in lg.producer_state.producers.items()},
    )


def test_full_disk_append_changes_nothing_and_resumes(tmp_path: Path, disk: Disk) -> None:
    lg, _ = open_log(tmp_path / "p-0", cfg(segment_bytes=1 << 20))
    append(lg, batch(1, pid=5, epoch=0, seq=0, tag=0))
    before = _log_state(lg)
    disk.full(20)  # a short write, then ENOSPC
    retry = batch(3, pid=5, epoch=0, seq=1, tag=1)
    for _ in range(3):  # the producer retries while the disk is full
        with pytest.raises(KafkaStorageError):
            append(lg, retry)
        assert _log_state(lg) == before
    disk.freed()
    info = append(lg, retry)  # same sequence: not a duplicate, not out of order
    assert (info.first_offset, info.last_offset, info.duplicate) == (1, 3, False)
    assert append(lg, retry).duplicate  # and now it is
    assert [r.offset for r in read_records(lg)] == [0, 1, 2, 3]
    lg.close()
    for clean in (True, False):
        again, report = open_log(tmp_path / "p-0", cfg(segment_bytes=1 << 20), clean=clean)
        assert report.truncated_bytes == 0
        assert values(read_records(again))[1:] == [b"v1-0value", b"v1-1value", b"v1-2value"]
        again.close()


def test_full_disk_during_a_roll_leaves_a_usable_log(tmp_path: Path, disk: Disk) -> None:
    lg, _ = open_log(tmp_path / "p-0", cfg(segment_bytes=3000, index_interval_bytes=100))
    for i in range(3):
        append(lg, _big(2, b"%d" % i))
    segments = len(lg.segments)
    disk.full(0)
    with pytest.raises((KafkaStorageError, OSError)) as ei:
        for i in range(3, 8):  # enough to need a roll
            append(lg, _big(2, b"%d" % i))
    if isinstance(ei.value, OSError):
        assert ei.value.errno == errno.ENOSPC
    end = lg.log_end_offset
    disk.freed()
    for i in range(8, 12):
        append(lg, _big(2, b"%d" % i))
    assert len(lg.segments) > segments
    assert lg.log_end_offset == end + 8
    recs = read_records(lg)
    assert [r.offset for r in recs] == list(range(lg.log_end_offset))
    lg.close()
    again, report = open_log(tmp_path / "p-0", cfg(segment_bytes=3000, index_interval_bytes=100))
    assert report.truncated_bytes == 0 and again.log_end_offset == end + 8
    again.close()


def test_a_snapshot_that_cannot_be_written_does_not_stop_a_roll(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lg, _ = open_log(tmp_path / "p-0", cfg(segment_bytes=1 << 20))
    append(lg, batch(1, pid=5, epoch=0, seq=0))
    real_open = builtins.open

    def failing_open(path: Any, *a: Any, **kw: Any) -> Any:
        if str(path).endswith(".snapshot.tmp"):
            real_open(path, *a, **kw).close()  # created, then the disk is full
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_open(path, *a, **kw)

    monkeypatch.setattr(builtins, "open", failing_open)
    lg.roll()
    monkeypatch.undo()
    assert len(lg.segments) == 2
    assert not list((tmp_path / "p-0").glob("*.tmp"))  # no partial snapshot left
    append(lg, batch(1, pid=5, epoch=0, seq=1))
    assert lg.log_end_offset == 2
