"""The side-by-side benchmarks with Apache Kafka run end to end in their quick mode and write JSON
with positive figures for both systems (``load/bench_java_perf.py``, ``load/bench_cluster.py``).

As in ``test_bench_scripts.py``, no timing goal is asserted (the machine is shared and small):
only that every figure could be measured on ours and on Kafka, in alternating order.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from load.bench_java_perf import HEADLINE, PHASES, parse_consumer, parse_producer
from load.peers import KafkaLauncher
from tests.load.test_bench_scripts import run_bench

pytestmark = [pytest.mark.integration, pytest.mark.kafka]


@pytest.fixture
def kafka_available() -> None:
    reason = KafkaLauncher().unavailable()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)


def test_the_tools_summary_lines_are_parsed() -> None:
    out = (
        "81265 records sent, 16188.2 records/sec (1.54 MB/sec), 1318.4 ms avg latency, "
        "2659.0 ms max latency.\n"
        "500000 records sent, 45687.134503 records/sec (4.36 MB/sec), 3491.83 ms avg latency, 5033.00 ms "
        "max latency, 3675 ms 50th, 4997 ms 95th, 5018 ms 99th, 5032 ms 99.9th.\n"
    )
    p = parse_producer(out)
    assert p["records"] == 500000 and p["records_s"] == 45687.134503 and p["mb_s"] == 4.36
    latency = (p["avg_ms"], p["max_ms"], p["p50_ms"], p["p99_ms"], p["p999_ms"])
    assert latency == (3491.83, 5033, 3675, 5018, 5032)
    out = (
        "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
        "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec\n"
        "2026-11-24 03:21:24:118, 2026-11-24 03:21:30:944, 47.6837, 6.9856, 500000, 73249.3408, 3589, "
        "3237, 14.7308, 154464.0099\n"
    )
    c = parse_consumer(out)
    assert c["records"] == 500000 and c["nmsg_s"] == 73249.3408 and c["mb_s"] == 6.9856
    assert c["rebalance_ms"] == 3589 and c["fetch_nmsg_s"] == 154464.0099
    with pytest.raises(ValueError, match="no summary line"):
        parse_producer(
            "1 records sent, 1.0 records/sec (0.00 MB/sec), 1.0 ms avg latency, 1.0 ms max latency."
        )
    with pytest.raises(ValueError, match="no result line"):
        parse_consumer("WARN nothing")


# slow: a benchmark's smoke run (Apache Kafka / Spark started), in `./run soak`, not the
# 30-minute suite; the benchmark's own parsing and options are tested here without it
@pytest.mark.slow
def test_bench_java_perf_quick(tmp_path: Path, kafka_available: None) -> None:
    doc = run_bench("load.bench_java_perf", tmp_path, "--quick", timeout=280)
    cfg = doc["config"]
    assert doc["not_run"] == {} and set(doc["systems"]) == {"ours", "kafka"}
    assert doc["order"] == [["ours", "kafka"], ["kafka", "ours"]][: cfg["reps"]]
    assert len(doc["runs"]) == cfg["reps"] * len(PHASES) * 2
    for system in ("ours", "kafka"):
        for phase, key in HEADLINE.items():
            figures = doc["summary"][system][phase]
            assert figures[key]["median"] > 0 and figures[key]["n"] == cfg["reps"], (system, phase)
            assert figures["mb_s"]["min"] > 0
            assert figures["server_cpu_us_per_msg"]["median"] > 0
    for phase in HEADLINE:
        assert doc["ratios"]["ours/kafka"][phase] > 0


# slow: a benchmark's smoke run (Apache Kafka / Spark started), in `./run soak`, not the
# 30-minute suite; the benchmark's own parsing and options are tested here without it
@pytest.mark.slow
def test_bench_cluster_throughput_quick(tmp_path: Path, kafka_available: None) -> None:
    args = ("--quick", "--phases", "throughput", "--count", "20000", "--reps", "2")
    doc = run_bench("load.bench_cluster", tmp_path, *args, timeout=280)
    assert doc["systems"] == ["ours", "kafka"] and doc["not_run"] == {}
    tp = doc["throughput"]
    assert tp["order"] == [["ours", "kafka"], ["kafka", "ours"]]
    assert len(tp["runs"]) == 2 * 2 * 2  # reps x acks x systems
    for system in ("ours", "kafka"):
        for figure in ("rf3_acks1", "rf3_acks_all"):
            rate = tp["summary"][system][f"{figure}_msgs_s"]
            assert rate["median"] > 0 and rate["min"] > 0 and rate["n"] == 2, (system, figure)
            assert tp["summary"][system][f"{figure}_cluster_cpu_us_per_msg_above_rest"]["median"] > 0
    assert tp["ratios"]["ours/kafka"]["rf3_acks_all"] > 0
    assert tp["single_acks_all_msgs_s"] > 0
    assert [g["name"] for g in doc["goals"]] == ["RF3 acks=all produce ours/kafka"]
