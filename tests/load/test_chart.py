"""``load.harness.chart`` and the docs page of a ``sftraffic bench`` run: the input is a result
written by the command's own report code (``summarise``, ``run_main``) in ``tmp_path``."""

from __future__ import annotations

import json
import struct
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from load import bench_cli
from load.bench_broker import BenchConfig, SystemReport
from load.bench_mqtt import MqttConfig, MqttReport
from load.bench_streams import StreamsConfig
from load.harness import chart, report
from load.harness.runner import run_main

FIGURES = {
    "produce_acks1_msgs_s": 800_000.0,
    "produce_acksall_msgs_s": 700_000.0,
    "consume_msgs_s": 600_000.0,
    "p99_ms_10k": 4.0,
    "broker_cpu_us_per_msg_produce": 0.2,
}


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk."""
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    assert head[12:16] == b"IHDR"
    width, height = struct.unpack(">II", head[16:24])
    return width, height


def system(name: str, scale: float, **kw: Any) -> dict[str, Any]:
    figures = {k: v * scale for k, v in FIGURES.items()} | kw.pop("figures", {})
    rep = SystemReport(name, f"{name} label", True, persists=True, version="1.2.3", figures=figures, **kw)
    return asdict(rep)


def write_result(tmp_path: Path) -> Path:
    """ours, Tansu (memory), Apache Kafka and Redis ran; noida-db was not installed; NATS was not
    selected; the MQTT comparison ran: a --quick result as ``sftraffic bench`` writes it."""
    kafka = {
        "primary": "ours",
        "systems": {
            "ours": system("ours", 1, figures={"rss_mb_1000_partitions": 40.0}),
            "tansu": system("tansu", 0.5) | {"persists": False},
            "noida": asdict(SystemReport("noida", "noida-db", False, "noida-db is not installed")),
            "kafka": system("kafka", 2, figures={"rss_mb_1000_partitions": 400.0}),
        },
    }
    streams = {"redis": system("redis", 0.05)}
    mqtt = MqttReport(versions={"mosquitto": "2.0"}, runs=[{"system": "gateway", "other_cpu_share": 0.0}])
    mqtt.figures = {"mosquitto_qos1_msgs_s": 4_000.0, "gateway_msgs_s": 3_600.0}
    doc = bench_cli.summarise(kafka, streams, asdict(mqtt), ["tansu", "noida", "kafka", "redis", "mosquitto"])
    doc["notes"].append("--quick: tiny counts and one repetition; the figures are indicative only.")
    doc["config"] = {
        "quick": True,
        "kafka": asdict(BenchConfig.of(True)),
        "streams": asdict(StreamsConfig(reps=1)),
        "mqtt": asdict(MqttConfig(reps=1)),
    }
    doc["machine"] = report.machine_info("load.bench_cli") | {"started_at": "2030-01-02T03:04:05+0000"}
    out = tmp_path / "bench-x.json"
    assert run_main(lambda: doc, bench_cli.render, str(out), lambda d: d["ok"]) == 0
    return out


@pytest.fixture
def result(tmp_path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(write_result(tmp_path).read_text())
    return doc


def test_chart_data_shows_every_system_with_ratios_and_n_a(result: dict[str, Any]) -> None:
    data = chart.chart_data(result)
    names = [s.name for s in data.systems]
    assert names == ["ours", "tansu", "noida", "kafka", "redis", "nats"]  # MQTT rows are the footer
    ran = {s.name: s.ran for s in data.systems}
    assert ran == {"ours": True, "tansu": True, "noida": False, "kafka": True, "redis": True, "nats": False}
    why = {s.name: s.why_not for s in data.systems}
    assert why["noida"] == "noida-db is not installed"
    assert why["nats"] == "not selected (--peers)"
    assert [p.key for p in data.panels] == [
        "produce_msgs_s",
        "produce_acksall_msgs_s",
        "consume_msgs_s",
        "p99_ms",
        "server_cpu_us_per_msg_produce",
        "rss_mb_1000_partitions",
    ]
    produce = data.panels[0]
    assert produce.values == [800_000.0, 400_000.0, None, 1_600_000.0, 40_000.0, None]
    assert produce.ratios == [None, 2.0, None, 0.5, 20.0, None]
    rss = data.panels[-1]
    assert rss.values == [40.0, None, None, 400.0, None, None]
    assert rss.ratios[3] == pytest.approx(0.1)
    footer = "\n".join(data.footer)
    assert "n/a noida-db: noida-db is not installed" in footer
    assert "n/a NATS JetStream: not selected (--peers)" in footer
    assert "n/a server RSS, 1,000 partitions: Tansu (mem), Redis Streams" in footer
    assert "gateway path 3.6k msgs/s until stored, Mosquitto alone 4.0k msgs/s = 0.90x" in footer
    assert "--quick" in data.title


def test_render_writes_a_1200x800_png(result: dict[str, Any], tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = chart.render(result, tmp_path / "sub" / "bench.png")
    assert out == tmp_path / "sub" / "bench.png"
    assert out.stat().st_size > 10_000
    assert png_size(out) == (1200, 800)


def test_the_command_draws_next_to_the_json_or_where_told(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    result = write_result(tmp_path)
    assert chart.main([str(result)]) == 0
    assert png_size(tmp_path / "bench-x.png") == (1200, 800)
    assert chart.main([str(result), "-o", str(tmp_path / "other.png")]) == 0
    assert png_size(tmp_path / "other.png") == (1200, 800)
    assert chart.write_next_to(result) == tmp_path / "bench-x.png"
    (tmp_path / "bad.json").write_text('{"results": []}')
    assert chart.main([str(tmp_path / "bad.json")]) == 2
    assert chart.main([str(tmp_path / "missing.json")]) == 2
    assert chart.write_next_to(tmp_path / "missing.json") is None  # reported, never raised


def test_publish_writes_the_table_and_the_chart_into_the_docs_page(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    page = tmp_path / "docs" / "benchmarks.md"
    page.parent.mkdir()
    start, end = report._markers("side-by-side")
    page.write_text(f"# Benchmarks\n\nbefore\n\n{start}\n![old](img/bench-2029-12-31.png)\n{end}\nafter\n")
    (page.parent / "img").mkdir()
    (page.parent / "img" / "bench-2029-12-31.png").write_bytes(b"old")
    bench_cli.publish(write_result(tmp_path), page)
    text = page.read_text()
    assert text.startswith("# Benchmarks\n\nbefore\n") and text.endswith("after\n")
    table = report.section(text, "side-by-side") or ""
    assert "2030-01-02" in table and "![sftraffic bench, 2030-01-02" in table
    assert "| sftraffic (ours) | disk | 800,000 | 700,000 | 600,000 | 4.00 | 0.20 |" in table
    assert "| Tansu 1.2 | memory | 400,000 |" in table and "| 2.00x | 2.00x | 2.00x | 2.00x |" in table
    assert png_size(page.parent / "img" / "bench-2030-01-02.png") == (1200, 800)
    assert not (page.parent / "img" / "bench-2029-12-31.png").exists()  # the previous run's chart
    report.publish("security", report.goals_markdown("Security", {"goals": []}), page)
    assert report.section(page.read_text(), "side-by-side") == table  # other sections kept
    assert "## Latest published runs" in page.read_text()
