"""KIP-848 consumer groups (coordinator/consumer_groups.py), seen from the members' heartbeats.

Each test speaks ConsumerGroupHeartbeat for its members the way librdkafka and the Java
client do (full request on join, then only what changed, owned partitions when they change)
and asserts epochs, assignments and error codes. Time is a manual clock (:class:`FakeScheduler`).
"""

from __future__ import annotations

from typing import Any

from framework.coordinator.consumer_groups import (
    ConsumerGroupConfig,
    ConsumerGroupCoordinator,
    ConsumerGroupState,
    ConsumerMember,
    HeartbeatRequest,
    HeartbeatResult,
    MemberState,
    Partitions,
    assign_range,
    assign_uniform,
)
from framework.protocol.error_codes import ErrorCode as E
from tests.support.coordinator import FakeScheduler, run_async

G = "orders-app"


class H:
    """A coordinator on a fake clock; ``topics`` are the cluster's partition counts."""

    def __init__(self, topics: dict[str, int] | None = None, classic: set[str] | None = None, **config: Any):
        self.sched = FakeScheduler()
        self.topics = dict(topics or {"orders": 4})
        self.classic = classic or set()
        self.co = ConsumerGroupCoordinator(
            self.sched,
            ConsumerGroupConfig(**config),
            lambda t: self.topics.get(t, 0),
            lambda gid: gid in self.classic,
            lambda: list(self.topics),
        )
        # what each member holds, as a client keeps it
        self.owned: dict[str, Partitions] = {}
        self.epoch: dict[str, int] = {}

    def join(self, mid: str, *topics: str, assignor: str | None = None) -> HeartbeatResult:
        r = self.co.heartbeat(
            HeartbeatRequest(
                G,
                mid,
                0,
                rebalance_timeout_ms=60_000,
                subscribed_topic_names=list(topics or ("orders",)),
                server_assignor=assignor,
                owned={},
            )
        )
        self._apply(mid, r)
        return r

    def beat(self, mid: str, **fields: Any) -> HeartbeatResult:
        """A heartbeat reporting what the member owns (after acting on the last response)."""
        fields.setdefault("owned", self.owned.get(mid, {}))
        epoch = fields.pop("epoch") if "epoch" in fields else self.epoch[mid]
        r = self.co.heartbeat(HeartbeatRequest(G, mid, epoch, **fields))
        self._apply(mid, r)
        return r

    def _apply(self, mid: str, r: HeartbeatResult) -> None:
        if r.error_code == E.NONE:
            self.epoch[mid] = r.member_epoch
            if r.assignment is not None:
                self.owned[mid] = r.assignment

    def settle(self, *mids: str, rounds: int = 6) -> None:
        for _ in range(rounds):
            for mid in mids:
                self.beat(mid)

    def count(self, mid: str) -> int:
        return sum(len(ps) for ps in self.owned.get(mid, {}).values())


def test_first_member_gets_every_partition_at_epoch_one() -> None:
    h = H()
    r = h.join("a")
    assert r.error_code == E.NONE
    assert (r.member_id, r.member_epoch, r.heartbeat_interval_ms) == ("a", 1, 5000)
    assert r.assignment == {"orders": {0, 1, 2, 3}}
    assert h.co.describe(G) is not None
    assert h.co.describe(G).state is ConsumerGroupState.STABLE  # type: ignore[union-attr]


def test_v0_member_id_is_generated() -> None:
    h = H()
    r = h.co.heartbeat(
        HeartbeatRequest(
            G, "", 0, rebalance_timeout_ms=1, subscribed_topic_names=["orders"], generate_member_id=True
        )
    )
    assert r.error_code == E.NONE and r.member_id


def test_second_member_waits_for_revocation_then_gets_its_half() -> None:
    h = H()
    h.join("a")
    r = h.join("b")
    assert r.member_epoch == 2
    assert r.assignment == {}  # its targeted partitions are still a's
    assert h.co.groups[G].members["b"].state is MemberState.UNRELEASED_PARTITIONS
    ra = h.beat("a")
    assert ra.member_epoch == 1  # keeps its epoch while revoking
    assert ra.assignment is not None and sum(len(p) for p in ra.assignment.values()) == 2
    assert h.co.groups[G].state is ConsumerGroupState.RECONCILING
    rb = h.beat("b")
    assert rb.assignment is None or rb.assignment == {}  # a has not reported the revocation yet
    ra = h.beat("a")  # now owns only its two
    assert ra.member_epoch == 2
    rb = h.beat("b")
    assert rb.assignment is not None and h.count("b") == 2
    both = h.owned["a"]["orders"] | h.owned["b"]["orders"]
    assert both == {0, 1, 2, 3} and not h.owned["a"]["orders"] & h.owned["b"]["orders"]
    assert h.co.groups[G].state is ConsumerGroupState.STABLE


