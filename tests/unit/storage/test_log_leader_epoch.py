"""Log and its leader epoch cache: epochs assigned on leader and follower appends, follower
appends of fetched data (offsets, epochs and producer state kept; overlap and partial tails),
truncation and deletions keeping the cache consistent, and the checkpoint file rebuilt from the
batch headers when it is missing or damaged."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.errors import CorruptRecord, OffsetOutOfRange
from framework.protocol import records as rb
from framework.storage.leader_epoch import CHECKPOINT_FILE, EpochEntry
from framework.storage.log import Log, UnexpectedAppendOffset
from tests.support.storage import (
    NOW,
    append,
    batch,
    cfg,
    flip_byte,
    log_files,
    offsets,
    open_log,
    payload,
    read_records,
)

DAY = 86_400_000
E = EpochEntry


@pytest.fixture
def leader(tmp_path: Path) -> Log:
    lg, _ = open_log(tmp_path / "leader" / "events-0")
    yield lg
    lg.close()


@pytest.fixture
def follower(tmp_path: Path) -> Log:
    lg, _ = open_log(tmp_path / "follower" / "events-0")
    yield lg
    lg.close()


def fill(lg: Log, batches: int, records: int = 1, *, ts: int = NOW) -> None:
    for _ in range(batches):
        append(lg, batch(records, ts=ts, tag=lg.log_end_offset))


def epochs_on_disk(lg: Log) -> str:
    return (lg.dir / CHECKPOINT_FILE).read_text()


def leader_with_epochs(lg: Log, plan: list[tuple[int, int]]) -> None:
    """(epoch, batches): become leader in each epoch and append that many 2-record batches."""
    for epoch, n in plan:
        lg.become_leader(epoch)
        fill(lg, n, records=2)


def fetch(lg: Log, offset: int, max_bytes: int = 100_000) -> memoryview:
    """What a fetch response carries for this partition (may end in a partial batch)."""
    return memoryview(lg.read(offset, max_bytes, lg.high_watermark))


def replicate(leader: Log, follower: Log, max_bytes: int = 100_000) -> int:
    """Fetch from the leader at the follower's log end until caught up; number of fetches."""
    n = 0
    while follower.log_end_offset < leader.log_end_offset:
        info = follower.append_as_follower(fetch(leader, follower.log_end_offset, max_bytes), NOW)
        assert info.records > 0, "a fetch at the log end must make progress"
        n += 1
    return n


def log_bytes(lg: Log) -> bytes:
    return b"".join(p.read_bytes() for p in log_files(lg.dir))


# -- leader ---------------------------------------------------------------------------------
def test_new_log_has_no_checkpoint_until_the_first_append_assigns_epoch_zero(leader: Log) -> None:
    assert not (leader.dir / CHECKPOINT_FILE).exists()
    assert leader.epochs.latest_epoch() == -1
    assert leader.end_offset_for_epoch(0) == (-1, -1)
    fill(leader, 3)
    assert leader.epochs.entries() == [E(0, 0)]
    assert epochs_on_disk(leader) == "0\n1\n0 0\n"
    assert leader.end_offset_for_epoch(0) == (0, 3)


def test_become_leader_records_the_epoch_at_the_log_end_before_any_write(leader: Log) -> None:
    fill(leader, 2)
    leader.become_leader(4)
    assert leader.epochs.entries() == [E(0, 0), E(4, 2)]
    assert leader.end_offset_for_epoch(4) == (4, 2)
    assert leader.end_offset_for_epoch(0) == (0, 2)
    append(leader, batch(1))
    assert [h.partition_leader_epoch for h in leader.iter_headers(0)] == [0, 0, 4]
    assert leader.end_offset_for_epoch(2) == (0, 2)
    assert leader.end_offset_for_epoch(4) == (4, 3)
    assert leader.end_offset_for_epoch(5) == (-1, -1)
    leader.become_leader(4)  # again: nothing changes
    assert leader.epochs.entries() == [E(0, 0), E(4, 2)]


def test_leader_append_assigns_its_epoch_when_the_cache_lags(leader: Log) -> None:
    leader.leader_epoch = 7  # set without become_leader: the append path still records it
    fill(leader, 2)
    assert leader.epochs.entries() == [E(7, 0)]


