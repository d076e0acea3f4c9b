"""Share-group membership (simple assignor, epochs) and share sessions."""

from __future__ import annotations

from framework.coordinator.share_groups import (
    ShareGroupConfig,
    ShareGroupCoordinator,
    ShareMember,
    SharePartitionManager,
    assign_simple,
)
from framework.coordinator.share_partition import SharePartitionConfig
from framework.protocol.error_codes import ErrorCode
from tests.support.coordinator import FakeScheduler, run_async


def coordinator(sched: FakeScheduler) -> ShareGroupCoordinator:
    counts = {"t": 2}
    return ShareGroupCoordinator(
        sched,
        ShareGroupConfig(session_timeout_ms=1000, heartbeat_interval_ms=100, max_size=3),
        lambda topic: counts.get(topic, 0),
        lambda gid: gid == "classic",
    )


def test_simple_assignor_spreads_partitions_and_shares_them_when_members_outnumber_them() -> None:
    members = {m: ShareMember(m, subscribed_topics=["t"]) for m in ("a", "b")}
    assert assign_simple(members, {"t": 4}) == {"a": {"t": {0, 2}}, "b": {"t": {1, 3}}}
    members = {m: ShareMember(m, subscribed_topics=["t"]) for m in ("a", "b", "c")}
    assert assign_simple(members, {"t": 2}) == {"a": {"t": {0}}, "b": {"t": {1}}, "c": {"t": {0}}}


def test_join_heartbeat_leave_and_fencing() -> None:
    sched = FakeScheduler()
    c = coordinator(sched)
    a = c.heartbeat("g", "a", 0, None, ["t"])
    assert a.error_code == ErrorCode.NONE and a.member_epoch == 1 and a.assignment == {"t": {0, 1}}
    b = c.heartbeat("g", "b", 0, None, ["t"])
    assert b.member_epoch == 2 and b.assignment == {"t": {1}}
    # a learns the new epoch and gives up nothing first: no revocation in share groups
    a2 = c.heartbeat("g", "a", 1, None, None)
    assert a2.member_epoch == 2 and a2.assignment == {"t": {0}}
    assert c.heartbeat("g", "a", 2, None, None).assignment is None  # unchanged: not sent
    assert c.heartbeat("g", "a", 7, None, None).error_code == ErrorCode.FENCED_MEMBER_EPOCH
    assert c.heartbeat("g", "zz", 2, None, None).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert c.heartbeat("g", "b", -1, None, None).member_epoch == -1
    assert c.heartbeat("g", "a", 2, None, None).assignment == {"t": {0, 1}}


@run_async
async def test_refusals_and_the_session_timeout() -> None:
    sched = FakeScheduler()
    c = coordinator(sched)
    assert c.heartbeat("g", "", 0, None, ["t"]).error_code == ErrorCode.INVALID_REQUEST
    assert c.heartbeat("g", "a", 0, None, None).error_code == ErrorCode.INVALID_REQUEST
    assert c.heartbeat("classic", "a", 0, None, ["t"]).error_code == ErrorCode.GROUP_ID_NOT_FOUND
    for m in "abc":
        c.heartbeat("g", m, 0, None, ["t"])
    assert c.heartbeat("g", "d", 0, None, ["t"]).error_code == ErrorCode.GROUP_MAX_SIZE_REACHED
    await sched.advance(1.5)
    g = c.describe("g")
    assert g is not None and g.members == {} and g.state.value == "Empty"
    assert c.delete("g") == ErrorCode.NONE


def test_share_sessions_epochs_and_closing_gives_records_back() -> None:
    sched = FakeScheduler()
    m = SharePartitionManager(sched, SharePartitionConfig(lock_duration_ms=1000), max_sessions=1)
    assert m.open_session("g", "a", 1)[0] == ErrorCode.SHARE_SESSION_NOT_FOUND
    code, s = m.open_session("g", "a", 0, "127.0.0.1:2")
    assert code == ErrorCode.NONE and s is not None
    assert m.open_session("g", "b", 0)[0] == ErrorCode.SHARE_SESSION_LIMIT_REACHED
    assert m.open_session("g", "a", 2)[0] == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    assert m.open_session("g", "a", 1)[0] == ErrorCode.NONE
    sp = m.get(("g", "t", 0), ("id", 0), lambda: 0)
    sp.acquire("a", [(0, 4)], 10, sched.time())
    m.schedule_expiry(("g", "t", 0))
    m.connection_closed("127.0.0.1:1")  # not its connection
    assert sp.in_flight == 5
    m.close_session("g", "a")
    assert sp.next_fetch_offset() == 0 and sp.in_flight == 0
    # a new leader epoch starts the partition over
    assert m.get(("g", "t", 0), ("id", 1), lambda: 7).start_offset == 7


@run_async
async def test_expired_locks_wake_long_polls() -> None:
    sched = FakeScheduler()
    m = SharePartitionManager(sched, SharePartitionConfig(lock_duration_ms=1000))
    key = ("g", "t", 0)
    sp = m.get(key, ("id", 0), lambda: 0)
    sp.acquire("a", [(0, 0)], 10, sched.time())
    m.schedule_expiry(key)
    fut = sched.create_future()
    m.add_waiter(key, fut)
    await sched.advance(0.5)
    assert not fut.done()
    await sched.advance(0.6)
    assert fut.done() and sp.next_fetch_offset() == 0
