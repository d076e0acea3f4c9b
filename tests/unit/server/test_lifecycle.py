"""The broker's lifecycle (framework/server/lifecycle.py): Kafka's BrokerState transitions,
joining the cluster on the quorum's events, the controlled shutdown and the hand-over of acks.

Small fakes stand for the quorum, the replica manager and the metadata store; the clock is a
counter the test moves, so no test waits on time.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import pytest

from framework.errors import StoreError
from framework.server.lifecycle import COMMIT_ANNOUNCE_S, BrokerLifecycle, BrokerState

S = BrokerState


class Clock:
    """Seconds that move only when told, or by ``step`` at each reading."""

    def __init__(self, step: float = 0.0) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        t = self.now
        self.now += self.step
        return t


class FakeQuorum:
    def __init__(self) -> None:
        self.voters = {1: "127.0.0.1:19001", 2: "127.0.0.1:19002", 3: "127.0.0.1:19003"}
        self.replayed_event = asyncio.Event()
        self.registered_event = asyncio.Event()
        self.broker_epoch = 42
        self.is_controller = False
        self.proposed: list[tuple[Any, ...]] = []
        self.refuse: StoreError | None = None
        self.on_fence: list[Any] = []  # run when the fencing applies

    async def propose_retrying(self, method: str, *args: Any, timeout: float = 15.0) -> Any:
        self.proposed.append((method, *args))
        if self.refuse is not None:
            raise self.refuse
        if method == "fence_broker":
            for f in self.on_fence:
                f()
        return None


class FakePartition:
    def __init__(self, topic: str, index: int, leader: bool = True) -> None:
        self.topic, self.index = topic, index
        self.is_leader, self.replicated = leader, True
        self.acks: list[asyncio.Future[None]] = []

    def unanswered_acks(self) -> list[asyncio.Future[None]]:
        return [f for f in self.acks if not f.done()]


class FakeReplicas:
    def __init__(self, *parts: FakePartition) -> None:
        self.parts = list(parts)
        self.calls: list[str] = []
        self.hand_over = False  # reconcile: an in-sync follower takes every leadership
        self.answered: list[asyncio.Future[None]] = []  # reconcile: answered as a follower

    def all_partitions(self) -> list[FakePartition]:
        return self.parts

    def quarantine_strays(self) -> None:
        self.calls.append("quarantine_strays")

    def reconcile(self) -> None:
        self.calls.append("reconcile")
        if self.hand_over:
            for p in self.parts:
                p.is_leader = False
        for f in self.answered:  # a moment later: the hand-over finds it waiting
            asyncio.get_running_loop().call_soon(f.set_result, None)


class FakeUsers:
    def __init__(self, pending: dict[str, dict[str, dict[str, Any]]] | None = None) -> None:
        self.path = Path("/data/__metadata/metadata.json")
        self.pending = pending or {}
        self.held: set[tuple[str, str]] = set()
        self.forgotten = False

    def bootstrap_credentials(self) -> dict[str, dict[str, dict[str, Any]]]:
        return self.pending

    def credential(self, user: str, mechanism: str) -> Any:
        return object() if (user, mechanism) in self.held else None

    def forget_bootstrap_credentials(self) -> None:
        self.forgotten = True


def lifecycle(
    replicas: FakeReplicas | None = None, users: FakeUsers | None = None, clock: Clock | None = None
) -> tuple[BrokerLifecycle, list[float]]:
    slept: list[float] = []

    async def sleep(s: float) -> None:
        slept.append(s)

    lc = BrokerLifecycle(1, replicas or FakeReplicas(), users or FakeUsers(), clock or Clock(), sleep)
    return lc, slept


def run(coro: Coroutine[Any, Any, None]) -> None:
    asyncio.run(coro)


async def never() -> None:
    await asyncio.Event().wait()


async def turns_until(done: Any, turns: int = 100) -> None:
    """Let the loop run other tasks (no time passes) until ``done()``."""
    for _ in range(turns):
        if done():
            return
        await asyncio.sleep(0)
    raise AssertionError("never happened")


def transitions(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if " -> " in r.getMessage()]


# -- joining -----------------------------------------------------------------------------------------
def test_a_cluster_broker_joins_on_the_quorums_events(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "sftraffic.broker")

    async def go() -> None:
        replicas = FakeReplicas()
        lc, _ = lifecycle(replicas)
        quorum = FakeQuorum()
        ticker = asyncio.ensure_future(never())
        lc.starting()
        join = asyncio.ensure_future(lc.join(quorum, ticker))
        await asyncio.sleep(0)
        assert lc.state is S.STARTING and not join.done()
        quorum.replayed_event.set()
        await turns_until(lambda: lc.state is S.RECOVERY)
        await asyncio.sleep(0)
        assert not join.done() and replicas.calls == []
        quorum.registered_event.set()
        await join
        assert replicas.calls == ["quarantine_strays", "reconcile"]  # before the listener serves
        lc.running()
        assert lc.state is S.RUNNING and not lc.stopping.is_set()
        ticker.cancel()

    run(go())
    assert transitions(caplog) == [
        "broker 1: NOT_RUNNING -> STARTING",
        "broker 1: STARTING -> RECOVERY",
        "broker 1: RECOVERY -> RUNNING",
    ]
    assert any("caught up with the metadata quorum" in r.getMessage() for r in caplog.records)


def test_joining_ends_with_what_stopped_the_quorum() -> None:
    async def go() -> None:
        lc, _ = lifecycle()
        lc.starting()

        async def broken() -> None:
            raise StoreError("cannot bind the controller endpoint")

        ticker = asyncio.ensure_future(broken())
        with pytest.raises(StoreError, match="cannot bind"):
            await lc.join(FakeQuorum(), ticker)
        assert lc.state is S.STARTING

    run(go())


def test_a_broker_waiting_for_the_quorum_says_what_it_waits_for(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "sftraffic.broker")

    async def go() -> None:
        # each reading of the clock is 6 s later: every wait is already past its note
        lc, _ = lifecycle(clock=Clock(step=6.0))
        quorum = FakeQuorum()
        ticker = asyncio.ensure_future(never())
        lc.starting()
        join = asyncio.ensure_future(lc.join(quorum, ticker))
        await turns_until(lambda: any("waiting for the metadata" in r.getMessage() for r in caplog.records))
        quorum.replayed_event.set()
        quorum.registered_event.set()
        await join
        ticker.cancel()

    run(go())
    notes = [r.getMessage() for r in caplog.records if "waiting for the metadata quorum" in r.getMessage()]
    assert notes[0] == (
        "broker 1 waiting for the metadata quorum (2 of 3 voters must be up: "
        "1@127.0.0.1:19001, 2@127.0.0.1:19002, 3@127.0.0.1:19003)"
    )


def test_bootstrap_users_missing_from_the_quorum_are_proposed_then_forgotten() -> None:
    sha256, sha512 = {"iterations": 4096}, {"iterations": 8192}
    users = FakeUsers(
        {"alice": {"SCRAM-SHA-256": sha256, "SCRAM-SHA-512": sha512}, "bob": {"SCRAM-SHA-256": {}}}
    )
    users.held = {("alice", "SCRAM-SHA-256"), ("bob", "SCRAM-SHA-256")}  # already in the quorum

    async def go() -> None:
        lc, _ = lifecycle(users=users)
        quorum = FakeQuorum()
        quorum.replayed_event.set()
        quorum.registered_event.set()
        lc.starting()
        await lc.join(quorum, asyncio.ensure_future(never()))
        assert quorum.proposed == [
            (
                "change_metadata",
                "scram_credentials",
                {"name": "alice", "set": {"SCRAM-SHA-512": sha512}, "delete": []},
            )
        ]

    run(go())
    assert users.forgotten


# -- stopping ----------------------------------------------------------------------------------------
async def running_cluster_broker(
    replicas: FakeReplicas, clock: Clock | None = None
) -> tuple[BrokerLifecycle, FakeQuorum, list[float]]:
    lc, slept = lifecycle(replicas, clock=clock)
    quorum = FakeQuorum()
    quorum.replayed_event.set()
    quorum.registered_event.set()
    lc.starting()
    await lc.join(quorum, asyncio.ensure_future(never()))
    lc.running()
    return lc, quorum, slept


def test_a_controlled_shutdown_fences_hands_over_and_answers_the_acks(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "sftraffic.broker")

    async def go() -> None:
        p = FakePartition("t", 0)
        replicas = FakeReplicas(p, FakePartition("t", 1, leader=False))
        lc, quorum, slept = await running_cluster_broker(replicas)
        ack = asyncio.get_running_loop().create_future()
        p.acks.append(ack)
        seen: list[tuple[BrokerState, bool, bool]] = []
        quorum.on_fence.append(lambda: seen.append((lc.state, lc.stopping.is_set(), lc.shutting_down())))
        replicas.hand_over = True
        replicas.answered.append(ack)  # the new leader's high watermark covers the batch
        await lc.shut_down(controlled=True)
        assert ack.done()
        assert quorum.proposed[-1] == ("fence_broker", 1, 42)  # its own epoch
        assert seen == [(S.PENDING_CONTROLLED_SHUTDOWN, True, True)]
        assert slept == []  # not the controller: nothing to announce
        assert lc.state is S.SHUTTING_DOWN and lc.shutting_down()
        lc.stopped()
        assert lc.state is S.NOT_RUNNING

    run(go())
    log = [r.getMessage() for r in caplog.records]
    assert "broker 1: controlled shutdown, handing over 1 leadership(s)" in log
    assert not any("not yet answered" in m or "no in-sync follower" in m for m in log)
    assert transitions(caplog)[-3:] == [
        "broker 1: RUNNING -> PENDING_CONTROLLED_SHUTDOWN",
        "broker 1: PENDING_CONTROLLED_SHUTDOWN -> SHUTTING_DOWN",
        "broker 1: SHUTTING_DOWN -> NOT_RUNNING",
    ]


def test_a_stopping_controller_lets_the_commit_go_out_and_names_what_it_still_leads(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "sftraffic.broker")

    async def go() -> None:
        replicas = FakeReplicas(FakePartition("t", 0))  # no in-sync follower to hand over to
        lc, quorum, slept = await running_cluster_broker(replicas)
        quorum.is_controller = True
        await lc.shut_down(controlled=True)
        assert slept == [COMMIT_ANNOUNCE_S]

    run(go())
    assert "broker 1: no in-sync follower could take over t-0" in [r.getMessage() for r in caplog.records]


def test_acks_unanswered_at_the_deadline_do_not_hold_the_stop(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "sftraffic.broker")

    async def go() -> None:
        p = FakePartition("t", 0)
        clock = Clock()
        lc, _, _ = await running_cluster_broker(FakeReplicas(p), clock)
        p.acks.append(asyncio.get_running_loop().create_future())  # never answered
        clock.step = 1.0  # the hand-over's second reading is past its 1 s
        await lc.shut_down(controlled=True)
        assert lc.state is S.SHUTTING_DOWN

    run(go())
    assert "broker 1: stopping with acks=all produce requests not yet answered" in [
        r.getMessage() for r in caplog.records
    ]


def test_a_refused_fencing_stops_anyway_without_waiting_for_acks(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "sftraffic.broker")

    async def go() -> None:
        p = FakePartition("t", 0)
        replicas = FakeReplicas(p)
        lc, quorum, _ = await running_cluster_broker(replicas)
        p.acks.append(asyncio.get_running_loop().create_future())
        quorum.refuse = StoreError("metadata quorum did not apply fence_broker: NOT_LEADER")
        await lc.shut_down(controlled=True)
        assert lc.state is S.SHUTTING_DOWN and replicas.calls == ["quarantine_strays", "reconcile"]

    run(go())
    assert any("controlled shutdown incomplete" in r.getMessage() for r in caplog.records)


def test_a_single_node_or_a_disabled_controlled_shutdown_goes_straight_to_shutting_down(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "sftraffic.broker")

    async def go() -> None:
        single, _ = lifecycle()
        single.starting()
        single.running()
        await single.shut_down(controlled=True)  # no quorum
        assert single.state is S.SHUTTING_DOWN and single.stopping.is_set()
        cluster, quorum, _ = await running_cluster_broker(FakeReplicas(FakePartition("t", 0)))
        await cluster.shut_down(controlled=False)
        assert cluster.state is S.SHUTTING_DOWN and not any(m[0] == "fence_broker" for m in quorum.proposed)

    run(go())
    assert "broker 1: STARTING -> RUNNING" in transitions(caplog)
    assert not any("controlled shutdown" in r.getMessage() for r in caplog.records)


def test_states_move_only_forward_and_a_forced_stop_comes_from_anywhere(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "sftraffic.broker")

    async def go() -> None:
        lc, _ = lifecycle()
        with pytest.raises(StoreError, match="no transition from NOT_RUNNING to RUNNING"):
            lc.running()
        lc.starting()
        lc.starting()  # already there: no second line
        lc.forced()
        lc.forced()
        assert lc.state is S.SHUTTING_DOWN and lc.stopping.is_set()
        with pytest.raises(StoreError, match="no transition from SHUTTING_DOWN to RUNNING"):
            lc.running()
        lc.stopped()
        assert lc.state is S.NOT_RUNNING and not lc.shutting_down()

    run(go())
    assert transitions(caplog) == [
        "broker 1: NOT_RUNNING -> STARTING",
        "broker 1: STARTING -> SHUTTING_DOWN",
        "broker 1: SHUTTING_DOWN -> NOT_RUNNING",
    ]


def test_the_states_carry_kafkas_codes() -> None:
    assert {s.name: s.value for s in BrokerState} == {
        "NOT_RUNNING": 0,
        "STARTING": 1,
        "RECOVERY": 2,
        "RUNNING": 3,
        "PENDING_CONTROLLED_SHUTDOWN": 6,
        "SHUTTING_DOWN": 7,
    }
