"""Partition (framework/replication/partition.py) as a leader over a real Log: the high watermark
(the smallest log end of the ISR, pending expansion included, never moving back), acks=all
waiters, Kafka's ISR shrink and expand rules with one AlterPartition proposal in flight, and
role changes from the metadata quorum (apply_state).

The quorum is a recording ``alter_isr`` callable plus explicit ``apply_state`` calls; time is
explicit: ``now_ms`` arguments, the election's included (no clock is patched).
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.errors import NotEnoughReplicas, NotLeader, OffsetOutOfRange
from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.fetch import (
    FetchPartition,
    FetchRequest,
    FetchResponse,
    FetchTopic,
    PartitionData,
)
from framework.replication.partition import NotEnoughReplicasAfterAppend, Partition
from framework.server.handlers import fetch as fetch_handler
from framework.storage.log import Log
from tests.support.broker_parts import Replicas, request_context, services
from tests.support.storage import NOW, batch, cfg, open_log, payload

LEADER = 1
LAG = 10_000  # replica.lag.time.max.ms


@dataclass
class Quorum:
    """Records AlterPartition proposals; commits them as the controller would."""

    proposals: list[tuple[int, int, list[int]]] = field(default_factory=list)

    def __call__(self, p: Partition, isr: list[int]) -> None:
        self.proposals.append((p.leader_epoch, p.partition_epoch, list(isr)))

    def commit(self, p: Partition) -> str:
        """The last proposal is applied: new ISR at partition epoch + 1."""
        _, epoch, isr = self.proposals[-1]
        assert epoch == p.partition_epoch
        return p.apply_state(p.leader_id, p.leader_epoch, isr, epoch + 1, p.replicas, now_ms=NOW)

    def set_isr(self, p: Partition, isr: list[int]) -> str:
        """The controller changes the ISR on its own (a fenced broker leaves it)."""
        return p.apply_state(p.leader_id, p.leader_epoch, isr, p.partition_epoch + 1, p.replicas, now_ms=NOW)


@pytest.fixture
def log(tmp_path: Path) -> Iterator[Log]:
    lg, _ = open_log(tmp_path / "events-0", cfg(segment_bytes=1 << 20))
    yield lg
    lg.close()


def follower_partition(
    lg: Log, quorum: Quorum, replicas: list[int] | None = None, node_id: int = LEADER
) -> Partition:
    """As the broker creates it before the quorum's first state (leader unknown)."""
    return Partition(
        topic="events",
        index=0,
        topic_id=b"\x00" * 16,
        log=lg,
        replicas=list(replicas or [1, 2, 3]),
        leader_id=-2,
        leader_epoch=-1,
        node_id=node_id,
        alter_isr=quorum,
    )


def elect(
    lg: Log,
    quorum: Quorum,
    *,
    replicas: list[int] | None = None,
    isr: list[int] | None = None,
    leader_epoch: int = 1,
    partition_epoch: int = 1,
    now_ms: int = NOW,
) -> Partition:
    p = follower_partition(lg, quorum, replicas)
    role = p.apply_state(LEADER, leader_epoch, list(isr or p.replicas), partition_epoch, p.replicas, now_ms)
    assert role == "leader"
    return p


def produce(p: Partition, n: int = 1, *, acks: int = 1, now: int = NOW) -> int:
    """Append ``n`` records as leader; returns the new log end offset."""
    p.append_records(payload(batch(n)), acks, now)
    return p.log_end_offset


def acks_all_waiter(p: Partition, n: int) -> tuple[int, asyncio.Future[None]]:
    """Append ``n`` records with acks=all; the new log end and its waiter, which outlives the
    leadership (as the Produce handler's does)."""
    end = produce(p, n, acks=-1)
    w = p.wait_replicated(end, outlive_leadership=True)
    assert w is not None
    return end, w


def hand_over_to_broker_2(p: Partition) -> None:
    """The controller makes broker 2 the leader (epoch 2): this broker follows."""
    assert p.apply_state(2, 2, [2, 3], 2, [1, 2, 3], NOW) == "follower"


@pytest.fixture
def quorum() -> Quorum:
    return Quorum()


