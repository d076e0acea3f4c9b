"""Growing and shrinking a cluster: 3 controller-quorum voters, then brokers 4 and 5
started later as non-voting observers of the metadata log; partitions moved onto them under
idempotent acks=all producers with no failed and no lost write; an observer SIGKILLed is fenced
by its missing heartbeats and its leaderships move; the replicas moved off 4 and 5 again and both
unregistered (UnregisterBroker, ``kafka-cluster unregister``): back to 3 brokers. And the
controller SIGKILLed: observers follow the next one, which fences a dead observer only.

Real brokers (``ClusterProcesses(voters=3)`` + ``add_broker``), real confluent-kafka clients.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest

from framework.client.reassign import alter_reassignments, list_reassignments, unregister_broker
from framework.client.security import wire_client
from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.describe_quorum import (
    DescribeQuorumRequest,
    DescribeQuorumRequestPartitionData,
    DescribeQuorumRequestTopicData,
    DescribeQuorumResponse,
)
from testing import ClusterProcesses, wait_for
from tests.support.cluster import OVERRIDES, Traffic, create, done_moving, partitions_of, read_partitions

pytestmark = [pytest.mark.integration, pytest.mark.sftraffic_only(reason="a 5-broker sftraffic cluster")]

TOPIC = "grown"
ORIGINAL = {p: [(p + i) % 3 + 1 for i in range(3)] for p in range(6)}  # [1,2,3], [2,3,1], ...
# each partition's first (leading) replica replaced by a new broker, which leads it once in sync
GROWN = {p: [4 + p % 2, *ORIGINAL[p][1:]] for p in range(6)}


def quorum(bootstrap: str) -> DescribeQuorumResponse:
    req = DescribeQuorumRequest(
        topics=[DescribeQuorumRequestTopicData("__cluster_metadata", [DescribeQuorumRequestPartitionData(0)])]
    )
    with wire_client(bootstrap, 10) as c:
        return c.send(req, DescribeQuorumResponse)


def leaders(c: ClusterProcesses) -> dict[int, int]:
    view = partitions_of(c.brokers[0], TOPIC) or {}
    return {p: lead for p, (lead, _r, _i) in view.items()}


def _grow_to_five(c: ClusterProcesses) -> float:
    """Two observers join; the seconds until both are registered."""
    t0 = time.monotonic()
    c.add_broker()
    c.add_broker()
    c.wait_registered(5, 30)
    joined = time.monotonic() - t0
    q = quorum(c.brokers[0].bootstrap).topics[0].partitions[0]
    assert sorted(v.replica_id for v in q.current_voters) == [1, 2, 3]
    assert sorted(o.replica_id for o in q.observers) == [4, 5]
    return joined


def _more_traffic(traffic: Traffic, what: str) -> None:
    seen = len(traffic.acked)
    wait_for(lambda: len(traffic.acked) > seen + 2000, 30, 0.05, what)


def _rebalance_onto_observers(c: ClusterProcesses, traffic: Traffic) -> None:
    """Each new broker takes a replica of, and leads, 3 partitions."""
    got = alter_reassignments(c.bootstrap, {(TOPIC, p): r for p, r in GROWN.items()})
    assert all(code == 0 for code, _ in got.values()), got
    wait_for(lambda: done_moving(c, TOPIC, GROWN), 60, 0.1, "the move onto brokers 4 and 5")
    wait_for(lambda: leaders(c) == {p: r[0] for p, r in GROWN.items()}, 15, 0.1, "4 and 5 leading")
    _more_traffic(traffic, "traffic through 4 and 5")
    # a broker still holding replicas, a voter and an unknown id cannot be unregistered
    assert unregister_broker(c.bootstrap, 4)[0] == ErrorCode.INVALID_REQUEST
    assert unregister_broker(c.bootstrap, 2)[0] == ErrorCode.INVALID_REQUEST
    assert unregister_broker(c.bootstrap, 9)[0] == ErrorCode.BROKER_ID_NOT_REGISTERED


def _kill_observer_until_fenced(c: ClusterProcesses, traffic: Traffic) -> float:
    """Broker 4 dies: fenced (no heartbeat for broker.session.timeout.ms), its partitions led by
    in-sync voters; the seconds that took."""
    c.brokers[3].kill()
    t0 = time.monotonic()
    wait_for(lambda: 4 not in leaders(c).values() and -1 not in leaders(c).values(), 20, 0.1, "4 fenced")
    fenced_in = time.monotonic() - t0
    assert c.live_brokers() == [1, 2, 3, 5]
    _more_traffic(traffic, "traffic after 4 died")
    return fenced_in


def _shrink_back_to_three(c: ClusterProcesses, traffic: Traffic) -> None:
    """Replicas back to 1-3 (4 is dead: its replicas are simply dropped); 4 and 5 unregistered."""
    got = alter_reassignments(c.bootstrap, {(TOPIC, p): r for p, r in ORIGINAL.items()})
    assert all(code == 0 for code, _ in got.values()), got
    wait_for(lambda: done_moving(c, TOPIC, ORIGINAL), 60, 0.1, "the move off brokers 4 and 5")
    assert c.brokers[4].stop(grace=30) == 0  # controlled shutdown: it leads nothing any more
    assert unregister_broker(c.bootstrap, 4) == (0, None)
    assert unregister_broker(c.bootstrap, 5) == (0, None)
    _more_traffic(traffic, "traffic on 3 brokers")


def _assert_three_brokers_and_every_write(c: ClusterProcesses, traffic: Traffic) -> None:
    assert traffic.failed == [], f"{len(traffic.failed)} writes failed, e.g. {traffic.failed[:3]}"
    assert list_reassignments(c.bootstrap) == {}
    assert c.live_brokers() == [1, 2, 3]
    q = quorum(c.brokers[0].bootstrap).topics[0].partitions[0]
    assert q.observers == []
    assert unregister_broker(c.bootstrap, 4)[0] == ErrorCode.BROKER_ID_NOT_REGISTERED
    got_back = {(m.partition(), m.offset()): m.value() for m in read_partitions(c.bootstrap, TOPIC, 6)}
    assert not traffic.lost(got_back), traffic.lost(got_back)
    dupes = [v for v, n in Counter(got_back.values()).items() if n > 1]
    assert not dupes, f"written twice: {dupes[:5]}"


def test_grow_to_five_move_partitions_fence_an_observer_and_shrink_back(tmp_path: Path) -> None:
    c = ClusterProcesses(tmp_path, 3, overrides=OVERRIDES, voters=3).start()
    try:
        create(c.bootstrap, TOPIC, [ORIGINAL[p] for p in range(6)], **{"min.insync.replicas": "2"})
        wait_for(lambda: done_moving(c, TOPIC, ORIGINAL), 15, 0.1, "the topic in sync")
        with Traffic(c.bootstrap, TOPIC, 6) as traffic:
            wait_for(lambda: len(traffic.acked) > 2000, 30, 0.05, "traffic flowing")
            joined = _grow_to_five(c)
            _rebalance_onto_observers(c, traffic)
            fenced_in = _kill_observer_until_fenced(c, traffic)
            _shrink_back_to_three(c, traffic)
        _assert_three_brokers_and_every_write(c, traffic)
        print(
            f"grew 3 -> 5 (observers registered in {joined:.1f} s), moved 6 partitions on and off, "
            f"observer fenced in {fenced_in:.1f} s, shrank to 3: {len(traffic.acked)} acknowledged "
            "writes, 0 failed, 0 lost"
        )
    except BaseException:
        print(c.logs()[-20000:])
        raise
    finally:
        c.stop()


def test_observers_follow_a_new_controller_which_fences_a_dead_one(tmp_path: Path) -> None:
    """The controller SIGKILLed: a live observer keeps heartbeating to the next one and is not
    fenced; a dead observer is fenced by the new controller, which has never heard from it."""
    c = ClusterProcesses(tmp_path, 3, overrides=OVERRIDES, voters=3).start()
    try:
        b4, b5 = c.add_broker(), c.add_broker()
        c.wait_registered(5, 30)
        leader = quorum(c.brokers[0].bootstrap).topics[0].partitions[0].leader_id
        assert leader in (1, 2, 3)
        b5.kill()
        c.brokers[leader - 1].kill()
        survivors = sorted({1, 2, 3} - {leader})
        wait_for(lambda: c.live_brokers() == [*survivors, 4], 30, 0.2, "the old controller and 5 fenced")
        q = quorum(b4.bootstrap).topics[0].partitions[0]
        assert q.leader_id in survivors
        assert sorted(o.replica_id for o in q.observers) == [4, 5]
        (o4,) = [o for o in q.observers if o.replica_id == 4]
        assert o4.last_fetch_timestamp > 0 and o4.log_end_offset > 0
        time.sleep(4.0)  # two sessions (broker.session.timeout.ms 2000)
        assert c.live_brokers() == [*survivors, 4], "the live observer was fenced"
    except BaseException:
        print(c.logs()[-20000:])
        raise
    finally:
        c.stop()
