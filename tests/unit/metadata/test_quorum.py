"""The metadata quorum's replicated apply functions (framework/metadata/quorum.py ClusterState):
Kafka's AlterPartition checks, broker fencing and registration, leader election from the ISR
only, and the partition states created with topics.

No Raft runs here. pysyncobj's ``@replicated`` wrapper calls the method's body directly when
given ``_doApply=True`` (what it does itself when a committed entry is applied), and the module
states that the apply functions read only the replicated state (``cluster_id``, ``md``,
``brokers``, ``pstates``), so a ClusterState holding just that state — built without
``SyncObj.__init__``: no socket, no journal, no thread — is enough to drive them in log order.
"""

from __future__ import annotations

import uuid
from dataclasses import asdict, replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.errors import InvalidPartitions, TopicAlreadyExists
from framework.metadata.quorum import PartitionState
from framework.protocol.error_codes import ErrorCode
from tests.support.quorum import Replica

OK = 0
INVALID_REQUEST = int(ErrorCode.INVALID_REQUEST)
FENCED_LEADER_EPOCH = int(ErrorCode.FENCED_LEADER_EPOCH)
INVALID_UPDATE_VERSION = int(ErrorCode.INVALID_UPDATE_VERSION)
INELIGIBLE_REPLICA = int(ErrorCode.INELIGIBLE_REPLICA)
UNKNOWN = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)


@pytest.fixture
def q(tmp_path: Path) -> Replica:
    return Replica(tmp_path)


@pytest.fixture
def three(q: Replica) -> Replica:
    """Brokers 1-3 registered; topic t with one partition on [1, 2, 3]: leader 1, ISR all."""
    q.register(1, 2, 3)
    assert q.create_topic("t", [[1, 2, 3]]) is None
    assert q.ps() == PartitionState(1, 0, [1, 2, 3], 0)
    return q


# -- change_metadata: partition states for new topics -----------------------------------------
def test_a_new_topic_leads_on_its_first_live_replica_with_the_live_replicas_in_sync(q: Replica) -> None:
    q.register(2, 3)
    before = q.changes
    assert q.create_topic("t", [[1, 2, 3], [3, 1, 2], [1]]) is None
    assert q.cs.pstates["t"] == [
        PartitionState(2, 0, [2, 3], 0),  # 1 never registered
        PartitionState(3, 0, [3, 2], 0),
        PartitionState(-1, 0, [1], 0),  # no live replica: offline, only 1 may lead it
    ]
    assert q.changes == before + 1
    assert "t" in q.cs.md.topics


def test_create_partitions_and_delete_topic_follow_the_metadata(three: Replica) -> None:
    q = three
    t = q.cs.md.topics["t"]
    arg = {"name": "t", "topic_id": t.topic_id, "from": 1, "new": [[2, 3, 1]]}
    assert q.apply("change_metadata", "create_partitions", arg) is None
    assert q.ps("t", 1) == PartitionState(2, 0, [2, 3, 1], 0)
    again = q.apply("change_metadata", "create_partitions", arg)  # applied twice: refused
    assert isinstance(again, InvalidPartitions)
    assert len(q.cs.pstates["t"]) == 2
    assert q.apply("change_metadata", "delete_topic", {"name": "t", "topic_id": t.topic_id}) is None
    assert "t" not in q.cs.pstates and q.cs.partition_state("t", 0) is None


def test_a_retried_topic_creation_keeps_the_partition_states(three: Replica) -> None:
    """A proposal retried after a leader change may be committed twice: same topic id, no-op."""
    q = three
    assert q.alter_isr([1, 2]) == OK
    state = q.snapshot()
    t = q.cs.md.topics["t"]
    assert q.apply("change_metadata", "create_topic", asdict(t)) is None
    assert q.ps() == state
    other = asdict(replace(t, topic_id=uuid.uuid4().hex))  # someone else's topic of that name
    assert isinstance(q.apply("change_metadata", "create_topic", other), TopicAlreadyExists)
    assert q.ps() == state


# -- alter_isr: Kafka's AlterPartition checks ---------------------------------------------------
def test_alter_isr_from_the_leader_at_the_current_epochs_bumps_the_partition_epoch(three: Replica) -> None:
    q = three
    before = q.changes
    assert q.alter_isr([1, 3]) == OK
    assert q.ps() == PartitionState(1, 0, [1, 3], 1)
    assert q.changes == before + 1
    assert q.alter_isr([1, 3, 2]) == OK  # back in (2 is unfenced)
    assert q.ps() == PartitionState(1, 0, [1, 3, 2], 2)


