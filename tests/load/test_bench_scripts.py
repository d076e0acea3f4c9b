"""The benchmark scripts run end to end in their tiny mode and write JSON with positive figures.

Timing goals are not asserted here (the machine running the tests is shared and small): only
that every figure the benchmarks report could be measured.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def run_bench(module: str, tmp_path: Path, *args: str, timeout: float = 120) -> dict[str, Any]:
    out = tmp_path / f"{module.rsplit('.', 1)[-1]}.json"
    proc = subprocess.run(
        [sys.executable, "-m", module, *args, "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    tail = f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert out.exists(), f"{module} wrote no JSON (exit {proc.returncode}):\n{tail}"
    doc: dict[str, Any] = json.loads(out.read_text())
    assert doc["errors"] == [], doc["errors"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    m = doc["machine"]
    assert m["cores"] >= 1 and m["cpu_model"] and module in m["command"]
    for g in doc["goals"]:
        assert g["measured"] is not None and g["measured"] > 0, g
        assert g["passed"] in (True, False)
    return doc


def test_bench_groups_smoke(tmp_path: Path) -> None:
    # the smallest run that still has every phase: 20k messages (a few per member and
    # partition), and a 3 s session so that the killed member is noticed sooner
    args = ("--count", "20000", "--session-timeout-ms", "3000", "--heartbeat-ms", "500")
    doc = run_bench("load.bench_groups", tmp_path, "--smoke", *args)
    assert doc["preload"]["msgs_s"] > 0
    run = doc["throughput_runs"][0]
    assert run["messages"] == doc["config"]["messages"] == 20_000 and run["msgs_s"] > 0
    assert [len(m["assignments"][0]) for m in run["members"]] == [3, 3, 3, 3]
    reb = doc["rebalance_runs"][0]
    assert reb["recovered_s"] > 0 and len(reb["victim_partitions"]) == 3
    assert reb["session_timeout_ms"] == 3000


def test_bench_fleet_smoke(tmp_path: Path) -> None:
    doc = run_bench("load.bench_fleet", tmp_path, "--smoke")
    run = doc["runs"][0]
    assert run["acknowledged"] == run["sent"] > 0
    assert run["steady_events_s"] > 0 and run["wall_events_s"] > 0


def test_bench_dashboard_smoke(tmp_path: Path) -> None:
    # each phase at its smallest: 2 markers, 2 page ticks (2 s apart), 1 isolated round
    doc = run_bench(
        "load.bench_dashboard", tmp_path, "--smoke", "--markers", "2", "--ticks", "2", "--rounds", "1"
    )
    vis = doc["visibility"]
    assert vis["seen"] == vis["markers"] == 2 and vis["p95_s"] > 0
    cb = doc["callbacks"]
    assert "map" in " ".join(cb["callbacks"])
    for mode in ("page", "isolated"):
        assert cb[mode]["calls"] > 0 and cb[mode]["errors"] == 0 and cb[mode]["p95_ms"] > 0


def test_bench_authorizer_smoke(tmp_path: Path) -> None:
    doc = run_bench("load.bench_authorizer", tmp_path, "--smoke", timeout=240)
    assert doc["in_process"]["authorize_uncached_us"] > 0 and doc["in_process"]["decision_cache_hit_us"] > 0
    assert {(r["system"], r["shape"]) for r in doc["runs"]} == {
        (s, shape) for s in ("off", "on") for shape in ("batched", "small")
    }
    assert all(r["errors"] == 0 and r["msgs_s"] > 0 for r in doc["runs"])
    assert [g["name"] for g in doc["goals"]] == [
        "broker CPU/msg on/off (batched)",
        "broker CPU/msg on/off (small)",
    ]


def test_bench_schema_validation_smoke(tmp_path: Path) -> None:
    doc = run_bench("load.bench_schema_validation", tmp_path, "--smoke", timeout=240)
    assert sorted(r["validation"] for r in doc["runs"]) == [False, True]
    assert all(r["failed"] == 0 and r["msgs_s"] > 0 for r in doc["runs"])
    assert 90 <= doc["values"]["mean_bytes"] <= 115  # ~100-byte Avro values
    ip = doc["in_process"]
    assert ip["check_records_ns_per_record_1000_on"] > 0 and ip["check_records_ns_per_record_9000_off"] > 0
    assert doc["summary"]["ratio_of_medians"] > 0
    assert [g["name"] for g in doc["goals"]] == [
        "produce msgs/s, validation on / off (ratio of medians)",
        "produce msgs/s, validation on / off (median of the pairs run back to back)",
        "leader append of 1500-record batches in process, on / off throughput",
    ]
    assert 0 < ip["append_throughput_ratio"] < 2


def test_bench_reassign_smoke(tmp_path: Path) -> None:
    # the smoke move (2 partitions x 2 MB) under a 2 MB/s throttle: 2 s instead of 4
    doc = run_bench("load.bench_reassign", tmp_path, "--smoke", "--rate", "2000000", timeout=240)
    r = doc["results"]
    assert r["measured_s"] > 0 and r["implied_s"] == pytest.approx(2.0, abs=0.1) and r["moved_mb"] == 4
    assert r["throttle"]['sftraffic_replication_throttled_bytes{side="follower"}'] >= 4_000_000
    assert [g["name"] for g in doc["goals"]] == [
        "measured / throttle-implied duration (not over)",
        "measured / throttle-implied duration (not under)",
    ]


def test_bench_share_smoke(tmp_path: Path) -> None:
    # ours alone (the ratio goals need Apache Kafka: `sftraffic bench share`): every record
    # read once by the 4 share consumers, at a measured rate
    out = tmp_path / "share.json"
    proc = subprocess.run(
        [sys.executable, "-m", "load.bench_share", "--smoke", "--peers", "none", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert out.exists(), f"no JSON (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    doc = json.loads(out.read_text())
    assert doc["errors"] == [] and proc.returncode == 0, doc["errors"]
    (row,) = doc["runs"]
    assert row["system"] == "ours" and row["distinct"] == doc["config"]["records"] == 20_000
    assert row["twice"] == 0 and row["records_s"] > 0 and row["members_with_records"] >= 1
