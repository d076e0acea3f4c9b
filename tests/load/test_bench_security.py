"""``load/bench_security.py`` runs end to end in its smoke mode (figures measured, goals not
asserted: the machine is shared)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.load.test_bench_scripts import run_bench

pytestmark = pytest.mark.integration


def test_bench_security_smoke(tmp_path: Path) -> None:
    doc = run_bench("load.bench_security", tmp_path, "--smoke")
    assert {(r["protocol"], r["kind"]) for r in doc["runs"]} == {
        (p, k) for p in ("PLAINTEXT", "SASL_SSL", "SSL") for k in ("produce", "consume")
    }
    assert all(r["msgs_s"] > 0 and r["errors"] == 0 for r in doc["runs"])
    assert doc["summary"]["produce"]["SASL_SSL/PLAINTEXT"] > 0
    assert "bench_authorizer" in doc["authorizer"]
