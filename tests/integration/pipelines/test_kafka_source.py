"""``--source kafka``: Spark's own Kafka connector (the JVM jars of ``deploy/spark``) reading
from and writing to the store, against the same jobs and expectations as our Python source.

The session fixture carries the connector (``tests/integration/pipelines/conftest.py``); where
Maven cannot resolve it, ``kafka_connector`` fails these tests with the command to run.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from pipelines import jobs, transforms
from sensors.layout import ensure_layout
from testing import BrokerProcess, wait_for
from tests.support.brokers import EXTERNAL_BOOTSTRAP, BrokerFactory, empty_cluster, quiet_logger
from tests.support.history import KEEP_TTL_MS, T0
from tests.support.pipelines import cfg_for, minute_events, produce, results, store, windows, wstart

pytestmark = [pytest.mark.spark, pytest.mark.integration]

RAW = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
BAD_VALUES = [
    b"not json",
    b"42",
    json.dumps({"sensor_id": "s-a", "event_time": T0, "segment_id": "a", "vehicle_class": "car"}).encode(),
    json.dumps(
        {"sensor_id": "s-a", "event_time": T0, "segment_id": "a", "vehicle_class": "car", "speed_kmh": "fast"}
    ).encode(),
]


def with_source(cfg: jobs.JobConfig, source: str) -> jobs.JobConfig:
    return dataclasses.replace(cfg, source=source)


def produce_bad(bootstrap: str) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "logger": quiet_logger()})
    for v in BAD_VALUES:
        p.produce(jobs.t("traffic"), key=b"s-a", value=v, timestamp=T0)
    assert p.flush(30) == 0


def dead_letters(bootstrap: str) -> list[tuple[str, str, dict[str, bytes]]]:
    """(key, value, headers) of the dead-letter topic."""
    topic = jobs.t("dead_letter")
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "dl", "logger": quiet_logger()})
    try:
        parts = list(c.list_topics(topic, timeout=10).topics[topic].partitions)
        total = sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in parts)
        c.assign([TopicPartition(topic, p, 0) for p in parts])
        out: list[tuple[str, str, dict[str, bytes]]] = []
        deadline = time.monotonic() + 20
        while len(out) < total and time.monotonic() < deadline:
            for m in c.consume(1000, timeout=0.3):
                if m.error() is None:
                    headers = dict(cast(list[tuple[str, bytes]], m.headers() or []))
                    out.append(((m.key() or b"").decode(), (m.value() or b"").decode(), headers))
        return out
    finally:
        c.close()


def test_the_connector_reads_the_records_and_events_the_python_source_reads(
    kafka_connector: Any, broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    spark = kafka_connector
    b = store(broker_factory)
    produce(b.bootstrap, minute_events(0, 2))
    produce_bad(b.bootstrap)
    cfg = cfg_for(b, tmp_path)
    raw = {
        src: sorted(
            jobs._read(spark, with_source(cfg, src), jobs.t("traffic"), batch=True).select(*RAW).collect()
        )
        for src in jobs.SOURCES
    }
    assert len(raw["kafka"]) == 18 + len(BAD_VALUES)
    assert raw["kafka"] == raw["sftraffic"]
    parsed: dict[str, tuple[list[Any], list[Any]]] = {}
    for src in jobs.SOURCES:
        good, bad = transforms.split_json(jobs._events(spark, with_source(cfg, src), "traffic", batch=True))
        parsed[src] = (
            sorted(good.collect()),
            sorted(bad.select("offset", "raw", "reason").collect()),
        )
    assert parsed["kafka"] == parsed["sftraffic"]
    reasons = Counter(r.reason for r in parsed["kafka"][1])
    assert reasons == {"not a JSON object": 2, "missing or invalid speed_kmh": 2}, reasons


def test_streaming_aggregates_through_the_connector_and_dead_letters_written_by_it(
    kafka_connector: Any, broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    spark = kafka_connector
    b = store(broker_factory)
    cfg = with_source(cfg_for(b, tmp_path), "kafka")
    produce(b.bootstrap, minute_events(0, 4))
    produce_bad(b.bootstrap)
    qs = jobs.start_aggregates(spark, cfg)
    try:
        wait_for(
            lambda: {(s, wstart(m)) for s in "ab" for m in range(3)} <= set(windows(b.bootstrap)),
            timeout=120,
            interval=0.5,
            what="windows 0..2 read through the connector",
        )
        wait_for(
            lambda: len(dead_letters(b.bootstrap)) >= len(BAD_VALUES),
            timeout=60,
            interval=0.5,
            what="dead letters written by the connector",
        )
    finally:
        jobs.stop_gracefully(qs)
    got = windows(b.bootstrap)
    assert all(n == 1 for n in got.values()), got
    assert all(r["volume"] == 3 for r in results(b.bootstrap, "traffic_aggregates"))
    dl = dead_letters(b.bootstrap)
    assert sorted(v.encode() for _k, v, _h in dl) == sorted(BAD_VALUES)
    assert {h["reason"] for _k, _v, h in dl} == {b"not a JSON object", b"missing or invalid speed_kmh"}
    assert all(k.startswith(jobs.t("traffic") + ":") for k, _v, _h in dl)


@pytest.fixture(scope="module")
def simulated_day(broker: BrokerProcess) -> Iterator[tuple[BrokerProcess, Any]]:
    """A whole simulated day of traffic and weather (no infrastructure assets) in a store."""
    from sensors.fleet import SensorFleet
    from sensors.model import ModelConfig, WeatherEffect
    from sensors.publish import KafkaSink

    if EXTERNAL_BOOTSTRAP:  # a shared Kafka still holds the first test's bad records
        empty_cluster(EXTERNAL_BOOTSTRAP)
    ensure_layout(
        broker.bootstrap,
        partitions=2,
        ttl_ms=KEEP_TTL_MS,
        extra_topics={jobs.t(n): {} for n in jobs.RESULT_TOPICS if n != "dead_letter"},
    )
    effect = WeatherEffect(rain_speed_factor=0.85, heavy_rain_speed_factor=0.72, fog_speed_factor=0.90)
    cfg = ModelConfig(seed=5, rain_share=0.4, volume_scale=0.3, effect=effect)
    fleet = SensorFleet(116, cfg, assets=False)
    sink = KafkaSink(broker.bootstrap)
    fleet.run(sink, T0 - 8 * 3_600_000, duration_s=86_400, speed=0)  # midnight to midnight
    assert sink.flush(60) == 0 and sink.errors == 0
    yield broker, effect


def test_correlation_through_the_connector_recovers_the_configured_weather_effect(
    kafka_connector: Any, simulated_day: tuple[BrokerProcess, Any], tmp_path: Path
) -> None:
    """With the tolerance of test_jobs' Python-source test (the first test here shows both
    sources yield the same events, so the estimates are the same; one run keeps this < 60 s)."""
    spark = kafka_connector
    b, effect = simulated_day
    out = jobs.run_batch(spark, with_source(cfg_for(b, tmp_path), "kafka"), "correlation")
    assert out["traffic_weather"] > 0 and out["dead_letters"] == 0
    eff = out["effects"].set_index(["segment_id", "condition"])
    # the regression estimate within ±0.03 of the configured factor (fog ±0.04)
    assert eff.loc[("*", "rain")].ols_factor == pytest.approx(effect.rain_speed_factor, abs=0.03)
    assert eff.loc[("*", "heavy_rain")].ols_factor == pytest.approx(effect.heavy_rain_speed_factor, abs=0.03)
    assert eff.loc[("*", "fog")].ols_factor == pytest.approx(effect.fog_speed_factor, abs=0.04)
    published = {(r["segment_id"], r["condition"]) for r in results(b.bootstrap, "weather_effects")}
    assert {("*", "rain"), ("*", "heavy_rain")} <= published


def test_pipeline_cli_takes_the_source() -> None:
    import argparse

    p = argparse.ArgumentParser()
    jobs.add_parser(p.add_subparsers())
    assert p.parse_args(["pipeline", "correlation"]).source == "sftraffic"
    assert p.parse_args(["pipeline", "correlation", "--source", "kafka"]).source == "kafka"
    with pytest.raises(SystemExit):
        p.parse_args(["pipeline", "correlation", "--source", "jdbc"])


def test_specific_starting_offsets_are_narrowed_to_each_readers_topic() -> None:
    """Spark's connector refuses offsets of partitions it does not read ("you must specify all
    TopicPartitions"): the correlation job's two readers each get their own topic's."""
    both = json.dumps({"a": {"0": 5, "1": 7}, "b": {"0": 2}})
    assert json.loads(jobs._offsets_for(both, "a")) == {"a": {"0": 5, "1": 7}}
    assert json.loads(jobs._offsets_for(both, "b")) == {"b": {"0": 2}}
    assert jobs._offsets_for(both, "c") == "earliest"
    assert jobs._offsets_for("latest", "a") == "latest"
