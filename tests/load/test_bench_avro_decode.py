"""``python -m load.bench_avro_decode --smoke`` runs end to end and reports every figure."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.load.test_bench_scripts import run_bench

pytestmark = pytest.mark.integration


def test_bench_avro_decode_smoke(tmp_path: Path) -> None:
    doc = run_bench("load.bench_avro_decode", tmp_path, "--smoke")
    for fmt in ("json", "avro", "avro_v1_v2", "avro_per_record"):
        assert doc["events_per_cpu_s"][fmt]["median"] > 0 and doc["us_per_event"][fmt] > 0
    assert doc["bytes_per_event"]["avro"] < doc["bytes_per_event"]["json"]
    assert doc["ratio_avro_json"] > 0