# -- follower -------------------------------------------------------------------------------
def test_follower_copies_the_leader_byte_for_byte_with_its_epochs(leader: Log, follower: Log) -> None:
    leader_with_epochs(leader, [(0, 3), (2, 4), (5, 2)])
    fetches = replicate(leader, follower, max_bytes=300)  # small fetches end in partial batches
    assert fetches > 3
    assert log_bytes(follower) == log_bytes(leader)
    assert follower.epochs.entries() == leader.epochs.entries() == [E(0, 0), E(2, 6), E(5, 14)]
    assert epochs_on_disk(follower) == epochs_on_disk(leader)
    for epoch in range(-1, 7):
        assert follower.end_offset_for_epoch(epoch) == leader.end_offset_for_epoch(epoch)


def test_follower_keeps_offsets_epochs_and_timestamps(tmp_path: Path) -> None:
    lg, _ = open_log(tmp_path / "f", cfg(log_append_time=True, timestamp_before_max_ms=DAY))
    old = NOW - 30 * DAY  # outside the produce window: the leader already accepted it
    data = rb.build_batch([(b"k", b"v")] * 3, base_offset=0, timestamp_ms=old, leader_epoch=9)
    info = lg.append_as_follower(payload(data), NOW)
    assert (info.first_offset, info.last_offset, info.records, info.log_append_time) == (0, 2, 3, -1)
    assert info.bytes == len(data)
    assert log_bytes(lg) == data  # nothing re-stamped: epoch, timestamps, CRC as sent
    assert lg.epochs.entries() == [E(9, 0)]
    assert lg.leader_epoch == 0  # a follower's appends do not change the epoch it would stamp
    lg.close()


def test_follower_accepts_offset_gaps_of_a_compacted_leader(follower: Log) -> None:
    a = rb.build_batch([(b"k", b"v")], base_offset=0, leader_epoch=1)
    b = rb.build_batch([(b"k", b"w")], base_offset=5, leader_epoch=1)
    info = follower.append_as_follower(payload(a, b), NOW)
    assert (info.first_offset, info.last_offset, follower.log_end_offset) == (0, 5, 6)


def test_overlapping_fetch_data_is_skipped(leader: Log, follower: Log) -> None:
    leader_with_epochs(leader, [(0, 3)])
    replicate(leader, follower)
    leader_with_epochs(leader, [(1, 2)])
    # a response starting below our log end: the first batches are ours already
    info = follower.append_as_follower(fetch(leader, 0), NOW)
    assert (info.first_offset, info.last_offset) == (6, 9)
    assert log_bytes(follower) == log_bytes(leader)
    assert follower.epochs.entries() == [E(0, 0), E(1, 6)]
    again = follower.append_as_follower(fetch(leader, 2), NOW)  # all of it is ours
    assert (again.records, again.bytes, again.batches, again.first_offset) == (0, 0, [], -1)
    assert log_bytes(follower) == log_bytes(leader)


def test_empty_or_partial_only_payload_appends_nothing(leader: Log, follower: Log) -> None:
    fill(leader, 2, records=5)
    for data in (memoryview(b""), fetch(leader, 0)[:40], fetch(leader, 0)[:100]):
        info = follower.append_as_follower(data, NOW)
        assert (info.records, info.bytes, info.first_offset, info.last_offset) == (0, 0, -1, -1)
    assert follower.log_end_offset == 0 and follower.epochs.entries() == []


def test_a_partial_trailing_batch_is_dropped(leader: Log, follower: Log) -> None:
    fill(leader, 3, records=4)
    data = fetch(leader, 0)
    info = follower.append_as_follower(data[: len(data) - 10], NOW)
    assert (info.first_offset, info.last_offset, follower.log_end_offset) == (0, 7, 8)
    replicate(leader, follower)
    assert log_bytes(follower) == log_bytes(leader)


def test_a_batch_straddling_the_log_end_is_refused_and_nothing_written(follower: Log) -> None:
    follower.append_as_follower(payload(rb.build_batch([(b"k", b"v")] * 2, leader_epoch=0)), NOW)
    straddling = rb.build_batch([(b"k", b"v")] * 3, base_offset=1, leader_epoch=1)
    with pytest.raises(UnexpectedAppendOffset) as exc:
        follower.append_as_follower(payload(straddling), NOW)
    assert exc.value.first_offset == 1
    assert follower.log_end_offset == 2
    assert follower.epochs.entries() == [E(0, 0)]


