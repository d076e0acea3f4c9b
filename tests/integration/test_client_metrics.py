"""Client metrics (KIP-714): a subscription set as a CLIENT_METRICS config resource makes a
librdkafka producer push its metrics, which the broker serves on ``/metrics``; without one a
client asks for its subscription, is given none, and pushes nothing. In a cluster the
subscription set through one broker is every broker's (the metadata quorum carries it).

Real broker processes and real confluent-kafka clients (``enable.metrics.push`` is librdkafka's
default). confluent-kafka's AdminClient has no CLIENT_METRICS resource type, so the
subscription is set with IncrementalAlterConfigs over the wire, as kafka-client-metrics.sh
sends it.
"""

from __future__ import annotations

import urllib.request
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from prometheus_client.parser import text_string_to_metric_families

from framework.client.wire import WireClient
from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsResponse,
)
from framework.protocol.messages.incremental_alter_configs import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from testing import ClusterProcesses, free_port, wait_for
from tests.support.brokers import BrokerFactory, create_topic, quiet_logger
from tests.support.cluster import OVERRIDES

pytestmark = pytest.mark.integration

CLIENT_METRICS, SET = 16, 0


def scrape(port: int) -> list[Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    return [s for family in text_string_to_metric_families(text) for s in family.samples]


def pushed(samples: list[Any], client_id: str) -> list[Any]:
    return [
        s for s in samples if s.name.startswith("kafka_client_") and s.labels.get("client_id") == client_id
    ]


def requests(samples: list[Any], api: str) -> float:
    return sum(
        s.value
        for s in samples
        if s.name == "sftraffic_request_latency_seconds_count" and s.labels["api"] == api
    )


def errors(samples: list[Any], api: str) -> float:
    return sum(
        s.value for s in samples if s.name == "sftraffic_request_errors_total" and s.labels["api"] == api
    )


def described(bootstrap: str, name: str) -> dict[str, str | None]:
    with WireClient(bootstrap).connect() as w:
        resp = w.send(
            DescribeConfigsRequest(
                resources=[
                    DescribeConfigsResource(
                        resource_type=CLIENT_METRICS, resource_name=name, configuration_keys=None
                    )
                ]
            ),
            DescribeConfigsResponse,
        )
    (result,) = resp.results
    assert result.error_code == ErrorCode.NONE
    return {c.name: c.value for c in result.configs}


def subscribe(bootstrap: str, name: str, configs: dict[str, str]) -> None:
    with WireClient(bootstrap).connect() as w:
        resp = w.send(
            IncrementalAlterConfigsRequest(
                resources=[
                    AlterConfigsResource(
                        resource_type=CLIENT_METRICS,
                        resource_name=name,
                        configs=[
                            AlterableConfig(name=k, config_operation=SET, value=v) for k, v in configs.items()
                        ],
                    )
                ]
            ),
            IncrementalAlterConfigsResponse,
        )
        assert [r.error_code for r in resp.responses] == [ErrorCode.NONE], resp
    assert described(bootstrap, name) == configs


def test_a_subscribed_producer_pushes_its_metrics_to_the_metrics_endpoint(
    broker_factory: BrokerFactory, topic_name: Any
) -> None:
    port = free_port()
    b = broker_factory({"metrics.listen": f"127.0.0.1:{port}"})
    topic = topic_name("telemetry")
    create_topic(b.bootstrap, topic)
    subscribe(
        b.bootstrap,
        "producers",
        {"metrics": "org.apache.kafka.producer.", "interval.ms": "1000", "match": "client_id=telemetry-.*"},
    )
    p = Producer(
        {
            "bootstrap.servers": b.bootstrap,
            "client.id": "telemetry-producer",
            "enable.metrics.push": True,
            "logger": quiet_logger(),
        }
    )
    for i in range(50):
        p.produce(topic, value=b"x" * 100, key=str(i).encode())
    assert p.flush(30) == 0

    def arrived() -> bool:
        p.poll(0.1)  # serve the producer's callbacks while it pushes from its own thread
        return bool(pushed(scrape(port), "telemetry-producer"))

    wait_for(arrived, timeout=30, what="the producer's pushed metrics on /metrics")
    samples = pushed(scrape(port), "telemetry-producer")
    names = {s.name for s in samples}
    assert all(n.startswith("kafka_client_org_apache_kafka_producer_") for n in names), names
    s = samples[0]
    assert s.labels["client_software_name"] == "confluent-kafka-python"
    assert s.labels["client_software_version"]
    assert len(s.labels["client_instance_id"]) == 36  # a Uuid the broker gave the client
    m = scrape(port)
    assert errors(m, "PushTelemetry") == 0
    assert errors(m, "GetTelemetrySubscriptions") == 0

    # a narrower subscription: the next push is refused (UNKNOWN_SUBSCRIPTION_ID), the client
    # asks again at once and from then on pushes only what is now asked for
    subscribe(
        b.bootstrap,
        "producers",
        {
            "metrics": "org.apache.kafka.producer.node.",
            "interval.ms": "1000",
            "match": "client_id=telemetry-.*",
        },
    )

    def narrowed() -> bool:
        p.poll(0.1)
        names = {s.name for s in pushed(scrape(port), "telemetry-producer")}
        return bool(names) and all(
            n.startswith("kafka_client_org_apache_kafka_producer_node_") for n in names
        )

    wait_for(narrowed, timeout=30, what="pushes of the narrowed subscription")
    refused = scrape(port)
    assert errors(refused, "PushTelemetry") == sum(
        s.value
        for s in refused
        if s.name == "sftraffic_request_errors_total"
        and s.labels == {"api": "PushTelemetry", "error": "UNKNOWN_SUBSCRIPTION_ID"}
    )
    assert errors(refused, "GetTelemetrySubscriptions") == 0
    p.flush(10)


def test_without_a_subscription_a_client_works_and_pushes_nothing(
    broker_factory: BrokerFactory, topic_name: Any
) -> None:
    port = free_port()
    b = broker_factory({"metrics.listen": f"127.0.0.1:{port}"})
    topic = topic_name("no-telemetry")
    create_topic(b.bootstrap, topic)
    p = Producer(
        {
            "bootstrap.servers": b.bootstrap,
            "client.id": "plain-producer",
            "enable.metrics.push": True,
            "logger": quiet_logger(),
        }
    )
    for i in range(20):
        p.produce(topic, value=b"y" * 10, key=str(i).encode())
    assert p.flush(30) == 0

    def asked() -> bool:
        p.poll(0.05)
        return requests(scrape(port), "GetTelemetrySubscriptions") >= 1

    wait_for(asked, timeout=30, what="the producer's GetTelemetrySubscriptions")
    for i in range(20):  # still producing after being told to push nothing
        p.produce(topic, value=b"z" * 10, key=str(i).encode())
    assert p.flush(30) == 0
    m = scrape(port)
    assert errors(m, "GetTelemetrySubscriptions") == 0
    assert requests(m, "PushTelemetry") == 0
    assert not [s for s in m if s.name.startswith("kafka_client_")]


def test_a_subscription_set_through_one_broker_is_every_brokers(tmp_path: Path) -> None:
    cluster = ClusterProcesses(tmp_path, 3, overrides=OVERRIDES).start()
    try:
        first, *others = cluster.brokers
        configs = {"metrics": "org.apache.kafka.", "interval.ms": "2000"}
        subscribe(first.bootstrap, "everyone", configs)
        for b in others:
            wait_for(
                lambda b=b: described(b.bootstrap, "everyone") == configs, 30, what=f"broker {b.node_id}"
            )
    finally:
        cluster.stop()
