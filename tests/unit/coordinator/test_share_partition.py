"""The share-partition state machine: acquisition, acknowledgement, locks, delivery limits."""

from __future__ import annotations

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
    assert sp.records[3].state is RecordState.ACQUIRED
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
    assert sp.start_offset == 2 and sp.records == {}


def test_renew_extends_a_lock() -> None:
    sp = SharePartition(0, CONFIG)
    sp.acquire("a", [(0, 0)], 10, now=0)
    assert sp.acknowledge("a", 0, 0, [AckType.RENEW], now=0.9) == ErrorCode.NONE
    assert sp.expire_locks(now=1.5) is False
    assert sp.records[0].state is RecordState.ACQUIRED
    assert sp.acknowledge("a", 0, 0, [AckType.ACCEPT], now=1.6) == ErrorCode.NONE


def test_in_flight_records_are_capped_and_a_member_leaving_gives_its_records_back() -> None:
    sp = SharePartition(0, CONFIG)
    assert sp.acquire("a", [(0, 14)], 100, now=0) == [Acquired(0, 9, 1)]
    assert not sp.can_acquire()
    assert sp.release_member("a") is True
    assert sp.can_acquire() and sp.next_fetch_offset() == 0
    assert sp.acquire("b", [(0, 14)], 100, now=0) == [Acquired(0, 9, 1)]  # that delivery uncounted


def test_offsets_no_batch_covers_are_archived_and_truncation_moves_the_start() -> None:
    sp = SharePartition(0, CONFIG)
    assert sp.acquire("a", [(3, 4)], 10, now=0) == [Acquired(3, 4, 1)]
    assert sp.start_offset == 3  # 0-2 are gone: archived, then passed
    sp.truncate_to(4)
    assert sp.start_offset == 4 and 3 not in sp.records
    assert sp.state_batches() == [(4, 4, RecordState.AVAILABLE, 1)]
