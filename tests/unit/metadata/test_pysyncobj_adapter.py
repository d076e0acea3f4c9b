"""The contract between the metadata quorum and pysyncobj's internals
(framework/metadata/pysyncobj_adapter.py): every private attribute and method the adapter reads
exists on a real, running ``SyncObj`` with the type it expects, and writing the method numbering
changes what is journalled and what is applied. A pysyncobj upgrade that moves any of them
fails here, not in a cluster.

Two real nodes on 127.0.0.1, ticked by hand (``autoTick=False``, as the quorum ticks them), with
no journal file: a leader is elected and replicates one entry to its follower.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import pysyncobj.syncobj
import pytest
from pysyncobj import SyncObj, SyncObjConf, replicated

from framework.metadata import pysyncobj_adapter as adapter
from framework.metadata.pysyncobj_adapter import SyncObjInternals


class Pair(SyncObj):  # type: ignore[misc]
    """Two replicated methods: pysyncobj numbers them by sorted name (alpha 0, beta 1)."""

    def __init__(self, me: str, other: str) -> None:
        self.applied: list[str] = []
        conf = SyncObjConf(
            autoTick=False,
            dynamicMembershipChange=False,
            commandsWaitLeader=True,
            appendEntriesPeriod=0.02,
            raftMinTimeout=0.1,
            raftMaxTimeout=0.2,
            connectionRetryTime=0.1,
            bindAddress=me,
        )
        super().__init__(me, [other], conf)

    @replicated  # type: ignore[untyped-decorator]
    def alpha(self) -> str:
        self.applied.append("alpha")
        return "alpha"

    @replicated  # type: ignore[untyped-decorator]
    def beta(self) -> str:
        self.applied.append("beta")
        return "beta"


def _address() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def tick_until(nodes: list[Pair], done: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    """Tick both nodes (each tick waits up to 5 ms for their sockets) until ``done``."""
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"pysyncobj never got there: {what}")
        for n in nodes:
            n.doTick(0.005)


@pytest.fixture(scope="module")
def pair() -> Iterator[tuple[Pair, Pair]]:
    """(leader, follower) once the follower has answered the leader's append entries."""
    a_addr, b_addr = _address(), _address()
    a, b = Pair(a_addr, b_addr), Pair(b_addr, a_addr)
    nodes = [a, b]
    try:
        tick_until(nodes, lambda: a._isLeader() or b._isLeader(), "a leader elected")
        leader, follower = (a, b) if a._isLeader() else (b, a)
        tick_until(nodes, lambda: follower.isReady() and leader.isReady(), "both ready")
        yield leader, follower
    finally:
        for n in nodes:
            n.destroy()


def test_the_version_the_adapter_was_written_against() -> None:
    """pyproject.toml pins it; a new version must pass this module before the pin moves."""
    assert pysyncobj.syncobj.VERSION == "0.3.17"


def test_the_private_state_exists_with_the_types_the_adapter_reads(pair: tuple[Pair, Pair]) -> None:
    leader, follower = pair
    result: list[Any] = []
    follower.alpha(callback=lambda r, err: result.append((r, err)))
    tick_until(list(pair), lambda: bool(result) and "alpha" in leader.applied, "an entry applied")
    for node in pair:
        end = getattr(node, adapter.LOG_INDEX)()
        assert isinstance(end, int) and end >= node.raftCommitIndex >= 1
        assert isinstance(node._isLeader(), bool)
        for name in (adapter.MATCH_INDEX, adapter.LAST_RESPONSE):
            assert isinstance(getattr(node, name), dict), name
        ids = vars(node)[adapter.METHOD_TO_ID]
        assert ids == {"alpha_v0": 0, "beta_v0": 1}
        methods = vars(node)[adapter.ID_TO_METHOD]
        assert {i: m.__name__ for i, m in methods.items()} == {0: "alpha_v0", 1: "beta_v0"}
    assert leader._isLeader() and not follower._isLeader()
    match = getattr(leader, adapter.MATCH_INDEX)
    heard = getattr(leader, adapter.LAST_RESPONSE)
    (node,) = match
    assert node.id == follower.selfNode.id and isinstance(match[node], int)
    assert match[node] == getattr(leader, adapter.LOG_INDEX)()  # the follower holds the whole log
    assert set(heard) == {node} and isinstance(heard[node], float)
    # the responses are stamped on the clock the adapter measures their age with
    assert pysyncobj.syncobj.monotonicTime is adapter.raft_clock
    assert 0 <= adapter.raft_clock() - heard[node] < 60
    assert follower._getLeader().id == leader.selfNode.id


def test_the_adapter_reads_a_running_pair(pair: tuple[Pair, Pair]) -> None:
    leader, follower = (SyncObjInternals(n) for n in pair)
    assert leader.is_leader() and not follower.is_leader()
    assert follower.leader_address() == pair[0].selfNode.id
    assert leader.log_end_index() == follower.log_end_index() >= 1
    (node,) = leader.match_index()
    assert leader.match_index()[node] == leader.log_end_index()
    assert 0 <= leader.silence()[node] < 60
    assert follower.match_index() == {} and follower.silence() == {}  # only the leader knows
    assert leader.method_ids() == {"alpha_v0": 0, "beta_v0": 1}


def test_renumbering_changes_what_is_journalled_and_what_is_applied(pair: tuple[Pair, Pair]) -> None:
    """The quorum pins its method ids (journal compatibility). Only the proposer renumbers
    here: its alpha is journalled as id 1, which it applies as alpha and the other node, still
    numbered by pysyncobj, as beta."""
    leader, follower = pair
    SyncObjInternals(leader).set_method_ids({"alpha_v0": 1, "beta_v0": 0})
    before_leader, before_follower = len(leader.applied), len(follower.applied)
    answered: list[Any] = []
    leader.alpha(callback=lambda r, err: answered.append(r))
    tick_until(
        list(pair),
        lambda: bool(answered) and len(follower.applied) > before_follower,
        "the renumbered entry applied on both",
    )
    assert answered == ["alpha"]
    assert leader.applied[before_leader:] == ["alpha"]
    assert follower.applied[before_follower:] == ["beta"]
