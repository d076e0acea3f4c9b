"""``sftraffic bench``: the command runs ours and the installed peers, prints the table, writes JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from load import bench_cli

ROOT = Path(__file__).parents[2]


def installed_peers() -> list[str]:
    """The peers this machine can run (the command itself would skip the others)."""
    from load import bench_mqtt, bench_streams
    from load.peers import PEERS

    out = [n for n in bench_cli.KAFKA_PEERS if PEERS[n]().unavailable() is None]
    out += [n for n in bench_cli.STREAM_PEERS if bench_streams.STREAM_PEERS[n]().unavailable() is None]
    if bench_mqtt.unavailable() is None:
        out.append("mosquitto")
    return out


@pytest.mark.integration
@pytest.mark.timeout(150)
def test_bench_quick_runs_ours_and_the_installed_peers(tmp_path: Path) -> None:
    peers = installed_peers()
    out = tmp_path / "bench.json"
    cmd = [sys.executable, "-m", "framework.cli.main", "bench", "--quick", "--json", str(out)]
    # 1 s latency phases (10,000 messages each at 10k/s) instead of --quick's 2 s
    cmd += ["--peers", ",".join(peers) or "none", "--latency-seconds", "1"]
    res = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=140, cwd=ROOT)
    assert res.returncode == 0, f"exit {res.returncode}\nstdout:\n{res.stdout}\nstderr:\n{res.stderr[-4000:]}"
    assert "sftraffic bench --quick" in res.stdout, "the comparison table was not printed"
    assert "Goals" in res.stdout
    doc = json.loads(out.read_text())
    ours = doc["systems"][doc["primary"]]
    assert doc["primary"] == "ours"
    assert ours["produce_msgs_s"] > 0
    assert ours["consume_msgs_s"] > 0
    assert ours["produce_acksall_msgs_s"] > 0
    assert ours["p99_ms"] > 0
    ran = [n for n in peers if doc["systems"][n]["ran"]]
    for name in ran:
        ratio = doc["ratios"][f"ours/{name}"]
        if name == "mosquitto":
            assert doc["systems"]["gateway"]["produce_msgs_s"] > 0
            assert ratio["gateway_path"] > 0
        else:
            assert set(ratio) == {"produce", "consume", "p99", "produce_acksall"}
            assert ratio["produce"] > 0
    # A peer that is installed should also have started; if not, the reason is in the output.
    for name in set(peers) - set(ran):
        assert doc["not_run"][name], name
    assert len(doc["goals"]) == 5
    assert doc["config"]["kafka"]["latency_seconds"] == doc["config"]["streams"]["latency_seconds"] == 1
    # the chart next to the JSON (load.harness.chart)
    from tests.load.test_chart import png_size

    assert png_size(out.with_suffix(".png")) == (1200, 800), res.stderr[-2000:]


@pytest.mark.integration
@pytest.mark.timeout(150)
def test_bench_external_measures_a_running_broker(broker: Any, tmp_path: Path) -> None:
    """``--external``: the Kafka benchmark runs against that broker (here the tests' one, Apache
    Kafka under test-on-kafka) and starts none of ours."""
    out = tmp_path / "bench.json"
    cmd = [sys.executable, "-m", "framework.cli.main", "bench", "--quick", "--json", str(out)]
    cmd += ["--external", broker.bootstrap, "--peers", "none", "--count", "5000", "--latency-seconds", "1"]
    res = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=140, cwd=ROOT)
    assert res.returncode == 0, f"exit {res.returncode}\nstdout:\n{res.stdout}\nstderr:\n{res.stderr[-4000:]}"
    assert "deprecated" not in res.stderr
    doc = json.loads(out.read_text())
    assert doc["primary"] == "external" and "ours" not in doc["systems"]
    external = doc["systems"]["external"]
    assert external["produce_msgs_s"] > 0 and external["consume_msgs_s"] > 0


def test_unknown_peer_is_a_usage_error() -> None:
    from load.peers import parse_peers

    with pytest.raises(ValueError, match="unknown peer"):
        parse_peers("tansu,kafka", bench_cli.ALL_PEERS)
    assert parse_peers("none", bench_cli.ALL_PEERS) == []
    assert parse_peers("Redis, nats,redis", bench_cli.ALL_PEERS) == ["redis", "nats"]
    with pytest.raises(ValueError, match="unknown peer"):
        parse_peers("ours@/tmp/old", bench_cli.ALL_PEERS)  # a baseline checkout is bench_broker's


def test_a_missing_server_is_reported_not_fatal(tmp_path: Path) -> None:
    from load.bench_streams import RedisLauncher, StreamsConfig, run_streams

    class Missing(RedisLauncher):
        binary_name = "redis-server-that-is-not-installed"
        binary_paths = ()

    reports = run_streams([Missing()], StreamsConfig(reps=1), tmp_path)
    r = reports["redis"]
    assert not r.available
    assert "not found" in r.reason


@pytest.mark.parametrize(("command", "module"), [("bench", "paho"), ("load", "locust")])
def test_without_the_app_extras_the_commands_name_what_is_missing(command: str, module: str) -> None:
    """As the other application commands: one line naming the missing module, exit code 2."""
    code = (
        f"import sys; sys.modules[{module!r}] = None  # find_spec() now says: not installed\n"
        f"from framework.cli.main import main; sys.exit(main([{command!r}, '--help']))\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=60
    )
    assert res.returncode == 2, res.stdout + res.stderr
    assert f"needs the application extras (missing {module})" in res.stderr
