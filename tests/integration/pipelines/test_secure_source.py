"""The Spark jobs' sources and sinks over SASL_SSL with the ``spark`` user's credentials, as
``sftraffic up --secure`` runs them: our data source (format ``sftraffic``) and
Spark's own Kafka connector (format ``kafka``, the Java client: the settings become a JAAS
config and a PEM trust store), each reading a topic of the stream and writing to one, with the
options :func:`pipelines.jobs.security_options` makes from ``$SFTRAFFIC_CLIENT_CONFIG``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from deploy.local import secure
from framework.client.security import ENV, read_properties
from pipelines import jobs
from sensors import layout
from testing import BrokerProcess, free_port

pytestmark = [pytest.mark.spark, pytest.mark.integration]


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("secure-spark")
    s, _ = secure.ensure(root, [])
    secure.prepare_store(root / "store", s)
    port = free_port()
    b = BrokerProcess(
        root / "store", port=port, overrides=secure.broker_settings(s, f"127.0.0.1:{port}")
    ).start()
    admin = read_properties(s.properties(secure.ADMIN))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(ENV, str(s.properties(secure.ADMIN)))
        layout.ensure_layout(b.bootstrap, partitions=2)
    p = Producer({**admin, "bootstrap.servers": b.bootstrap})
    for i in range(5):
        p.produce(layout.topic("dead_letter"), f"v{i}".encode(), f"k{i}".encode())
    assert p.flush(20) == 0
    yield b, s
    b.stop()


@pytest.mark.parametrize("source", ["sftraffic", "kafka"])
def test_spark_reads_and_writes_the_secured_store_as_its_user(
    kafka_connector: Any, secured: Any, source: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    spark = kafka_connector
    broker: BrokerProcess
    broker, s = secured
    monkeypatch.setenv(ENV, str(s.properties(secure.SPARK)))
    opts = {"kafka.bootstrap.servers": broker.bootstrap, **jobs.security_options(source)}
    if source == "kafka":
        assert "ScramLoginModule" in opts["kafka.sasl.jaas.config"]
    else:
        assert opts["kafka.sasl.username"] == secure.SPARK

    def values(topic: str) -> list[bytes]:
        df = spark.read.format(source).options(**opts).option("subscribe", topic)
        return sorted(bytes(r.value) for r in df.option("startingOffsets", "earliest").load().collect())

    assert values(layout.topic("dead_letter"))[:5] == [b"v0", b"v1", b"v2", b"v3", b"v4"]
    out = layout.topic("infrastructure")
    before = len(values(out))
    rows = spark.createDataFrame([(f"{source}-k", f"{source}-v")], "key string, value string")
    rows.write.format(source).options(**opts).option("topic", out).mode("append").save()
    assert len(values(out)) == before + 1
