"""Producer id allocation (coordinator/producer_ids.py)."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest

from framework.coordinator.producer_ids import ProducerIdManager
from framework.errors import StoreError


def test_ids_are_unique_and_increasing(tmp_path: Path) -> None:
    m = ProducerIdManager(tmp_path, block_size=10)
    ids = [m.next_id() for _ in range(35)]
    assert ids == list(range(35))
    assert int(m.path.read_text()) == 40  # four blocks reserved


def test_restart_never_reuses_an_id(tmp_path: Path) -> None:
    seen: list[int] = []
    for handed_out in (3, 10, 0, 1, 25):
        m = ProducerIdManager(tmp_path, block_size=10)  # a broker restart
        seen += [m.next_id() for _ in range(handed_out)]
    assert len(seen) == len(set(seen))
    assert seen == sorted(seen)
    assert min(seen) >= 0


def test_block_size_change_across_restart(tmp_path: Path) -> None:
    a = ProducerIdManager(tmp_path, block_size=1000)
    first = a.next_id()
    b = ProducerIdManager(tmp_path, block_size=5)
    assert b.next_id() == 1000 > first


def test_block_is_persisted_before_an_id_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    m = ProducerIdManager(tmp_path, block_size=4)
    for _ in range(9):
        pid = m.next_id()
        # whatever happens next, a restart starts above every id handed out so far
        assert int(m.path.read_text()) > pid

    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: (events.append("fsync"), real_fsync(fd))[1])
    monkeypatch.setattr(os, "replace", lambda a, b: (events.append("replace"), real_replace(a, b))[1])
    m2 = ProducerIdManager(tmp_path, block_size=4)
    m2.next_id()
    # data fsynced, renamed into place, and the rename itself made durable (directory fsync)
    assert events == ["fsync", "replace", "fsync"]
    assert not m2.path.with_suffix(".tmp").exists()


def test_failed_reservation_hands_out_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    m = ProducerIdManager(tmp_path, block_size=2)
    assert [m.next_id(), m.next_id()] == [0, 1]

    def boom(*a: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        m.next_id()
    monkeypatch.undo()
    assert m.next_id() == 2  # the failed block was not used
    assert ProducerIdManager(tmp_path, block_size=2).next_id() == 4


@pytest.mark.parametrize("content", ["", "abc", "12x", "1.5", "-5", "\x00\x00"])
def test_damaged_block_file_is_a_clear_store_error(tmp_path: Path, content: str) -> None:
    (tmp_path / "producer-id-block").write_text(content)
    m = ProducerIdManager(tmp_path)
    with pytest.raises(StoreError) as ei:
        m.next_id()
    assert "producer-id-block" in str(ei.value) and "damaged" in str(ei.value)
    assert (tmp_path / "producer-id-block").read_text() == content  # left for the operator


def test_concurrent_callers_get_distinct_ids(tmp_path: Path) -> None:
    m = ProducerIdManager(tmp_path, block_size=7)
    out: list[int] = []
    lock = threading.Lock()

    def work() -> None:
        got = [m.next_id() for _ in range(50)]
        with lock:
            out.extend(got)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(out) == list(range(200))
