"""The nemesis against a fake target: one fault at a time, each healed before the next, the
same schedule for the same seed, the current fault healed when the run stops; and the option
rules of ``sftraffic chaos``."""

from __future__ import annotations

import random
import time

import pytest

from chaos.nemesis import KINDS, CommandTarget, Nemesis
from chaos.runner import SetupError, _interval, choose_kinds

FAST = {k: (0.0, 0.01) for k in KINDS}


class FakeTarget:
    def __init__(self) -> None:
        self.nodes = [1, 2, 3]
        self.kinds = KINDS
        self.calls: list[tuple[str, int | None]] = []
        self.down: set[int] = set()
        self.paused: set[int] = set()
        self.cut: set[int] = set()

    def _faulty(self) -> int:
        return len(self.down) + len(self.paused) + len(self.cut)

    def kill(self, node: int) -> str:
        assert self._faulty() == 0, "a fault injected while another is on"
        self.calls.append(("kill", node))
        self.down.add(node)
        return "SIGKILL"

    def term(self, node: int) -> str:
        assert self._faulty() == 0
        self.calls.append(("term", node))
        self.down.add(node)
        return "stopped"

    def start(self, node: int) -> str:
        self.down.discard(node)
        return "started"

    def pause(self, node: int) -> str:
        assert self._faulty() == 0
        self.calls.append(("pause", node))
        self.paused.add(node)
        return "SIGSTOP"

    def resume(self, node: int) -> str:
        self.paused.discard(node)
        return "SIGCONT"

    def isolate(self, node: int, from_clients: bool) -> str:
        assert self._faulty() == 0
        self.calls.append(("partition", node))
        self.cut.add(node)
        return "cut"

    def heal_network(self) -> str:
        self.cut.clear()
        return "healed"

    def heal(self) -> list[str]:
        return []


def run_for(
    seed: int, n_faults: int, holds: dict[str, tuple[float, float]] | None = None
) -> tuple[FakeTarget, Nemesis]:
    target = FakeTarget()
    t0 = time.monotonic()
    nem = Nemesis(
        target,
        list(KINDS),
        random.Random(seed),
        lambda: time.monotonic() - t0,
        (0.001, 0.002),
        holds=holds or FAST,
    )
    nem.start()
    deadline = time.monotonic() + 10
    while len(target.calls) < n_faults and time.monotonic() < deadline:
        time.sleep(0.005)
    nem.stop()
    return target, nem


def test_one_fault_at_a_time_each_healed_and_every_kind_used() -> None:
    target, nem = run_for(3, 40)
    assert len(target.calls) >= 40
    assert {k for k, _n in target.calls} == set(KINDS)
    assert {n for _k, n in target.calls} == {1, 2, 3}
    assert target._faulty() == 0
    heals = {"kill": "restart", "term": "restart", "pause": "resume", "partition": "heal"}
    actions = [e.action for e in nem.events if e.action != "stopped"]
    for fault, after in zip(actions[::2], actions[1::2], strict=False):
        assert heals[fault] == after
    assert all(a.t <= b.t for a, b in zip(nem.events, nem.events[1:], strict=False))


def test_a_seed_replays_the_same_schedule() -> None:
    a, _ = run_for(7, 12)
    b, _ = run_for(7, 12)
    c, _ = run_for(8, 12)
    assert a.calls[:12] == b.calls[:12]
    assert a.calls[:12] != c.calls[:12]


def test_stopping_during_a_fault_heals_it_at_once() -> None:
    long = {k: (60.0, 60.0) for k in KINDS}
    t0 = time.monotonic()
    target, nem = run_for(1, 1, holds=long)
    assert time.monotonic() - t0 < 5, "the hold was not cut short"
    assert len(target.calls) == 1
    assert target._faulty() == 0
    assert len(nem.events) >= 2


def test_a_failing_fault_is_an_error_event_and_the_nemesis_goes_on() -> None:
    class Broken(FakeTarget):
        def kill(self, node: int) -> str:
            raise RuntimeError("kill failed\nsecond line")

    target = Broken()
    nem = Nemesis(target, ["kill", "pause"], random.Random(2), lambda: 0.0, (0.001, 0.002), holds=FAST)
    nem.start()
    deadline = time.monotonic() + 10
    while len(target.calls) < 5 and time.monotonic() < deadline:
        time.sleep(0.005)
    nem.stop()
    errors = [e for e in nem.events if e.action == "error"]
    assert errors and errors[0].detail == "kill: kill failed"
    assert len(target.calls) >= 5


def test_command_target_offers_the_faults_it_has_templates_for() -> None:
    t = CommandTarget([1], {"kill": "true", "pause": "true", "resume": None, "term": ""}, lambda: [1])
    assert t.kinds == ("kill",)
    t = CommandTarget([1], {"kill": "echo {node}", "pause": "true", "resume": "true"}, lambda: [1])
    assert t.kinds == ("kill", "pause")
    assert t.kill(5).startswith("`echo 5` exited 0")
    assert t.start(1) == "left to its supervisor"
    failing = CommandTarget([1], {"kill": "exit 3"}, lambda: [1])
    with pytest.raises(RuntimeError, match="exited 3"):
        failing.kill(1)


def test_nemesis_option_rules() -> None:
    assert choose_kinds(None, KINDS, local=True) == (list(KINDS), None)
    kinds, note = choose_kinds(None, ("kill", "pause", "term"), local=True)
    assert kinds == ["kill", "pause", "term"] and note == "not injecting partition"
    assert choose_kinds("kill", KINDS, local=True) == (["kill"], None)
    with pytest.raises(SetupError, match="unknown"):
        choose_kinds("kill,flood", KINDS, local=True)
    with pytest.raises(SetupError, match="namespaces"):
        choose_kinds("partition", ("kill",), local=True)
    with pytest.raises(SetupError, match="no fault available"):
        choose_kinds(None, (), local=False)
    assert _interval("5-10") == (5.0, 10.0)
    assert _interval("3") == (3.0, 3.0)
    for bad in ("10-5", "x", "0-1"):
        with pytest.raises(SetupError):
            _interval(bad)
