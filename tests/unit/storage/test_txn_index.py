"""Transactions in the log: the aborted-transactions index (``.txnindex``) alone, then markers,
the last stable offset and crash recovery through Log (appends, restarts, damaged files)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from framework.protocol import records as rb
from framework.protocol.control import EndTxnMarker, build_marker_batch, read_marker
from framework.protocol.error_codes import ErrorCode
from framework.storage.log import Log
from framework.storage.offset_index import CorruptIndex
from framework.storage.producer_state import InvalidProducerEpoch, InvalidTxnState
from framework.storage.segment import segment_name
from framework.storage.txn_index import ENTRY_SIZE, AbortedTxn, TransactionIndex
from tests.support.storage import NOW, append, batch, cfg, open_log, payload, read_records

P1, P2 = 1001, 1002


# -- TransactionIndex alone -----------------------------------------------------------------
def index(tmp_path: Path, *entries: AbortedTxn, base: int = 0) -> TransactionIndex:
    ix = TransactionIndex(tmp_path / segment_name(base, ".txnindex"), base)
    ix.rewrite()
    for e in entries:
        ix.append(e)
    return ix


def test_entries_are_34_bytes_and_reload(tmp_path: Path) -> None:
    a, b = AbortedTxn(P1, 0, 5, 6), AbortedTxn(P2, 3, 9, 10)
    ix = index(tmp_path, a, b)
    assert ENTRY_SIZE == 34
    assert ix.path.stat().st_size == 68
    again = TransactionIndex(ix.path, 0)
    again.load(next_offset=10)
    assert again.entries == [a, b]


def test_append_ignores_an_entry_not_past_the_last(tmp_path: Path) -> None:
    ix = index(tmp_path, AbortedTxn(P1, 0, 5, 6))
    assert not ix.append(AbortedTxn(P1, 0, 5, 6))  # a replay re-adding it
    assert not ix.append(AbortedTxn(P2, 0, 4, 6))
    assert ix.path.stat().st_size == ENTRY_SIZE


def test_collect_answers_overlapping_ranges(tmp_path: Path) -> None:
    # P1 aborted [10, 20], P2 aborted [15, 30] while P1's was open, then P1 aborted [40, 45]
    ix = index(
        tmp_path,
        AbortedTxn(P1, 10, 20, 15),
        AbortedTxn(P2, 15, 30, 31),
        AbortedTxn(P1, 40, 45, 46),
    )

    def pids(lo: int, hi: int) -> list[tuple[int, int]]:
        return [(t.producer_id, t.first_offset) for t in ix.collect(lo, hi)[0]]

    assert pids(0, 10) == []  # ends before the first aborted record
    assert pids(0, 11) == [(P1, 10)]
    assert pids(21, 31) == [(P2, 15)]
    assert pids(31, 40) == []  # between transactions
    assert pids(0, 100) == [(P1, 10), (P2, 15), (P1, 40)]
    assert pids(45, 46) == [(P1, 40)]  # the marker itself is in range
    assert ix.collect(0, 31)[1]  # complete: the LSO after P2's abort reached the bound
    assert not ix.collect(0, 100)[1]  # a later segment may still hold an overlapping abort


@pytest.mark.parametrize("damage", ["missing", "torn entry", "past the segment", "out of order", "version"])
def test_load_refuses_a_damaged_index(tmp_path: Path, damage: str) -> None:
    ix = index(tmp_path, AbortedTxn(P1, 0, 5, 6), AbortedTxn(P2, 6, 8, 9))
    next_offset = 10
    if damage == "missing":
        ix.path.unlink()
    elif damage == "torn entry":
        os.truncate(ix.path, ENTRY_SIZE + 10)  # a crash while appending the second
    elif damage == "past the segment":
        next_offset = 7
    elif damage == "out of order":
        data = ix.path.read_bytes()
        ix.path.write_bytes(data[ENTRY_SIZE:] + data[:ENTRY_SIZE])
    else:
        raw = bytearray(ix.path.read_bytes())
        raw[1] = 9
        ix.path.write_bytes(bytes(raw))
    with pytest.raises(CorruptIndex):
        TransactionIndex(ix.path, 0).load(next_offset)


def test_truncate_drops_entries_at_or_above(tmp_path: Path) -> None:
    ix = index(tmp_path, AbortedTxn(P1, 0, 5, 6), AbortedTxn(P2, 6, 8, 9))
    ix.truncate_to(8)
    assert ix.entries == [AbortedTxn(P1, 0, 5, 6)]
    assert ix.path.stat().st_size == ENTRY_SIZE


# -- markers --------------------------------------------------------------------------------
def test_marker_batch_layout() -> None:
    m = EndTxnMarker(P1, 3, commit=False, coordinator_epoch=7)
    data = build_marker_batch(m, base_offset=42, timestamp_ms=NOW)
    h = rb.read_header(data)
    assert h.is_control and h.is_transactional
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.records_count) == (P1, 3, -1, 1)
    rec = rb.decode_batch(data)[1][0]
    assert rec.key == b"\x00\x00\x00\x00"  # version 0, ABORT
    assert rec.value == b"\x00\x00\x00\x00\x00\x07"  # version 0, coordinator epoch 7
    assert read_marker(data) == m
    assert read_marker(build_marker_batch(EndTxnMarker(P1, 3, True, 7))) == EndTxnMarker(P1, 3, True, 7)


# -- through the log ------------------------------------------------------------------------
def txn_batch(pid: int, seq: int, n: int = 2, epoch: int = 0, tag: int = 0) -> bytes:
    return rb.build_batch(
        [(b"k", f"t{tag}-{i}".encode()) for i in range(n)],
        timestamp_ms=NOW,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        transactional=True,
    )


def txn_append(lg: Log, *batches: bytes) -> int:
    info = lg.append_as_leader(payload(*batches), NOW, transactional=True)
    lg.high_watermark = lg.log_end_offset
    return info.first_offset


def end(lg: Log, pid: int, commit: bool, epoch: int = 0, coordinator_epoch: int = 0) -> int:
    info, _ = lg.append_txn_marker(EndTxnMarker(pid, epoch, commit, coordinator_epoch), NOW)
    lg.high_watermark = lg.log_end_offset
    return info.first_offset


def state(lg: Log) -> tuple[object, ...]:
    ps = lg.producer_state
    return (
        lg.log_end_offset,
        lg.last_stable_offset,
        dict(ps.ongoing),
        {
            p: (e.epoch, e.coordinator_epoch, e.current_txn_first_offset, e.last_seq)
            for p, e in ps.producers.items()
        },
        [t for s in lg.segments for t in s.txn_index.entries],
    )


def test_transactional_batches_are_refused_unless_admitted(tmp_path: Path) -> None:
    lg, _ = open_log(tmp_path)
    with pytest.raises(Exception) as exc:
        lg.append_as_leader(payload(txn_batch(P1, 0)), NOW)
    assert getattr(exc.value, "code", None) == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    with pytest.raises(Exception) as exc:
        lg.append_as_leader(payload(build_marker_batch(EndTxnMarker(P1, 0, True, 0))), NOW)
    assert lg.log_end_offset == 0
    lg.close()


def test_lso_stops_at_an_open_transaction_and_moves_when_it_ends(tmp_path: Path) -> None:
    lg, _ = open_log(tmp_path)
    append(lg, batch(3))  # 0-2 plain
    assert lg.last_stable_offset == 3 and lg.first_unstable_offset is None
    first = txn_append(lg, txn_batch(P1, 0))  # 3-4
    assert first == 3
    append(lg, batch(1))  # 5 plain, after the open transaction
    assert (lg.high_watermark, lg.last_stable_offset) == (6, 3)
    txn_append(lg, txn_batch(P2, 0))  # 6-7
    txn_append(lg, txn_batch(P1, 2))  # 8-9: same transaction, first offset stays 3
    assert lg.first_unstable_offset == 3
    assert end(lg, P1, commit=True) == 10
    assert lg.last_stable_offset == 6  # P2's transaction is still open
    assert lg.segments[-1].txn_index.entries == []  # a commit is not indexed
    assert end(lg, P2, commit=False) == 11
    assert lg.last_stable_offset == lg.high_watermark == 12
    assert [t for s in lg.segments for t in s.txn_index.entries] == [AbortedTxn(P2, 6, 11, 12)]
    lg.high_watermark = 4  # the LSO never passes the high watermark
    assert lg.last_stable_offset == 4
    lg.close()


def test_the_lso_never_falls_below_the_log_start(tmp_path: Path) -> None:
    lg, _ = open_log(tmp_path)
    txn_append(lg, txn_batch(P1, 0))  # 0-1, open
    append(lg, batch(4))  # 2-5
    assert lg.last_stable_offset == 0
    lg.delete_records_before(3)
    assert (lg.first_unstable_offset, lg.last_stable_offset) == (3, 3)
    lg.close()


def test_abort_index_records_the_lso_of_other_open_transactions(tmp_path: Path) -> None:
    lg, _ = open_log(tmp_path)
    txn_append(lg, txn_batch(P1, 0))  # 0-1
    txn_append(lg, txn_batch(P2, 0))  # 2-3
    end(lg, P2, commit=False)  # 4: P1 still open from 0
    end(lg, P1, commit=False)  # 5
    entries = [t for s in lg.segments for t in s.txn_index.entries]
    assert entries == [AbortedTxn(P2, 2, 4, 0), AbortedTxn(P1, 0, 5, 6)]
    assert lg.collect_aborted(0, 6) == entries
    assert lg.collect_aborted(5, 6) == [AbortedTxn(P1, 0, 5, 6)]
    assert lg.collect_aborted(0, 1) == [AbortedTxn(P1, 0, 5, 6)]
    lg.close()


def test_collect_aborted_across_segments(tmp_path: Path) -> None:
    lg, _ = open_log(tmp_path, cfg(segment_bytes=300))
    seq = 0
    for i in range(6):
        txn_append(lg, txn_batch(P1, seq, n=3, tag=i))
        seq += 3
        end(lg, P1, commit=i % 2 == 1)
    assert len(lg.segments) > 2
    aborted = lg.collect_aborted(0, lg.log_end_offset)
    assert [(t.first_offset, t.last_offset) for t in aborted] == [(0, 3), (8, 11), (16, 19)]
    assert [(t.first_offset, t.last_offset) for t in lg.collect_aborted(9, 17)] == [(8, 11), (16, 19)]
    lg.close()


def test_marker_checks(tmp_path: Path) -> None:
    lg, _ = open_log(tmp_path)
    txn_append(lg, txn_batch(P1, 0, epoch=2))
    leo = lg.log_end_offset
    with pytest.raises(InvalidProducerEpoch) as e1:
        lg.append_txn_marker(EndTxnMarker(P1, 1, True, 0), NOW)  # a fenced producer's marker
    assert e1.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    end(lg, P1, commit=True, epoch=2, coordinator_epoch=5)
    with pytest.raises(Exception) as e2:
        lg.append_txn_marker(EndTxnMarker(P1, 2, False, 4), NOW)  # a deposed coordinator
    assert getattr(e2.value, "code", None) == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    assert lg.log_end_offset == leo + 1  # nothing written by the refused markers
    # a non-transactional write during an open transaction
    txn_append(lg, txn_batch(P1, 2, epoch=2))
    with pytest.raises(InvalidTxnState) as e3:
        append(lg, batch(1, pid=P1, epoch=2, seq=4))
    assert e3.value.code == ErrorCode.INVALID_TXN_STATE
    # a marker for a producer that never wrote here ends an empty transaction (as Kafka)
    at = end(lg, P2, commit=False)
    assert lg.collect_aborted(at, at + 1) == [AbortedTxn(P2, at, at, 3)]
    lg.close()


def test_follower_rebuilds_transactions_from_replicated_batches(tmp_path: Path) -> None:
    leader, _ = open_log(tmp_path / "leader")
    txn_append(leader, txn_batch(P1, 0))
    txn_append(leader, txn_batch(P2, 0))
    end(leader, P1, commit=False)
    follower, _ = open_log(tmp_path / "follower")
    follower.append_as_follower(memoryview(bytearray(leader.read(0, 1 << 20, leader.log_end_offset))), NOW)
    follower.high_watermark = follower.log_end_offset
    assert state(follower)[1:] == state(leader)[1:]
    leader.close()
    follower.close()


# -- recovery -------------------------------------------------------------------------------
def history(lg: Log) -> None:
    """Several segments: committed and aborted transactions, one left open, plain data."""
    seq = {P1: 0, P2: 0}
    for i in range(5):
        for pid in (P1, P2):
            txn_append(lg, txn_batch(pid, seq[pid], n=3, tag=i))
            seq[pid] += 3
        append(lg, batch(2, tag=i))
        end(lg, P1, commit=i % 2 == 0)
        if i < 4:
            end(lg, P2, commit=i % 3 == 0)


def test_history_spans_segments_and_leaves_one_transaction_open(tmp_path: Path) -> None:
    lg, _ = open_log(tmp_path, cfg(segment_bytes=400))
    history(lg)
    assert len(lg.segments) > 3
    assert lg.first_unstable_offset is not None
    assert lg.last_stable_offset < lg.log_end_offset
    assert sum(len(s.txn_index.entries) for s in lg.segments) == 2 + 2
    lg.close()


@pytest.mark.parametrize(
    "damage",
    [
        "clean restart",
        "crash",
        "truncated txnindex",
        "missing txnindex",
        "every txnindex missing",
        "garbage txnindex",
        "no snapshot",
        "version 1 snapshot",
    ],
)
def test_recovery_rebuilds_the_same_state(tmp_path: Path, damage: str) -> None:
    config = cfg(segment_bytes=400)
    lg, _ = open_log(tmp_path, config)
    history(lg)
    expected = state(lg)
    lg.close()
    txn_files = sorted(tmp_path.glob("*.txnindex"))
    with_entries = [p for p in txn_files if p.stat().st_size]
    assert len(with_entries) >= 2
    if damage == "truncated txnindex":
        p = with_entries[0]
        os.truncate(p, p.stat().st_size - ENTRY_SIZE - 5)
    elif damage == "missing txnindex":
        with_entries[0].unlink()
    elif damage == "every txnindex missing":
        for p in txn_files:
            p.unlink()
    elif damage == "garbage txnindex":
        with_entries[-1].write_bytes(b"\xff" * ENTRY_SIZE * 2)
    elif damage == "no snapshot":
        for p in tmp_path.glob("*.snapshot"):
            p.unlink()
    elif damage == "version 1 snapshot":
        _downgrade_snapshots(tmp_path)
    again, _ = open_log(tmp_path, config, clean=damage != "crash")
    again.high_watermark = again.log_end_offset
    if damage in ("no snapshot", "version 1 snapshot"):
        # no transaction state to start from: the indexes are still whole (the v1 format
        # predates transactional writes, so a real one never had a transaction open; with no
        # snapshot only the last segments are replayed, see Log's docstring)
        assert state(again)[4] == expected[4]
    else:
        assert state(again) == expected
    # every index file is whole again
    for seg in again.segments:
        assert seg.txn_index.path.stat().st_size == ENTRY_SIZE * len(seg.txn_index.entries)
    again.close()


def _downgrade_snapshots(d: Path) -> None:
    """Rewrite every snapshot in the version 1 format (no transaction fields)."""
    import struct

    import crc32c

    for p in d.glob("*.snapshot"):
        data = p.read_bytes()
        body = data[6:]
        (count,) = struct.unpack_from(">i", body, 0)
        pos, out = 4, bytearray(struct.pack(">i", count))
        for _ in range(count):
            pid, epoch, last_ms, _ce, _first, n = struct.unpack_from(">qhqiqb", body, pos)
            pos += struct.calcsize(">qhqiqb")
            out += struct.pack(">qhqb", pid, epoch, last_ms, n)
            out += body[pos : pos + n * 24]
            pos += n * 24
        p.write_bytes(struct.pack(">hI", 1, crc32c.crc32c(bytes(out))) + out)


def test_truncating_a_marker_reopens_its_transaction(tmp_path: Path) -> None:
    lg, _ = open_log(tmp_path, cfg(segment_bytes=300))
    txn_append(lg, txn_batch(P2, 0, n=6))
    append(lg, batch(5))
    lg.roll()  # a snapshot at the roll: P2's transaction open from 0
    txn_append(lg, txn_batch(P1, 0))
    marker = end(lg, P1, commit=False)
    assert lg.first_unstable_offset == 0
    end(lg, P2, commit=True)
    assert lg.first_unstable_offset is None
    lg.truncate_to(marker)
    assert lg.first_unstable_offset == 0
    assert lg.producer_state.ongoing == {P2: 0, P1: 11}
    assert lg.collect_aborted(0, lg.log_end_offset) == []
    lg.close()


def test_retention_deletes_the_txnindex_with_its_segment(tmp_path: Path) -> None:
    lg, _ = open_log(tmp_path, cfg(segment_bytes=300, retention_bytes=1))
    for i in range(4):
        txn_append(lg, txn_batch(P1, 2 * i, tag=i))
        end(lg, P1, commit=False)
    first = lg.segments[0].txn_index.path
    assert first.exists()
    lg.delete_retained_segments(NOW)
    assert not first.exists()
    assert len(list(tmp_path.glob("*.txnindex"))) == len(lg.segments)
    lg.close()


def test_read_committed_view(tmp_path: Path) -> None:
    """What Fetch at read_committed will do: read below the LSO, drop aborted producers' data."""
    lg, _ = open_log(tmp_path)
    txn_append(lg, txn_batch(P1, 0, tag=1))
    txn_append(lg, txn_batch(P2, 0, tag=2))
    end(lg, P1, commit=False)
    upper = lg.last_stable_offset
    assert upper == 2  # P2 open
    end(lg, P2, commit=True)
    upper = lg.last_stable_offset
    aborted = lg.collect_aborted(0, upper)
    recs = read_records(lg, 0, upper)
    ranges = {t.producer_id: (t.first_offset, t.last_offset) for t in aborted}
    visible = []
    for r in recs:
        seg_batches = [h for h in lg.iter_headers(r.offset) if h.base_offset <= r.offset][:1]
        h = seg_batches[0]
        if h.is_control:
            continue
        rng = ranges.get(h.producer_id)
        if rng and rng[0] <= r.offset <= rng[1]:
            continue
        visible.append(r.value)
    assert visible == [b"t2-0", b"t2-1"]
    lg.close()