@pytest.mark.parametrize(
    ("who", "code"),
    [
        ({"leader": 2}, FENCED_LEADER_EPOCH),  # not the leader
        ({"leader_epoch": 1}, FENCED_LEADER_EPOCH),  # a leader epoch the quorum never gave
        ({"leader_epoch": -1}, FENCED_LEADER_EPOCH),
        ({"partition_epoch": 5}, INVALID_UPDATE_VERSION),
    ],
)
def test_alter_isr_is_refused_from_a_stale_or_wrong_leader(
    three: Replica, who: dict[str, int], code: int
) -> None:
    q = three
    state, changes = q.snapshot(), q.changes
    assert q.alter_isr([1, 2], **who) == code
    assert q.ps() == state and q.changes == changes  # nothing applied


def test_alter_isr_at_a_stale_partition_epoch_is_refused(three: Replica) -> None:
    q = three
    assert q.alter_isr([1, 2]) == OK  # partition epoch 0 -> 1
    state = q.snapshot()
    assert q.alter_isr([1], partition_epoch=0) == INVALID_UPDATE_VERSION
    assert q.ps() == state


def test_a_deposed_leader_is_fenced_by_its_leader_epoch(three: Replica) -> None:
    q = three
    q.fence(1)  # 2 takes over at leader epoch 1
    assert q.ps().leader == 2 and q.ps().leader_epoch == 1
    q.register(1)
    assert q.alter_isr([1, 2, 3], leader=1, leader_epoch=0) == FENCED_LEADER_EPOCH
    assert q.alter_isr([2, 3, 1]) == OK  # the new leader adds 1 back


@pytest.mark.parametrize("isr", [[2, 3], [], [2]])
def test_alter_isr_without_the_leader_is_refused(three: Replica, isr: list[int]) -> None:
    q = three
    state = q.snapshot()
    assert q.alter_isr(isr) == INELIGIBLE_REPLICA
    assert q.ps() == state


def test_alter_isr_may_not_add_a_fenced_or_unknown_broker(three: Replica) -> None:
    q = three
    q.fence(3)
    assert q.ps().isr == [1, 2]
    state = q.snapshot()
    assert q.alter_isr([1, 2, 3]) == INELIGIBLE_REPLICA
    assert q.alter_isr([1, 2, 7]) == INELIGIBLE_REPLICA  # never registered
    assert q.ps() == state
    q.register(3)
    assert q.alter_isr([1, 2, 3]) == OK


def test_alter_isr_may_not_add_a_broker_that_is_not_a_replica(three: Replica) -> None:
    """An unfenced broker outside the assignment would never fetch, so the leader's high
    watermark would stop (Kafka's Replicas.validateIsr: INVALID_REQUEST)."""
    q = three
    q.register(4)
    assert q.create_topic("two", [[1, 2]]) is None
    state = q.snapshot("two")
    assert q.alter_isr([1, 2, 4], topic="two") == INVALID_REQUEST
    assert q.alter_isr([1, 3], topic="two") == INVALID_REQUEST  # 3 is live, not a replica
    assert q.ps("two") == state
    assert q.alter_isr([1], topic="two") == OK


@pytest.mark.parametrize("isr", [[1, 1], [1, 2, 2], [1, 2, 3, 1]])
def test_alter_isr_with_a_replica_twice_is_refused(three: Replica, isr: list[int]) -> None:
    q = three
    state, changes = q.snapshot(), q.changes
    assert q.alter_isr(isr) == INVALID_REQUEST
    assert q.ps() == state and q.changes == changes


def test_alter_isr_of_an_unknown_partition(three: Replica) -> None:
    q = three
    assert q.apply("alter_isr", "t", 1, 1, 0, 0, [1]) == UNKNOWN
    assert q.apply("alter_isr", "nope", 0, 1, 0, 0, [1]) == UNKNOWN


# -- fence_broker -------------------------------------------------------------------------------
def test_fencing_a_follower_removes_it_from_the_isr(three: Replica) -> None:
    q = three
    q.fence(2)
    assert q.cs.brokers[2]["fenced"] and q.cs.live_brokers() == [1, 3]
    assert q.ps() == PartitionState(1, 0, [1, 3], 1)  # same leader, same leader epoch


def test_fencing_the_leader_elects_the_next_isr_replica_at_leader_epoch_plus_one(three: Replica) -> None:
    q = three
    q.fence(1)
    ps = q.ps()
    assert ps.leader == 2 and ps.isr == [2, 3]
    assert ps.leader_epoch == 1
    assert ps.partition_epoch > 0


