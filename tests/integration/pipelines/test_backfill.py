"""The backfill's batch jobs and the streaming jobs after them: each window once,
none missing at the boundary, and the effects of a replayed showery spell recovered; a
backfill SIGKILLed before its commit and run again emits each window once (its
results and its ledger record go out in one transaction, pipelines/sink.py)."""

from __future__ import annotations

import os
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pipelines import jobs, sink
from sensors import backfill as bf
from sensors.fleet import SensorFleet
from sensors.model import WeatherEffect
from sensors.publish import KafkaSink
from tests.support.brokers import BrokerFactory
from tests.support.history import T0
from tests.support.pipelines import (
    MIN,
    TOLERANCE,
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


def test_backfill_then_streaming_emits_every_window_once_across_the_boundary(
    spark: Any, broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    """Minutes 0-4 are the backfill, live starts at minute 5. Live events are written before,
    between and after the backfill's (the topics interleave them, as a gateway's late
    deliveries would); the split is by event time, so neither side takes the other's."""
    b = store(broker_factory)
    cfg = cfg_for(b, tmp_path)
    until = T0 + 5 * MIN
    produce(b.bootstrap, minute_events(5, 5), seq0=1000)  # live, before the replay was stored
    produce(b.bootstrap, minute_events(0, 4))
    summary = jobs.run_backfill(spark, cfg, T0, until)
    assert summary["aggregates"] == 10 and "dead_letters" not in summary
    assert set(windows(b.bootstrap)) == {(s, wstart(m)) for s in "ab" for m in range(5)}

    produce(b.bootstrap, minute_events(6, 9), seq0=2000)
    cfg.event_from_ms = until  # what `sftraffic pipeline all --backfill FROM,UNTIL` streams with
    qs = jobs.start_aggregates(spark, cfg)
    try:
        wait_running(
            qs,
            lambda: {(s, wstart(m)) for s in "ab" for m in range(8)} <= set(windows(b.bootstrap)),
            "the live windows",
        )
    finally:
        stop_all(qs)
    got = windows(b.bootstrap)
    assert all(n == 1 for n in got.values()), {k: n for k, n in got.items() if n > 1}
    assert set(got) >= {(s, wstart(m)) for s in "ab" for m in range(8)}
    assert all(r["volume"] == 3 for r in results(b.bootstrap, "traffic_aggregates"))

    again = jobs.run_backfill(spark, cfg, T0, until)  # a restarted pipeline: the marker holds
    assert again.get("skipped") is True
    assert windows(b.bootstrap) == got


def test_a_replayed_showery_spell_recovers_the_configured_effects(
    spark: Any, broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    """Three hours of the backfill fleet (1 in 40 of 10,000 sensors, 5 s ticks) through the
    store, then the backfill's batch jobs: estimates per regime with a CI around the configured
    factor, windows for every segment, congestion alerts, all on the result topics."""
    b = store(broker_factory)
    plan = bf.Backfill.ending_now(3 * 3_600_000, sample=40, now_ms=T0 + 8 * 3_600_000)
    fleet = SensorFleet(10_000, plan.model_config(), shard=(0, plan.sample), assets=False)
    sink = KafkaSink(b.bootstrap)
    stats = fleet.run(sink, plan.from_ms, plan.duration_ms / 1000, speed=0, tick_ms=5000)
    assert sink.flush(60) == 0 and sink.errors == 0
    assert stats.events > 200_000

    summary = jobs.run_backfill(spark, cfg_for(b, tmp_path), plan.from_ms, plan.until_ms)
    effect = WeatherEffect()
    truth = {"fog": effect.fog_speed_factor, "rain": effect.rain_speed_factor}
    truth["heavy_rain"] = effect.heavy_rain_speed_factor
    est = {r["condition"]: r for r in summary["effects"]}
    assert set(est) == set(truth)
    for regime, factor in truth.items():
        r = est[regime]
        assert r["ols_factor"] == pytest.approx(factor, abs=TOLERANCE[regime]), (regime, r)
        assert r["ols_ci_low"] < r["ols_factor"] < r["ols_ci_high"]
    # 116 segments x 180 minutes, but for a quiet minute on a side street (1 in 40 sensors)
    assert 0.99 * 116 * 180 <= summary["aggregates"] == summary["traffic_weather"] <= 116 * 180
    assert summary["alerts"] > 0
    published = results(b.bootstrap, "traffic_aggregates")
    assert len(published) == summary["aggregates"]
    assert len({r["segment_id"] for r in published}) == 116
    assert Counter(r["condition"] for r in results(b.bootstrap, "traffic_weather"))["fog"] > 0
    assert {(r["segment_id"], r["condition"]) for r in results(b.bootstrap, "weather_effects")} >= {
        ("*", c) for c in truth
    }
    assert len(results(b.bootstrap, "congestion_alerts")) == summary["alerts"]


def test_a_backfill_killed_before_its_commit_emits_each_window_once_when_run_again(
    spark: Any, broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    """The backfill SIGKILLs itself once its windows, joined windows and ledger record are
    produced and acknowledged, before the commit (where an idempotent producer left them all
    visible, and a rerun wrote them again). At read_committed nothing of it is visible and no
    Parquet file is in place; the rerun writes each window once. A rerun after a commit whose
    summary file was lost writes nothing."""
    import sys

    b = store(broker_factory)
    cfg = cfg_for(b, tmp_path)
    until = T0 + 5 * MIN
    produce(b.bootstrap, minute_events(0, 4))
    cmd = [sys.executable, "-m", "tests.support.backfill_worker", b.bootstrap, cfg.checkpoint_dir]
    cmd += [cfg.output_dir, str(T0), str(until)]
    env = {**os.environ, sink.KILL_ENV: "backfill"}
    root = Path(__file__).resolve().parents[3]
    killed = subprocess.run(cmd, check=False, cwd=root, env=env, capture_output=True, text=True, timeout=240)
    assert killed.returncode == -9, killed.stderr[-3000:]
    assert windows(b.bootstrap) == {}  # produced, never committed
    assert not list(Path(cfg.output_dir).glob("aggregates/*.parquet"))  # staged only

    summary = jobs.run_backfill(spark, cfg, T0, until)
    assert summary["aggregates"] == 10
    expected = {(s, wstart(m)): 1 for s in "ab" for m in range(5)}
    assert windows(b.bootstrap) == expected
    joined = Counter((r["segment_id"], r["window_start"]) for r in results(b.bootstrap, "traffic_weather"))
    assert set(joined.values()) <= {1}
    assert spark.read.parquet(str(Path(cfg.output_dir) / "aggregates")).count() == 10

    jobs.backfill_marker(cfg).unlink()  # killed after the commit, before the summary file
    again = jobs.run_backfill(spark, cfg, T0, until)
    assert again.get("committed_before") is True and again.get("skipped") is True
    assert windows(b.bootstrap) == expected
    assert spark.read.parquet(str(Path(cfg.output_dir) / "aggregates")).count() == 10
