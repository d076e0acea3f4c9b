"""One local SparkSession for the whole test session (a cold start costs 7-15 s).

It carries Spark's own Kafka connector (``deploy/spark``, format ``kafka``; resolved with Maven
into ``.cache/maven`` on first use) so that the ``--source kafka`` tests share it. When the
connector cannot be resolved here the session starts without it, every other Spark test runs,
and the ``kafka_connector`` fixture fails those tests with the one-line reason.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

CONNECTOR_MISSING: list[str] = []


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from deploy.spark.connector import ConnectorMissing
    from pipelines.spark import session

    conf = {"spark.sql.shuffle.partitions": "2"}
    try:
        s = session("sftraffic-tests", master="local[2]", conf=conf, kafka_connector=True)
    except ConnectorMissing as exc:
        CONNECTOR_MISSING.append(str(exc))
        s = session("sftraffic-tests", master="local[2]", conf=conf)
    yield s
    s.stop()


@pytest.fixture
def kafka_connector(spark: Any) -> Any:
    """The session, which must have Spark's Kafka connector (else: fail with what to run)."""
    if CONNECTOR_MISSING:
        pytest.fail(CONNECTOR_MISSING[0], pytrace=False)
    return spark
