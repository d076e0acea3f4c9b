"""The replication throttle's quota (framework/replication/quota.py): which replicas a
throttled-replicas list names for a broker, and the rate measured over the sample windows."""

from __future__ import annotations

from framework.replication.quota import ALL, UNLIMITED, ReplicationQuota, throttled_partitions


def test_a_list_names_the_partitions_of_one_broker_or_all() -> None:
    assert throttled_partitions(["0:1", "1:2", "2:1"], 1) == {0, 2}
    assert throttled_partitions(["0:1", "1:2"], 3) == frozenset()
    assert throttled_partitions(["*"], 3) == {ALL}
    assert throttled_partitions([" 4 : 3 "], 3) == {4}


def test_the_quota_is_exceeded_above_the_rate_and_counts_what_it_held_back() -> None:
    q = ReplicationQuota("follower", rate=1000, throttled={"t": frozenset({0})})
    assert q.active and q.is_throttled("t", 0) and not q.is_throttled("t", 1)
    assert not q.exceeded(0.0)
    q.record(900, 0.0)
    assert not q.exceeded(0.5)  # 900 B over at least one window: under 1000 B/s
    q.record(600, 0.5)
    assert q.exceeded(0.9) and q.throttled_skips == 1  # 1500 B in 1 s
    assert not q.exceeded(1.6)  # 1500 B over 1.6 s
    assert q.throttled_bytes == 1500
    q.record(10_000, 2.0)
    assert q.exceeded(10.0)  # 11,500 B within the 11 windows kept, over 10 s: over 1000 B/s
    assert not q.exceeded(13.5)  # the first windows left: 10,000 B over 11.5 s


def test_no_rate_no_throttle() -> None:
    q = ReplicationQuota("leader", throttled={"t": frozenset({ALL})})
    assert q.rate == UNLIMITED and not q.active
    q.record(10**9, 0.0)
    assert not q.exceeded(0.1) and q.throttled_bytes == 10**9
