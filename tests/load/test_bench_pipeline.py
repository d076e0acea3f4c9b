"""``python -m load.bench_pipeline --smoke``: every phase runs and the JSON holds its figures.

Timing goals are not asserted (the machine is shared); only that each figure was measured.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sensors.layout import topic

pytestmark = [pytest.mark.integration, pytest.mark.spark]


# slow: a benchmark's smoke run (Apache Kafka / Spark started), in `./run soak`, not the
# 30-minute suite; the benchmark's own parsing and options are tested here without it
@pytest.mark.slow
def test_smoke_run_writes_positive_figures(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, "-m", "load.bench_pipeline", "--smoke", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=280,  # about a minute on an idle 2-core machine; Spark's warm-up varies with load
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    doc = json.loads(out.read_text())
    assert doc["benchmark"] == "pipeline" and doc["mode"] == "smoke" and not doc["errors"]
    assert doc["machine"]["cores"] >= 1 and "load.bench_pipeline" in doc["machine"]["command"]

    stream = doc["stream"]
    assert stream["backlog"]["input_rows"] > 0
    assert sum(b["input_rows"] for b in stream["batches"]) >= stream["backlog"]["input_rows"]
    assert stream["sustained_events_per_s"] > 0 and stream["overall_events_per_s"] > 0
    assert stream["durations"]["total_ms"]["addBatch"] > 0
    assert stream["cpu"]["cpu_total_s"] > 0

    live = doc["live"]
    assert live["fleet"]["events"] > 0 and live["batches"]["count"] > 0
    lat = live["latency"]
    assert lat["records"] > 0 and lat["windows"] > 0
    assert lat["raw_s"]["p50"] > 0 and lat["raw_s"]["p95"] >= lat["raw_s"]["p50"]
    assert lat["after_close_s"]["n"] == lat["records"]

    batch = doc["batch"]
    assert batch["input"]["stored"][topic("traffic")] > 0
    for job in batch["jobs"].values():
        assert job["wall_s"] > 0 and job["events_per_s"] > 0 and job["traffic_events"] > 0
        assert job["results"]["aggregates"] > 0

    goals = {g["goal"]: g for g in doc["goals"]}
    assert len(goals) == 3 and all(g["value"] is not None for g in goals.values())
    assert "goal:" in proc.stdout


def test_latency_is_measured_from_the_window_end_and_from_its_close() -> None:
    from load.bench_pipeline import interval_ms, latency_figures

    assert interval_ms("2 minutes") == 120_000 and interval_ms("1 second") == 1000
    end = 1_700_000_040_000 + 40_000  # a window ending 40 s after a whole minute
    rec = {"window_start_ms": end - 60_000, "window_end_ms": end, "produced_ms": end + 149_000}
    rec["visible_ms"] = end + 150_000
    agg = latency_figures([rec], interval_ms("2 minutes"), weather_gated=False)
    assert agg["raw_s"]["p50"] == 150.0 and agg["after_close_s"]["p50"] == 30.0
    assert agg["after_close_by_produce_timestamp_s"]["p50"] == 29.0
    # the join's watermark waits for the once-a-minute weather reports: close on the next minute
    corr = latency_figures([rec], interval_ms("2 minutes"), weather_gated=True)
    assert corr["after_close_s"]["p50"] == 10.0 and corr["windows"] == 1