def test_leave_gives_partitions_to_the_rest() -> None:
    h = H()
    h.join("a")
    h.join("b")
    h.settle("a", "b")
    r = h.beat("b", epoch=-1)
    assert (r.error_code, r.member_epoch) == (E.NONE, -1)
    h.settle("a")
    assert h.owned["a"] == {"orders": {0, 1, 2, 3}}
    assert h.epoch["a"] == 3
    assert h.beat("a", epoch=-1).error_code == E.NONE
    assert not h.co.is_consumer_group(G)


@run_async
async def test_session_timeout_removes_a_silent_member() -> None:
    h = H(session_timeout_ms=10_000)
    h.join("a")
    h.join("b")
    h.settle("a", "b")
    for _ in range(3):
        await h.sched.advance(4)
        h.beat("a")
    assert "b" not in h.co.groups[G].members
    h.settle("a")
    assert h.count("a") == 4
    assert h.beat("b").error_code == E.UNKNOWN_MEMBER_ID


@run_async
async def test_member_that_never_revokes_is_removed_after_its_rebalance_timeout() -> None:
    h = H(session_timeout_ms=120_000)
    h.join("a")
    h.join("b")
    h.beat("a", owned=None)  # told to revoke; never reports it
    await h.sched.advance(61)
    assert "a" not in h.co.groups[G].members
    h.settle("b")
    assert h.count("b") == 4


def test_epoch_checks() -> None:
    h = H()
    h.join("a")
    assert h.beat("a", epoch=5).error_code == E.FENCED_MEMBER_EPOCH
    h.join("b")
    h.settle("a", "b")
    assert h.epoch["a"] == 2
    # the previous epoch with owned partitions within the assignment: a lost response
    assert h.beat("a", epoch=1).error_code == E.NONE
    assert h.beat("a", epoch=0, owned=None, subscribed_topic_names=None).error_code == E.INVALID_REQUEST
    assert h.beat("zed", epoch=3).error_code == E.UNKNOWN_MEMBER_ID
    r = h.co.heartbeat(HeartbeatRequest(G, "b", 1, owned={"orders": {0, 1, 2, 3}}))
    assert r.error_code == E.FENCED_MEMBER_EPOCH


def test_rejoin_after_fence_starts_from_nothing() -> None:
    h = H()
    h.join("a")
    h.owned["a"] = {}
    r = h.join("a")
    assert r.error_code == E.NONE and r.assignment == {"orders": {0, 1, 2, 3}}


def test_request_validation_and_limits() -> None:
    h = H(max_size=1)
    co = h.co
    assert co.heartbeat(HeartbeatRequest("", "a", 0)).error_code == E.INVALID_REQUEST
    assert co.heartbeat(
        HeartbeatRequest(G, "", 0, rebalance_timeout_ms=1, subscribed_topic_names=[])
    ).error_code == (E.INVALID_REQUEST)
    assert co.heartbeat(HeartbeatRequest(G, "a", 0, rebalance_timeout_ms=1)).error_code == E.INVALID_REQUEST
    assert co.heartbeat(HeartbeatRequest(G, "a", -3)).error_code == E.INVALID_REQUEST
    bad = HeartbeatRequest(
        G, "a", 0, rebalance_timeout_ms=1, subscribed_topic_names=["orders"], server_assignor="x"
    )
    assert co.heartbeat(bad).error_code == E.UNSUPPORTED_ASSIGNOR
    assert h.join("a").error_code == E.NONE
    assert h.join("b").error_code == E.GROUP_MAX_SIZE_REACHED


def test_classic_group_of_the_same_id_is_refused() -> None:
    h = H(classic={G})
    assert h.join("a").error_code == E.GROUP_ID_NOT_FOUND


def test_subscription_and_topic_changes_bump_the_epoch() -> None:
    h = H(topics={"orders": 2, "refunds": 2})
    h.join("a")
    assert h.owned["a"] == {"orders": {0, 1}}
    h.beat("a", subscribed_topic_names=["orders", "refunds"])
    assert h.epoch["a"] == 2 and h.owned["a"] == {"orders": {0, 1}, "refunds": {0, 1}}
    h.topics["orders"] = 3
    h.beat("a")
    assert h.epoch["a"] == 3 and h.owned["a"]["orders"] == {0, 1, 2}


def test_offset_commit_checks_the_member_epoch() -> None:
    h = H()
    h.join("a")
    assert h.co.check_commit(G, "a", 1) == E.NONE
    assert h.co.check_commit(G, "a", 0) == E.STALE_MEMBER_EPOCH
    assert h.co.check_commit(G, "b", 1) == E.UNKNOWN_MEMBER_ID


def test_range_assignor_when_asked() -> None:
    h = H()
    h.join("a", assignor="range")
    h.join("b", assignor="range")
    h.settle("a", "b")
    assert h.co.groups[G].assignor == "range"
    assert h.owned == {"a": {"orders": {0, 1}}, "b": {"orders": {2, 3}}}


