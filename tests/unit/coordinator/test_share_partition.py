"""The share-partition state machine: acquisition, acknowledgement, locks, delivery limits."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from framework.coordinator.share_partition import (
    AckType,
    Acquired,
    RecordState,
    SharePartition,
    SharePartitionConfig,
)
from framework.protocol.error_codes import ErrorCode

CONFIG = SharePartitionConfig(lock_duration_ms=1000, delivery_count_limit=2, max_record_locks=10)
BATCHES = [(0, 4), (5, 9)]


def test_acquisition_takes_whole_batches_up_to_max_records() -> None:
    sp = SharePartition(0, CONFIG)
    assert sp.acquire("a", BATCHES, 3, now=0) == [Acquired(0, 4, 1)]
    assert sp.end_offset == 5
    # record_limit mode (KIP-1206) stops at exactly max_records
    assert sp.acquire("b", [(5, 9)], 2, now=0, strict=True) == [Acquired(5, 6, 1)]
    assert sp.next_fetch_offset() == 7


def test_accept_moves_the_start_past_settled_records_only() -> None:
    sp = SharePartition(0, CONFIG)
    sp.acquire("a", BATCHES, 10, now=0)
    assert sp.acknowledge("a", 2, 4, [AckType.ACCEPT], now=0) == ErrorCode.NONE
    assert sp.start_offset == 0  # 0 and 1 are still acquired
    assert sp.acknowledge("a", 0, 1, [AckType.ACCEPT, AckType.REJECT], now=0) == ErrorCode.NONE
    assert sp.start_offset == 5


def test_another_members_or_an_unacquired_record_is_refused_whole() -> None:
    sp = SharePartition(0, CONFIG)
    sp.acquire("a", [(0, 4)], 10, now=0)
    assert sp.acknowledge("b", 0, 0, [AckType.ACCEPT], now=0) == ErrorCode.INVALID_RECORD_STATE
    # 5 was never handed out: the batch 3-5 is refused and changes nothing
    assert sp.acknowledge("a", 3, 5, [AckType.ACCEPT], now=0) == ErrorCode.INVALID_REQUEST
    assert sp.state_of(3) == (RecordState.ACQUIRED, 1)
    assert sp.acknowledge("a", 0, 1, [AckType.ACCEPT], now=0) == ErrorCode.NONE
    assert sp.acknowledge("a", 0, 1, [AckType.ACCEPT], now=0) == ErrorCode.NONE  # settled: skipped
    assert sp.acknowledge("a", 1, 2, [AckType.ACCEPT], now=0) == ErrorCode.NONE  # 2 is acquired
    assert sp.acknowledge("a", 0, 1, [1, 1, 1], now=0) == ErrorCode.INVALID_REQUEST  # 3 types for 2


def test_released_or_expired_records_come_again_until_the_delivery_limit() -> None:
    sp = SharePartition(0, CONFIG)
    sp.acquire("a", [(0, 1)], 10, now=0)
    assert sp.acknowledge("a", 0, 0, [AckType.RELEASE], now=0) == ErrorCode.NONE
    assert sp.expire_locks(now=0.5) is False  # 1's lock runs until 1.0
    assert sp.expire_locks(now=1.0) is True
    assert sp.acquire("b", [(0, 1)], 10, now=1) == [Acquired(0, 1, 2)]
    # second delivery of both: at the limit, a release or an expiry archives them
    assert sp.acknowledge("b", 0, 0, [AckType.RELEASE], now=1) == ErrorCode.NONE
    assert sp.expire_locks(now=5) is False
    assert sp.start_offset == 2 and sp.runs == []


def test_renew_extends_a_lock() -> None:
    sp = SharePartition(0, CONFIG)
    sp.acquire("a", [(0, 0)], 10, now=0)
    assert sp.acknowledge("a", 0, 0, [AckType.RENEW], now=0.9) == ErrorCode.NONE
    assert sp.expire_locks(now=1.5) is False
    assert sp.state_of(0) == (RecordState.ACQUIRED, 1)
    assert sp.acknowledge("a", 0, 0, [AckType.ACCEPT], now=1.6) == ErrorCode.NONE


def test_in_flight_records_are_capped_and_a_member_leaving_gives_its_records_back() -> None:
    sp = SharePartition(0, CONFIG)
    # whole batches may go past the cap of 10; the next batch waits until records settle
    assert sp.acquire("a", [(0, 11), (12, 14)], 100, now=0) == [Acquired(0, 11, 1)]
    assert not sp.can_acquire()
    strict = SharePartition(0, CONFIG)
    assert strict.acquire("a", [(0, 14)], 100, now=0, strict=True) == [Acquired(0, 9, 1)]
    assert sp.release_member("a") is True
    assert sp.can_acquire() and sp.next_fetch_offset() == 0
    assert sp.acquire("b", [(0, 11)], 100, now=0) == [Acquired(0, 11, 1)]  # that delivery uncounted


def test_offsets_no_batch_covers_are_archived_and_truncation_moves_the_start() -> None:
    sp = SharePartition(0, CONFIG)
    assert sp.acquire("a", [(3, 4)], 10, now=0) == [Acquired(3, 4, 1)]
    assert sp.start_offset == 3  # 0-2 are gone: archived, then passed
    sp.truncate_to(4)
    assert sp.start_offset == 4 and sp.state_of(3) is None
    assert sp.state_batches() == [(4, 4, RecordState.AVAILABLE, 1)]


def test_mixed_acknowledgements_split_a_batch_and_its_released_middle_comes_again() -> None:
    sp = SharePartition(0, CONFIG)
    assert sp.acquire("a", [(0, 9)], 100, now=0) == [Acquired(0, 9, 1)]
    kinds = [AckType.ACCEPT] * 3 + [AckType.RELEASE] * 4 + [AckType.ACCEPT, AckType.REJECT, AckType.GAP]
    assert sp.acknowledge("a", 0, 9, kinds, now=0) == ErrorCode.NONE
    assert sp.start_offset == 3 and sp.next_fetch_offset() == 3
    # the released 3-6 come again, second delivery; record_limit takes two of them
    assert sp.acquire("b", [(0, 9)], 2, now=1, strict=True) == [Acquired(3, 4, 2)]
    assert sp.acquire("c", [(0, 9), (10, 11)], 100, now=1) == [Acquired(5, 6, 2), Acquired(10, 11, 1)]
    assert sp.acknowledge("b", 3, 4, [AckType.ACCEPT], now=1) == ErrorCode.NONE
    assert sp.acknowledge("c", 5, 6, [AckType.ACCEPT], now=1) == ErrorCode.NONE
    assert sp.start_offset == 10 and sp.state_batches() == [(10, 11, RecordState.AVAILABLE, 1)]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 4), st.integers(0, 9), st.integers(1, 6), st.booleans()), max_size=40)
)
def test_runs_stay_ordered_and_a_record_is_held_by_one_member_at_a_time(
    ops: list[tuple[int, int, int, bool]],
) -> None:
    """Random acquisitions, acknowledgements, expiries and releases: the runs cover the
    in-flight offsets once each, in order, and nothing acquired is handed out again."""
    sp = SharePartition(
        0, SharePartitionConfig(lock_duration_ms=1000, delivery_count_limit=3, max_record_locks=12)
    )
    batches: list[tuple[int, int]] = []
    held: dict[int, str] = {}
    now = 0.0
    for op, x, n, flag in ops:
        member = "abc"[x % 3]
        if op <= 1:
            end = batches[-1][1] + 1 if batches else 0
            batches.append((end, end + n - 1))
            got = sp.acquire(
                member, [b for b in batches if b[1] >= sp.next_fetch_offset()], n, now, strict=flag
            )
            for a in got:
                for o in range(a.first_offset, a.last_offset + 1):
                    assert o not in held, f"offset {o} handed out twice"
                    held[o] = member
        elif op == 2 and held:
            o = sorted(held)[x % len(held)]
            hi = o
            while hi + 1 in held and held[hi + 1] == held[o] and hi - o < n:
                hi += 1  # a range the member holds, maybe across runs acquired apart
            kinds = [
                [AckType.ACCEPT, AckType.RELEASE, AckType.REJECT, AckType.RENEW][(n + i) % 4]
                for i in range(hi - o + 1)
            ]
            assert sp.acknowledge("zz", o, hi, [AckType.ACCEPT], now) == ErrorCode.INVALID_RECORD_STATE
            assert sp.acknowledge(held[o], o, hi, kinds if flag else kinds[:1], now) == ErrorCode.NONE
            for i in range(o, hi + 1):
                if (kinds[i - o] if flag else kinds[0]) is not AckType.RENEW:
                    del held[i]
        elif op == 3:
            now += 0.6
            sp.expire_locks(now)
        else:
            sp.release_member(member)
        held = {o: m for o, m in held.items() if sp.state_of(o) == (RecordState.ACQUIRED, sp.state_of(o)[1])}  # type: ignore[index]
        expect = sp.start_offset
        for r in sp.runs:
            assert r.first == expect and r.first <= r.last
            expect = r.last + 1
        assert expect == sp.end_offset
        assert not sp.runs or sp.runs[0].state not in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