def test_fencing_never_elects_outside_the_isr(three: Replica) -> None:
    q = three
    assert q.alter_isr([1]) == OK  # 2 and 3 fell behind
    q.fence(1)
    ps = q.ps()
    assert ps.leader == -1  # offline rather than an unclean election
    assert ps.isr == [1]  # never empty: the last in-sync replica stays
    assert ps.leader_epoch == 1


def test_fencing_an_unknown_or_fenced_broker_changes_nothing(three: Replica) -> None:
    q = three
    q.fence(2)
    state, changes = q.snapshot(), q.changes
    q.fence(2)
    q.fence(9)
    assert q.ps() == state and q.changes == changes


def test_the_isr_never_empties_as_brokers_are_fenced(three: Replica) -> None:
    q = three
    for b in (3, 1, 2):
        q.fence(b)
        assert q.ps().isr
    assert q.ps().isr == [2] and q.ps().leader == -1


# -- register_broker and offline partitions -----------------------------------------------------
def test_an_offline_partition_is_led_again_when_its_last_isr_member_returns(three: Replica) -> None:
    q = three
    assert q.alter_isr([1]) == OK
    q.fence(1)
    assert q.ps().leader == -1
    q.register(2, 3)  # not in the ISR: they may not lead
    assert q.ps().leader == -1
    epoch = q.ps().leader_epoch
    q.register(1)
    ps = q.ps()
    assert ps.leader == 1 and ps.isr == [1]
    assert ps.leader_epoch > epoch


def test_a_partition_created_before_its_replicas_registered_is_led_when_one_does(q: Replica) -> None:
    assert q.create_topic("t", [[1, 2]]) is None
    assert q.ps() == PartitionState(-1, 0, [1], 0)
    q.register(2)
    assert q.ps().leader == -1  # 2 is not in the ISR
    q.register(1)
    assert q.ps().leader == 1 and q.ps().leader_epoch == 1


def test_a_restarted_leader_leaves_its_isrs_and_leads_nothing(three: Replica) -> None:
    """It re-registers without having been fenced (back within the session timeout), but
    may have lost unflushed records: a new leader is elected from the rest of the ISR, at a
    new leader epoch, and it rejoins the ISR through that leader once caught up."""
    q = three
    before = q.snapshot()
    q.register(1)
    ps = q.ps()
    assert ps.leader == 2 and ps.isr == [2, 3]
    assert ps.leader_epoch == before.leader_epoch + 1
    assert ps.partition_epoch > before.partition_epoch


def test_a_restarted_follower_leaves_the_isr(three: Replica) -> None:
    q = three
    q.register(3)
    assert q.ps() == PartitionState(1, 0, [1, 2], 1)


def test_a_restarted_sole_isr_leader_leads_again_at_a_new_epoch(three: Replica) -> None:
    """Nobody else is in sync: it stays in the ISR and leads again, at a larger epoch."""
    q = three
    assert q.alter_isr([1]) == OK
    before = q.snapshot()
    q.register(1)
    ps = q.ps()
    assert ps.leader == 1 and ps.isr == [1]
    # one apply, one change: each epoch moves by exactly one (not once for leaving, once more
    # for the re-election)
    assert ps.leader_epoch == before.leader_epoch + 1
    assert ps.partition_epoch == before.partition_epoch + 1


def test_fencing_a_leader_in_a_larger_isr_is_one_partition_change(three: Replica) -> None:
    q = three
    q.fence(1)
    assert q.ps() == PartitionState(2, 1, [2, 3], 1)


def test_init_cluster_sets_the_id_once(q: Replica) -> None:
    q.apply("init_cluster", "abc")
    q.apply("init_cluster", "def")
    assert q.cs.cluster_id == "abc" and q.cs.md.cluster_id == "abc"


