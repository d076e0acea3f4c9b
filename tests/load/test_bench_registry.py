"""``python -m load.bench_registry --smoke`` runs end to end and reports every figure."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.load.test_bench_scripts import run_bench

pytestmark = pytest.mark.integration


def test_bench_registry_smoke(tmp_path: Path) -> None:
    doc = run_bench("load.bench_registry", tmp_path, "--smoke")
    g = doc["get_by_id"]
    assert g["requests"] > 0 and g["errors"] == 0 and g["latency_ms"]["p99"] > 0
    assert g["registry_cpu_us_per_request"] > 0 and doc["register_ms"]["n"] == doc["config"]["schemas"]
