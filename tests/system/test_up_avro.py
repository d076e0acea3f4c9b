"""``sftraffic up --format avro``: the registry starts, the schemas are registered, the fleet and
the gateway write Avro (an MQTT device's JSON reading converted), the dashboard shows it, and
Ctrl-C stops everything."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import requests
from confluent_kafka import Consumer, TopicPartition

from sensors import avro, layout
from testing import free_port, wait_for
from tests.support.brokers import quiet_logger
from tests.support.up import get_json, start_up, stop_and_check_nothing_left, trace_mqtt_reading, up_cmd

pytestmark = pytest.mark.system


def test_up_format_avro(tmp_path: Path) -> None:
    ports = {k: free_port() for k in ("store", "metrics", "mqtt", "dash", "registry")}
    cmd = up_cmd(tmp_path, ports["store"], ports, "--no-spark", "--format", "avro")
    cmd += ["--registry-port", str(ports["registry"])]
    log = tmp_path / "up.out"
    proc = start_up(cmd, log)
    dash, registry = f"http://127.0.0.1:{ports['dash']}", f"http://127.0.0.1:{ports['registry']}"
    pids: dict[str, int] = {}
    try:
        wait_for(
            lambda: "press Ctrl-C" in log.read_text(), timeout=180, interval=0.5, what="every part ready"
        )
        pids = json.loads((tmp_path / "up" / "up.json").read_text())
        assert "registry" in pids
        subjects = requests.get(f"{registry}/subjects", timeout=10).json()
        assert {f"{layout.topic(t)}-value" for t in avro.SCHEMAS} == set(subjects)
        trace_mqtt_reading(ports["mqtt"], dash)  # JSON over MQTT, Avro in the store, on the dashboard
        assert get_json(f"{dash}/api/health")[1]["store_ok"] is True
        c = Consumer(
            {"bootstrap.servers": f"127.0.0.1:{ports['store']}", "group.id": "t", "logger": quiet_logger()}
        )
        try:
            topic = layout.topic("traffic")
            c.assign(
                [
                    TopicPartition(topic, p, 0)
                    for p in c.list_topics(topic, timeout=10).topics[topic].partitions
                ]
            )
            msgs = [m for m in c.consume(500, timeout=10) if m.error() is None]
        finally:
            c.close()
        dec = avro.AvroDecoder(registry)
        assert msgs and all(m.value()[:1] == b"\x00" for m in msgs)
        senders = {dec.decode(m.value())["sensor_id"].startswith("mqtt-") for m in msgs}
        assert False in senders  # the direct fleet's events (the devices' are there too, later)
    finally:
        stop_and_check_nothing_left(proc, log, pids, tmp_path / "up")
