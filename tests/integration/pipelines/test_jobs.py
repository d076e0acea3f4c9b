"""The Spark jobs against the real store, with one local SparkSession."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from pipelines import jobs
from tests.support.brokers import BrokerFactory, quiet_logger
from tests.support.history import T0
from tests.support.pipelines import (
    MIN,
    cfg_for,
    minute_events,
    produce,
    results,
    stop_all,
    store,
    wait_running,
    windows,
    wstart,
)

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def test_restarted_streaming_query_emits_each_window_exactly_once(
    spark: Any, broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    b = store(broker_factory)
    cfg = cfg_for(b, tmp_path)
    produce(b.bootstrap, minute_events(0, 4))
    qs = jobs.start_aggregates(spark, cfg)
    try:
        # watermark = 4:50 - 1 min: windows 0..2 are final
        wait_running(
            qs, lambda: {("a", wstart(m)) for m in range(3)} <= set(windows(b.bootstrap)), "the first windows"
        )
    finally:
        stop_all(qs)
    produce(b.bootstrap, minute_events(5, 9), seq0=100)
    qs = jobs.start_aggregates(spark, cfg)  # same checkpoint: resumes after the last offsets
    try:
        wait_running(
            qs,
            lambda: {(s, wstart(m)) for s in "ab" for m in range(8)} <= set(windows(b.bootstrap)),
            "windows after the restart",
        )
    finally:
        stop_all(qs)
    got = windows(b.bootstrap)
    assert all(n == 1 for n in got.values()), {k: n for k, n in got.items() if n > 1}
    assert all(r["volume"] == 3 for r in results(b.bootstrap, "traffic_aggregates"))
    parquet = spark.read.parquet(str(tmp_path / "out" / "aggregates"))
    assert parquet.count() == parquet.select("segment_id", "window_start").distinct().count()


def test_late_events_within_the_watermark_count_and_later_ones_do_not(
    spark: Any, broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    b = store(broker_factory)
    cfg = cfg_for(b, tmp_path)
    produce(b.bootstrap, minute_events(0, 4))
    qs = jobs.start_aggregates(spark, cfg)
    try:
        wait_running(qs, lambda: ("a", wstart(2)) in windows(b.bootstrap), "windows 0..2")
        # the watermark is now 3:50: 4:10 is late but within it, 1:30 is beyond it (window 1 is
        # final); 9:00 then moves the watermark past window 4. Spark filters a micro-batch with
        # the watermark of the previous one, so the three may arrive together.
        produce(
            b.bootstrap,
            [
                ("a", 99.0, T0 + 4 * MIN + 10_000),
                ("a", 99.0, T0 + 1 * MIN + 30_000),
                ("a", 30.0, T0 + 9 * MIN),
            ],
            seq0=500,
        )
        wait_running(qs, lambda: ("a", wstart(4)) in windows(b.bootstrap), "window 4")
    finally:
        stop_all(qs)
    rows = {(r["segment_id"], r["window_start"]): r for r in results(b.bootstrap, "traffic_aggregates")}
    assert rows[("a", wstart(4))]["volume"] == 4, "a late event within the watermark must be counted"
    assert rows[("a", wstart(1))]["volume"] == 3, (
        "an event beyond the watermark must not change a final window"
    )
    assert Counter(k for k in windows(b.bootstrap)).most_common(1)[0][1] == 1


def test_correlation_over_a_simulated_day_recovers_the_configured_weather_effect(
    spark: Any, broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    from sensors.fleet import SensorFleet
    from sensors.model import ModelConfig, WeatherEffect
    from sensors.publish import KafkaSink

    b = store(broker_factory)
    effect = WeatherEffect(rain_speed_factor=0.85, heavy_rain_speed_factor=0.72, fog_speed_factor=0.90)
    fleet = SensorFleet(116, ModelConfig(seed=5, rain_share=0.4, volume_scale=0.3, effect=effect))
    sink = KafkaSink(b.bootstrap)
    fleet.run(sink, T0 - 8 * 3_600_000, duration_s=86_400, speed=0)  # a whole day, midnight to midnight
    assert sink.flush(60) == 0 and sink.errors == 0
    cfg = cfg_for(b, tmp_path)
    summary = jobs.run_batch(spark, cfg, "correlation")
    eff = summary["effects"].set_index(["segment_id", "condition"])
    # stated tolerance: the regression estimate within ±0.03 of the configured factor
    assert eff.loc[("*", "rain")].ols_factor == pytest.approx(effect.rain_speed_factor, abs=0.03)
    assert eff.loc[("*", "heavy_rain")].ols_factor == pytest.approx(effect.heavy_rain_speed_factor, abs=0.03)
    assert eff.loc[("*", "fog")].ols_factor == pytest.approx(effect.fog_speed_factor, abs=0.04)
    published = {(r["segment_id"], r["condition"]) for r in results(b.bootstrap, "weather_effects")}
    assert {("*", "rain"), ("*", "heavy_rain")} <= published


def weather_events(first: int, last: int, condition: str = "rain") -> list[dict[str, Any]]:
    return [
        {
            "type": "weather",
            "sensor_id": "wx-fidi",
            "seq": m,
            "event_time": T0 + m * MIN,
            "station": "wx-fidi",
            "condition": condition,
            "precipitation_mm_h": 4.0,
            "visibility_m": 3000.0,
        }
        for m in range(first, last + 1)
    ]


def produce_weather(bootstrap: str, events: list[dict[str, Any]]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "logger": quiet_logger()})
    for e in events:
        p.produce(jobs.t("weather_conditions"), key=b"wx-fidi", value=json.dumps(e).encode())
    assert p.flush(30) == 0


def test_streaming_correlation_joins_each_window_once_with_its_weather_across_a_restart(
    spark: Any, broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    b = store(broker_factory)
    cfg = cfg_for(b, tmp_path)
    seg = "market-st-00"  # its nearest station is wx-fidi

    def seg_events(first: int, last: int) -> list[tuple[str, float, int]]:
        return [(seg, 30.0 + k, T0 + m * MIN + k * 10_000) for m in range(first, last + 1) for k in range(3)]

    def joined() -> Counter[str]:
        return Counter(r["window_start"] for r in results(b.bootstrap, "traffic_weather"))

    produce(b.bootstrap, seg_events(0, 4))
    produce_weather(b.bootstrap, weather_events(0, 4))
    qs = jobs.start_correlation(spark, cfg)
    try:
        wait_running(qs, lambda: wstart(2) in joined(), "joined windows 0..2")
    finally:
        stop_all(qs)
    produce(b.bootstrap, seg_events(5, 9), seq0=100)
    produce_weather(b.bootstrap, weather_events(5, 9, condition="fog"))
    qs = jobs.start_correlation(spark, cfg)
    try:
        wait_running(qs, lambda: wstart(7) in joined(), "windows after restart")
    finally:
        stop_all(qs)
    rows = results(b.bootstrap, "traffic_weather")
    got = Counter(r["window_start"] for r in rows)
    assert set(got) == {wstart(m) for m in range(8)} and all(n == 1 for n in got.values()), got
    by_start = {r["window_start"]: r for r in rows}
    assert by_start[wstart(1)]["volume"] == 3 and by_start[wstart(1)]["mean_speed_kmh"] == 31.0
    assert by_start[wstart(1)]["condition"] == "rain" and by_start[wstart(6)]["condition"] == "fog"
    assert by_start[wstart(6)]["station"] == "wx-fidi" and by_start[wstart(6)]["precipitation_mm_h"] == 4.0


def flaky_writer(spark: Any, tmp_path: Path, fail: Callable[[int], str | None], seen: list[int]) -> Any:
    """A rate-source query whose sink raises ``fail(batch_id)``'s message when it returns one."""

    def sink(_df: Any, batch_id: int) -> None:
        why = fail(batch_id)
        if why is not None:
            raise RuntimeError(why)
        seen.append(batch_id)

    return (
        spark.readStream.format("rate")
        .option("rowsPerSecond", 5)
        .load()
        .writeStream.foreachBatch(sink)
        .trigger(processingTime="0.2 seconds")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .queryName("flaky")
    )


