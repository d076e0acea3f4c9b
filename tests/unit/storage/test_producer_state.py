"""Idempotent producers: sequence checks, duplicates, fencing, expiry and snapshots — first on
ProducerStateManager alone, then end to end through Log.append_as_leader and restarts."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.protocol import records as rb
from framework.protocol.control import EndTxnMarker
from framework.protocol.error_codes import ErrorCode
from framework.storage.log import Log
from framework.storage.producer_state import (
    INT32_MAX,
    MAX_BATCHES,
    Duplicate,
    InvalidProducerEpoch,
    OutOfOrderSequence,
    Pending,
    ProducerStateManager,
    UnknownProducerId,
)
from tests.support.storage import (
    NOW,
    append,
    batch,
    cfg,
    flip_byte,
    log_files,
    offsets,
    open_log,
    read_records,
)

PID = 4242


# -- ProducerStateManager alone -------------------------------------------------------------
class Writer:
    """Feeds a ProducerStateManager the way the log does: check, assign offsets, apply."""

    def __init__(self, ps: ProducerStateManager) -> None:
        self.ps = ps
        self.next_offset = 0

    def headers(self, *specs: tuple[int, int, int, int]) -> list[rb.BatchHeader]:
        """(pid, epoch, base_sequence, records) per batch, offsets assigned from the end."""
        out, off = [], self.next_offset
        for pid, epoch, seq, n in specs:
            data = rb.build_batch(
                [(b"k", b"v")] * n,
                base_offset=off,
                timestamp_ms=NOW,
                producer_id=pid,
                producer_epoch=epoch,
                base_sequence=seq,
            )
            out.append(rb.read_header(data))
            off += n
        return out

    def write(self, *specs: tuple[int, int, int, int], now: int = NOW) -> Pending | Duplicate:
        hs = self.headers(*specs)
        res = self.ps.check(hs)
        if isinstance(res, Pending):
            self.ps.apply(res, hs, now)
            self.next_offset = hs[-1].next_offset
        return res


@pytest.fixture
def w(tmp_path: Path) -> Writer:
    return Writer(ProducerStateManager(tmp_path, "t-0"))


def test_first_batch_of_a_new_producer_starts_at_sequence_zero(w: Writer) -> None:
    assert isinstance(w.write((PID, 0, 0, 3)), Pending)
    e = w.ps.producers[PID]
    assert (e.epoch, e.last_seq, e.last_append_ms) == (0, 2, NOW)
    assert w.ps.dirty


def test_unknown_producer_with_a_non_zero_sequence_is_unknown_producer_id(w: Writer) -> None:
    with pytest.raises(UnknownProducerId, match="new producer id") as ei:
        w.write((PID, 0, 5, 1))
    assert ei.value.code == ErrorCode.UNKNOWN_PRODUCER_ID
    assert PID not in w.ps.producers


def test_in_sequence_batches_are_accepted(w: Writer) -> None:
    for seq in range(0, 30, 3):
        assert isinstance(w.write((PID, 0, seq, 3)), Pending)
    assert w.ps.producers[PID].last_seq == 29
    assert len(w.ps.producers[PID].batches) == MAX_BATCHES  # only the last five are kept


def test_each_of_the_last_five_batches_is_a_duplicate_with_its_original_offsets(w: Writer) -> None:
    sent = []
    for seq in range(0, 14, 2):
        before = w.next_offset
        w.write((PID, 0, seq, 2))
        sent.append((seq, before, before + 1))
    for seq, first, last in sent[-MAX_BATCHES:]:
        dup = w.write((PID, 0, seq, 2))
        assert dup == Duplicate(first, last)
    # older than the five remembered: no longer recognised, and not in sequence
    with pytest.raises(OutOfOrderSequence):
        w.write((PID, 0, sent[0][0], 2))


def test_a_gap_is_out_of_order_sequence(w: Writer) -> None:
    w.write((PID, 0, 0, 2))
    with pytest.raises(OutOfOrderSequence, match="expected sequence 2, got 3") as ei:
        w.write((PID, 0, 3, 1))
    assert ei.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    # a batch overlapping the last one without matching it is out of order too
    with pytest.raises(OutOfOrderSequence):
        w.write((PID, 0, 1, 2))
    assert w.ps.producers[PID].last_seq == 1


def test_an_older_epoch_is_fenced(w: Writer) -> None:
    w.write((PID, 3, 0, 1))
    with pytest.raises(InvalidProducerEpoch, match="fenced") as ei:
        w.write((PID, 2, 1, 1))
    assert ei.value.code == ErrorCode.INVALID_PRODUCER_EPOCH


def test_a_new_epoch_must_start_at_sequence_zero_and_forgets_the_old_batches(w: Writer) -> None:
    w.write((PID, 0, 0, 5))
    with pytest.raises(OutOfOrderSequence, match="must start at sequence 0"):
        w.write((PID, 1, 5, 1))
    assert isinstance(w.write((PID, 1, 0, 1)), Pending)
    e = w.ps.producers[PID]
    assert e.epoch == 1 and len(e.batches) == 1
    # the old epoch's batch is no longer a duplicate: it is fenced
    with pytest.raises(InvalidProducerEpoch):
        w.write((PID, 0, 0, 5))


def test_producers_are_independent(w: Writer) -> None:
    w.write((1, 0, 0, 1))
    w.write((2, 0, 0, 1))
    w.write((1, 0, 1, 1))
    assert w.write((2, 0, 0, 1)) == Duplicate(1, 1)
    assert w.write((1, 0, 1, 1)) == Duplicate(2, 2)
    assert isinstance(w.write((2, 0, 1, 1)), Pending)


def test_several_batches_in_one_request_are_checked_against_each_other(w: Writer) -> None:
    assert isinstance(w.write((PID, 0, 0, 2), (PID, 0, 2, 2), (-1, -1, -1, 1)), Pending)
    assert w.ps.producers[PID].last_seq == 3
    with pytest.raises(OutOfOrderSequence):
        w.write((PID, 0, 4, 1), (PID, 0, 6, 1))
    assert w.ps.producers[PID].last_seq == 3  # check has no side effects


def test_sequence_wraps_after_int32_max(w: Writer) -> None:
    w.write((PID, 0, 0, 1))
    e = w.ps.producers[PID]
    e.batches[-1].last_seq = INT32_MAX - 2  # as after two billion records
    assert isinstance(w.write((PID, 0, INT32_MAX - 1, 2)), Pending)  # ends exactly at INT32_MAX
    assert e.last_seq == INT32_MAX
    assert isinstance(w.write((PID, 0, 0, 1)), Pending)  # wraps to 0
    assert e.last_seq == 0
    # a batch that itself crosses the wrap
    e.batches[-1].last_seq = INT32_MAX - 2
    assert isinstance(w.write((PID, 0, INT32_MAX - 1, 3)), Pending)
    assert e.last_seq == 0
    assert isinstance(w.write((PID, 0, 1, 1)), Pending)
    with pytest.raises(OutOfOrderSequence):
        w.write((PID, 0, INT32_MAX, 1))


def test_remove_expired_forgets_idle_producers(w: Writer) -> None:
    w.write((1, 0, 0, 1), now=NOW)
    w.write((2, 0, 0, 1), now=NOW + 5_000)
    w.ps.dirty = False
    assert w.ps.remove_expired(NOW + 10_000, 9_000) == [1]
    assert w.ps.dirty
    assert w.ps.remove_expired(NOW + 10_000, 9_000) == []
    with pytest.raises(UnknownProducerId):
        w.write((1, 0, 1, 1))
    assert isinstance(w.write((1, 0, 0, 1)), Pending)  # a fresh start is fine
    assert isinstance(w.write((2, 0, 1, 1)), Pending)


def test_truncate_to_forgets_batches_at_and_after_the_offset(w: Writer) -> None:
    w.write((1, 0, 0, 2))  # 0-1
    w.write((2, 0, 0, 2))  # 2-3
    w.write((1, 0, 2, 2))  # 4-5
    w.ps.take_snapshot(6)
    w.ps.take_snapshot(2)
    w.ps.truncate_to(3)
    assert w.ps.producers[1].last_seq == 1
    assert 2 not in w.ps.producers  # every batch of producer 2 is gone
    assert [p.name for p in w.ps.snapshot_files()] == ["00000000000000000002.snapshot"]


# -- snapshots ------------------------------------------------------------------------------
def test_snapshot_round_trip(w: Writer, tmp_path: Path) -> None:
    w.write((1, 0, 0, 2))
    w.write((2, 7, 0, 1))
    w.write((1, 0, 2, 3))
    path = w.ps.take_snapshot(6)
    assert path == tmp_path / "00000000000000000006.snapshot"
    assert not w.ps.dirty
    fresh = ProducerStateManager(tmp_path)
    assert fresh.load_latest(6) == 6
    assert fresh.producers == w.ps.producers


def test_snapshot_v2_keeps_open_transactions_and_coordinator_epochs(w: Writer, tmp_path: Path) -> None:
    txn = rb.build_batch(
        [(b"k", b"v")] * 2,
        timestamp_ms=NOW,
        producer_id=5,
        producer_epoch=1,
        base_sequence=0,
        transactional=True,
    )
    hs = [rb.read_header(txn)._replace(base_offset=3)]
    pending = w.ps.check(hs)
    assert isinstance(pending, Pending)
    w.ps.apply(pending, hs, NOW)
    w.ps.complete_txn(EndTxnMarker(6, 0, False, 9), 7, NOW)  # another producer's marker
    assert w.ps.ongoing == {5: 3} and w.ps.first_unstable_offset() == 3
    path = w.ps.take_snapshot(8)
    assert path is not None and struct.unpack_from(">h", path.read_bytes())[0] == 2
    fresh = ProducerStateManager(tmp_path)
    assert fresh.load_latest(8) == 8
    assert fresh.producers == w.ps.producers
    assert fresh.ongoing == {5: 3}
    assert fresh.producers[6].coordinator_epoch == 9


def test_a_version_1_snapshot_still_loads(tmp_path: Path) -> None:
    """The format before transactions: no coordinator epoch, no open transaction."""
    body = struct.pack(">i", 1) + struct.pack(">qhqb", 77, 3, NOW, 1) + struct.pack(">iiqq", 0, 4, 10, 14)
    (tmp_path / f"{15:020d}.snapshot").write_bytes(struct.pack(">hI", 1, crc32c.crc32c(body)) + body)
    ps = ProducerStateManager(tmp_path)
    assert ps.load_latest(20) == 15
    e = ps.producers[77]
    assert (e.epoch, e.last_seq, e.coordinator_epoch, e.current_txn_first_offset) == (3, 4, -1, -1)
    assert ps.ongoing == {} and ps.first_unstable_offset() is None


def test_a_producer_with_an_open_transaction_does_not_expire(w: Writer) -> None:
    txn = rb.build_batch(
        [(b"k", b"v")], timestamp_ms=NOW, producer_id=5, producer_epoch=0, base_sequence=0, transactional=True
    )
    hs = [rb.read_header(txn)]
    pending = w.ps.check(hs)
    assert isinstance(pending, Pending)
    w.ps.apply(pending, hs, NOW)
    w.write((1, 0, 0, 1))
    assert w.ps.remove_expired(NOW + 10_000, 1000) == [1]
    assert 5 in w.ps.producers


def test_snapshot_is_skipped_when_nothing_changed(w: Writer) -> None:
    w.write((1, 0, 0, 1))
    assert w.ps.take_snapshot(1) is not None
    assert w.ps.take_snapshot(1) is None
    w.write((1, 0, 1, 1))
    assert w.ps.take_snapshot(1) is not None


def test_only_the_two_newest_snapshots_are_kept(w: Writer, tmp_path: Path) -> None:
    for off in (10, 20, 30, 40):
        w.write((1, 0, off // 10 - 1, 1))
        w.ps.take_snapshot(off)
    assert [p.name[:20] for p in w.ps.snapshot_files()] == [f"{30:020d}", f"{40:020d}"]
    assert not list(tmp_path.glob("*.tmp"))


def test_snapshots_beyond_the_log_end_are_deleted_on_load(w: Writer, tmp_path: Path) -> None:
    w.write((1, 0, 0, 1))
    w.ps.take_snapshot(1)
    w.write((1, 0, 1, 1))
    w.ps.take_snapshot(2)
    fresh = ProducerStateManager(tmp_path)
    assert fresh.load_latest(1) == 1  # the log lost offset 1 in a crash
    assert fresh.producers[1].last_seq == 0
    assert [p.name[:20] for p in fresh.snapshot_files()] == [f"{1:020d}"]


@pytest.mark.parametrize("damage", ["flip", "truncate", "empty", "version", "garbage"])
def test_a_damaged_snapshot_is_ignored_for_the_previous_one(w: Writer, tmp_path: Path, damage: str) -> None:
    w.write((1, 0, 0, 1))
    w.ps.take_snapshot(1)
    w.write((1, 0, 1, 1))
    newest = w.ps.take_snapshot(2)
    assert newest is not None
    if damage == "flip":
        flip_byte(newest, newest.stat().st_size - 3)
    elif damage == "truncate":
        os.truncate(newest, newest.stat().st_size - 5)
    elif damage == "empty":
        newest.write_bytes(b"")
    elif damage == "version":
        data = bytearray(newest.read_bytes())
        struct.pack_into(">h", data, 0, 9)
        newest.write_bytes(bytes(data))
    else:
        newest.write_bytes(os.urandom(64))
    fresh = ProducerStateManager(tmp_path)
    assert fresh.load_latest(2) == 1
    assert fresh.producers[1].last_seq == 0


def test_no_valid_snapshot_means_empty_state(tmp_path: Path) -> None:
    (tmp_path / "00000000000000000005.snapshot").write_bytes(b"\x00\x01junkjunkjunk")
    ps = ProducerStateManager(tmp_path)
    assert ps.load_latest(10) == -1
    assert ps.producers == {}


def test_replay_rebuilds_state_from_batch_headers(w: Writer, tmp_path: Path) -> None:
    hs = []
    for spec in [(1, 0, 0, 2), (2, 0, 0, 1), (-1, -1, -1, 4), (1, 0, 2, 1)]:
        h = w.headers(spec)
        w.write(spec)
        hs += h
    fresh = ProducerStateManager(tmp_path)
    assert fresh.replay(hs, NOW) == 3  # the non-idempotent batch is skipped
    assert fresh.producers == w.ps.producers


@settings(max_examples=60, deadline=None)
@given(ops=st.lists(st.tuples(st.integers(0, 2), st.integers(-2, 6), st.integers(1, 3)), max_size=40))
def test_state_matches_a_reference_model(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[int, int, int]]
) -> None:
    """Random producers sending batches at random sequence offsets from their next expected one
    (negative: retries of recent batches). Every outcome matches a simple model."""
    ps = ProducerStateManager(tmp_path_factory.mktemp("ps"))
    w = Writer(ps)
    model: dict[int, list[tuple[int, int, int, int]]] = {}  # pid -> [(first, last, off0, off1)]
    for pid, shift, size in ops:
        n = size
        hist = model.get(pid, [])
        nxt = hist[-1][1] + 1 if hist else 0
        if shift < 0 and hist:
            first, last, o0, _o1 = hist[max(len(hist) + shift, 0)]
            seq, n = first, last - first + 1
        else:
            seq = nxt + max(shift, 0)
        recent = {(f, la): (a, b) for f, la, a, b in hist[-MAX_BATCHES:]}
        key = (seq, seq + n - 1)
        if key in recent:
            assert w.write((pid, 0, seq, n)) == Duplicate(*recent[key])
        elif not hist and seq != 0:
            with pytest.raises(UnknownProducerId):
                w.write((pid, 0, seq, n))
        elif seq != nxt:
            with pytest.raises(OutOfOrderSequence):
                w.write((pid, 0, seq, n))
        else:
            o0 = w.next_offset
            assert isinstance(w.write((pid, 0, seq, n)), Pending)
            model.setdefault(pid, []).append((seq, seq + n - 1, o0, o0 + n - 1))
    # and the state survives a snapshot
    ps.take_snapshot(w.next_offset)
    fresh = ProducerStateManager(ps.dir)
    fresh.load_latest(w.next_offset)
    assert fresh.producers == ps.producers


# -- end to end through the log -------------------------------------------------------------
def send(
    lg: Log,
    seq: int,
    n: int = 1,
    *,
    pid: int = PID,
    epoch: int = 0,
    now: int = NOW,
    tag: int | None = None,
):
    return append(lg, batch(n, pid=pid, epoch=epoch, seq=seq, tag=seq if tag is None else tag), now=now)


@pytest.fixture
def plog(tmp_path: Path) -> Log:
    lg, _ = open_log(tmp_path / "p")
    yield lg
    lg.close()


def _disk(lg: Log) -> int:
    return sum(p.stat().st_size for p in log_files(lg.dir))


def test_retry_of_any_of_the_last_five_batches_returns_original_offsets_and_writes_nothing(
    plog: Log,
) -> None:
    infos = [send(plog, seq, 2) for seq in range(0, 16, 2)]  # 8 batches, offsets 0..15
    leo, size = plog.log_end_offset, _disk(plog)
    for seq, orig in zip(range(0, 16, 2)[-5:], infos[-5:], strict=True):
        dup = send(plog, seq, 2)
        assert dup.duplicate
        assert (dup.first_offset, dup.last_offset) == (orig.first_offset, orig.last_offset)
        assert dup.records == 0 and dup.bytes == 0
    assert (plog.log_end_offset, _disk(plog)) == (leo, size)
    assert offsets(read_records(plog)) == list(range(16))  # every record exactly once
    with pytest.raises(OutOfOrderSequence):
        send(plog, 0, 2)  # too old to be recognised


def test_rejected_batches_write_nothing(plog: Log) -> None:
    send(plog, 0, epoch=1)
    leo, size = plog.log_end_offset, _disk(plog)
    with pytest.raises(OutOfOrderSequence):
        send(plog, 2, epoch=1)
    with pytest.raises(InvalidProducerEpoch):
        send(plog, 1, epoch=0)
    with pytest.raises(OutOfOrderSequence):
        send(plog, 1, epoch=2)
    with pytest.raises(UnknownProducerId):
        send(plog, 1, pid=PID + 1)
    assert (plog.log_end_offset, _disk(plog)) == (leo, size)
    assert send(plog, 1, epoch=1).first_offset == 1


def test_non_idempotent_batches_are_never_deduplicated(plog: Log) -> None:
    data = batch(1)
    append(plog, data)
    append(plog, data)
    assert plog.log_end_offset == 2


def test_producer_state_survives_a_clean_restart(tmp_path: Path) -> None:
    d = tmp_path / "p"
    lg, _ = open_log(d)
    first = send(lg, 0, 3)
    send(lg, 3, 2)
    lg.close()
    assert list(d.glob("*.snapshot")), "a snapshot is written at close"
    lg, _ = open_log(d, clean=True)
    dup = send(lg, 0, 3)
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (
        first.first_offset,
        first.last_offset,
    )
    assert send(lg, 5).first_offset == 5
    with pytest.raises(OutOfOrderSequence):
        send(lg, 9)


@pytest.mark.parametrize("damage", ["deleted", "corrupt"])
def test_state_is_rebuilt_from_the_log_without_a_usable_snapshot(tmp_path: Path, damage: str) -> None:
    d = tmp_path / "p"
    lg, _ = open_log(d)
    infos = [send(lg, seq) for seq in range(4)]
    lg.close()
    for p in d.glob("*.snapshot"):
        if damage == "deleted":
            p.unlink()
        else:
            flip_byte(p, p.stat().st_size - 1)
    lg, _ = open_log(d, clean=False)
    dup = send(lg, 3)
    assert dup.duplicate and dup.first_offset == infos[3].first_offset
    assert lg.log_end_offset == 4
    assert send(lg, 4).first_offset == 4


def test_roll_writes_a_snapshot_at_the_new_segment_base(tmp_path: Path) -> None:
    lg, _ = open_log(tmp_path / "p")
    seq = 0
    while len(lg.segments) < 3:
        send(lg, seq, 2)
        seq += 2
    snaps = sorted(int(p.name[:20]) for p in lg.dir.glob("*.snapshot"))
    assert snaps == [s.base_offset for s in lg.segments[1:]]
    # the snapshot at a base holds the state as of that offset: before the batch starting it
    fresh = ProducerStateManager(lg.dir)
    base = lg.segments[2].base_offset
    assert fresh.load_latest(base) == base
    assert fresh.producers[PID].batches[-1].last_offset == base - 1
    lg.close()


def test_retry_after_a_crash_with_many_segments_and_no_snapshot(tmp_path: Path) -> None:
    d = tmp_path / "p"
    lg, _ = open_log(d)
    seq = 0
    infos = []
    while len(lg.segments) < 5:
        infos.append(send(lg, seq, 2))
        seq += 2
    lg.close()
    for p in d.glob("*.snapshot"):
        p.unlink()
    lg, _ = open_log(d, clean=False)
    # the last batch is recognised (replay covers the newest segments)
    dup = send(lg, seq - 2, 2)
    assert dup.duplicate and dup.first_offset == infos[-1].first_offset
    assert send(lg, seq, 2).first_offset == infos[-1].last_offset + 1


def test_a_batch_lost_in_a_crash_is_written_again_on_retry_not_answered_as_duplicate(
    tmp_path: Path,
) -> None:
    d = tmp_path / "p"
    lg, _ = open_log(d)
    for seq in range(5):
        send(lg, seq)
    lg.close()  # snapshot at offset 5 knows sequence 4
    active = log_files(d)[-1]
    last_size = rb.read_header(active.read_bytes(), 0).size
    os.truncate(active, active.stat().st_size - last_size // 2)  # the batch with sequence 4 is torn
    lg, report = open_log(d, clean=False)
    assert report.truncated_bytes > 0 and lg.log_end_offset == 4
    info = send(lg, 4)
    assert not info.duplicate and info.first_offset == 4  # written, not a phantom duplicate
    assert offsets(read_records(lg)) == [0, 1, 2, 3, 4]


def test_log_truncation_forgets_the_truncated_batches(plog: Log) -> None:
    for seq in range(6):
        send(plog, seq)
    plog.truncate_to(4)
    with pytest.raises(OutOfOrderSequence):
        send(plog, 6)
    info = send(plog, 4)
    assert not info.duplicate and info.first_offset == 4


def test_emptying_the_log_forgets_every_producer(tmp_path: Path) -> None:
    d = tmp_path / "p"
    lg, _ = open_log(d)
    for seq in range(3):
        send(lg, seq)
    lg.roll()
    lg.truncate_fully_and_start_at(100)
    # a retry of a batch that is gone must not be acknowledged with offsets that no longer exist
    with pytest.raises(UnknownProducerId):
        send(lg, 2)
    assert not list(d.glob("*.snapshot"))
    assert send(lg, 0).first_offset == 100
    lg.close()
    lg, _ = open_log(d, clean=True)
    assert send(lg, 1).first_offset == 101
    lg.close()


def test_an_expired_producer_id_is_unknown_even_after_a_clean_restart(tmp_path: Path) -> None:
    d = tmp_path / "p"
    lg, _ = open_log(d, cfg(producer_id_expiration_ms=60_000))
    send(lg, 0, now=NOW)
    send(lg, 0, pid=7, now=NOW + 50_000)
    assert lg.producer_state.remove_expired(NOW + 60_001, lg.config.producer_id_expiration_ms) == [PID]
    with pytest.raises(UnknownProducerId):
        send(lg, 1, now=NOW + 60_001)
    lg.close()
    lg, _ = open_log(d, clean=True)
    with pytest.raises(UnknownProducerId):
        send(lg, 1)
    assert send(lg, 1, pid=7).first_offset == 2  # the other producer is still known
    assert send(lg, 0).first_offset == 3  # a new start of the expired one is accepted


def test_sequence_wrap_end_to_end(plog: Log) -> None:
    send(plog, 0)
    plog.producer_state.producers[PID].batches[-1].last_seq = INT32_MAX - 1
    info = send(plog, INT32_MAX, 3)  # sequences INT32_MAX, 0, 1
    assert not info.duplicate and (info.first_offset, info.last_offset) == (1, 3)
    assert send(plog, INT32_MAX, 3).duplicate  # its retry is recognised
    assert send(plog, 2).first_offset == 4
    plog.close()
    again, _ = open_log(plog.dir, clean=False)
    assert send(again, 3).first_offset == 5
    again.close()


def test_log_append_time_topic_duplicate_keeps_original_offsets(tmp_path: Path) -> None:
    lg, _ = open_log(tmp_path / "p", cfg(log_append_time=True))
    first = send(lg, 0, 2, now=NOW)
    dup = send(lg, 0, 2, now=NOW + 1000)
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (
        first.first_offset,
        first.last_offset,
    )
    assert [r.timestamp for r in read_records(lg)] == [NOW, NOW]