# -- property: any order of commands keeps the invariants -----------------------------------------
ASSIGNMENTS = [[1, 2, 3], [2, 3, 1], [3, 1]]
Command = tuple[str, int, int, int, int, list[int]]
commands = st.lists(
    st.one_of(
        st.tuples(st.just("register"), st.integers(1, 3), st.just(0), st.just(0), st.just(0), st.just([])),
        st.tuples(st.just("fence"), st.integers(1, 3), st.just(0), st.just(0), st.just(0), st.just([])),
        st.tuples(
            st.just("alter"),
            st.integers(0, len(ASSIGNMENTS) - 1),  # partition
            st.integers(0, 3),  # proposer: 0 = the current leader
            st.integers(-1, 0),  # leader epoch offset
            st.integers(-1, 0),  # partition epoch offset
            st.lists(st.integers(1, 3), min_size=0, max_size=4),
        ),
    ),
    max_size=40,
)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.sets(st.integers(1, 3)), commands)
def test_invariants_hold_in_any_order_of_commands(
    tmp_path_factory: pytest.TempPathFactory, first: set[int], steps: list[Command]
) -> None:
    """Brokers registering (restarts), fenced, and AlterPartition proposals (valid or stale)
    in any order. After every command, for every partition:

    * the ISR is never empty and holds only replicas; the leader is -1 or an unfenced ISR member;
    * a partition is offline (-1) only when no ISR member is unfenced (nothing left to elect);
    * epochs never decrease and move by at most one per command; a new leader comes with a
      larger leader epoch and was in the ISR before (no unclean election); any change of
      leader or ISR bumps the partition epoch;
    * the ISR grows only by unfenced brokers, and only through an accepted AlterPartition;
    * alter_isr succeeds exactly when proposed by the leader at its current leader and
      partition epochs with itself in the new ISR, only replicas, none twice and no fenced
      newcomer.
    """
    q = Replica(tmp_path_factory.mktemp("quorum"))
    q.register(*sorted(first))
    for i, a in enumerate(ASSIGNMENTS):
        assert q.create_topic(f"p{i}", [a]) is None
    for cmd, a, b, c, d, isr in steps:
        before = [q.snapshot(f"p{i}") for i in range(len(ASSIGNMENTS))]
        fenced_before = {n for n in (1, 2, 3) if not q.cs.unfenced(n)}
        if cmd == "register":
            q.register(a)
        elif cmd == "fence":
            q.fence(a)
        else:
            ps = q.ps(f"p{a}")
            proposer = ps.leader if b == 0 else b
            code = q.alter_isr(
                isr,
                topic=f"p{a}",
                leader=proposer,
                leader_epoch=ps.leader_epoch + c,
                partition_epoch=ps.partition_epoch + d,
            )
            valid = (
                proposer == before[a].leader
                and proposer != -1
                and c == 0
                and d == 0
                and proposer in isr
                and all(r in before[a].isr or r not in fenced_before for r in isr)
                and set(isr) <= set(ASSIGNMENTS[a])
                and len(set(isr)) == len(isr)
            )
            assert (code == OK) == valid, (before[a], proposer, c, d, isr, code)
        for i, assigned in enumerate(ASSIGNMENTS):
            old, ps = before[i], q.ps(f"p{i}")
            assert ps.isr and len(set(ps.isr)) == len(ps.isr) and set(ps.isr) <= set(assigned)
            if ps.leader != -1:
                assert ps.leader in ps.isr and q.cs.unfenced(ps.leader)
            else:
                assert not any(q.cs.unfenced(r) for r in ps.isr), ps
            assert ps.leader_epoch >= old.leader_epoch and ps.partition_epoch >= old.partition_epoch
            assert ps.leader_epoch <= old.leader_epoch + 1, (cmd, old, ps)  # one change per apply
            assert ps.partition_epoch <= old.partition_epoch + 1, (cmd, old, ps)
            if ps.leader != old.leader:
                assert ps.leader_epoch > old.leader_epoch
                assert ps.leader == -1 or ps.leader in old.isr, (old, ps)
            if (ps.leader, ps.isr) != (old.leader, old.isr):
                assert ps.partition_epoch > old.partition_epoch
            grown = set(ps.isr) - set(old.isr)
            if grown:
                assert cmd == "alter" and a == i, (cmd, old, ps)
                assert not grown & fenced_before


# -- leader elections: preferred (ElectLeaders, auto rebalance) and unclean ----------------------
ELECTION_NOT_NEEDED = int(ErrorCode.ELECTION_NOT_NEEDED)
PREFERRED_NOT_AVAILABLE = int(ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE)
ELIGIBLE_NOT_AVAILABLE = int(ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE)


def elect(q: Replica, candidate: int, *, unclean: bool = False, epoch: int | None = None) -> int:
    ps = q.ps()
    return int(
        q.apply("elect_leader", "t", 0, ps.leader_epoch if epoch is None else epoch, candidate, unclean)
    )


def test_the_preferred_replica_leads_again_once_back_in_sync(three: Replica) -> None:
    three.fence(1)  # the preferred leader (first of the assignment) dies
    assert three.ps().leader == 2
    three.register(1)  # it restarts: a follower, out of the ISR
    assert elect(three, 1) == PREFERRED_NOT_AVAILABLE  # not in sync yet
    assert three.alter_isr([2, 3, 1]) == OK  # it caught up
    before = replace(three.ps())
    assert elect(three, 1) == OK
    after = three.ps()
    assert (after.leader, after.leader_epoch, after.partition_epoch) == (
        1,
        before.leader_epoch + 1,
        before.partition_epoch + 1,
    )
    assert after.isr == before.isr
    assert elect(three, 1) == ELECTION_NOT_NEEDED


