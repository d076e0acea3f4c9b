"""The ``sftraffic`` data source with ``valueFormat=avro``: Confluent-framed Avro values of
mixed schema versions (and JSON from before a switch) read through Spark as one
column."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from deploy.local.registry import RegistryProcess
from pipelines import spark_schemas, transforms
from pipelines.source import AvroValues, SourceError
from sensors import avro
from tests.support.brokers import BrokerFactory
from tests.support.history import KEEP_TTL_MS, T0
from tests.support.pipelines import reader, topic_with

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
    vs = transforms.pruned(spark_schemas.TRAFFIC, spark_schemas.TRAFFIC_REQUIRED, ("seq",))
    df = (
        reader(spark, bootstrap, topic)
        .option("startingOffsets", "earliest")
        .option("valueFormat", "avro")
        .option("schemaRegistryUrl", registry.url)
        .option("valueAvroSchema", json.dumps(avro.TRAFFIC_V2))
        .option("valueSchema", vs.json())
        .option("valueRequired", ",".join(spark_schemas.TRAFFIC_REQUIRED))
        .load()
    )
    rows = sorted(df.select("offset", "json.*").collect(), key=lambda r: r.offset)
    assert [r.seq for r in rows] == [0, 1, 2, None, 4]
    assert [r.speed_kmh for r in rows] == [31.5, 12.0, 31.5, None, 31.5]
    assert [r._corrupt_record is None for r in rows] == [True, True, True, False, True]
    assert rows[4].segment_id == "b"


def test_avro_options_are_checked_on_the_driver() -> None:
    from pipelines.source import Options

    vs = spark_schemas.TRAFFIC.json()
    with pytest.raises(SourceError, match="schemaRegistryUrl"):
        Options.parse({"bootstrap": "x:1", "subscribe": "t", "valueFormat": "avro", "valueSchema": vs})
    with pytest.raises(SourceError, match="valueAvroSchema"):
        AvroValues(vs, "http://127.0.0.1:1", reader='{"type": "nope"}')
    with pytest.raises(SourceError, match="schemaRegistryUser and schemaRegistryPassword go together"):
        Options.parse({"bootstrap": "x:1", "subscribe": "t", "schemaRegistryUser": "spark"})


def test_a_registry_wanting_credentials_gets_them_from_the_options(
    spark: Any, broker_factory: BrokerFactory, tmp_path: Any
) -> None:
    """schemaRegistryUser/schemaRegistryPassword (options Spark redacts): the writers' schemas
    are fetched with them; without them the query fails with one line saying which options."""
    from registry.auth import user_entry

    b = broker_factory()
    auth = tmp_path / "auth.json"
    users = [user_entry("fleet", "f-pw"), user_entry("spark", "s-pw")]
    may = [{"username": "fleet", "operation": "Write", "resource": ".*"}]
    may.append({"username": "spark", "operation": "Read", "resource": "Subject:traffic"})
    auth.write_text(json.dumps({"users": users, "permissions": may}))
    registry = RegistryProcess(b.bootstrap, extra_args=["--auth-file", str(auth)]).start(timeout=60)
    try:
        topic = "traffic_monitoring.traffic"
        url = registry.url.replace("http://", "http://fleet:f-pw@")  # type: ignore[attr-defined]
        topic_with(
            b.bootstrap, topic, [avro.AvroEncoder(url, schemas={topic: avro.TRAFFIC}).encode(topic, EVENT)]
        )
        vs = transforms.pruned(spark_schemas.TRAFFIC, spark_schemas.TRAFFIC_REQUIRED, ("seq",))

        def read(*creds: str) -> Any:
            r = (
                reader(spark, b.bootstrap, topic)
                .option("startingOffsets", "earliest")
                .option("valueFormat", "avro")
                .option("schemaRegistryUrl", registry.url)  # type: ignore[attr-defined]
                .option("valueSchema", vs.json())
            )
            if creds:
                r = r.option("schemaRegistryUser", creds[0]).option("schemaRegistryPassword", creds[1])
            return r.load().select("json.*").collect()

        assert [row.speed_kmh for row in read("spark", "s-pw")] == [31.5]
        with pytest.raises(Exception, match=r"401 Unauthorized reading schema \d+ .*schemaRegistryPassword"):
            read()
    finally:
        registry.stop()


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
