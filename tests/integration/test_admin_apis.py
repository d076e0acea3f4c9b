"""kafka-python's admin calls for the cluster admin APIs against one broker: ``describe_log_dirs``
(DescribeLogDirs 35), ``describe_topic_partitions`` (DescribeTopicPartitions 75, KIP-966) page
by page, ``describe_metadata_quorum`` (DescribeQuorum 55) and ``create_partitions`` (37) with
its errors. The assertions hold on Apache Kafka too (``./run test-on-kafka``); the cluster side
is tests/integration/kafka/test_admin_cluster.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewPartitions
from kafka.errors import InvalidPartitionsError, UnknownTopicOrPartitionError

from tests.support.brokers import create_topic

pytestmark = pytest.mark.integration


@pytest.fixture
def admin(broker: Any) -> Iterator[KafkaAdminClient]:
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    yield a
    a.close()


def test_describe_log_dirs(admin: KafkaAdminClient, broker: Any, topic_name: Any) -> None:
    t = topic_name("logdirs")
    create_topic(broker.bootstrap, t, 3)
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    for _ in range(10):
        p.send(t, b"x" * 1000, partition=2)
    p.flush()
    p.close()
    (answer,) = admin.describe_log_dirs({t: [0, 2, 7]})  # 7: no such partition, left out
    (log_dir,) = answer["log_dirs"]
    assert log_dir["error_code"] == 0 and log_dir["log_dir"].startswith("/")
    parts = {
        q["partition_index"]: q
        for topic in log_dir["topics"]
        if topic["name"] == t
        for q in topic["partitions"]
    }
    assert sorted(parts) == [0, 2]
    assert parts[0]["partition_size"] == 0 and parts[2]["partition_size"] > 10_000
    assert all(q["offset_lag"] == 0 and not q["is_future_key"] for q in parts.values())
    assert 0 < log_dir["usable_bytes"] <= log_dir["total_bytes"]
    everything = admin.describe_log_dirs()[0]["log_dirs"][0]["topics"]
    assert t in {topic["name"] for topic in everything}


def test_describe_topic_partitions_page_by_page(
    admin: KafkaAdminClient, broker: Any, topic_name: Any
) -> None:
    a, b = sorted([topic_name("pagea"), topic_name("pageb")])
    create_topic(broker.bootstrap, a, 3)
    create_topic(broker.bootstrap, b, 2)
    seen: list[tuple[str, int]] = []
    cursor = None
    for _ in range(10):
        page = admin.describe_topic_partitions([b, a], response_partition_limit=2, cursor=cursor)
        got = [(x["name"], q["partition_index"]) for x in page["topics"] for q in x["partitions"]]
        assert 1 <= len(got) <= 2, page
        seen += got
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [(a, 0), (a, 1), (a, 2), (b, 0), (b, 1)]
    (topic,) = admin.describe_topic_partitions([a])["topics"]
    assert topic["error_code"] == 0 and not topic["is_internal"]
    assert all(q["leader_id"] >= 0 and q["isr_nodes"] == q["replica_nodes"] for q in topic["partitions"])
    (missing,) = admin.describe_topic_partitions([topic_name("nope")])["topics"]
    assert missing["error_code"] == UnknownTopicOrPartitionError.errno and missing["partitions"] == []


def test_describe_metadata_quorum(admin: KafkaAdminClient) -> None:
    quorum = admin.describe_metadata_quorum()
    (topic,) = quorum["topics"]
    (p,) = topic["partitions"]
    assert topic["topic_name"] == "__cluster_metadata" and p["error"] is None
    voters = {v["replica_id"]: v for v in p["current_voters"]}
    assert p["leader_id"] in voters and p["leader_epoch"] >= 0 and p["high_watermark"] >= 0
    assert voters[p["leader_id"]]["log_end_offset"] >= 0


def test_create_partitions_grows_only(admin: KafkaAdminClient, broker: Any, topic_name: Any) -> None:
    t = topic_name("grow")
    create_topic(broker.bootstrap, t, 1)
    admin.create_partitions({t: NewPartitions(3)})
    with pytest.raises(InvalidPartitionsError):
        admin.create_partitions({t: NewPartitions(2)})
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.create_partitions({topic_name("nope"): NewPartitions(2)})
    (topic,) = admin.describe_topic_partitions([t])["topics"]
    assert [q["partition_index"] for q in topic["partitions"]] == [0, 1, 2]
