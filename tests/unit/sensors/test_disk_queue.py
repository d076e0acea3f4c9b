"""The gateway's crash-safe FIFO on disk (sensors/disk_queue.py): order across files, what a
commit removes, what a restart re-delivers, the size bound, and what survives a torn last
record (power loss during an append) — everything before it, nothing corrupt."""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Any

import crc32c
import pytest

from sensors import disk_queue
from sensors.disk_queue import DiskQueue, Item, QueueFull
from tests.support.durable_os import RecordingOs

T0 = 1_700_000_000_000
Rec = tuple[str, bytes, bytes, int]


def recs(n: int, start: int = 0, *, size: int = 8, topic: str = "sf.traffic") -> list[Rec]:
    """``n`` records, value ``v<i>`` padded to ``size`` bytes, key ``s<i % 3>``, time T0 + i."""
    return [
        (topic, f"s{i % 3}".encode(), f"v{i}".encode().ljust(size, b"."), T0 + i)
        for i in range(start, start + n)
    ]


def as_recs(items: list[Item]) -> list[Rec]:
    return [(it.topic, it.key, it.value, it.timestamp_ms) for it in items]


def encoded_size(r: Rec) -> int:
    """Bytes one record takes on disk (u32 length | u32 crc | payload)."""
    topic, key, value, _ = r
    return 8 + 2 + len(topic.encode()) + 2 + len(key) + 8 + len(value)


def drain(q: DiskQueue, batch: int = 10_000) -> list[Item]:
    out: list[Item] = []
    while items := q.read(batch):
        out += items
    return out


def files(d: Path) -> list[str]:
    return sorted(p.name for p in d.glob("q-*.log"))


@pytest.fixture
def qdir(tmp_path: Path) -> Path:
    return tmp_path / "queue"


# -- order, commit, re-delivery ---------------------------------------------------------------
def test_records_come_back_in_order_with_their_fields(qdir: Path) -> None:
    q = DiskQueue(qdir)
    q.append(recs(3))
    q.append([("other", b"", b"", -5)])  # empty key and value, any timestamp
    q.append(recs(2, 3))
    assert as_recs(q.read()) == [*recs(3), ("other", b"", b"", -5), *recs(2, 3)]
    assert q.read() == []


def test_reads_continue_where_the_last_one_stopped(qdir: Path) -> None:
    q = DiskQueue(qdir)
    q.append(recs(10))
    assert as_recs(q.read(4)) == recs(4)
    assert as_recs(q.read(4)) == recs(4, 4)
    q.append(recs(3, 10))
    assert as_recs(q.read(100)) == recs(2, 8) + recs(3, 10)


def test_rewind_reads_again_from_the_last_commit(qdir: Path) -> None:
    q = DiskQueue(qdir)
    q.append(recs(6))
    first = q.read(2)
    q.commit(first[-1].position)
    assert as_recs(q.read(2)) == recs(2, 2)  # delivery fails
    q.rewind()
    assert as_recs(q.read()) == recs(4, 2)


def test_a_restart_redelivers_what_was_not_committed_and_nothing_committed(qdir: Path) -> None:
    q = DiskQueue(qdir)
    q.append(recs(5))
    items = q.read(3)
    q.commit(items[1].position)  # the store acknowledged two of the three sent
    again = DiskQueue(qdir)
    assert as_recs(again.read()) == recs(3, 2)
    assert len(again) == 3


def test_records_survive_a_reopen_in_order(qdir: Path) -> None:
    q = DiskQueue(qdir)
    q.append(recs(4))
    q = DiskQueue(qdir)
    q.append(recs(4, 4))
    assert as_recs(DiskQueue(qdir).read()) == recs(8)


def test_len_size_and_empty_count_what_is_not_committed(qdir: Path) -> None:
    q = DiskQueue(qdir)
    assert q.empty() and len(q) == 0 and q.size_bytes == 0
    q.append(recs(4))
    per = encoded_size(recs(1)[0])
    assert len(q) == 4 and q.size_bytes == 4 * per and not q.empty()
    items = q.read(3)
    assert len(q) == 4  # read is not delivered
    q.commit(items[-1].position)
    assert len(q) == 1 and q.size_bytes == per
    q.commit(q.read()[-1].position)
    assert q.empty() and len(q) == 0


