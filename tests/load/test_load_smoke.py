"""``sftraffic load smoke``: locust against private services; zero failures, nothing lost."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
SFTRAFFIC = [sys.executable, "-m", "framework.cli.main"]


def test_smoke_scenario_accounts_for_every_message(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    proc = subprocess.run(
        # 12 s of load (5 s of ramp): ~1,300 MQTT and ~600 Kafka messages, over twice the minimum below
        [*SFTRAFFIC, "load", "smoke", "--duration", "12", "--users", "40", "--reports", str(reports)],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:] + (reports / "locust.log").read_text()[-3000:]
    summary = json.loads((reports / "summary.json").read_text())
    # both paths carried load: MQTT devices through Mosquitto + gateway, and direct producers
    assert summary["acknowledged_by_source"].get("mqtt", 0) > 500
    assert summary["acknowledged_by_source"].get("kafka", 0) > 200
    assert summary["missing"] == 0 and summary["consumed"] == summary["acknowledged"]
    assert summary["failures"] == 0 and summary["failed_sends"] == 0
    with open(reports / "locust_stats.csv", newline="") as fh:
        rows = {(r["Type"], r["Name"]): r for r in csv.DictReader(fh)}
    for key in (
        ("MQTT", "publish qos1"),
        ("kafka", "produce"),
        ("kafka", "end-to-end"),
        ("GET", "/api/health"),
    ):
        assert int(rows[key]["Request Count"]) > 0, key
        assert int(rows[key]["Failure Count"]) == 0, key
    assert (reports / "locust.html").stat().st_size > 10_000
    assert "passed" in proc.stderr


def test_lost_message_makes_the_ledger_fail() -> None:
    """The ledger is what makes the smoke test able to fail: an acknowledged message the
    auditor never saw is reported missing (exit code 3 in locust)."""
    code = (
        "from load.locustfiles.common import Ledger\n"
        "l = Ledger(); l.ack('mqtt', 's1', 0); l.ack('mqtt', 's1', 1); l.saw('s1', 0); l.saw('s1', 0)\n"
        "print(sorted(l.missing()), l.duplicates)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[('s1', 1)] 1"
