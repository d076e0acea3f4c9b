"""The application on Avro: fleet and gateway write Confluent's wire format with the
schemas of sensors/avro.py registered in sftraffic registry; Confluent's deserializer reads it;
schema evolution (v1 and v2 producers side by side, old and new readers, an incompatible
v3 refused naming its field)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from deploy.local.mosquitto import MosquittoProcess
from deploy.local.registry import RegistryProcess
from sensors import avro, layout
from sensors.fleet import SensorFleet
from sensors.model import ModelConfig
from sensors.publish import KafkaSink, MqttSink
from testing import wait_for
from tests.support.brokers import quiet_logger
from tests.support.gateway import GatewayProc, event

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def registry(broker: Any) -> Iterator[RegistryProcess]:
    layout.ensure_layout(broker.bootstrap, partitions=2)
    r = RegistryProcess(broker.bootstrap).start(timeout=60)
    yield r  # type: ignore[misc]
    r.stop()


def read_all(bootstrap: str, topic: str) -> list[Any]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "avro-check", "logger": quiet_logger()})
    try:
        parts = c.list_topics(topic, timeout=10).topics[topic].partitions
        ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in parts}
        c.assign([TopicPartition(topic, p, 0) for p in parts])
        out: list[Any] = []
        deadline = time.monotonic() + 30
        while len(out) < sum(ends.values()) and time.monotonic() < deadline:
            out += [m for m in c.consume(1000, timeout=0.5) if m.error() is None]
        return out
    finally:
        c.close()


def fleet_events(n_ticks: int = 20) -> list[tuple[str, str, dict[str, Any], int]]:
    f = SensorFleet(200, ModelConfig(seed=7))
    t = int(time.time() * 1000) // 60_000 * 60_000 - 3_600_000
    return [e for i in range(n_ticks) for e in f.tick(t + i * 1000)]


def plain(ev: dict[str, Any]) -> dict[str, Any]:
    return {k: (float(v) if k == "visibility_m" else v) for k, v in ev.items() if v is not None}


def test_fleet_events_in_avro_read_by_confluents_deserializer(broker: Any, registry: RegistryProcess) -> None:
    events = fleet_events()
    sink = KafkaSink(broker.bootstrap, encode=avro.AvroEncoder(registry.url).encode)
    for topic, key, ev, ts in events:
        sink.send(topic, key, ev, ts)
    assert sink.flush(30) == 0 and sink.errors == 0
    subjects = requests.get(registry.url + "/subjects", timeout=10).json()
    assert {f"{layout.topic(t)}-value" for t in ("traffic", "weather_conditions")} <= set(subjects)
    des = AvroDeserializer(SchemaRegistryClient({"url": registry.url}))
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for topic, _, ev, _ in events:
        by_topic.setdefault(topic, []).append(plain(ev))
    for topic, want in by_topic.items():
        msgs = read_all(broker.bootstrap, topic)
        got = [plain(des(m.value(), SerializationContext(topic, MessageField.VALUE))) for m in msgs]
        key = lambda e: (e["sensor_id"], e["seq"])  # noqa: E731
        assert sorted(got, key=key) == sorted(want, key=key)


def test_evolution_v1_and_v2_side_by_side(broker: Any, registry: RegistryProcess) -> None:
    topic = f"{layout.STREAM}.traffic_evolution"
    traffic = [e for _, _, e, _ in fleet_events(10) if e["type"] == "traffic"][:200]
    v1 = avro.AvroEncoder(registry.url, schemas={topic: avro.TRAFFIC})
    v2 = avro.AvroEncoder(registry.url, schemas={topic: avro.TRAFFIC_V2})
    old_producer = KafkaSink(broker.bootstrap, encode=v1.encode)
    new_producer = KafkaSink(broker.bootstrap, encode=v2.encode)
    for i, ev in enumerate(traffic):  # v1 and v2 producers side by side
        if i % 2:
            new_producer.send(topic, ev["sensor_id"], {**ev, "road_surface": "wet"}, ev["event_time"])
        else:
            old_producer.send(topic, ev["sensor_id"], ev, ev["event_time"])
    assert old_producer.flush(30) == 0 and new_producer.flush(30) == 0
    assert v1.schema_id(topic) != v2.schema_id(topic)
    msgs = read_all(broker.bootstrap, topic)
    assert len(msgs) == len(traffic)
    old = avro.AvroDecoder(registry.url, reader=avro.TRAFFIC)
    new = avro.AvroDecoder(registry.url, reader=avro.TRAFFIC_V2)
    for m in msgs:
        assert "road_surface" not in old.decode(m.value())
        assert new.decode(m.value())["road_surface"] in ("dry", "wet")
    surfaces = sorted(new.decode(m.value())["road_surface"] for m in msgs)
    assert (surfaces.count("dry"), surfaces.count("wet")) == ((len(traffic) + 1) // 2, len(traffic) // 2)
    # v3: a required field without a default is refused, naming it
    v3 = {**avro.TRAFFIC_V2, "fields": [*avro.TRAFFIC_V2["fields"], {"name": "plate", "type": "string"}]}
    r = requests.post(
        f"{registry.url}/subjects/{topic}-value/versions",
        data=json.dumps({"schema": json.dumps(v3)}),
        headers={"Content-Type": avro.CONTENT_TYPE},
        timeout=10,
    )
    assert r.status_code == 409 and "plate" in r.json()["message"]


def test_gateway_converts_device_json_to_avro(broker: Any, registry: RegistryProcess, tmp_path: Path) -> None:
    mqtt = MosquittoProcess(tmp_path / "mosquitto").start()
    gw = GatewayProc(
        broker.bootstrap,
        mqtt.address,
        tmp_path,
        gid="gw-avro",
        extra=("--format", "avro", "--registry", registry.url),
    ).start()
    try:
        topic = layout.topic("infrastructure")
        before = len(read_all(broker.bootstrap, topic))
        sink = MqttSink("127.0.0.1", mqtt.port, connections=1, window=100, client_prefix="avro-dev")
        t0 = int(time.time() * 1000)
        sent = [event("infrastructure", f"in-{i}", 0, t0 + i) for i in range(50)]
        for ev in sent:
            sink.send(topic, ev["sensor_id"], ev, 0)
        assert sink.flush(30) == 0
        sink.close()
        wait_for(lambda: len(read_all(broker.bootstrap, topic)) >= before + 50, timeout=30, what="50 events")
        dec = avro.AvroDecoder(registry.url)
        got = [plain(dec.decode(m.value())) for m in read_all(broker.bootstrap, topic)]
        got = [e for e in got if e["sensor_id"].startswith("in-")]
        assert sorted(got, key=lambda e: e["sensor_id"]) == sorted(sent, key=lambda e: e["sensor_id"])
    finally:
        gw.stop()
        mqtt.stop()


def test_dashboard_reads_avro_events(registry: RegistryProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    from dashboard import data

    monkeypatch.setenv("SFTRAFFIC_REGISTRY", registry.url)
    monkeypatch.setattr(data, "_avro", [])
    d = data.DashboardData("127.0.0.1:1")
    topic = layout.topic("traffic")
    ev = next(e for _, _, e, _ in fleet_events(5) if e["type"] == "traffic")
    d.ingest(topic, ev["sensor_id"].encode(), avro.AvroEncoder(registry.url).encode(topic, ev))
    d.ingest(topic, b"x", b"\x00\x00\x00\x7f\xffdamaged")  # skipped, not raised
    assert d.events_seen == 1 and d.newest_event_ms == ev["event_time"]
    assert d.live[ev["segment_id"]][1:] == [1, ev["speed_kmh"]]


def test_faust_codec_reads_avro_and_json(registry: RegistryProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    from pipelines.faust_app import EventCodec, apply_event

    monkeypatch.setenv("SFTRAFFIC_REGISTRY", registry.url)
    monkeypatch.setattr(EventCodec, "decoder", None)
    codec = EventCodec()
    topic = layout.topic("traffic")
    ev = next(e for _, _, e, _ in fleet_events(5) if e["type"] == "traffic")
    from_avro = codec.loads(avro.AvroEncoder(registry.url).encode(topic, ev))
    assert plain(from_avro) == plain(ev) == codec.loads(json.dumps(ev).encode())
    assert json.loads(codec.dumps(from_avro)) == from_avro  # the repartition topic carries JSON
    assert apply_event({}, from_avro) is not None