# -- the high watermark ------------------------------------------------------------------------
def test_one_replica_high_watermark_follows_the_log_end(log: Log, quorum: Quorum) -> None:
    p = elect(log, quorum, replicas=[LEADER])
    assert produce(p, 3) == 3
    assert p.high_watermark == 3
    assert quorum.proposals == []


def test_high_watermark_is_the_smallest_log_end_of_the_isr(log: Log, quorum: Quorum) -> None:
    p = elect(log, quorum)
    produce(p, 10)
    assert p.high_watermark == 0  # nobody else has anything yet
    p.follower_fetched(2, 10, NOW)
    assert p.high_watermark == 0  # follower 3 has not fetched since the election
    p.follower_fetched(3, 4, NOW)
    assert p.high_watermark == 4
    p.follower_fetched(3, 10, NOW)
    assert p.high_watermark == 10
    produce(p, 5)
    assert p.high_watermark == 10  # the leader's own log end is one of the ISR's
    p.follower_fetched(2, 15, NOW)
    p.follower_fetched(3, 12, NOW)
    assert p.high_watermark == 12


def test_high_watermark_never_moves_back(log: Log, quorum: Quorum) -> None:
    p = elect(log, quorum)
    produce(p, 10)
    p.follower_fetched(2, 10, NOW)
    p.follower_fetched(3, 10, NOW)
    assert p.high_watermark == 10
    p.follower_fetched(3, 6, NOW + 1)  # a follower that went back (it truncated)
    assert p.high_watermark == 10
    p.maybe_advance_high_watermark()
    assert p.high_watermark == 10
    quorum.set_isr(p, [1, 2, 3])  # a metadata update recomputes; still not back
    assert p.high_watermark == 10


def test_a_follower_outside_the_isr_does_not_hold_the_high_watermark(log: Log, quorum: Quorum) -> None:
    p = elect(log, quorum, isr=[1, 2])
    produce(p, 10)
    p.follower_fetched(2, 10, NOW)
    p.follower_fetched(3, 3, NOW)  # out of the ISR and below the high watermark
    assert p.high_watermark == 10 and quorum.proposals == []
    produce(p, 5)
    p.follower_fetched(2, 15, NOW)
    assert p.high_watermark == 15


def test_a_pending_isr_expansion_counts_for_the_high_watermark(log: Log, quorum: Quorum) -> None:
    """Kafka's "maximal ISR": once the leader proposed a follower in, it waits for it too, so
    the high watermark is safe whichever way the proposal is decided."""
    p = elect(log, quorum, isr=[1, 2])
    produce(p, 10)
    p.follower_fetched(2, 10, NOW)
    assert p.high_watermark == 10
    produce(p, 10)  # log end 20
    p.follower_fetched(3, 10, NOW)  # reached the high watermark: proposed in
    assert quorum.proposals == [(1, 1, [1, 2, 3])]
    assert p.pending_isr == [1, 2, 3] and p.isr == [1, 2]
    p.follower_fetched(2, 20, NOW)
    assert p.high_watermark == 10  # 3 holds it back although it is not in the ISR yet
    p.follower_fetched(3, 15, NOW)
    assert p.high_watermark == 15
    assert quorum.commit(p) == ""
    assert p.isr == [1, 2, 3] and p.pending_isr is None and p.partition_epoch == 2
    p.follower_fetched(3, 20, NOW)
    assert p.high_watermark == 20


def test_an_expansion_whose_outcome_is_unknown_counts_until_the_metadata_says(
    log: Log, quorum: Quorum
) -> None:
    """The quorum lost its leader while deciding an expansion (pysyncobj's LEADER_CHANGED): the
    change may still apply. Forgetting it would let the leader acknowledge records the added
    follower lacks, which an election of that follower then loses."""
    p = elect(log, quorum, isr=[1, 2])
    produce(p, 10)
    p.follower_fetched(2, 10, NOW)
    p.follower_fetched(3, 10, NOW)  # proposed in
    assert quorum.proposals == [(1, 1, [1, 2, 3])]
    assert p.isr_change_answered([1, 2, 3], 1, None)  # unknown: propose the same again
    assert p.pending_isr == [1, 2, 3]
    produce(p, 10)  # log end 20
    p.follower_fetched(2, 20, NOW)
    assert p.high_watermark == 10  # still waits for 3
    assert quorum.commit(p) == ""  # the first proposal did apply
    assert p.isr == [1, 2, 3] and p.pending_isr is None
    assert not p.isr_change_answered([1, 2, 3], 1, ErrorCode.INVALID_UPDATE_VERSION)  # the retry
    assert p.isr == [1, 2, 3] and p.pending_isr is None


