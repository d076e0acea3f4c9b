"""A cluster's brokers stop, restart and change leaders the way Kafka's do: controlled shutdown
on SIGTERM, preferred leaders coming back, ElectLeaders (API 43), unclean leader election.

Three real brokers on 127.0.0.1 (``ClusterProcesses``), real confluent-kafka clients.
"""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ElectionType, KafkaError, TopicPartition

from testing import ClusterProcesses, wait_for
from tests.support.cluster import (
    Traffic,
    admin,
    create_topic,
    delivery_of,
    led_view,
    partitions_of,
    read_partitions,
    running,
    settle,
    start_cluster,
)

pytestmark = pytest.mark.integration


def test_sigterm_under_load_hands_over_leadership_and_stops_cleanly(tmp_path: Path) -> None:
    c = start_cluster(tmp_path)
    try:
        topic = "handover"
        create_topic(c.bootstrap, topic, partitions=6, config={"min.insync.replicas": "2"})
        settle(c, topic, 6)
        view = led_view(c.brokers[0], topic)
        victim = max(c.brokers, key=lambda b: sum(1 for lead, _r, _i in view.values() if lead == b.node_id))
        led = [p for p, (lead, _r, _i) in view.items() if lead == victim.node_id]
        assert led, "the victim leads something"
        with Traffic(c.bootstrap, topic, 6) as traffic:
            wait_for(lambda: len(traffic.acked) > 2000, 30, 0.05, "traffic flowing")
            assert victim.stop(grace=30) == 0
            assert "stopped cleanly" in victim.logs()
            assert "controlled shutdown, handing over" in victim.logs()
            survivor = next(b for b in running(c))
            after = partitions_of(survivor, topic)
            assert after is not None
            for p in led:
                leader, _replicas, isr = after[p]
                assert leader not in (victim.node_id, -1) and victim.node_id not in isr
            seen = len(traffic.acked)
            wait_for(lambda: len(traffic.acked) > seen + 2000, 30, 0.05, "traffic on the new leaders")
        assert traffic.failed == [], f"deliveries failed: {traffic.failed[:5]}"
        got = {(m.partition(), m.offset()): m.value() for m in read_partitions(c.bootstrap, topic, 6)}
        assert not traffic.lost(got), traffic.lost(got)
    finally:
        c.stop()


def test_a_restarted_broker_gets_its_preferred_leaderships_back(tmp_path: Path) -> None:
    c = start_cluster(tmp_path, **{"leader.imbalance.check.interval.seconds": 1})
    try:
        topic = "preferred"
        create_topic(c.bootstrap, topic, partitions=6)
        settle(c, topic, 6)
        first = c.brokers[0]
        preferred = [p for p, (_l, replicas, _i) in led_view(c.brokers[1], topic).items() if replicas[0] == 1]
        assert preferred
        first.kill()
        wait_for(
            lambda: all(led_view(c.brokers[1], topic)[p][0] != 1 for p in preferred), 20, 0.1, "failover"
        )
        first.start(60)
        wait_for(
            lambda: all(led_view(c.brokers[1], topic)[p][0] == 1 for p in preferred),
            60,
            0.2,
            "broker 1 leading its preferred partitions again",
        )
    finally:
        c.stop()


def test_elect_leaders_moves_leadership_to_the_preferred_replica(tmp_path: Path) -> None:
    c = start_cluster(tmp_path, **{"auto.leader.rebalance.enable": "false"})
    try:
        topic = "elect"
        create_topic(c.bootstrap, topic, partitions=3)
        settle(c, topic, 3)
        first = c.brokers[0]
        preferred = [p for p, (_l, replicas, _i) in led_view(c.brokers[1], topic).items() if replicas[0] == 1]
        first.kill()
        wait_for(
            lambda: all(led_view(c.brokers[1], topic)[p][0] != 1 for p in preferred), 20, 0.1, "failover"
        )
        first.start(60)
        wait_for(
            lambda: all(1 in led_view(c.brokers[1], topic)[p][2] for p in preferred), 30, 0.1, "back in sync"
        )
        assert all(led_view(c.brokers[1], topic)[p][0] != 1 for p in preferred), "no automatic rebalance"

        a = admin(c.bootstrap)
        tps = [TopicPartition(topic, p) for p in range(3)]
        result = a.elect_leaders(ElectionType.PREFERRED, tps).result(30)
        for tp in tps:
            err = result[tp]
            if tp.partition in preferred:
                assert err is None, f"{tp}: {err}"
            else:
                assert err is not None and err.code() == KafkaError.ELECTION_NOT_NEEDED
        wait_for(
            lambda: all(led_view(c.brokers[1], topic)[p][0] == 1 for p in preferred), 10, 0.05, "elected"
        )
        unclean = a.elect_leaders(ElectionType.UNCLEAN, tps).result(30)
        assert all(e is not None and e.code() == KafkaError.ELECTION_NOT_NEEDED for e in unclean.values())
    finally:
        c.stop()


