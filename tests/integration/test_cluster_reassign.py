"""Partition reassignment on a 3-broker cluster: AlterPartitionReassignments (45) and
ListPartitionReassignments (46) as Kafka answers them, replicas moved under acks=all idempotent
producers with no failed and no lost write, a cancelled move reverting, a move going on after
the controller is SIGKILLed, and the replication throttle holding a move back (its counters).

Real brokers (``ClusterProcesses``, every broker a Raft voter), real confluent-kafka clients;
reassignments through :mod:`framework.client.reassign` (confluent-kafka has no call for them).
"""

from __future__ import annotations

import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import ConfigResource

from framework.client.reassign import alter_reassignments, list_reassignments
from framework.client.wire import WireClient
from framework.protocol.error_codes import ErrorCode
from testing import BrokerProcess, ClusterProcesses, free_port, wait_for
from tests.support.cluster import (
    OVERRIDES,
    Traffic,
    admin,
    create,
    done_moving,
    fill,
    partitions_of,
    read_partitions,
)

pytestmark = [pytest.mark.integration, pytest.mark.sftraffic_only(reason="a 3-broker sftraffic cluster")]


class Metrics:
    """Each broker's Prometheus endpoint (metrics.listen), read as {name{labels}: value}."""

    def __init__(self, ports: list[int]) -> None:
        self.ports = ports

    def read(self, node_id: int) -> dict[str, float]:
        url = f"http://127.0.0.1:{self.ports[node_id - 1]}/metrics"
        with urllib.request.urlopen(url, timeout=5) as r:
            text = r.read().decode()
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                out[name] = float(value)
        return out


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ClusterProcesses, Metrics]]:
    ports = [free_port("127.0.0.1") for _ in range(3)]
    c = ClusterProcesses(
        tmp_path_factory.mktemp("reassign"),
        3,
        overrides=OVERRIDES,
        broker_overrides=[{"metrics.listen": f"127.0.0.1:{p}"} for p in ports],
    ).start()
    try:
        yield c, Metrics(ports)
    finally:
        c.stop()


def set_configs(bootstrap: str, resources: list[ConfigResource]) -> None:
    a = admin(bootstrap)
    for res in resources:  # librdkafka takes one BROKER resource per call
        for f in a.incremental_alter_configs([res]).values():
            f.result(30)


def partition_dir(b: BrokerProcess, topic: str, p: int) -> Path:
    return b.data_dir / f"{topic}-{p}"


def controller_id(c: ClusterProcesses, metrics: Metrics) -> int:
    """The broker whose sftraffic_active_controller is 1 (-1: none now)."""
    for b in c.brokers:
        if b.alive() and metrics.read(b.node_id).get("sftraffic_active_controller") == 1:
            return b.node_id
    return -1