def test_a_transient_start_failure_restarts_the_query_from_its_checkpoint(spark: Any, tmp_path: Path) -> None:
    failed: list[int] = []
    seen: list[int] = []

    def fail_once(batch_id: int) -> str | None:
        if failed:
            return None
        failed.append(batch_id)
        return "Python worker failed to connect back."  # Spark's words (PythonWorkerFactory)

    qs = [jobs._start(flaky_writer(spark, tmp_path, fail_once, seen))]
    first = qs[0].runId
    try:
        wait_running(qs, lambda: len(seen) >= 2, "batches after the restart", timeout=60)
    finally:
        stop_all(qs)
    assert qs[0].runId != first, "the stopped query was replaced by a new run"
    assert seen[0] == failed[0], "the restarted query resumes at the batch that failed (its checkpoint)"


def test_other_failures_and_repeated_transient_ones_stop_the_pipeline(spark: Any, tmp_path: Path) -> None:
    failures: list[int] = []

    def always(why: str) -> Callable[[int], str]:
        def fail(batch_id: int) -> str:
            failures.append(batch_id)
            return why

        return fail

    qs = [jobs._start(flaky_writer(spark, tmp_path / "a", always("disk full"), []))]
    with pytest.raises(jobs.QueryStopped, match="query flaky stopped"):
        wait_running(qs, lambda: False, "the query to stop", timeout=60)
    assert len(failures) == 1, "a failure that is not a slow start is not retried"

    failures.clear()
    slow_start = always("Python worker failed to connect back.")
    qs = [jobs._start(flaky_writer(spark, tmp_path / "b", slow_start, []))]
    with pytest.raises(jobs.QueryStopped, match="query flaky stopped"):
        wait_running(qs, lambda: False, "the query to stop", timeout=120)
    assert len(failures) == 1 + jobs.MAX_RESTARTS, "a slow start is retried, a bounded number of times"
