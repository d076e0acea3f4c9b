"""Schema validation on a 3-broker cluster: every broker reads its own replica of ``_schemas``
(replication factor 3), so a schema registered just before a produce is accepted whichever
broker leads the partition, also where the ``_schemas`` replica is a follower that learns the
high watermark a fetch after the records (the re-check after reading to the log end); and every
leader refuses an unframed value."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from deploy.local.registry import RegistryProcess
from testing import ClusterProcesses, wait_for
from tests.support.brokers import quiet_logger

pytestmark = pytest.mark.integration

OVERRIDES: dict[str, object] = {"group.initial.rebalance.delay.ms": 0}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcesses]:
    cl = ClusterProcesses(tmp_path_factory.mktemp("cluster"), size=3, overrides=OVERRIDES)
    cl.start()
    yield cl
    cl.stop()


@pytest.fixture(scope="module")
def registry(
    cluster: ClusterProcesses, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RegistryProcess]:
    # _schemas made here on all three brokers, and served, before the registry starts (its own
    # creation then reading the end at once can race the cluster's metadata)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "logger": quiet_logger()})
    admin.create_topics([NewTopic("_schemas", 1, 3, config={"cleanup.policy": "compact"})])[
        "_schemas"
    ].result(30)
    wait_for(lambda: end_offset(cluster.bootstrap, "_schemas") is not None, 60, 0.2, "_schemas served")
    r = RegistryProcess(cluster.bootstrap, log=Path(tmp_path_factory.mktemp("registry")) / "registry.log")
    r.start(timeout=90)
    yield r
    r.stop()


def end_offset(bootstrap: str, topic: str) -> int | None:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe", "logger": quiet_logger()})
    try:
        return int(c.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)[1])
    except KafkaException:
        return None
    finally:
        c.close()


def leaders(bootstrap: str, topic: str) -> dict[int, int]:
    md = AdminClient({"bootstrap.servers": bootstrap, "logger": quiet_logger()}).list_topics(
        topic, timeout=10
    )
    return {p.id: p.leader for p in md.topics[topic].partitions.values()}


def test_fresh_schemas_pass_on_every_leader_and_plain_values_do_not(
    cluster: ClusterProcesses, registry: RegistryProcess
) -> None:
    topic = f"svc-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "logger": quiet_logger()})
    config = {"confluent.value.schema.validation": "true", "min.insync.replicas": "1"}
    admin.create_topics([NewTopic(topic, 3, 3, config=config)])[topic].result(30)
    wait_for(
        lambda: sorted(leaders(cluster.bootstrap, topic).values()) == [1, 2, 3], 60, 0.2, "one leader each"
    )
    client = SchemaRegistryClient({"url": registry.url})
    p = Producer(
        {"bootstrap.servers": cluster.bootstrap, "linger.ms": 0, "acks": "all", "logger": quiet_logger()}
    )
    outcomes: list[tuple[int, Any]] = []

    def delivered(err: Any, msg: Any) -> None:
        outcomes.append((msg.partition(), err))

    for round_ in range(5):  # each round registers a new version right before producing with it
        extra = [{"name": f"f{i}", "type": "int", "default": 0} for i in range(round_ + 1)]
        schema = {"type": "record", "name": "Event", "fields": [{"name": "speed", "type": "int"}, *extra]}
        ser = AvroSerializer(client, json.dumps(schema))
        value = ser(
            {"speed": round_, **{f["name"]: 1 for f in extra}},
            SerializationContext(topic, MessageField.VALUE),
        )
        for partition in range(3):
            p.produce(topic, value, partition=partition, on_delivery=delivered)
        p.flush(30)
    assert len(outcomes) == 15 and all(err is None for _, err in outcomes), outcomes

    outcomes.clear()
    for partition in range(3):
        p.produce(topic, b'{"speed": 1}', partition=partition, on_delivery=delivered)
    p.flush(30)
    assert sorted(part for part, _ in outcomes) == [0, 1, 2]
    assert all(err is not None and err.code() == KafkaError.INVALID_RECORD for _, err in outcomes), outcomes
