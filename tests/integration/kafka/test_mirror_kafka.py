"""``sftraffic mirror`` between sftraffic and Apache Kafka, both ways at once.

One sftraffic broker and one Apache Kafka node (KRaft, ``deploy/kafka``); a mirror copies
``orders`` from sftraffic to Kafka (``sft.orders``, ``--exactly-once``: Kafka's transaction
coordinator) while another copies ``clicks`` from Kafka to sftraffic (``kafka.clicks``); both
copies are compared record by record with their sources, and a consumer group that read part
of ``orders`` on sftraffic resumes on Kafka from the offsets the mirror committed there and
reads everything it had not read.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from deploy.kafka.cluster import KafkaCluster
from testing import ManagedProcess, sftraffic, wait_for
from tests.support.brokers import BrokerFactory, create_topic, quiet_logger
from tests.support.mirror import end_offsets, produce_numbered, read_partition

pytestmark = [pytest.mark.kafka, pytest.mark.sftraffic_only(reason="an sftraffic broker and a Kafka node")]

N = 3000


@pytest.fixture
def kafka(kafka_lib: Path, tmp_path: Path) -> Iterator[str]:
    c = KafkaCluster(1, tmp_path / "kafka", overrides={"group.initial.rebalance.delay.ms": 0})
    try:
        yield c.start()
    finally:
        c.stop()


def _mirror(
    src: str, dst: str, alias: str, target_alias: str, topics: str, log: Path, *extra: str
) -> ManagedProcess:
    cmd = sftraffic(
        "mirror", "--source-bootstrap-server", src, "--target-bootstrap-server", dst,
        "--source-alias", alias, "--target-alias", target_alias,
        "--topics", topics, "--commit-interval", "0.2", "--checkpoint-interval", "0.3",
        "--status-interval", "0", "--sync-group-offsets", *extra,
    )  # fmt: skip
    return ManagedProcess(f"mirror-{alias}", cmd, ready="copying", log=log).start(timeout=60)


def test_mirror_both_ways_between_sftraffic_and_kafka(
    broker_factory: BrokerFactory, kafka: str, tmp_path: Path
) -> None:
    sft = broker_factory().bootstrap
    create_topic(sft, "orders", 2)
    create_topic(kafka, "clicks", 2)
    produce_numbered(sft, "orders", 0, N, 2)
    produce_numbered(kafka, "clicks", 0, N, 2)

    g = Consumer(
        {"bootstrap.servers": sft, "group.id": "billing", "logger": quiet_logger(),
         "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )  # fmt: skip
    g.subscribe(["orders"])
    read_at_source: list[bytes] = []
    while len(read_at_source) < 500:
        read_at_source += [m.value() for m in g.consume(500 - len(read_at_source), 1.0) if m.error() is None]
    g.commit(asynchronous=False)
    committed = list(g.committed([TopicPartition("orders", p) for p in range(2)], timeout=10))
    g.close()

    # into Kafka with transactions (Kafka's coordinator), into sftraffic without
    to_kafka = _mirror(sft, kafka, "sft", "kafka", "orders", tmp_path / "to-kafka.log", "--exactly-once")
    to_sft = _mirror(kafka, sft, "kafka", "sft", "clicks", tmp_path / "to-sft.log")
    try:
        # (end offsets count transaction markers too: at least N once every copy is there)
        wait_for(lambda: end_offsets(kafka, {"sft.orders": 2}) >= N, 60, 0.1, "orders copied to Kafka")
        wait_for(lambda: end_offsets(sft, {"kafka.clicks": 2}) >= N, 60, 0.1, "clicks copied to sftraffic")
        for src, dst, topic, remote in (
            (sft, kafka, "orders", "sft.orders"),
            (kafka, sft, "clicks", "kafka.clicks"),
        ):
            for p in range(2):
                want = [
                    (m.key(), m.value(), m.headers(), m.timestamp()) for m in read_partition(src, topic, p)
                ]
                got = [
                    (m.key(), m.value(), m.headers(), m.timestamp()) for m in read_partition(dst, remote, p)
                ]
                assert got == want, f"{remote}-{p} differs from {topic}-{p}"

        c = Consumer(
            {"bootstrap.servers": kafka, "group.id": "billing", "logger": quiet_logger(),
             "auto.offset.reset": "earliest", "enable.auto.commit": False}
        )  # fmt: skip
        parts = [TopicPartition("sft.orders", tp.partition) for tp in committed if tp.offset >= 0]

        def synced() -> bool:
            return all(tp.offset >= 0 for tp in c.committed(parts, timeout=10))

        wait_for(synced, 30, 0.1, "group billing's offsets committed on Kafka")
        c.subscribe(["sft.orders"])
        unread = {f"orders-{i}".encode() for i in range(N)} - set(read_at_source)
        got_values: set[bytes] = set()
        wait_for(
            lambda: (
                got_values.update(m.value() for m in c.consume(1000, 0.5) if m.error() is None)
                or unread <= got_values
            ),
            30,
            0,
            "group billing reads every record it had not read",
        )
        c.close()
        again = len(got_values & set(read_at_source))
        print(f"billing: {len(read_at_source)} read on sftraffic, {again} read again on Kafka")
    finally:
        assert to_kafka.stop(grace=20) == 0, to_kafka.tail()
        assert to_sft.stop(grace=20) == 0, to_sft.tail()