# -- files -----------------------------------------------------------------------------------
def test_order_holds_across_files_and_committed_files_are_deleted(qdir: Path) -> None:
    per = encoded_size(recs(1)[0])
    q = DiskQueue(qdir, file_bytes=4 * per)
    for i in range(10):
        q.append(recs(1, i))
    assert files(qdir) == ["q-000000000001.log", "q-000000000002.log", "q-000000000003.log"]
    items = q.read(5)
    assert as_recs(items) == recs(5)
    q.commit(items[-1].position)  # into the second file: the first is done
    assert files(qdir) == ["q-000000000002.log", "q-000000000003.log"]
    assert as_recs(drain(q, 2)) == recs(5, 5)
    assert as_recs(DiskQueue(qdir, file_bytes=4 * per).read()) == recs(5, 5)


def test_a_fully_delivered_queue_deletes_its_file_and_goes_on(qdir: Path) -> None:
    q = DiskQueue(qdir)
    q.append(recs(3))
    q.commit(q.read()[-1].position)
    assert files(qdir) == [] and q.empty()
    q.append(recs(2, 3))
    assert as_recs(q.read()) == recs(2, 3)
    assert as_recs(DiskQueue(qdir).read()) == recs(2, 3)  # after a restart too


def test_large_records_come_back_in_order_across_files(qdir: Path) -> None:
    q = DiskQueue(qdir, file_bytes=2 << 20)
    big = recs(60, size=50_000)
    for r in big:
        q.append([r])
    assert len(files(qdir)) == 2
    assert [r[2] for r in as_recs(drain(q, 100))] == [r[2] for r in big]


def test_a_record_larger_than_a_megabyte_is_read_whole(qdir: Path) -> None:
    q = DiskQueue(qdir)
    big = recs(1, size=3 << 20)
    q.append(recs(1) + big + recs(1, 2))
    assert as_recs(q.read(1)) == recs(1)
    assert as_recs(q.read(1)) == big
    assert as_recs(q.read(1)) == recs(1, 2)


# -- the size bound ----------------------------------------------------------------------------
def test_a_full_queue_refuses_a_whole_append_and_accepts_again_after_a_commit(qdir: Path) -> None:
    per = encoded_size(recs(1)[0])
    q = DiskQueue(qdir, max_bytes=5 * per)
    q.append(recs(4))
    with pytest.raises(QueueFull):
        q.append(recs(2, 4))  # 6 > 5: none of the two is written
    assert len(q) == 4 and q.size_bytes == 4 * per
    q.append(recs(1, 4))  # exactly full
    with pytest.raises(QueueFull):
        q.append(recs(1, 5))
    q.commit(q.read(2)[-1].position)
    q.append(recs(2, 5))
    assert as_recs(drain(q)) == recs(5, 2)
    assert as_recs(DiskQueue(qdir, max_bytes=5 * per).read()) == recs(5, 2)


# -- torn and damaged tails --------------------------------------------------------------------
def _queue_with_tail(qdir: Path, n: int = 5) -> tuple[Path, int, int]:
    """n records in one file; returns (file, start of the last record, file size)."""
    q = DiskQueue(qdir)
    q.append(recs(n))
    path = qdir / files(qdir)[0]
    size = path.stat().st_size
    return path, size - encoded_size(recs(1, n - 1)[0]), size


@pytest.mark.parametrize("cut", [1, 4, 8, 9, 15, 20, 29])
def test_a_torn_last_record_is_cut_off_and_nothing_before_it_is_lost(qdir: Path, cut: int) -> None:
    path, last, size = _queue_with_tail(qdir)
    assert last + cut < size
    os.truncate(path, last + cut)  # power loss in the middle of the last append
    q = DiskQueue(qdir)
    assert path.stat().st_size == last
    assert as_recs(q.read()) == recs(4)
    q.append(recs(2, 100))  # appends go on after the repaired end
    assert as_recs(DiskQueue(qdir).read()) == recs(4) + recs(2, 100)


def test_a_last_record_with_a_bad_crc_is_cut_off(qdir: Path) -> None:
    path, _, size = _queue_with_tail(qdir)
    data = bytearray(path.read_bytes())
    data[size - 1] ^= 0xFF
    path.write_bytes(bytes(data))
    assert as_recs(DiskQueue(qdir).read()) == recs(4)


def test_a_torn_tail_after_committed_records_keeps_the_cursor(qdir: Path) -> None:
    path, last, _ = _queue_with_tail(qdir)
    q = DiskQueue(qdir)
    q.commit(q.read(2)[-1].position)
    os.truncate(path, last + 3)
    assert as_recs(DiskQueue(qdir).read()) == recs(2, 2)