def led_view_or_offline(b: Any, topic: str, part: int) -> int:
    """The partition's leader as broker ``b`` reports it (-1: offline, -2: topic not listed)."""
    view = partitions_of(b, topic)
    return -2 if view is None else view[part][0]


def _offline_with_stale_follower(tmp_path: Path, unclean: str) -> tuple[ClusterProcesses, str, int]:
    """Partition 0 on [1, 2]: broker 2 stopped, more records acknowledged by 1 alone (the ISR
    shrank to [1]), then 1 killed and 2 restarted: no in-sync replica is alive."""
    c = start_cluster(tmp_path, **{"replica.lag.time.max.ms": 1000})
    topic = "unclean"
    a = admin(c.bootstrap)
    from confluent_kafka.admin import NewTopic

    a.create_topics(
        [
            NewTopic(
                topic,
                num_partitions=1,
                replica_assignment=[[1, 2]],
                config={"unclean.leader.election.enable": unclean},
            )
        ]
    )[topic].result(30)
    settle(c, topic, 1)
    second = c.brokers[1]
    second.kill()
    wait_for(lambda: led_view(c.brokers[0], topic)[0][2] == [1], 30, 0.1, "ISR shrinking to the leader")
    assert delivery_of(c.bootstrap, topic, 0, acks="all") is None  # on broker 1 only
    c.brokers[0].kill()
    second.start(60)
    return c, topic, 0


def test_unclean_leader_election_when_enabled_elects_a_live_out_of_sync_replica(tmp_path: Path) -> None:
    c, topic, part = _offline_with_stale_follower(tmp_path, "true")
    try:
        wait_for(lambda: led_view(c.brokers[1], topic)[part][0] == 2, 30, 0.1, "unclean election of broker 2")
        _leader, _replicas, isr = led_view(c.brokers[1], topic)[part]
        assert isr == [2]
        controller_logs = "\n".join(b.logs() for b in c.brokers)
        assert "unclean leader election" in controller_logs
        assert delivery_of(c.bootstrap, topic, part, acks="all") is None  # writable again
    finally:
        c.stop()


def test_without_unclean_election_the_partition_stays_offline_until_an_in_sync_replica_returns(
    tmp_path: Path,
) -> None:
    c, topic, part = _offline_with_stale_follower(tmp_path, "false")
    try:
        # broker 1 is fenced once the controller has not heard from it for the session timeout
        wait_for(lambda: led_view_or_offline(c.brokers[1], topic, part) == -1, 30, 0.1, "partition offline")
        deadline = time.monotonic() + 5  # several controller rounds
        while time.monotonic() < deadline:
            view = partitions_of(c.brokers[1], topic)
            assert view is not None and view[part][0] == -1, "an out-of-sync replica was elected"
            time.sleep(0.2)
        c.brokers[0].start(60)
        wait_for(
            lambda: led_view(c.brokers[1], topic)[part][0] == 1, 30, 0.1, "the in-sync replica leading again"
        )
    finally:
        c.stop()


def test_a_stop_without_a_quorum_is_bounded_and_a_second_signal_forces_it(tmp_path: Path) -> None:
    """Two of three brokers gone: the controlled shutdown cannot commit. The stop still ends
    within its bound, logs flushed and marked clean; a second SIGTERM ends it at once."""
    c = start_cluster(tmp_path)
    try:
        topic = "lonely"
        create_topic(c.bootstrap, topic, partitions=3)
        settle(c, topic, 3)
        first, second, third = c.brokers
        second.kill()
        third.kill()
        handing_over = threading.Event()
        first.on_line(lambda line: "controlled shutdown, handing over" in line and handing_over.set())
        first.signal(signal.SIGTERM)
        assert handing_over.wait(10), first.tail()
        first.signal(signal.SIGTERM)
        assert first.proc is not None and first.proc.wait(10) == 1
        assert "stopped: forced (second signal)" in first.logs()
        assert (first.data_dir / ".clean-shutdown").exists()

        for b in c.brokers:  # all three again (a broker starts only with a quorum)
            b.launch()
        for b in c.brokers:
            b.wait_ready(60)
        c.wait_registered(3)
        second.kill()
        third.kill()
        assert first.stop(grace=20) == 0  # bounded: no quorum to hand leadership over to
        assert "controlled shutdown incomplete" in first.logs()
        assert "stopped cleanly" in first.logs()
        assert (first.data_dir / ".clean-shutdown").exists()
    finally:
        c.stop()