def test_an_empty_log_starting_inside_the_leaders_first_batch_restarts_there(
    leader: Log, follower: Log
) -> None:
    """DeleteRecords put the leader's log start inside a batch; a new follower starts its log
    there and fetches that offset: the batch holding it starts earlier (Kafka's case)."""
    append(leader, batch(10))
    append(leader, batch(2))
    leader.delete_records_before(5)
    follower.truncate_fully_and_start_at(leader.log_start_offset)
    info = follower.append_as_follower(fetch(leader, 5), NOW)
    assert (info.first_offset, info.last_offset) == (0, 11)
    assert (follower.log_start_offset, follower.log_end_offset) == (5, 12)
    assert follower.segments[0].base_offset == 0
    assert follower.epochs.entries() == leader.epochs.entries() == [E(0, 5)]
    assert offsets(read_records(follower)) == list(range(5, 12))
    with pytest.raises(OffsetOutOfRange):
        follower.read(4, 1000, follower.log_end_offset)


def test_corrupt_fetched_data_is_refused_and_nothing_written(leader: Log, follower: Log) -> None:
    leader_with_epochs(leader, [(0, 1), (3, 2)])
    data = bytearray(fetch(leader, 0))
    data[-1] ^= 0xFF  # last batch's CRC no longer matches
    with pytest.raises(CorruptRecord, match="CRC"):
        follower.append_as_follower(memoryview(data), NOW)
    assert follower.log_end_offset == 0
    assert follower.epochs.entries() == []
    garbage = memoryview(bytes(12) + b"\x00" * 61)  # batch length 0
    with pytest.raises(CorruptRecord):
        follower.append_as_follower(garbage, NOW)


def test_offsets_going_backwards_inside_a_fetch_are_refused(follower: Log) -> None:
    a = rb.build_batch([(b"k", b"v")] * 2, base_offset=0, leader_epoch=0)
    b = rb.build_batch([(b"k", b"v")], base_offset=1, leader_epoch=0)
    with pytest.raises(CorruptRecord, match="backwards"):
        follower.append_as_follower(payload(a, b), NOW)
    assert follower.log_end_offset == 0


def test_producer_state_follows_replication_so_a_promoted_follower_deduplicates(
    leader: Log, follower: Log
) -> None:
    """An idempotent producer's batch reaches the old leader and is replicated; the producer
    never got the answer and retries on the new leader: it must not be written twice."""
    first = append(leader, batch(2, pid=7, epoch=0, seq=0, tag=0))
    retry = batch(3, pid=7, epoch=0, seq=2, tag=1)
    original = append(leader, retry)
    replicate(leader, follower)
    assert follower.producer_state.producers[7].last_seq == 4
    follower.become_leader(1)
    dup = follower.append_as_leader(payload(retry), NOW)
    assert dup.duplicate
    assert (dup.first_offset, dup.last_offset) == (original.first_offset, original.last_offset)
    assert follower.log_end_offset == leader.log_end_offset == 5
    nxt = follower.append_as_leader(payload(batch(1, pid=7, epoch=0, seq=5)), NOW)
    assert (nxt.first_offset, nxt.duplicate) == (5, False)
    assert first.first_offset == 0
    assert follower.epochs.entries() == [E(0, 0), E(1, 5)]


# -- truncation and deletions ---------------------------------------------------------------
def test_truncate_to_drops_the_epochs_of_the_removed_data(leader: Log) -> None:
    leader_with_epochs(leader, [(0, 2), (1, 2), (3, 2)])  # starts 0, 4, 8; end 12
    leader.truncate_to(5)  # mid-batch: the batch 4..5 goes whole
    assert leader.log_end_offset == 4
    assert leader.epochs.entries() == [E(0, 0)]
    assert epochs_on_disk(leader) == "0\n1\n0 0\n"
    assert leader.end_offset_for_epoch(1) == (-1, -1)


def test_truncate_to_the_end_forgets_an_epoch_never_written_to(leader: Log) -> None:
    fill(leader, 2)
    leader.become_leader(3)  # led epoch 3 but wrote nothing, then became a follower
    assert leader.epochs.entries() == [E(0, 0), E(3, 2)]
    leader.truncate_to(2)
    assert leader.epochs.entries() == [E(0, 0)]