def test_an_expansion_refused_as_ineligible_is_dropped_an_epoch_conflict_waits_for_the_metadata(
    log: Log, quorum: Quorum
) -> None:
    p = elect(log, quorum, isr=[1, 2])
    p.follower_fetched(3, 0, NOW)
    assert not p.isr_change_answered([1, 2, 3], 1, ErrorCode.INVALID_UPDATE_VERSION)
    assert p.pending_isr == [1, 2, 3]  # another change won; it counts until that one arrives
    assert quorum.set_isr(p, [1, 2]) == ""
    assert p.pending_isr is None and p.partition_epoch == 2
    p.follower_fetched(3, 0, NOW)
    assert quorum.proposals[-1] == (1, 2, [1, 2, 3])
    assert not p.isr_change_answered([1, 2, 3], 2, ErrorCode.INELIGIBLE_REPLICA)  # 3 is fenced
    assert p.pending_isr is None and p.isr == [1, 2]
    p.follower_fetched(3, 0, NOW)
    assert not p.isr_change_answered([1, 2, 3], 1, None)  # an old proposal's late answer
    assert p.pending_isr == [1, 2, 3]


def test_a_pending_isr_shrink_still_waits_for_the_follower_leaving(log: Log, quorum: Quorum) -> None:
    p = elect(log, quorum)
    produce(p, 10)
    p.follower_fetched(3, 5, NOW)
    p.follower_fetched(2, 10, NOW + LAG)
    p.shrink_isr(NOW + LAG + 1, LAG)  # 3 was last caught up at the election
    assert quorum.proposals == [(1, 1, [1, 2])]
    assert p.high_watermark == 5  # until the quorum applies the shrink
    quorum.commit(p)
    assert p.isr == [1, 2]
    assert p.high_watermark == 10  # applying it recomputes at once