def _members(subs: dict[str, list[str]]) -> dict[str, ConsumerMember]:
    return {mid: ConsumerMember(mid, subscribed_topics=ts) for mid, ts in subs.items()}


def test_uniform_is_balanced_and_sticky() -> None:
    members = _members({"a": ["t"], "b": ["t"], "c": ["t"]})
    first = assign_uniform(members, {"t": 7}, {})
    assert sorted(sum(len(p) for p in a.values()) for a in first.values()) == [2, 2, 3]
    del members["c"]
    second = assign_uniform(members, {"t": 7}, first)
    for mid in ("a", "b"):
        assert first[mid]["t"] <= second[mid]["t"]  # nothing moved between the survivors
    assert second["a"]["t"] | second["b"]["t"] == set(range(7))


def test_uniform_respects_heterogeneous_subscriptions() -> None:
    members = _members({"a": ["t", "u"], "b": ["u"]})
    out = assign_uniform(members, {"t": 2, "u": 2}, {})
    assert "t" not in out["b"]
    assert sum(len(p) for p in out["a"].values()) == 2 and len(out["b"]["u"]) == 2 - len(
        out["a"].get("u", ())
    )


def test_range_splits_each_topic() -> None:
    out = assign_range(_members({"a": ["t"], "b": ["t"]}), {"t": 5}, {})
    assert out == {"a": {"t": {0, 1, 2}}, "b": {"t": {3, 4}}}


def test_a_regex_subscription_follows_the_topics_that_match() -> None:
    h = H({"orders-eu": 2, "orders-us": 1, "payments": 3})
    r = h.co.heartbeat(
        HeartbeatRequest(G, "a", 0, rebalance_timeout_ms=60_000, subscribed_topic_regex="orders-.*", owned={})
    )
    h._apply("a", r)
    assert r.assignment == {"orders-eu": {0, 1}, "orders-us": {0}}
    epoch = r.member_epoch
    h.topics["orders-asia"] = 1  # created later: the next heartbeat resolves the expression again
    h.topics["xorders-eu"] = 1  # matches only part of the name: not subscribed
    h.settle("a")
    assert h.owned["a"] == {"orders-eu": {0, 1}, "orders-us": {0}, "orders-asia": {0}}
    assert h.epoch["a"] > epoch
    assert h.co.groups[G].members["a"].topic_regex == "orders-.*"


def test_an_invalid_regex_is_refused() -> None:
    h = H()
    r = h.co.heartbeat(
        HeartbeatRequest(G, "a", 0, rebalance_timeout_ms=60_000, subscribed_topic_regex="orders-(", owned={})
    )
    assert r.error_code == E.INVALID_REGULAR_EXPRESSION and "orders-(" in (r.error_message or "")


def test_a_static_member_restarting_takes_its_partitions_back_without_a_rebalance() -> None:
    h = H()
    for mid in ("a", "b"):
        r = h.co.heartbeat(
            HeartbeatRequest(
                G,
                mid,
                0,
                instance_id=f"host-{mid}",
                rebalance_timeout_ms=60_000,
                subscribed_topic_names=["orders"],
                owned={},
            )
        )
        h._apply(mid, r)
    h.settle("a", "b")
    g = h.co.groups[G]
    epoch, held = g.group_epoch, h.owned["b"]
    assert h.count("b") == 2
    # b restarts: it leaves with -2, its partitions wait for it
    assert h.beat("b", epoch=-2, instance_id="host-b").member_epoch == -2
    h.settle("a")
    assert h.count("a") == 2 and g.group_epoch == epoch
    # a second member with a's instance id while a is live is refused
    dup = h.co.heartbeat(
        HeartbeatRequest(
            G,
            "a2",
            0,
            instance_id="host-a",
            rebalance_timeout_ms=60_000,
            subscribed_topic_names=["orders"],
            owned={},
        )
    )
    assert dup.error_code == E.UNRELEASED_INSTANCE_ID
    back = h.co.heartbeat(
        HeartbeatRequest(
            G,
            "b2",
            0,
            instance_id="host-b",
            rebalance_timeout_ms=60_000,
            subscribed_topic_names=["orders"],
            owned={},
        )
    )
    assert back.error_code == E.NONE and back.assignment == held
    assert g.group_epoch == epoch and set(g.members) == {"a", "b2"}


@run_async
async def test_a_static_member_that_does_not_come_back_is_removed_at_its_session_timeout() -> None:
    h = H(session_timeout_ms=10_000)
    r = h.co.heartbeat(
        HeartbeatRequest(
            G,
            "a",
            0,
            instance_id="host-a",
            rebalance_timeout_ms=60_000,
            subscribed_topic_names=["orders"],
            owned={},
        )
    )
    h._apply("a", r)
    h.join("b")
    h.settle("a", "b")
    h.beat("a", epoch=-2, instance_id="host-a")
    for _ in range(3):
        await h.sched.advance(4)
        h.beat("b")
    h.settle("b")
    assert set(h.co.groups[G].members) == {"b"} and h.count("b") == 4