def test_follower_truncates_then_converges_on_the_new_leader(tmp_path: Path) -> None:
    """KIP-101: a follower with data the new leader never had truncates at the end offset of
    its latest epoch as the leader sees it, then fetches the leader's log."""
    old, _ = open_log(tmp_path / "old")
    new, _ = open_log(tmp_path / "new")
    leader_with_epochs(old, [(0, 2)])
    replicate(old, new)
    leader_with_epochs(old, [(1, 2)])  # written by the old leader only, then it failed
    new.become_leader(2)
    fill(new, 3, records=1)
    epoch, end = new.end_offset_for_epoch(old.epochs.latest_epoch())
    assert (epoch, end) == (0, 4)  # epoch 1 is unknown to the new leader: epoch 0 ends at 4
    old.truncate_to(end)
    assert old.epochs.entries() == [E(0, 0)]
    replicate(new, old)
    assert log_bytes(old) == log_bytes(new)
    assert old.epochs.entries() == new.epochs.entries() == [E(0, 0), E(2, 4)]
    old.close()
    new.close()


def test_truncate_fully_clears_the_cache(leader: Log) -> None:
    leader_with_epochs(leader, [(0, 2), (1, 1)])
    leader.truncate_fully_and_start_at(100)
    assert leader.epochs.entries() == []
    assert epochs_on_disk(leader) == "0\n0\n"
    append(leader, batch(1))
    assert leader.epochs.entries() == [E(1, 100)]


def test_retention_moves_the_first_epoch_start_to_the_log_start(tmp_path: Path) -> None:
    lg, _ = open_log(tmp_path, cfg(retention_ms=DAY))
    lg.become_leader(0)
    fill(lg, 20, ts=NOW - 2 * DAY)
    lg.become_leader(1)
    fill(lg, 20, ts=NOW)
    assert lg.epochs.entries() == [E(0, 0), E(1, 20)]
    assert lg.delete_retained_segments(NOW) > 0
    start = lg.log_start_offset
    assert 0 < start <= 20
    assert lg.epochs.entries() == ([E(0, start), E(1, 20)] if start < 20 else [E(1, 20)])
    assert epochs_on_disk(lg).splitlines()[2].endswith(f" {start}")
    lg.close()


def test_everything_expiring_keeps_the_latest_epoch_at_the_log_end(tmp_path: Path) -> None:
    lg, _ = open_log(tmp_path, cfg(retention_ms=DAY))
    leader_with_epochs(lg, [(0, 10), (2, 10)])
    lg.delete_retained_segments(NOW + 3 * DAY)
    assert lg.log_start_offset == lg.log_end_offset == 40
    assert lg.epochs.entries() == [E(2, 40)]
    assert lg.end_offset_for_epoch(2) == (2, 40)
    lg.close()


def test_delete_records_moves_the_first_epoch_start(leader: Log) -> None:
    leader_with_epochs(leader, [(0, 5), (1, 5)])  # starts 0, 10
    leader.delete_records_before(7)
    assert leader.epochs.entries() == [E(0, 7), E(1, 10)]
    leader.delete_records_before(15)
    assert leader.epochs.entries() == [E(1, 15)]
    leader.close()
    again, _ = open_log(leader.dir, log_start_offset=15, clean=True)
    assert again.epochs.entries() == [E(1, 15)]
    again.close()


# -- loading and recovery -------------------------------------------------------------------
PLAN = [(0, 6), (2, 1), (3, 9), (7, 4)]  # small segments: epochs change inside and across them
EXPECTED = [E(0, 0), E(2, 12), E(3, 14), E(7, 32)]


def built(d: Path) -> Log:
    lg, _ = open_log(d, cfg(segment_bytes=300))  # about three batches per segment
    leader_with_epochs(lg, PLAN)
    assert lg.epochs.entries() == EXPECTED
    assert len(lg.segments) > 3
    return lg


def test_the_cache_survives_a_reopen(tmp_path: Path) -> None:
    built(tmp_path).close()
    for clean in (True, False):
        lg, _ = open_log(tmp_path, clean=clean)
        assert lg.epochs.entries() == EXPECTED
        lg.close()