# -- the answers -----------------------------------------------------------------------------------
def test_errors_are_kafkas(cluster: tuple[ClusterProcesses, Metrics]) -> None:
    c, _ = cluster
    with WireClient(c.brokers[0].bootstrap, timeout=5) as w:  # ApiVersions advertises both
        assert w.versions.get(45) == (0, 1) and w.versions.get(46) == (0, 0), w.versions
    create(c.bootstrap, "answers", [[1, 2]])
    got = alter_reassignments(
        c.bootstrap,
        {
            ("answers", 0): [1, 9],  # no broker 9
            ("nosuchtopic", 0): [1, 2],
            ("answers", 5): [1, 2],
        },
    )
    assert got[("answers", 0)][0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert "broker 9" in (got[("answers", 0)][1] or "")
    assert got[("nosuchtopic", 0)][0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert got[("answers", 5)][0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    dup = alter_reassignments(c.bootstrap, {("answers", 0): [2, 2]})[("answers", 0)]
    assert dup[0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT and "more than once" in (dup[1] or "")
    empty = alter_reassignments(c.bootstrap, {("answers", 0): []})[("answers", 0)]
    assert empty[0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    cancel = alter_reassignments(c.bootstrap, {("answers", 0): None})[("answers", 0)]
    assert cancel[0] == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
    # a reordering only: in sync already, done at once; the preferred (first) replica leads
    assert alter_reassignments(c.bootstrap, {("answers", 0): [2, 1]})[("answers", 0)][0] == 0
    wait_for(lambda: done_moving(c, "answers", {0: [2, 1]}), 15, 0.1, "reordered replicas")
    assert list_reassignments(c.bootstrap) == {}


# -- moves ---------------------------------------------------------------------------------------
def test_a_move_under_acks_all_traffic_fails_and_loses_no_write(
    cluster: tuple[ClusterProcesses, Metrics],
) -> None:
    """Broker 1 leaves every partition of a topic (RF 2: {1,2} -> {3,2}, {2,1} -> {2,3}),
    leading half of them, while idempotent acks=all producers write."""
    c, metrics = cluster
    topic = "moved"
    before = [[1, 2], [2, 1]] * 3
    after = [[3, 2], [2, 3]] * 3
    create(c.bootstrap, topic, before, **{"min.insync.replicas": "2"})
    wait_for(lambda: done_moving(c, topic, dict(enumerate(before))), 15, 0.1, "the topic in sync")
    removed_before = metrics.read(1)["sftraffic_replicas_removed"]
    with Traffic(c.bootstrap, topic, 6) as traffic:
        wait_for(lambda: len(traffic.acked) > 2000, 30, 0.05, "traffic flowing")
        got = alter_reassignments(c.bootstrap, {(topic, p): r for p, r in enumerate(after)})
        assert all(code == 0 for code, _ in got.values()), got
        wait_for(lambda: done_moving(c, topic, dict(enumerate(after))), 60, 0.1, "the move")
        seen = len(traffic.acked)
        wait_for(lambda: len(traffic.acked) > seen + 2000, 30, 0.05, "traffic after the move")
    assert traffic.failed == [], f"{len(traffic.failed)} writes failed, e.g. {traffic.failed[:3]}"
    assert list_reassignments(c.bootstrap) == {}
    got_back = {(m.partition(), m.offset()): m.value() for m in read_partitions(c.bootstrap, topic, 6)}
    assert not traffic.lost(got_back), traffic.lost(got_back)
    dupes = [v for v, n in Counter(got_back.values()).items() if n > 1]
    assert not dupes, f"written twice: {dupes[:5]}"
    # broker 1 stopped serving the partitions and deleted their logs; broker 3 holds them
    b1, b3 = c.brokers[0], c.brokers[2]
    wait_for(
        lambda: not any(partition_dir(b1, topic, p).exists() for p in range(6)), 10, 0.1, "b1's logs gone"
    )
    assert all(partition_dir(b3, topic, p).exists() for p in range(6))
    assert metrics.read(1)["sftraffic_replicas_removed"] - removed_before == 6
    print(f"moved 6 partitions under {len(traffic.acked)} acknowledged writes, 0 failed, 0 lost")


def test_a_single_replica_moves_to_another_broker_under_traffic(
    cluster: tuple[ClusterProcesses, Metrics],
) -> None:
    """RF 1: the only replica, the leader, moves ({2} -> {3}, {3} -> {1}): the new one copies the
    log while the old one serves, then takes over."""
    c, _ = cluster
    topic = "single"
    create(c.bootstrap, topic, [[2], [3]])
    wait_for(lambda: done_moving(c, topic, {0: [2], 1: [3]}), 15, 0.1, "the topic led")
    with Traffic(c.bootstrap, topic, 2) as traffic:
        wait_for(lambda: len(traffic.acked) > 1000, 30, 0.05, "traffic flowing")
        got = alter_reassignments(c.bootstrap, {(topic, 0): [3], (topic, 1): [1]})
        assert all(code == 0 for code, _ in got.values()), got
        wait_for(lambda: done_moving(c, topic, {0: [3], 1: [1]}), 60, 0.1, "the move")
        seen = len(traffic.acked)
        wait_for(lambda: len(traffic.acked) > seen + 1000, 30, 0.05, "traffic after the move")
    assert traffic.failed == [], f"{len(traffic.failed)} writes failed, e.g. {traffic.failed[:3]}"
    got_back = {(m.partition(), m.offset()): m.value() for m in read_partitions(c.bootstrap, topic, 2)}
    assert not traffic.lost(got_back), traffic.lost(got_back)
    assert not [v for v, n in Counter(got_back.values()).items() if n > 1], "a record written twice"


def throttle(c: ClusterProcesses, topic: str, leader: str, follower: str, rate: int | None) -> None:
    """The throttle kafka-reassign-partitions --throttle sets: topic lists, broker rates."""
    resources = [
        ConfigResource(
            "TOPIC",
            topic,
            incremental_configs=[
                _op("leader.replication.throttled.replicas", leader),
                _op("follower.replication.throttled.replicas", follower),
            ],
        )
    ]
    for b in (1, 2, 3):
        resources.append(
            ConfigResource(
                "BROKER",
                str(b),
                incremental_configs=[
                    _op("leader.replication.throttled.rate", None if rate is None else str(rate)),
                    _op("follower.replication.throttled.rate", None if rate is None else str(rate)),
                ],
            )
        )
    set_configs(c.bootstrap, resources)


def _op(name: str, value: str | None) -> object:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry

    if value is None:
        return ConfigEntry(name, None, incremental_operation=AlterConfigOpType.DELETE)
    return ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)


def test_a_cancelled_move_reverts(cluster: tuple[ClusterProcesses, Metrics]) -> None:
    c, _ = cluster
    topic = "cancelled"
    create(c.bootstrap, topic, [[1, 2]])
    fill(c.bootstrap, topic, 0, 400, 10_000)  # 4 MB
    throttle(c, topic, "0:1,0:2", "0:3", 50_000)  # 50 kB/s: the move would take 80 s
    try:
        assert alter_reassignments(c.bootstrap, {(topic, 0): [1, 3]})[(topic, 0)][0] == 0
        wait_for(lambda: (topic, 0) in list_reassignments(c.bootstrap), 10, 0.1, "the move listed")
        assert list_reassignments(c.bootstrap)[(topic, 0)] == ([1, 3, 2], [3], [2])
        view = partitions_of(c.brokers[0], topic)
        assert view is not None and view[0][1] == [1, 3, 2]
        wait_for(lambda: partition_dir(c.brokers[2], topic, 0).exists(), 10, 0.1, "broker 3 copying")
        assert alter_reassignments(c.bootstrap, {(topic, 0): None})[(topic, 0)][0] == 0
        wait_for(lambda: done_moving(c, topic, {0: [1, 2]}), 15, 0.1, "the revert")
        assert list_reassignments(c.bootstrap) == {}
        wait_for(lambda: not partition_dir(c.brokers[2], topic, 0).exists(), 10, 0.1, "broker 3's copy gone")
        again = alter_reassignments(c.bootstrap, {(topic, 0): None})[(topic, 0)]
        assert again[0] == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
    finally:
        throttle(c, topic, "", "", None)


def test_the_throttle_holds_a_move_back(cluster: tuple[ClusterProcesses, Metrics]) -> None:
    """4 MB moved to broker 3 at 1 MB/s: the leader's and the follower's throttles both record
    the bytes and hold fetches back (their counters); the move completes."""
    c, metrics = cluster
    topic = "throttled"
    create(c.bootstrap, topic, [[2, 1]])
    fill(c.bootstrap, topic, 0, 400, 10_000)
    rate = 1_000_000
    throttle(c, topic, "0:2,0:1", "0:3", rate)
    try:
        lead0 = metrics.read(2)
        follow0 = metrics.read(3)
        assert follow0['sftraffic_replication_throttle_rate{side="follower"}'] == rate
        t0 = time.monotonic()
        assert alter_reassignments(c.bootstrap, {(topic, 0): [2, 3]})[(topic, 0)][0] == 0
        wait_for(lambda: done_moving(c, topic, {0: [2, 3]}), 60, 0.1, "the throttled move")
        took = time.monotonic() - t0
        lead, follow = metrics.read(2), metrics.read(3)
        moved = 'sftraffic_replication_throttled_bytes{side="%s"}'
        skips = 'sftraffic_replication_throttle_skips{side="%s"}'
        assert follow[moved % "follower"] - follow0[moved % "follower"] >= 4_000_000
        assert lead[moved % "leader"] - lead0[moved % "leader"] >= 4_000_000
        assert (
            lead[skips % "leader"] > lead0[skips % "leader"]
            or follow[skips % "follower"] > follow0[skips % "follower"]
        ), "the throttle never held a fetch back"
        print(f"4 MB moved at a 1 MB/s throttle in {took:.1f} s")
    finally:
        throttle(c, topic, "", "", None)
    a = admin(c.bootstrap)  # referenced until the result is in
    described = a.describe_configs([ConfigResource("BROKER", "1")])
    entries = next(iter(described.values())).result(30)
    assert entries["leader.replication.throttled.rate"].value == str(2**63 - 1)


def test_a_move_goes_on_after_the_controller_is_killed(cluster: tuple[ClusterProcesses, Metrics]) -> None:
    """The reassignment is Raft metadata: started, then the controller SIGKILLed while the new
    replica copies, it completes under the next controller."""
    c, metrics = cluster
    ctl = controller_id(c, metrics)
    assert ctl > 0
    others = [b for b in (1, 2, 3) if b != ctl]
    topic = "failover"
    create(c.bootstrap, topic, [[ctl, others[0]]], **{"min.insync.replicas": "1"})
    fill(c.bootstrap, topic, 0, 300, 10_000)  # 3 MB
    throttle(c, topic, f"0:{ctl},0:{others[0]}", f"0:{others[1]}", 500_000)  # ~6 s
    target = [others[0], others[1]]
    victim = c.brokers[ctl - 1]
    try:
        assert alter_reassignments(c.bootstrap, {(topic, 0): target})[(topic, 0)][0] == 0
        wait_for(lambda: (topic, 0) in list_reassignments(c.bootstrap), 10, 0.1, "the move listed")
        victim.kill()
        wait_for(lambda: controller_id(c, metrics) not in (ctl, -1), 20, 0.2, "a new controller")
        still = list_reassignments(c.brokers[others[0] - 1].bootstrap)  # a survivor's view
        wait_for(lambda: done_moving(c, topic, {0: target}), 90, 0.2, "the move under the new controller")
        assert list_reassignments(c.brokers[others[1] - 1].bootstrap) == {}
        print(f"killed controller {ctl}; in progress after the kill: {still}")
    finally:
        if not victim.alive():
            victim.start(60)
        c.wait_registered(3)
        throttle(c, topic, "", "", None)
    assert len(read_partitions(c.bootstrap, topic, 1)) == 300
