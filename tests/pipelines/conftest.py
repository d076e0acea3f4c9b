"""One local SparkSession for the whole test session (a cold start costs 7-15 s)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from pipelines.spark import session

    s = session("sftraffic-tests", master="local[2]", conf={"spark.sql.shuffle.partitions": "2"})
    yield s
    s.stop()
