"""Kafka's ``kafka-client-metrics`` (ClientMetricsCommand) manages client-metrics subscriptions
(KIP-714) on the store as on Kafka, and the Java client pushes its metrics to the store's
``/metrics`` when one matches it."""

from __future__ import annotations

import urllib.request
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from testing import free_port
from tests.support.brokers import EXTERNAL_BOOTSTRAP, BrokerFactory, create_topic
from tests.support.kafka_tools import Tool

pytestmark = [pytest.mark.integration, pytest.mark.kafka]

CLIENT_METRICS_COMMAND = "org.apache.kafka.tools.ClientMetricsCommand"  # bin/kafka-client-metrics.sh


def test_kafka_client_metrics_alter_describe_list_delete(broker: Any, tool: Tool) -> None:
    def run(*args: str) -> str:
        return str(tool(CLIENT_METRICS_COMMAND, "--bootstrap-server", broker.bootstrap, *args).stdout)

    alter = ["--alter", "--name", "cm-producers", "--metrics", "org.apache.kafka.producer."]
    assert "Altered" in run(*alter, "--interval", "60000", "--match", "client_id=orders-.*")
    described = run("--describe", "--name", "cm-producers")
    assert "interval.ms=60000" in described
    assert "match=client_id=orders-.*" in described
    assert "metrics=org.apache.kafka.producer." in described
    assert "cm-producers" in run("--list").split()
    assert "Deleted" in run("--delete", "--name", "cm-producers")
    assert "cm-producers" not in run("--list").split()


@pytest.mark.skipif(bool(EXTERNAL_BOOTSTRAP), reason="Kafka hands pushed metrics to a plugin, not /metrics")
def test_the_java_producer_pushes_its_metrics(broker_factory: BrokerFactory, tool: Tool) -> None:
    port = free_port()
    b = broker_factory({"metrics.listen": f"127.0.0.1:{port}"})
    create_topic(b.bootstrap, "java-telemetry")
    tool(
        CLIENT_METRICS_COMMAND,
        "--bootstrap-server",
        b.bootstrap,
        "--alter",
        "--name",
        "java",
        "--metrics",
        "*",
        "--interval",
        "1000",
        "--match",
        "client_software_name=apache-kafka-java",
    )
    # 5 s of producing at 40 records/s: a few pushes at 1 s intervals, then the terminating one
    tool(
        "kafka-producer-perf-test",
        "--topic",
        "java-telemetry",
        "--num-records",
        "200",
        "--throughput",
        "40",
        "--record-size",
        "100",
        "--producer-props",
        f"bootstrap.servers={b.bootstrap}",
        "client.id=java-perf",
    )
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    pushed = [
        s
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name.startswith("kafka_client_") and s.labels.get("client_id") == "java-perf"
    ]
    assert pushed, "no metrics pushed by the Java producer"
    assert {s.labels["client_software_name"] for s in pushed} == {"apache-kafka-java"}
    assert any(s.name.startswith("kafka_client_org_apache_kafka_producer_") for s in pushed)