def test_an_election_decided_on_a_stale_state_is_refused(three: Replica) -> None:
    three.fence(1)
    three.register(1)
    three.alter_isr([2, 3, 1])
    stale = three.ps().leader_epoch - 1
    assert elect(three, 1, epoch=stale) == FENCED_LEADER_EPOCH
    assert three.ps().leader == 2


def test_a_preferred_election_needs_a_live_replica(three: Replica) -> None:
    three.fence(2)
    assert elect(three, 2) == PREFERRED_NOT_AVAILABLE
    assert elect(three, 7) == PREFERRED_NOT_AVAILABLE  # not a replica at all


def test_unclean_election_only_when_no_in_sync_replica_is_alive(three: Replica) -> None:
    assert three.alter_isr([1]) == OK  # followers fell behind
    assert elect(three, 2, unclean=True) == ELECTION_NOT_NEEDED  # the leader is alive
    three.fence(1)  # the only in-sync replica dies: the partition is offline
    assert (three.ps().leader, three.ps().isr) == (-1, [1])
    before = three.ps().leader_epoch
    assert elect(three, 3, unclean=True) == OK
    ps = three.ps()
    assert (ps.leader, ps.isr, ps.leader_epoch) == (3, [3], before + 1)


def test_unclean_election_needs_a_live_replica(three: Replica) -> None:
    three.alter_isr([1])
    three.fence(1)
    three.fence(2)
    assert elect(three, 2, unclean=True) == ELIGIBLE_NOT_AVAILABLE
    assert three.ps().leader == -1


def test_a_clean_election_never_takes_an_out_of_sync_replica(three: Replica) -> None:
    three.alter_isr([1])
    three.fence(1)
    assert elect(three, 2) == PREFERRED_NOT_AVAILABLE
    assert three.ps().leader == -1


# -- snapshots (journal compaction) ---------------------------------------------------------------
def test_a_snapshot_restores_the_whole_replicated_state(three: Replica, tmp_path: Path) -> None:
    three.fence(3)
    three.create_topic("u", [[2, 1]])
    path = str(tmp_path / "raft.snapshot")
    raft_part = (("entry", 41, 7), ("entry", 42, 7), {"node"})
    three.cs._write_snapshot(path, raft_part)

    fresh = Replica(tmp_path / "fresh")
    seen: list[str] = []
    fresh.cs.md.listeners.append(lambda event, name: seen.append(event))
    assert fresh.cs._read_snapshot(path) == raft_part
    assert fresh.cs.brokers == three.cs.brokers
    assert fresh.cs.pstates == three.cs.pstates
    assert fresh.cs.version == three.cs.version
    assert set(fresh.cs.md.topics) == {"t", "u"} == set(three.cs.md.topics)
    assert fresh.cs.md.topics["u"].assignments == [[2, 1]]
    assert fresh.cs.md.topics_by_id.keys() == three.cs.md.topics_by_id.keys()
    assert seen == ["restored"] and fresh.changes == 1  # the broker reconciles its partitions


def test_a_snapshot_of_another_format_is_refused(three: Replica, tmp_path: Path) -> None:
    import pickle

    path = tmp_path / "raft.snapshot"
    path.write_bytes(pickle.dumps((99, {}, ())))
    with pytest.raises(Exception, match="unknown snapshot format"):
        three.cs._read_snapshot(str(path))


def test_a_client_election_applies_to_the_partition_as_it_is_when_applied(three: Replica) -> None:
    """ElectLeaders carries no epoch (-1): the broker that took the request may lag the log."""
    three.fence(1)
    three.register(1)
    three.alter_isr([2, 3, 1])
    assert elect(three, 1, epoch=-1) == OK
    assert three.ps().leader == 1
    assert elect(three, 1, epoch=-1) == ELECTION_NOT_NEEDED


def test_importing_the_quorum_leaves_socket_inet_ntop_working() -> None:
    """pysyncobj replaces socket.inet_ntop with a Windows-only function on import; the quorum
    module puts the real one back (psutil's connection listing in a test failed on it)."""
    import socket

    import framework.metadata.quorum  # noqa: F401

    assert socket.inet_ntop(socket.AF_INET, b"\x7f\x00\x00\x01") == "127.0.0.1"
    assert socket.inet_ntop(socket.AF_INET6, bytes(15) + b"\x01") == "::1"
