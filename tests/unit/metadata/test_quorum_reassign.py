"""Reassignment in the metadata quorum's apply functions (ClusterState.alter_reassignment and
the ISR change that completes it), checked against Kafka's PartitionReassignmentReplicas,
PartitionReassignmentRevert and PartitionChangeBuilder; driven without Raft as
tests/unit/metadata/test_quorum.py drives the other apply functions."""

from __future__ import annotations

from pathlib import Path

import pytest

from framework.metadata.quorum import PartitionState
from framework.protocol.error_codes import ErrorCode
from tests.support.quorum import Replica


@pytest.fixture
def q(tmp_path: Path) -> Replica:
    """Brokers 1-4 registered; topic t with one partition on [1, 2]: leader 1, ISR [1, 2]."""
    r = Replica(tmp_path)
    r.register(1, 2, 3, 4)
    assert r.create_topic("t", [[1, 2]]) is None
    return r


def reassign(q: Replica, target: list[int] | None, allow_rf_change: bool = True) -> tuple[int, str | None]:
    code, message = q.apply("alter_reassignment", "t", 0, target, allow_rf_change)
    return int(code), message


def replicas(q: Replica) -> list[int]:
    return q.cs.md.topics["t"].assignments[0]


def test_a_move_adds_the_target_then_drops_the_rest_once_in_sync(q: Replica) -> None:
    assert reassign(q, [3, 2]) == (0, None)
    assert replicas(q) == [3, 2, 1]  # target first, then the replicas being removed
    assert q.ps() == PartitionState(1, 0, [1, 2], 1, adding=[3], removing=[1])
    assert q.cs.reassignments() == {("t", 0): ([3, 2, 1], [3], [1])}
    # the new replica caught up: the leader (1, being removed) puts it in the ISR, which
    # completes the move in the same change and hands leadership to the first target replica
    assert q.alter_isr([1, 2, 3]) == 0
    assert replicas(q) == [3, 2]
    assert q.ps() == PartitionState(3, 1, [2, 3], 2)
    assert q.cs.reassignments() == {}


def test_the_leader_stays_when_it_is_kept_and_the_epoch_goes_up_when_a_replica_leaves(q: Replica) -> None:
    assert reassign(q, [1, 3]) == (0, None)
    assert q.alter_isr([1, 2, 3]) == 0
    assert replicas(q) == [1, 3]
    assert q.ps() == PartitionState(1, 1, [1, 3], 2)  # Kafka bumps the leader epoch: 2 left


def test_a_target_in_sync_already_completes_at_once(q: Replica) -> None:
    assert reassign(q, [2, 1]) == (0, None)
    assert replicas(q) == [2, 1] and q.ps() == PartitionState(1, 0, [1, 2], 1)
    assert reassign(q, [2]) == (0, None)  # shrinking: 1 leaves, 2 (in sync) leads
    assert replicas(q) == [2] and q.ps() == PartitionState(2, 1, [2], 2)


def test_cancelling_reverts_to_the_original_replicas(q: Replica) -> None:
    assert reassign(q, [3, 4]) == (0, None)
    assert replicas(q) == [3, 4, 1, 2]
    assert q.alter_isr([1, 2, 3]) == 0  # 3 caught up, 4 not yet: still moving
    assert q.ps().adding == [3, 4]
    assert reassign(q, None) == (0, None)
    assert replicas(q) == [1, 2]
    ps = q.ps()
    assert (ps.leader, ps.isr, ps.adding, ps.removing) == (1, [1, 2], [], [])
    assert reassign(q, None)[0] == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS


def test_kafkas_refusals(q: Replica) -> None:
    code, message = reassign(q, [1, 9])
    assert code == ErrorCode.INVALID_REPLICA_ASSIGNMENT and "broker 9" in (message or "")
    assert reassign(q, [2, 2])[0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert reassign(q, [])[0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert reassign(q, [1, 2, 3], allow_rf_change=False)[0] == ErrorCode.INVALID_REPLICATION_FACTOR
    assert int(q.apply("alter_reassignment", "nope", 0, [1], True)[0]) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert int(q.apply("alter_reassignment", "t", 3, [1], True)[0]) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert replicas(q) == [1, 2] and not q.ps().reassigning


def test_a_fenced_leader_hands_over_to_a_target_replica_first(q: Replica) -> None:
    assert reassign(q, [3, 2]) == (0, None)
    assert q.alter_isr([1, 2, 3]) == 0  # done: 3 leads
    assert reassign(q, [3, 4]) == (0, None)
    q.fence(3)  # the leader goes: the next live in-sync replica, in replica order
    ps = q.ps()
    assert ps.leader == 2 and ps.adding == [4] and ps.removing == [2]


def test_an_ongoing_reassignment_is_in_the_snapshot(q: Replica, tmp_path: Path) -> None:
    assert reassign(q, [3, 2]) == (0, None)
    path = tmp_path / "snap"
    q.cs._write_snapshot(str(path), ())
    other = Replica(tmp_path / "other")
    other.cs.on_change = lambda: None
    other.cs._read_snapshot(str(path))  # what a restarted or lagging node loads
    assert other.cs.reassignments() == {("t", 0): ([3, 2, 1], [3], [1])}
