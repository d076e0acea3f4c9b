"""The ``sftraffic`` data source with ``valueFormat=avro``: Confluent-framed Avro values of
mixed schema versions (and JSON from before a switch) read through Spark as one column
(issue 20)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from deploy.local.registry import RegistryProcess
from pipelines import schemas, transforms
from pipelines.source import AvroValues, SourceError
from sensors import avro
from tests.conftest import BrokerFactory
from tests.pipelines.test_source import T0, reader, topic_with
from tests.support.history import KEEP_TTL_MS

pytestmark = [pytest.mark.spark, pytest.mark.integration]

EVENT = {
    "type": "traffic",
    "sensor_id": "s-1",
    "seq": 0,
    "event_time": T0,
    "segment_id": "market-st-00",
    "road": "Market St",
    "lat": 37.79,
    "lon": -122.39,
    "direction": "N",
    "lane": 1,
    "vehicle_class": "car",
    "weight_kg": 1400.0,
    "axle_count": 2,
    "axle_distances_m": [2.7],
    "speed_kmh": 31.5,
}


@pytest.fixture
def store(broker_factory: BrokerFactory) -> Iterator[tuple[str, RegistryProcess]]:
    b = broker_factory()
    r = RegistryProcess(b.bootstrap).start(timeout=60)
    yield b.bootstrap, r  # type: ignore[misc]
    r.stop()


def test_mixed_v1_v2_and_json_values_read_as_one_column(spark: Any, store: tuple[str, Any]) -> None:
    bootstrap, registry = store
    topic = "traffic_monitoring.traffic"
    v1 = avro.AvroEncoder(registry.url, schemas={topic: avro.TRAFFIC})
    v2 = avro.AvroEncoder(registry.url, schemas={topic: avro.TRAFFIC_V2})
    values = [
        v1.encode(topic, EVENT),
        v2.encode(topic, {**EVENT, "seq": 1, "speed_kmh": 12.0, "road_surface": "wet"}),
        json.dumps({**EVENT, "seq": 2}).encode(),  # written as JSON before the switch
        b"\x00\x00\x00\x03\xe7garbage",  # an id nobody registered
        v1.encode(topic, {**EVENT, "seq": 4, "segment_id": "b"}),
    ]
    topic_with(bootstrap, topic, values)
    vs = transforms.pruned(schemas.TRAFFIC, schemas.TRAFFIC_REQUIRED, ("seq",))
    df = (
        reader(spark, bootstrap, topic)
        .option("startingOffsets", "earliest")
        .option("valueFormat", "avro")
        .option("schemaRegistryUrl", registry.url)
        .option("valueAvroSchema", json.dumps(avro.TRAFFIC_V2))
        .option("valueSchema", vs.json())
        .option("valueRequired", ",".join(schemas.TRAFFIC_REQUIRED))
        .load()
    )
    rows = sorted(df.select("offset", "json.*").collect(), key=lambda r: r.offset)
    assert [r.seq for r in rows] == [0, 1, 2, None, 4]
    assert [r.speed_kmh for r in rows] == [31.5, 12.0, 31.5, None, 31.5]
    assert [r._corrupt_record is None for r in rows] == [True, True, True, False, True]
    assert rows[4].segment_id == "b"


def test_avro_options_are_checked_on_the_driver() -> None:
    vs = schemas.TRAFFIC.json()
    with pytest.raises(SourceError, match="schemaRegistryUrl"):
        from pipelines.source import Options

        Options.parse({"bootstrap": "x:1", "subscribe": "t", "valueFormat": "avro", "valueSchema": vs})
    with pytest.raises(SourceError, match="valueAvroSchema"):
        AvroValues(vs, "http://127.0.0.1:1", reader='{"type": "nope"}')


def test_batch_jobs_run_on_avro_events(spark: Any, broker_factory: BrokerFactory, tmp_path: Any) -> None:
    """The fleet's events written as Avro: the batch jobs read them (--format avro) and find the
    same windows as the events hold, with no dead letters."""
    from pipelines import jobs
    from sensors.fleet import SensorFleet
    from sensors.layout import ensure_layout
    from sensors.model import ModelConfig
    from sensors.publish import KafkaSink

    b = broker_factory()
    ensure_layout(
        b.bootstrap,
        partitions=2,
        ttl_ms=KEEP_TTL_MS,
        extra_topics={jobs.t(n): {} for n in jobs.RESULT_TOPICS if n != "dead_letter"},
    )
    registry = RegistryProcess(b.bootstrap).start(timeout=60)
    try:
        sink = KafkaSink(b.bootstrap, encode=avro.AvroEncoder(registry.url).encode)  # type: ignore[attr-defined]
        fleet = SensorFleet(100, ModelConfig(seed=3), infrastructure=False)
        segments = set()
        for i in range(180):
            for topic, key, ev, ts in fleet.tick(T0 + i * 1000):
                sink.send(topic, key, ev, ts)
                if ev["type"] == "traffic":
                    segments.add((ev["segment_id"], (ev["event_time"] - T0) // 60_000))
        assert sink.flush(30) == 0
        cfg = jobs.JobConfig(
            bootstrap=b.bootstrap,
            checkpoint_dir=str(tmp_path / "ck"),
            output_dir=str(tmp_path / "out"),
            value_format="avro",
            registry_url=registry.url,  # type: ignore[attr-defined]
        )
        out = jobs.run_batch(spark, cfg, "aggregates")
        assert out.get("dead_letters", 0) == 0, out
        assert out["aggregates"] == len(segments), out
    finally:
        registry.stop()