DAMAGE = {
    "missing": None,
    "garbage": b"\x00\xffnot a checkpoint\n",
    "truncated": b"0\n4\n0 0\n2 1",
    "wrong count": b"0\n9\n0 0\n2 12\n3 14\n7 32\n",
    "bad version": b"1\n4\n0 0\n2 12\n3 14\n7 32\n",
    "not increasing": b"0\n2\n3 14\n2 12\n",
    "empty": b"",
}


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "unclean"])
@pytest.mark.parametrize("damage", DAMAGE.values(), ids=DAMAGE.keys())
def test_missing_or_damaged_checkpoint_is_rebuilt_from_the_batches(
    tmp_path: Path, damage: bytes | None, clean: bool, caplog: pytest.LogCaptureFixture
) -> None:
    built(tmp_path).close()
    path = tmp_path / CHECKPOINT_FILE
    if damage is None:
        path.unlink()
    else:
        path.write_bytes(damage)
    lg, _ = open_log(tmp_path, clean=clean)
    assert lg.epochs.entries() == EXPECTED
    assert path.read_text() == "0\n4\n0 0\n2 12\n3 14\n7 32\n"  # rewritten whole
    if damage is not None:
        assert str(path) in caplog.text  # the warning names the file
    assert offsets(read_records(lg)) == list(range(40))  # the log itself is untouched
    lg.close()


def test_rebuild_honours_the_log_start_offset(tmp_path: Path) -> None:
    lg = built(tmp_path)
    lg.delete_records_before(20)
    lg.close()
    (tmp_path / CHECKPOINT_FILE).unlink()
    again, _ = open_log(tmp_path, log_start_offset=20, clean=True)
    assert again.epochs.entries() == [E(3, 20), E(7, 32)]
    again.close()


def test_entries_past_a_torn_log_end_are_dropped_on_reopen(tmp_path: Path) -> None:
    lg = built(tmp_path)
    lg.become_leader(9)  # recorded, then the crash took the data written in epoch 9
    lg.close()
    (tmp_path / CHECKPOINT_FILE).write_text("0\n6\n0 0\n2 12\n3 14\n7 32\n9 40\n11 60\n")
    again, _ = open_log(tmp_path)
    assert again.epochs.entries() == EXPECTED
    again.close()


def test_a_torn_batch_at_the_end_takes_its_epoch_entry_with_it(tmp_path: Path) -> None:
    lg = built(tmp_path)
    lg.become_leader(8)
    append(lg, batch(2))  # offsets 40, 41 in epoch 8
    lg.close()
    last = log_files(tmp_path)[-1]
    flip_byte(last, last.stat().st_size - 1)  # the crash tore the last batch
    again, report = open_log(tmp_path, recovery_point=0)
    assert report.truncated_bytes > 0
    assert again.log_end_offset == 40
    assert again.epochs.entries() == EXPECTED
    again.close()


def test_unclean_recovery_restores_entries_missing_from_the_file(tmp_path: Path) -> None:
    """Kafka's testRecoverEpochCacheOnUncleanShutdown... case: a valid file that lacks the
    newest entries gets them back from the recovered segments' batches."""
    built(tmp_path).close()
    (tmp_path / CHECKPOINT_FILE).write_text("0\n2\n0 0\n2 12\n")
    lg, _ = open_log(tmp_path, recovery_point=0)
    assert lg.epochs.entries() == EXPECTED
    lg.close()


@settings(max_examples=25, deadline=None)
@given(
    plan=st.lists(st.tuples(st.integers(0, 3), st.integers(1, 6), st.integers(1, 4)), min_size=1, max_size=8)
)
def test_rebuild_matches_the_cache_kept_while_appending(
    tmp_path_factory: pytest.TempPathFactory, plan: list[tuple[int, int, int]]
) -> None:
    """Random epoch bumps and batch sizes over small segments: the cache rebuilt from the
    batches equals the one maintained during the appends."""
    d = tmp_path_factory.mktemp("log")
    lg, _ = open_log(d)
    epoch = 0
    for bump, n, records in plan:
        epoch += bump
        lg.become_leader(epoch)
        fill(lg, n, records=records)
    kept = lg.epochs.entries()
    lg.close()
    (d / CHECKPOINT_FILE).unlink()
    again, _ = open_log(d, clean=True)  # rebuilt from the batches
    assert again.epochs.entries() == kept
    again.close()
