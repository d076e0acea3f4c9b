"""``load.harness.chart``: the chart ``sftraffic bench`` writes next to its JSON, and the one the
README shows."""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path
from typing import Any

import pytest

from load.harness import chart

ROOT = Path(__file__).parents[2]
README = ROOT / "load" / "README.md"


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk."""
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    assert head[12:16] == b"IHDR"
    width, height = struct.unpack(">II", head[16:24])
    return width, height


def system(ran: bool = True, **figures: Any) -> dict[str, Any]:
    keys = ("produce_msgs_s", "produce_acksall_msgs_s", "consume_msgs_s", "p99_ms")
    base = dict.fromkeys((*keys, "server_cpu_us_per_msg_produce"))
    return base | {"kind": "kafka", "ran": ran, "persists": True, "reason": "", "errors": []} | figures


def synthetic() -> dict[str, Any]:
    """ours, Tansu (memory), Apache Kafka and Redis ran; noida-db was not installed; NATS was not
    selected; the MQTT comparison ran."""
    figures = {
        "produce_msgs_s": 800_000.0,
        "produce_acksall_msgs_s": 700_000.0,
        "consume_msgs_s": 600_000.0,
        "p99_ms": 4.0,
        "server_cpu_us_per_msg_produce": 0.2,
    }
    return {
        "primary": "ours",
        "ok": True,
        "systems": {
            "ours": system(**figures, rss_mb_1000_partitions=40.0),
            "tansu": system(**{k: v / 2 for k, v in figures.items()}, persists=False),
            "noida": system(ran=False, reason="noida-db is not installed (pip install noida-db)"),
            "kafka": system(**{k: v * 2 for k, v in figures.items()}, rss_mb_1000_partitions=400.0),
            "redis": system(**{k: v / 20 for k, v in figures.items()}, kind="stream"),
            "mosquitto": system(kind="mqtt", produce_msgs_s=4_000.0),
            "gateway": system(kind="mqtt", produce_msgs_s=3_600.0),
        },
        "not_run": {"noida": "noida-db is not installed (pip install noida-db)"},
        "notes": ["--quick: tiny counts and one repetition; the figures are indicative only."],
        "config": {"quick": True, "kafka": {"count": 50_000, "reps": 1, "latency_rate": 10_000}},
    }


def test_chart_data_shows_every_system_with_ratios_and_n_a() -> None:
    data = chart.chart_data(synthetic())
    names = [s.name for s in data.systems]
    assert names == ["ours", "tansu", "noida", "kafka", "redis", "nats"]  # MQTT rows are the footer
    ran = {s.name: s.ran for s in data.systems}
    assert ran == {"ours": True, "tansu": True, "noida": False, "kafka": True, "redis": True, "nats": False}
    why = {s.name: s.why_not for s in data.systems}
    assert why["noida"] == "noida-db is not installed (pip install noida-db)"
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


def test_render_writes_a_1200x800_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = chart.render(synthetic(), tmp_path / "sub" / "bench.png")
    assert out == tmp_path / "sub" / "bench.png"
    assert out.stat().st_size > 10_000
    assert png_size(out) == (1200, 800)


def test_the_command_draws_next_to_the_json_or_where_told(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    result = tmp_path / "bench-x.json"
    result.write_text(json.dumps(synthetic()))
    assert chart.main([str(result)]) == 0
    assert png_size(tmp_path / "bench-x.png") == (1200, 800)
    assert chart.main([str(result), "-o", str(tmp_path / "other.png")]) == 0
    assert png_size(tmp_path / "other.png") == (1200, 800)
    assert chart.write_next_to(result) == tmp_path / "bench-x.png"
    (tmp_path / "bad.json").write_text('{"results": []}')
    assert chart.main([str(tmp_path / "bad.json")]) == 2
    assert chart.main([str(tmp_path / "missing.json")]) == 2
    assert chart.write_next_to(tmp_path / "missing.json") is None  # reported, never raised


def newest_bench_result() -> Path:
    """The newest `sftraffic bench` result (``python -m load.bench_broker`` results are named
    bench-*.json too, without the "details" of sftraffic bench)."""
    paths = sorted((ROOT / "load" / "results").glob("bench-*.json"))
    return [p for p in paths if "details" in json.loads(p.read_text())][-1]


def test_older_results_have_rss_under_details() -> None:
    doc = json.loads(newest_bench_result().read_text())
    data = chart.chart_data(doc)
    rss = data.panels[-1]
    expected = doc["details"]["kafka"]["systems"]["ours"]["figures"]["rss_mb_1000_partitions"]
    assert rss.values[0] == pytest.approx(expected)


def test_the_readme_shows_the_chart_of_the_newest_committed_result() -> None:
    links = re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", README.read_text())
    charts = [link for link in links if re.fullmatch(r"results/bench-[^/]+\.png", link)]
    assert charts, f"no results/bench-*.png image in {README}: {links}"
    for link in links:
        assert (README.parent / link).is_file(), f"{README} shows {link}, which does not exist"
    newest = newest_bench_result()
    assert chart.chart_path(newest).relative_to(README.parent).as_posix() in charts
    assert png_size(README.parent / charts[0]) == (1200, 800)
