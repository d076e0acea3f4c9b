"""``python -m load.bench_spark_source --quick``: both sources read the same backlog, alternating,
and the JSON holds every run's figures, the medians and the ratio.

Timing goals are not asserted (the machine is shared); only that each figure was measured.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.spark]

ROOT = Path(__file__).resolve().parents[2]


# slow: a benchmark's smoke run (Apache Kafka / Spark started), in `./run soak`, not the
# 30-minute suite; the benchmark's own parsing and options are tested here without it
@pytest.mark.slow
def test_quick_run_alternates_the_sources_and_reports_the_ratio(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, "-m", "load.bench_spark_source", "--quick", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=420,  # about 2 minutes on an idle 2-core machine; Spark's warm-up varies with load
        check=False,
    )
    assert out.exists(), f"no JSON (exit {proc.returncode}):\n{proc.stderr[-4000:]}"
    doc = json.loads(out.read_text())
    assert doc["errors"] == [] and proc.returncode == 0, (doc["errors"], proc.stderr[-4000:])
    assert doc["benchmark"] == "spark_source" and doc["config"]["mode"] == "quick"
    assert doc["store"]["store"] == "sftraffic (ours)" and doc["spark_version"].startswith("4.")
    assert doc["backlog"]["by_topic"]["traffic"] >= doc["config"]["events"]
    assert [(r["rep"], r["source"]) for r in doc["runs"]] == [
        (1, "python"),
        (1, "jvm"),
        (2, "python"),
        (2, "jvm"),
    ]
    for r in doc["runs"]:
        assert r["sustained_events_per_s"] > 0 and r["overall_events_per_s"] > 0, r
        assert r["micro_batches"] >= 2 and r["cpu"]["cpu_s"]["spark_jvm"] > 0
    for label in ("python", "jvm"):
        s = doc["sources"][label]["sustained_events_per_s"]
        assert s["n"] == 2 and s["min"] <= s["median"] <= s["max"]
    assert doc["ratio_python_over_jvm"] > 0 and all(x > 0 for x in doc["ratio_by_rep"])
    assert doc["goals"][0]["value"] == doc["ratio_python_over_jvm"] and doc["goals"][0]["target"] == 1.0
    assert "ratio_python_over_jvm" in proc.stdout and "goal:" in proc.stdout


def test_options_are_taken() -> None:
    from load.scenarios import parse_args

    cfg = parse_args("spark-source", []).cfg
    assert (cfg.events, cfg.reps, cfg.store, cfg.mode) == (12_000_000, 2, "ours", "full")
    args = ["--quick", "--events", "500", "--store", "kafka", "--reps", "3", "--py-spy"]
    cfg = parse_args("spark-source", args).cfg
    assert (cfg.events, cfg.reps, cfg.store, cfg.py_spy, cfg.mode) == (500, 3, "kafka", True, "quick")
    assert cfg.pipeline("kafka").source == "kafka" and cfg.pipeline("kafka").stream_events == 500
    with pytest.raises(SystemExit):
        parse_args("spark-source", ["--store", "redpanda"])