# -- acks=all ----------------------------------------------------------------------------------
def run(body: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run an async test body (futures need a running loop)."""
    asyncio.run(body())


def test_acks_all_waiters_complete_exactly_when_the_high_watermark_passes_them(
    log: Log, quorum: Quorum
) -> None:
    async def body() -> None:
        p = elect(log, quorum)
        end1 = produce(p, 5, acks=-1)
        end2 = produce(p, 5, acks=-1)
        w1, w2 = p.wait_replicated(end1), p.wait_replicated(end2)
        assert w1 is not None and w2 is not None
        p.follower_fetched(2, 10, NOW)
        p.follower_fetched(3, 4, NOW)
        assert p.high_watermark == 4 and not w1.done()
        p.follower_fetched(3, 5, NOW)
        assert w1.done() and w1.result() is None
        assert not w2.done()
        p.follower_fetched(3, 9, NOW)
        assert not w2.done()
        p.follower_fetched(3, 10, NOW)
        assert w2.done() and w2.result() is None
        assert p.wait_replicated(end2) is None  # already replicated: nothing to wait for

    run(body)


def test_acks_all_is_refused_before_writing_when_the_isr_is_below_min_insync(
    tmp_path: Path, quorum: Quorum
) -> None:
    lg, _ = open_log(tmp_path / "events-0", cfg(min_insync_replicas=2))
    try:
        p = elect(lg, quorum, isr=[LEADER])
        with pytest.raises(NotEnoughReplicas):
            produce(p, 3, acks=-1)
        assert p.log_end_offset == 0  # check, then apply: nothing written
        assert produce(p, 3, acks=1) == 3  # acks=1 does not need the ISR
    finally:
        lg.close()


def test_acks_all_waiter_fails_when_the_isr_shrank_below_min_insync_before_the_hw_passed(
    tmp_path: Path, quorum: Quorum
) -> None:
    lg, _ = open_log(tmp_path / "events-0", cfg(min_insync_replicas=2))

    async def body() -> None:
        p = elect(lg, quorum)
        end = produce(p, 3, acks=-1)
        w = p.wait_replicated(end)
        assert w is not None
        quorum.set_isr(p, [1, 2])  # still min.insync.replicas: keep waiting for 2
        assert not w.done()
        quorum.set_isr(p, [LEADER])  # the leader alone: the HW jumps to the log end
        assert p.high_watermark == end
        assert w.done()
        assert isinstance(w.exception(), NotEnoughReplicasAfterAppend)

    try:
        run(body)
    finally:
        lg.close()


def test_acks_all_waiter_succeeds_when_the_isr_shrank_but_not_below_min_insync(
    tmp_path: Path, quorum: Quorum
) -> None:
    lg, _ = open_log(tmp_path / "events-0", cfg(min_insync_replicas=2))

    async def body() -> None:
        p = elect(lg, quorum)
        end = produce(p, 3, acks=-1)
        w = p.wait_replicated(end)
        assert w is not None
        quorum.set_isr(p, [1, 2])
        p.follower_fetched(2, end, NOW)
        assert w.done() and w.result() is None

    try:
        run(body)
    finally:
        lg.close()


def test_an_acks_all_waiter_outlives_the_leadership_and_succeeds_once_the_new_leader_commits_it(
    log: Log, quorum: Quorum
) -> None:
    """A batch appended as leader and replicated to the follower elected next is committed by
    it: the old leader, now following, answers its producer with success once the new leader's
    high watermark covers it. (NOT_LEADER_OR_FOLLOWER at the handover, which clients take as
    "not persisted", let librdkafka send the batch again under a bumped producer epoch when
    another partition's OUT_OF_ORDER_SEQUENCE_NUMBER made it bump meanwhile: written twice.)"""

    async def body() -> None:
        p = elect(log, quorum)
        end, w = acks_all_waiter(p, 3)
        p.follower_fetched(2, end, NOW)  # broker 2 has it, broker 3 does not: no HW yet
        assert p.high_watermark == 0 and not w.done()
        hand_over_to_broker_2(p)
        assert not w.done()  # not "not persisted": broker 2 leads with the batch in its log
        with pytest.raises(NotLeader):
            produce(p, 1)
        p.advance_high_watermark(end - 1)  # as the fetcher does with the leader's HW
        assert not w.done()
        p.advance_high_watermark(end)
        assert w.done() and w.result() is None

    run(body)


def test_an_acks_all_waiter_fails_with_not_leader_when_a_follower_truncates_its_batch(
    tmp_path: Path, log: Log, quorum: Quorum
) -> None:
    """The new leader never had the batch: the follower truncates it and answers
    NOT_LEADER_OR_FOLLOWER; never success, even when other data later fills those offsets."""

    async def body() -> None:
        p = elect(log, quorum)
        end, kept = acks_all_waiter(p, 3)
        end2, gone = acks_all_waiter(p, 2)
        hand_over_to_broker_2(p)
        # broker 2 had the first batch only: OffsetForLeaderEpoch says truncate at 3; the
        # fetcher's truncation is not told to the partition here, the next HW advance is
        log.truncate_to(end)
        other, _ = open_log(tmp_path / "leader-2", cfg(segment_bytes=1 << 20))
        try:
            other.become_leader(1)
            other.append_as_leader(payload(batch(3)), NOW)
            other.become_leader(2)
            other.append_as_leader(payload(batch(4, value=b"other")), NOW)
            log.append_as_follower(memoryview(other.read(end, 1 << 20, other.log_end_offset)), NOW)
        finally:
            other.close()
        assert log.log_end_offset == 7 >= end2
        p.advance_high_watermark(7)
        assert kept.done() and kept.result() is None
        assert gone.done() and isinstance(gone.exception(), NotLeader)

    run(body)


def test_a_coordinators_acks_all_waiter_fails_with_not_leader_when_leadership_moves(
    log: Log, quorum: Quorum
) -> None:
    async def body() -> None:
        p = elect(log, quorum)
        end = produce(p, 3, acks=-1)
        w = p.wait_replicated(end)  # not outliving the leadership (the coordinators' writes)
        assert w is not None
        p.follower_fetched(3, 2, NOW)  # a proposal in flight is dropped with the leadership
        hand_over_to_broker_2(p)
        assert w.done()
        assert isinstance(w.exception(), NotLeader)
        assert not p.is_leader and p.followers == {} and p.pending_isr is None
        with pytest.raises(NotLeader):
            produce(p, 1)

    run(body)


def test_an_acks_all_waiter_fails_at_once_when_the_follower_truncates(log: Log, quorum: Quorum) -> None:
    async def body() -> None:
        p = elect(log, quorum)
        _, w = acks_all_waiter(p, 3)
        hand_over_to_broker_2(p)
        log.truncate_to(0)
        p.truncated()  # what the replica fetcher calls after truncating
        assert w.done() and isinstance(w.exception(), NotLeader)

    run(body)


def test_acks_all_waiters_fail_with_not_leader_when_the_partition_closes(log: Log, quorum: Quorum) -> None:
    async def body() -> None:
        p = elect(log, quorum)
        _, w = acks_all_waiter(p, 3)
        hand_over_to_broker_2(p)
        assert not p.is_leader and p.followers == {} and p.pending_isr is None
        p.close(NotLeader("events-0: moved"))
        assert w.done() and isinstance(w.exception(), NotLeader)

    run(body)


def test_a_new_leader_counts_in_sync_followers_as_caught_up_at_the_election(log: Log, quorum: Quorum) -> None:
    elected = NOW + 50_000
    p = elect(log, quorum, replicas=[1, 2, 3, 4], isr=[1, 2, 3], now_ms=elected)
    assert p.followers[2].last_caught_up_ms == elected
    assert p.followers[3].last_caught_up_ms == elected
    assert p.followers[4].last_caught_up_ms == 0  # out of the ISR: not caught up
    p.shrink_isr(elected + LAG, LAG)
    assert quorum.proposals == []  # within the lag of the election: nobody is dropped
    p.shrink_isr(elected + LAG + 1, LAG)
    assert quorum.proposals == [(1, 1, [LEADER])]


def test_a_follower_fetching_at_the_log_end_stays_in_sync(log: Log, quorum: Quorum) -> None:
    p = elect(log, quorum, isr=[1, 2])
    t = NOW
    for _ in range(5):
        leo = produce(p, 2)
        t += LAG // 2
        p.follower_fetched(2, leo, t)
        assert p.followers[2].last_caught_up_ms == t
        p.shrink_isr(t + LAG, LAG)
    assert quorum.proposals == []


def test_a_follower_reaching_the_log_end_of_its_previous_fetch_is_caught_up_as_of_then(
    log: Log, quorum: Quorum
) -> None:
    """Kafka's Replica.updateFetchState: under steady production a follower never sees the
    current log end, but each fetch reaches the end as it was at the previous one."""
    p = elect(log, quorum, isr=[1, 2])
    produce(p, 10)
    p.follower_fetched(2, 10, NOW)  # at the log end now
    assert p.followers[2].last_caught_up_ms == NOW
    produce(p, 10)  # log end 20
    p.follower_fetched(2, 10, NOW + 1_000)  # not at 20, but at the 10 of its previous fetch
    assert p.followers[2].last_caught_up_ms == NOW
    produce(p, 10)  # log end 30
    p.follower_fetched(2, 20, NOW + 2_000)  # reached the 20 of its previous fetch (at +1000)
    assert p.followers[2].last_caught_up_ms == NOW + 1_000
    produce(p, 10)  # log end 40
    p.follower_fetched(2, 25, NOW + 3_000)  # short of the 30 of its previous fetch
    assert p.followers[2].last_caught_up_ms == NOW + 1_000


def test_a_follower_not_caught_up_for_the_lag_is_proposed_out(log: Log, quorum: Quorum) -> None:
    p = elect(log, quorum)
    produce(p, 10)
    p.follower_fetched(2, 10, NOW)
    p.follower_fetched(3, 10, NOW)
    t = NOW
    for _ in range(4):  # 3 keeps fetching, always short of the log end of its previous fetch
        leo = produce(p, 10)
        t += LAG // 3
        p.follower_fetched(2, leo, t)
        p.follower_fetched(3, p.followers[3].log_end_offset + 1, t)
    assert p.followers[3].last_caught_up_ms == NOW
    p.shrink_isr(NOW + LAG, LAG)
    assert quorum.proposals == []  # exactly the lag: still in sync (Kafka's <=)
    p.shrink_isr(NOW + LAG + 1, LAG)
    assert quorum.proposals == [(1, 1, [1, 2])]
    assert p.pending_isr == [1, 2] and p.isr == [1, 2, 3]
    quorum.commit(p)
    assert p.isr == [1, 2] and p.pending_isr is None and p.partition_epoch == 2


def test_shrink_never_drops_the_leader_or_a_lone_isr_and_only_as_leader(log: Log, quorum: Quorum) -> None:
    p = elect(log, quorum, isr=[LEADER])
    p.shrink_isr(NOW + 10 * LAG, LAG)
    assert quorum.proposals == []
    quorum.set_isr(p, [1, 2])
    p.shrink_isr(NOW + 10 * LAG, LAG)
    assert quorum.proposals == [(1, 2, [LEADER])]
    p.apply_state(2, 2, [2], 3, [1, 2, 3], NOW)
    quorum.proposals.clear()
    p.shrink_isr(NOW + 20 * LAG, LAG)  # a follower proposes nothing
    assert quorum.proposals == []


# -- ISR expand ---------------------------------------------------------------------------------
def test_a_follower_is_proposed_back_once_it_reaches_the_high_watermark(log: Log, quorum: Quorum) -> None:
    p = elect(log, quorum, isr=[1, 2])
    produce(p, 10)
    p.follower_fetched(2, 10, NOW)
    assert p.high_watermark == 10
    p.follower_fetched(3, 9, NOW)
    assert quorum.proposals == []  # below the high watermark
    p.follower_fetched(3, 10, NOW)
    assert quorum.proposals == [(1, 1, [1, 2, 3])]
    quorum.commit(p)
    assert p.isr == [1, 2, 3]
    p.follower_fetched(3, 10, NOW)
    assert len(quorum.proposals) == 1  # in the ISR: nothing more to propose


def test_expansion_also_waits_for_the_start_of_the_leaders_epoch(log: Log, quorum: Quorum) -> None:
    """A follower at the high watermark but before the offset where this leader's epoch
    starts may still hold the previous leader's divergent records there (Kafka's rule)."""
    p = follower_partition(log, quorum)
    log.append_as_leader(payload(batch(10)), NOW)  # records this broker had as a follower
    log.high_watermark = 5  # the previous leader's high watermark
    assert p.apply_state(LEADER, 3, [1, 2], 7, [1, 2, 3], NOW) == "leader"
    assert p.epoch_start_offset == 10
    assert log.leader_epoch == 3
    assert p.high_watermark == 5
    p.follower_fetched(3, 5, NOW)
    assert quorum.proposals == []  # at the high watermark, short of the epoch start
    p.follower_fetched(3, 10, NOW)
    assert quorum.proposals == [(3, 7, [1, 2, 3])]


def test_fetches_from_unknown_replicas_are_ignored(log: Log, quorum: Quorum) -> None:
    p = elect(log, quorum, isr=[1, 2])
    p.follower_fetched(9, 0, NOW)
    assert 9 not in p.followers and quorum.proposals == []


def test_a_follower_fetching_outside_the_log_is_refused_and_not_recorded(log: Log, quorum: Quorum) -> None:
    """Past the log end (a follower that diverged) or below the log start: OFFSET_OUT_OF_RANGE,
    and the follower counts neither as caught up nor for the ISR or the high watermark (Kafka
    updates follower state only after a successful read)."""
    p = elect(log, quorum, isr=[1, 2])
    produce(p, 10)
    p.follower_fetched(2, 10, NOW)
    before = replace(p.followers[3])
    with pytest.raises(OffsetOutOfRange):
        p.follower_fetched(3, 11, NOW + 1)
    assert p.followers[3] == before and quorum.proposals == [] and p.high_watermark == 10
    log.delete_records_before(5)
    with pytest.raises(OffsetOutOfRange):
        p.follower_fetched(3, 4, NOW + 2)
    assert p.followers[3] == before
    p.follower_fetched(3, 10, NOW + 3)  # at the log end: in range, caught up, proposed in
    assert quorum.proposals == [(1, 1, [1, 2, 3])]


def _fetch_as_follower(p: Partition, replica_id: int, offset: int) -> PartitionData:
    """One partition of a Fetch (v12) from follower ``replica_id``, through the handler."""
    ctx = request_context(services(partitions=Replicas.of(p)), FetchRequest.API_KEY, 12)
    fp = FetchPartition(
        partition=0, current_leader_epoch=p.leader_epoch, fetch_offset=offset, partition_max_bytes=1 << 20
    )
    req = FetchRequest(replica_id=replica_id, topics=[FetchTopic(topic="events", partitions=[fp])])
    resp = asyncio.run(fetch_handler.handle(ctx, req))
    assert isinstance(resp, FetchResponse)
    return resp.responses[0].partitions[0]


def test_the_fetch_handler_checks_a_followers_offset_before_recording_it(log: Log, quorum: Quorum) -> None:
    p = elect(log, quorum, isr=[1, 2])
    produce(p, 10)
    p.follower_fetched(2, 10, NOW)
    pd = _fetch_as_follower(p, 3, 11)
    assert pd.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    # what the replica fetcher needs to tell "behind the log start" from "diverged"
    assert (pd.log_start_offset, pd.high_watermark) == (0, 10)
    assert p.followers[3].log_end_offset == -1 and quorum.proposals == []
    pd = _fetch_as_follower(p, 3, 10)
    assert pd.error_code == 0 and p.followers[3].log_end_offset == 10
    assert quorum.proposals == [(1, 1, [1, 2, 3])]


def test_without_a_quorum_nothing_is_proposed(log: Log) -> None:
    p = Partition("events", 0, b"\x00" * 16, log, [1, 2], 1, 0, [1], node_id=1)
    p.follower_fetched(2, 0, NOW)
    p.shrink_isr(NOW + 10 * LAG, LAG)
    assert p.pending_isr is None and p.isr == [1]


# -- one proposal in flight; apply_state ----------------------------------------------------------
def test_only_one_isr_proposal_is_in_flight(log: Log, quorum: Quorum) -> None:
    p = elect(log, quorum, replicas=[1, 2, 3, 4], isr=[1, 2])
    p.follower_fetched(2, 0, NOW)
    p.follower_fetched(3, 0, NOW)
    assert quorum.proposals == [(1, 1, [1, 2, 3])]
    p.follower_fetched(4, 0, NOW)  # also eligible, but one change at a time
    p.shrink_isr(NOW + 10 * LAG, LAG)  # 2 would go too
    assert quorum.proposals == [(1, 1, [1, 2, 3])]
    quorum.commit(p)
    p.follower_fetched(4, 0, NOW + 1)  # the next change goes from the applied state
    assert quorum.proposals[-1] == (1, 2, [1, 2, 3, 4])


def test_apply_state_clears_the_pending_isr_only_when_the_partition_epoch_changes(
    log: Log, quorum: Quorum
) -> None:
    p = elect(log, quorum, isr=[1, 2])
    p.follower_fetched(3, 0, NOW)
    assert p.pending_isr == [1, 2, 3]
    assert p.apply_state(LEADER, 1, [1, 2], 1, [1, 2, 3], NOW) == ""  # the same state again
    assert p.pending_isr == [1, 2, 3]
    assert quorum.set_isr(p, [LEADER]) == ""  # another change won: the proposal is stale
    assert p.pending_isr is None and p.isr == [LEADER] and p.partition_epoch == 2
    p.follower_fetched(3, 0, NOW + 1)
    assert quorum.proposals[-1] == (1, 2, [1, 3])  # proposed again, at the new epoch


def test_apply_state_reports_role_changes(log: Log, quorum: Quorum) -> None:
    p = follower_partition(log, quorum)
    assert p.apply_state(2, 1, [1, 2, 3], 1, [1, 2, 3], NOW) == "follower"
    assert not p.is_leader
    assert p.apply_state(2, 1, [1, 2], 2, [1, 2, 3], NOW) == ""  # only the ISR changed
    assert p.isr == [1, 2]
    assert p.apply_state(LEADER, 2, [1, 2], 3, [1, 2, 3], NOW) == "leader"
    assert p.is_leader and p.leader_epoch == 2 and set(p.followers) == {2, 3}
    assert p.apply_state(LEADER, 3, [1, 2], 4, [1, 2, 3], NOW) == "leader"  # re-elected, new epoch
    assert log.leader_epoch == 3


def test_election_wakes_long_polling_fetchers(log: Log, quorum: Quorum) -> None:
    async def body() -> None:
        p = follower_partition(log, quorum)
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        p.add_waiter(waiter)
        p.apply_state(LEADER, 1, [1, 2, 3], 1, [1, 2, 3], NOW)
        assert waiter.done()

    run(body)


# -- property: the high watermark under random interleavings ----------------------------------
Op = tuple[str, int, int]
ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 4), st.just(0)),
        st.tuples(st.just("fetch"), st.sampled_from([2, 3]), st.integers(0, 6)),
        st.tuples(st.just("tick"), st.integers(0, 2 * LAG), st.just(0)),
        st.tuples(st.just("commit"), st.just(0), st.just(0)),
        st.tuples(st.just("drop"), st.sampled_from([2, 3]), st.just(0)),
        st.tuples(st.just("wait"), st.just(0), st.just(0)),
    ),
    max_size=60,
)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.sampled_from([[1], [1, 2], [1, 2, 3]]), ops)
def test_high_watermark_is_monotonic_and_the_min_log_end_of_the_isr(isr: list[int], steps: list[Op]) -> None:
    """Appends, follower fetches (each follower's offset only grows, up to the leader's end),
    time passing with ISR shrink checks, the quorum applying the pending proposal, the
    controller removing a follower, and acks=all waiters, in any order, from an election
    with ``isr``. After every step:

    * the high watermark never moved back and is at most every ISR (+ pending) member's end;
    * it equals max(previous, min log end over leader, ISR and pending ISR);
    * every acks=all waiter is done exactly when the high watermark reached its offset.
    """

    async def body(d: Path) -> None:
        lg, _ = open_log(d / "events-0", cfg(segment_bytes=1 << 20))
        quorum = Quorum()
        p = elect(lg, quorum, isr=isr)
        fetched = {2: 0, 3: 0}
        now = NOW
        for r in fetched:
            p.follower_fetched(r, 0, now)
        waiters: list[tuple[int, asyncio.Future[None]]] = []
        hw = p.high_watermark
        try:
            for op, a, b in steps:
                if op == "append":
                    produce(p, a, now=NOW)
                elif op == "fetch":
                    fetched[a] = min(fetched[a] + b, p.log_end_offset)
                    p.follower_fetched(a, fetched[a], now)
                elif op == "tick":
                    now += a
                    p.shrink_isr(now, LAG)
                elif op == "commit" and p.pending_isr is not None:
                    quorum.commit(p)
                elif op == "drop" and a in p.isr:
                    quorum.set_isr(p, [r for r in p.isr if r != a])
                elif op == "wait":
                    w = p.wait_replicated(p.log_end_offset)
                    if w is not None:
                        waiters.append((p.log_end_offset, w))
                members = (set(p.isr) | set(p.pending_isr or ())) - {LEADER}
                smallest = min([p.log_end_offset, *(fetched[r] for r in members)])
                assert p.high_watermark >= hw, f"moved back after {op}"
                assert p.high_watermark <= smallest, f"above an ISR member's end after {op}"
                assert p.high_watermark == max(hw, smallest), f"did not advance after {op}"
                hw = p.high_watermark
                for end, w in waiters:
                    assert w.done() == (end <= hw)
                    if w.done():
                        assert w.result() is None
        finally:
            lg.close()

    with tempfile.TemporaryDirectory() as d:
        asyncio.run(body(Path(d)))
