"""Observers of the metadata quorum (framework/metadata/quorum.py): brokers beyond
the voters register, hold replicas, heartbeat through the log, are fenced by the controller when
their heartbeats stop, and leave the cluster with ``unregister_broker`` once they hold no
replica. Apply functions driven in log order as in test_quorum.py (no Raft runs here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from framework.errors import StoreError
from framework.metadata.quorum import REPLICATED_METHODS, ClusterState, PartitionState
from framework.protocol.error_codes import ErrorCode
from tests.support.quorum import Replica

NOT_REGISTERED = int(ErrorCode.BROKER_ID_NOT_REGISTERED)
INVALID_REQUEST = int(ErrorCode.INVALID_REQUEST)


@pytest.fixture
def five(tmp_path: Path) -> Replica:
    """Voters 1-3 and observers 4, 5 registered; t-0 on [1, 2, 3]."""
    q = Replica(tmp_path)
    q.register(1, 2, 3, 4, 5)
    assert q.create_topic("t", [[1, 2, 3]]) is None
    return q


def test_an_observer_is_a_reassignment_target_and_leads_once_in_sync(five: Replica) -> None:
    assert five.apply("alter_reassignment", "t", 0, [4, 5, 1], True) == (0, None)
    assert five.ps().adding == [4, 5]
    five.alter_isr([1, 2, 3, 4, 5])
    ps = five.ps()
    assert five.cs._replicas("t", 0) == [4, 5, 1] and ps.isr == [1, 4, 5] and not ps.reassigning
    assert five.apply("elect_leader", "t", 0, -1, 4, False) == 0
    assert five.ps().leader == 4


def test_a_heartbeat_changes_no_replicated_state(five: Replica) -> None:
    before, changes = (dict(five.cs.brokers), five.snapshot()), five.changes
    five.apply("broker_heartbeat", 4, 17)
    assert (dict(five.cs.brokers), five.snapshot()) == before and five.changes == changes
    assert five.cs._heartbeats[4][1] == 17


def test_the_controller_fences_an_observer_whose_heartbeats_stopped(five: Replica) -> None:
    five.apply("broker_heartbeat", 4, 1)
    five.apply("broker_heartbeat", 5, 1)
    t4 = five.cs._heartbeats[4][0]
    five.cs._heartbeats[5] = (t4 - 10, 1)  # 5 went silent 10 s ago
    # voters are judged by their Raft responses, never here
    assert five.cs.silent_observers(t4 + 1, t4 - 20) == [(5, pytest.approx(11))]
    # a new controller counts from its election
    assert five.cs.silent_observers(t4 + 1, t4) == []
    five.fence(5)
    assert five.cs.silent_observers(t4 + 1, t4 - 20) == []


def test_a_fenced_observer_leading_hands_over_to_the_isr(five: Replica) -> None:
    five.apply("alter_reassignment", "t", 0, [4, 1, 2], True)
    five.alter_isr([1, 2, 3, 4])
    five.apply("elect_leader", "t", 0, -1, 4, False)
    epoch = five.ps().leader_epoch
    five.fence(4)
    ps = five.ps()
    assert ps.leader in (1, 2) and 4 not in ps.isr and ps.leader_epoch == epoch + 1


def test_unregister_refuses_a_broker_holding_replicas_a_voter_and_an_unknown_id(five: Replica) -> None:
    five.apply("alter_reassignment", "t", 0, [1, 2, 4], True)
    code, message = five.apply("unregister_broker", 4)
    assert code == INVALID_REQUEST and "t-0" in message
    assert five.apply("unregister_broker", 2)[0] == INVALID_REQUEST
    assert five.apply("unregister_broker", 9)[0] == NOT_REGISTERED
    assert 4 in five.cs.brokers


def test_unregister_removes_an_observer_once_its_replicas_moved_off(five: Replica) -> None:
    five.apply("alter_reassignment", "t", 0, [4, 5, 1], True)
    five.alter_isr([1, 2, 3, 4, 5])
    five.apply("alter_reassignment", "t", 0, [1, 2, 3], True)
    five.alter_isr([*five.ps().isr, 2, 3])
    assert five.cs._replicas("t", 0) == [1, 2, 3] and not five.ps().reassigning
    five.apply("broker_heartbeat", 4, 1)
    assert five.apply("unregister_broker", 4) == (0, None)
    assert five.apply("unregister_broker", 5) == (0, None)
    assert sorted(five.cs.brokers) == [1, 2, 3] and 4 not in five.cs._heartbeats
    # reassigning onto it now is refused, as for any unknown broker
    refused = int(ErrorCode.INVALID_REPLICA_ASSIGNMENT)
    assert five.apply("alter_reassignment", "t", 0, [4, 1, 2], True)[0] == refused
    assert isinstance(five.ps(), PartitionState)


def test_each_registration_has_a_higher_broker_epoch(five: Replica) -> None:
    first = five.cs.brokers[4]["epoch"]
    five.fence(4)
    five.register(4)  # restarted
    assert five.cs.brokers[4]["epoch"] > first


def test_a_previous_incarnations_heartbeat_and_shutdown_are_refused(five: Replica) -> None:
    old = five.cs.brokers[4]["epoch"]
    five.register(4)  # a restart registered while the old run's requests were in flight
    new = five.cs.brokers[4]["epoch"]
    five.cs._heartbeats.pop(4)
    assert five.apply("broker_heartbeat", 4, 5, old) == int(ErrorCode.STALE_BROKER_EPOCH)
    assert 4 not in five.cs._heartbeats
    assert five.apply("broker_heartbeat", 4, 5, new) == 0
    five.apply("fence_broker", 4, old)  # the old run's controlled shutdown
    assert not five.cs.brokers[4]["fenced"]
    five.apply("fence_broker", 4, new)
    assert five.cs.brokers[4]["fenced"]


def test_a_heartbeat_from_an_unregistered_broker_is_refused(five: Replica) -> None:
    assert five.apply("broker_heartbeat", 9, 1, -1) == int(ErrorCode.STALE_BROKER_EPOCH)
    assert 9 not in five.cs._heartbeats


# -- journal compatibility -------------------------------------------------------------------------
def test_the_methods_before_observers_keep_their_journal_ids() -> None:
    """pysyncobj numbers @replicated methods by sorted name: alter_reassignment and
    broker_heartbeat would otherwise take change_metadata's id, and a journal written by an
    earlier release would replay as the wrong calls. The first six keep the ids they had before
    any method was added; the later ones follow in the order they were added."""
    assert REPLICATED_METHODS[:7] == (
        "alter_isr",
        "change_metadata",
        "elect_leader",
        "fence_broker",
        "init_cluster",
        "register_broker",
        "alter_reassignment",
    )
    replicated = {
        m.removesuffix("_v0")
        for m in dir(ClusterState)
        if getattr(getattr(ClusterState, m), "replicated", False)
    }
    assert replicated == set(REPLICATED_METHODS) and len(REPLICATED_METHODS) == len(set(REPLICATED_METHODS))


def test_pinning_renumbers_pysyncobjs_ids_and_refuses_an_unlisted_method(five: Replica) -> None:
    cs = five.cs
    sorted_names = sorted(f"{n}_v0" for n in REPLICATED_METHODS)
    cs._methodToID = {n: i for i, n in enumerate(sorted_names)}  # what pysyncobj assigns
    cs._pin_method_ids()
    assert cs._methodToID["change_metadata_v0"] == 1 and cs._methodToID["broker_heartbeat_v0"] == 7
    assert cs._idToMethod[5].__name__ == "register_broker_v0"
    assert cs._idToMethod[6].__name__ == "alter_reassignment_v0"
    cs._methodToID = {**cs._methodToID, "surprise_v0": 9}
    with pytest.raises(StoreError, match="surprise"):
        cs._pin_method_ids()
