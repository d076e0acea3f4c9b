"""``sftraffic up`` on Apache Kafka: ``--store kafka`` starts Kafka (deploy/kafka) instead of the
embedded store, ``--external`` uses a cluster that is already running; the fleet's events and
an MQTT reading get through the gateway to Kafka and the dashboard, and Ctrl-C stops
everything that ``up`` started (the Kafka JVM too) and nothing else."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from sensors import layout
from testing import BrokerProcess, free_port, wait_for
from tests.support.brokers import EXTERNAL_BOOTSTRAP, quiet_logger
from tests.support.up import (
    free_block,
    start_up,
    stop_and_check_nothing_left,
    trace_mqtt_reading,
    up_cmd,
)

pytestmark = [pytest.mark.system, pytest.mark.kafka]


def end_offsets(bootstrap: str, name: str) -> int:
    """Records in topic ``name`` (the sum of its partitions' high watermarks)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe", "logger": quiet_logger()})
    try:
        parts = c.list_topics(name, timeout=10).topics[name].partitions
        return sum(c.get_watermark_offsets(TopicPartition(name, p), timeout=10)[1] for p in parts)
    finally:
        c.close()


def run_up(tmp_path: Path, ports: dict[str, int], *extra: str) -> tuple[Any, Path, str]:
    cmd = up_cmd(tmp_path, ports["store"], ports, "--no-spark", "--mqtt-devices", "20", *extra)
    log = tmp_path / "up.out"
    return start_up(cmd, log), log, f"http://127.0.0.1:{ports['dash']}"


def check_demo_runs(log: Path, dash: str, bootstrap: str, mqtt_port: int) -> dict[str, int]:
    wait_for(lambda: "press Ctrl-C" in log.read_text(), timeout=240, interval=0.5, what="every part ready")
    traffic = layout.topic("traffic")
    before = end_offsets(bootstrap, traffic)
    wait_for(
        lambda: end_offsets(bootstrap, traffic) > before + 100,
        timeout=60,
        interval=1,
        what="the fleet's events on Kafka",
    )
    trace_mqtt_reading(mqtt_port, dash, timeout=90)
    return json.loads((log.parent / "up" / "up.json").read_text())


@pytest.mark.skipif(bool(EXTERNAL_BOOTSTRAP), reason="starts its own Apache Kafka (one Kafka at a time)")
def test_up_store_kafka_runs_the_demo_on_apache_kafka(tmp_path: Path) -> None:
    base = free_block(1)
    ports = {"store": base, **{k: free_port() for k in ("metrics", "mqtt", "dash")}}
    proc, log, dash = run_up(tmp_path, ports, "--store", "kafka")
    pids: dict[str, int] = {}
    try:
        pids = check_demo_runs(log, dash, f"127.0.0.1:{base}", ports["mqtt"])
        assert "kafka-1" in pids and "store" not in pids
        assert "Apache Kafka (1 KRaft node) on 127.0.0.1:" in log.read_text()
        assert (tmp_path / "up" / "kafka" / "node-1" / "data" / "meta.properties").exists()
        assert "Kafka Server started" in (tmp_path / "up" / "logs" / "kafka-1.log").read_text()
    finally:
        stop_and_check_nothing_left(proc, log, pids, tmp_path / "up")
    assert "stopping kafka-1" in log.read_text()


def test_up_external_uses_a_running_cluster(tmp_path: Path) -> None:
    """``--external``: nothing of a store is started; the cluster (Kafka under test-on-kafka,
    otherwise one of our brokers standing in for "a cluster somebody runs") outlives the demo."""
    own = None if EXTERNAL_BOOTSTRAP else BrokerProcess(tmp_path / "cluster").start()
    bootstrap = EXTERNAL_BOOTSTRAP or own.bootstrap  # type: ignore[union-attr]
    ports = {k: free_port() for k in ("store", "metrics", "mqtt", "dash")}
    try:
        proc, log, dash = run_up(tmp_path, ports, "--external", bootstrap)
        pids: dict[str, int] = {}
        try:
            pids = check_demo_runs(log, dash, bootstrap, ports["mqtt"])
            assert not {"store", "kafka-1", "store-1"} & set(pids)
            assert f"the Kafka cluster at {bootstrap} (not started here)" in log.read_text()
        finally:
            stop_and_check_nothing_left(proc, log, pids, tmp_path / "up")
        assert end_offsets(bootstrap, layout.topic("traffic")) > 0  # still there, still answering
        assert own is None or own.alive()
    finally:
        if own is not None:
            own.stop()