def test_a_zero_filled_tail_is_not_read_as_records(qdir: Path) -> None:
    path, _, _ = _queue_with_tail(qdir)
    with open(path, "ab") as fh:
        fh.write(b"\x00" * 64)
    assert crc32c.crc32c(b"") == 0
    q = DiskQueue(qdir)
    assert as_recs(q.read()) == recs(5)
    q.append(recs(1, 5))
    assert as_recs(q.read()) == recs(1, 5)


def test_a_crc_valid_record_shorter_than_any_payload_is_cut_off(qdir: Path) -> None:
    """Shorter than ``u16 | u16 | i64`` cannot be a record the queue wrote, whatever its CRC."""
    path, _, size = _queue_with_tail(qdir)
    short = b"abc"
    with open(path, "ab") as fh:
        fh.write(struct.pack(">II", len(short), crc32c.crc32c(short)) + short)
    q = DiskQueue(qdir)
    assert path.stat().st_size == size
    assert as_recs(q.read()) == recs(5)


class _Crash(Exception):
    pass


class _OsDyingAtReplace:
    """The module's ``os``, whose ``replace`` dies at its ``n``-th call, before renaming."""

    def __init__(self, n: int) -> None:
        self.n = n

    def replace(self, src: Any, dst: Any) -> None:
        self.n -= 1
        if self.n == 0:
            raise _Crash
        os.replace(src, dst)

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)


def test_a_crash_while_committing_the_last_file_loses_nothing_appended_later(
    qdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    q = DiskQueue(qdir)
    q.append(recs(3))
    end = q.read()[-1].position
    monkeypatch.setattr(disk_queue, "os", _OsDyingAtReplace(2))  # the second cursor write
    with pytest.raises(_Crash):
        q.commit(end)
    monkeypatch.setattr(disk_queue, "os", os)
    again = DiskQueue(qdir)
    again.append(recs(5, 10))
    assert as_recs(again.read()) == recs(5, 10)


def test_a_crash_before_deleting_a_delivered_file_is_finished_on_reopen(
    qdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    q = DiskQueue(qdir)
    q.append(recs(3))
    end = q.read()[-1].position

    def die(self: Path, missing_ok: bool = False) -> None:
        raise _Crash

    monkeypatch.setattr(Path, "unlink", die)
    with pytest.raises(_Crash):
        q.commit(end)  # both cursor writes done, the file not deleted
    monkeypatch.undo()
    assert files(qdir) == ["q-000000000001.log"]
    again = DiskQueue(qdir)
    assert files(qdir) == [] and again.empty()
    again.append(recs(2, 10))
    assert as_recs(again.read()) == recs(2, 10)


def test_the_cursor_is_fsynced_and_its_rename_too(qdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    q = DiskQueue(qdir)
    q.append(recs(3))
    items = q.read()
    recording = RecordingOs()
    monkeypatch.setattr(disk_queue, "os", recording)
    q.commit(items[0].position)
    assert recording.calls == ["fsync file", "replace", "fsync dir"]


def test_a_crash_before_the_cursor_is_written_redelivers(qdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    q = DiskQueue(qdir)
    q.append(recs(3))
    end = q.read()[-1].position
    monkeypatch.setattr(disk_queue, "os", _OsDyingAtReplace(1))
    with pytest.raises(_Crash):
        q.commit(end)
    monkeypatch.setattr(disk_queue, "os", os)
    assert as_recs(DiskQueue(qdir).read()) == recs(3)  # at least once: sent again


def test_an_unreadable_cursor_starts_from_the_oldest_file(qdir: Path) -> None:
    q = DiskQueue(qdir)
    q.append(recs(3))
    (qdir / "cursor").write_text("garbage")
    assert as_recs(DiskQueue(qdir).read()) == recs(3)


def test_the_record_format_is_the_documented_one(qdir: Path) -> None:
    """``u32 length | u32 crc32c(payload) | payload`` with payload ``u16 topic length | topic |
    u16 key length | key | i64 timestamp | value``, big-endian."""
    DiskQueue(qdir).append([("tp", b"k", b"val", 42)])
    data = (qdir / files(qdir)[0]).read_bytes()
    payload = struct.pack(">H", 2) + b"tp" + struct.pack(">H", 1) + b"k" + struct.pack(">q", 42) + b"val"
    assert data == struct.pack(">II", len(payload), crc32c.crc32c(payload)) + payload
