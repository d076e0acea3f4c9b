"""The metrics a broker serves on ``/metrics`` move as the broker works
(docs/reference/metrics.md).

Real broker processes, real confluent-kafka clients, ``/metrics`` scraped over HTTP while they
work: one broker with a consumer group (bytes and records in and out, request counts, lag that
returns to 0 once the group commits, errors counted at every level), then a 3-broker cluster
that loses a broker (under-replicated partitions on a surviving leader, exactly one controller,
fencing, elections, ISR shrinks and, after a restart, expands).
"""

from __future__ import annotations

import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from framework.client.wire import WireClient
from framework.protocol import records as rb
from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic, MetadataResponse
from framework.protocol.messages.produce import (
    PartitionProduceData,
    ProduceRequest,
    ProduceResponse,
    TopicProduceData,
)
from testing import BrokerProcess, ClusterProcesses, free_port, wait_for
from tests.support.brokers import ARTIFACTS, BrokerFactory, quiet_logger
from tests.support.cluster import OVERRIDES, full_isr, led_view, running, settle

pytestmark = pytest.mark.integration

Samples = list[Any]  # prometheus_client Sample(name, labels, value, ...)


def scrape(port: int) -> Samples:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        assert r.status == 200
        text = r.read().decode()
    return [s for family in text_string_to_metric_families(text) for s in family.samples]


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sum of the samples called ``name`` whose labels include ``labels``."""
    return sum(
        s.value for s in samples if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    )


def requests(samples: Samples, api: str) -> float:
    return value(samples, "sftraffic_request_latency_seconds_count", api=api)


def errors(samples: Samples, api: str, error: str) -> float:
    return value(samples, "sftraffic_request_errors_total", api=api, error=error)


# -- one broker, one consumer group --------------------------------------------------------------
def create(bootstrap: str, topic: str, partitions: int, replication: int = 1) -> None:
    a = AdminClient({"bootstrap.servers": bootstrap, "logger": quiet_logger()})
    a.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=replication)])[
        topic
    ].result(30)


def produce(bootstrap: str, topic: str, n: int, partitions: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "logger": quiet_logger()})
    for i in range(n):
        p.produce(topic, value=b"v" * 100, partition=i % partitions)
    assert p.flush(30) == 0


def consume(c: Consumer, n: int) -> None:
    got, deadline = 0, time.monotonic() + 60
    while got < n and time.monotonic() < deadline:
        for m in c.consume(100, timeout=0.5):
            if m.error() is None:
                got += 1
    assert got == n, f"consumed {got} of {n}"
    c.commit(asynchronous=False)


def group_lag(port: int, group: str) -> tuple[float, float, int]:
    """(sum of lag, sum of committed offsets, partitions) of ``group`` as the broker reports it."""
    s = scrape(port)
    rows = [x for x in s if x.name == "sftraffic_consumer_group_lag" and x.labels["group"] == group]
    committed = value(s, "sftraffic_consumer_group_committed_offset", group=group)
    return sum(x.value for x in rows), committed, len(rows)


def test_one_broker_counts_traffic_lag_and_errors(broker_factory: BrokerFactory) -> None:
    port = free_port()
    b = broker_factory({"metrics.listen": f"127.0.0.1:{port}"})
    topic, group = "metrics-orders", "metrics-g"
    m0 = scrape(port)
    assert value(m0, "sftraffic_active_controller") == 1  # a single node is its own controller
    assert value(m0, "sftraffic_offline_partitions") == 0

    create(b.bootstrap, topic, 2)
    produce(b.bootstrap, topic, 20, 2)
    m1 = scrape(port)
    assert value(m1, "sftraffic_messages_in_total", topic=topic) == 20
    assert value(m1, "sftraffic_bytes_in_total", topic=topic) > 20 * 100
    assert requests(m1, "Produce") > requests(m0, "Produce")
    assert requests(m1, "CreateTopics") == requests(m0, "CreateTopics") + 1
    assert value(m1, "sftraffic_high_watermark", topic=topic) == 20
    assert value(m1, "sftraffic_under_replicated_partitions") == 0
    assert value(m1, "sftraffic_leader_partitions") >= 2

    c = Consumer(
        {
            "bootstrap.servers": b.bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "logger": quiet_logger(),
        }
    )
    try:
        c.subscribe([topic])
        consume(c, 20)
        wait_for(lambda: group_lag(port, group) == (0, 20, 2), 15, 0.1, "lag 0 after the commit")
        m2 = scrape(port)
        assert value(m2, "sftraffic_bytes_out_total", topic=topic) >= value(
            m2, "sftraffic_bytes_in_total", topic=topic
        )
        for api in ("JoinGroup", "SyncGroup", "OffsetCommit", "Fetch"):
            assert requests(m2, api) >= 1, api
        assert value(m2, "sftraffic_connections") >= 1

        produce(b.bootstrap, topic, 6, 2)  # not consumed yet: the group lags by 6
        assert group_lag(port, group)[:2] == (6, 20)
        consume(c, 6)
        wait_for(lambda: group_lag(port, group) == (0, 26, 2), 15, 0.1, "lag back to 0")
    finally:
        c.close()

    # errors, counted from the responses: one partition, every partition of a refused
    # request, and a Metadata topic error (set by its handler, not raised)
    before = scrape(port)
    batch = rb.build_batch([(None, b"x")])
    with WireClient(b.bootstrap, timeout=5) as w:

        def produce_req(acks: int, indexes: list[int]) -> ProduceRequest:
            return ProduceRequest(
                acks=acks,
                timeout_ms=5000,
                topic_data=[
                    TopicProduceData(
                        name=topic,
                        partition_data=[PartitionProduceData(index=i, records=batch) for i in indexes],
                    )
                ],
            )

        resp = w.send(produce_req(1, [7]), ProduceResponse, version=9)
        assert resp.responses[0].partition_responses[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        resp = w.send(produce_req(2, [0, 1]), ProduceResponse, version=9)
        assert {p.error_code for p in resp.responses[0].partition_responses} == {
            ErrorCode.INVALID_REQUIRED_ACKS
        }
        md = w.send(
            MetadataRequest(topics=[MetadataRequestTopic(name="no-such")], allow_auto_topic_creation=False),
            MetadataResponse,
        )
        assert md.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    after = scrape(port)
    moved = {
        (api, err): errors(after, api, err) - errors(before, api, err)
        for api, err in [
            ("Produce", "UNKNOWN_TOPIC_OR_PARTITION"),
            ("Produce", "INVALID_REQUIRED_ACKS"),
            ("Metadata", "UNKNOWN_TOPIC_OR_PARTITION"),
        ]
    }
    assert moved == {
        ("Produce", "UNKNOWN_TOPIC_OR_PARTITION"): 1,
        ("Produce", "INVALID_REQUIRED_ACKS"): 2,
        ("Metadata", "UNKNOWN_TOPIC_OR_PARTITION"): 1,
    }
    assert value(after, "sftraffic_messages_in_total", topic=topic) == 26  # nothing written


# -- a cluster losing a broker ----------------------------------------------------------------------
def sum_over(ports: dict[int, int], name: str) -> float:
    return sum(value(scrape(p), name) for p in ports.values())


def controllers(ports: dict[int, int]) -> list[int]:
    return [n for n, p in ports.items() if value(scrape(p), "sftraffic_active_controller") == 1]


def one_controller(ports: dict[int, int]) -> list[int]:
    """The brokers reporting themselves controller, once exactly one does."""
    found: list[int] = []

    def ready() -> bool:
        found[:] = controllers(ports)
        return len(found) == 1

    wait_for(ready, 30, 0.2, f"exactly one controller among brokers {sorted(ports)}")
    return found


def test_a_cluster_losing_a_broker_reports_under_replicated_partitions_and_one_controller(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    mports = [free_port() for _ in range(3)]
    cluster = ClusterProcesses(
        tmp_path,
        3,
        overrides=OVERRIDES,
        broker_overrides=[{"metrics.listen": f"127.0.0.1:{p}"} for p in mports],
    ).start()
    ports = {i + 1: p for i, p in enumerate(mports)}
    try:
        topic = "metrics-replicated"
        create(cluster.bootstrap, topic, 3, 3)
        settle(cluster, topic, 3)
        [controller] = one_controller(ports)
        assert sum_over(ports, "sftraffic_under_replicated_partitions") == 0
        assert value(scrape(ports[controller]), "sftraffic_offline_partitions") == 0

        # lose the controller: the next one fences it and moves its leaderships
        victim = next(b for b in cluster.brokers if b.node_id == controller)
        led_by_victim = [i for i, (leader, _r, _i) in led_view(victim, topic).items() if leader == controller]
        before = {n: scrape(p) for n, p in ports.items()}
        victim.kill()
        alive = {n: p for n, p in ports.items() if n != controller}
        one_controller(alive)
        survivors = {b.node_id: b for b in running(cluster)}

        def under_replicated_on_a_leader() -> bool:
            return any(
                value(s := scrape(p), "sftraffic_under_replicated_partitions") > 0
                and value(s, "sftraffic_leader_partitions") > 0
                for p in alive.values()
            )

        wait_for(under_replicated_on_a_leader, 30, 0.2, "under-replicated partitions on a surviving leader")
        wait_for(
            lambda: sum_over(alive, "sftraffic_under_replicated_partitions") >= 3, 30, 0.2, "every partition"
        )

        def on_new_controller(name: str) -> float:
            # counted where the controller is; summed over the survivors, since on a loaded
            # machine the controllership may move between them once more before it settles
            return sum(value(scrape(p), name) - value(before[n], name) for n, p in alive.items())

        def shrinks() -> float:
            return sum(
                value(scrape(p), "sftraffic_isr_shrinks_total")
                - value(before[n], "sftraffic_isr_shrinks_total")
                for n, p in alive.items()
            )

        # broker.session.timeout.ms after the new controller took over, it fences the old one
        wait_for(lambda: on_new_controller("sftraffic_broker_fencings_total") >= 1, 30, 0.2, "the fencing")
        wait_for(
            lambda: on_new_controller("sftraffic_leader_elections_total") >= len(led_by_victim),
            15,
            0.2,
            f"new leaders for partitions {led_by_victim}",
        )
        # each of the topic's partitions lost the victim from its ISR (the offsets topic's too)
        wait_for(lambda: shrinks() >= 3, 15, 0.2, "ISR shrinks")
        [new_controller] = one_controller(alive)
        assert value(scrape(alive[new_controller]), "sftraffic_offline_partitions") == 0
        assert len(one_controller(alive)) == 1

        # back again: it catches up, its leaders take it back into the ISRs (expands)
        expands_before = sum(value(scrape(p), "sftraffic_isr_expands_total") for p in alive.values())
        victim.start()
        wait_for(
            lambda: all(full_isr(b, topic) for b in survivors.values()),
            60,
            0.2,
            "full ISRs after the restart",
        )
        wait_for(
            lambda: sum_over(ports, "sftraffic_under_replicated_partitions") == 0,
            60,
            0.2,
            "no under-replication",
        )
        expands = sum(value(scrape(p), "sftraffic_isr_expands_total") for p in alive.values())
        assert expands - expands_before >= 1
        assert len(one_controller(ports)) == 1
    except BaseException:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        (ARTIFACTS / f"{request.node.name}.log").write_text(cluster.logs())
        raise
    finally:
        cluster.stop()


def test_a_broker_whose_metrics_port_is_taken_says_so(tmp_path: Path) -> None:
    port = free_port()
    b = BrokerProcess(tmp_path / "b", overrides={"metrics.listen": f"127.0.0.1:{port}"})
    b.start()
    try:
        other = BrokerProcess(tmp_path / "c", overrides={"metrics.listen": f"127.0.0.1:{port}"})
        other.launch()
        wait_for(lambda: other.returncode is not None, 30, 0.1, "the second broker to exit")
        assert other.returncode == 2
        assert f"cannot serve metrics on 127.0.0.1:{port}" in other.logs()
    finally:
        b.stop()
