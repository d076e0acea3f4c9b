"""read_committed over real sockets on plain (non-transactional) data: with no transaction open
the last stable offset is the high watermark, so a confluent-kafka consumer at
``isolation.level=read_committed`` reads everything a read_uncommitted one does, and the
watermarks and ListOffsets agree at both levels. (The LSO with open transactions is tested in
tests/unit/server/handlers/test_read_committed.py, and with transactional producers in
tests/integration/test_transactions.py.)"""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from framework.client.wire import WireClient
from framework.protocol.messages.fetch import FetchPartition, FetchRequest, FetchResponse, FetchTopic
from testing import BrokerProcess
from tests.support.brokers import create_topic, quiet_logger

pytestmark = pytest.mark.integration

N = 500


def consume_all(bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"rc-{isolation}-{topic}",
            "isolation.level": isolation,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "logger": quiet_logger(),
        }
    )
    out: list[bytes] = []
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(2)])
        idle = 0
        while len(out) < N and idle < 20:
            msgs = c.consume(200, timeout=0.5)
            idle = 0 if msgs else idle + 1
            for m in msgs:
                assert m.error() is None, m.error()
                out.append(bytes(m.value() or b""))
        assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)[1] > 0
    finally:
        c.close()
    return out


def test_read_committed_reads_plain_data_up_to_the_high_watermark(
    broker: BrokerProcess, topic_name: Any
) -> None:
    topic = topic_name("rc")
    create_topic(broker.bootstrap, topic, 2)
    p = Producer(
        {"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "logger": quiet_logger()}
    )
    for i in range(N):
        p.produce(topic, key=b"k%d" % (i % 7), value=b"v%d" % i)
    assert p.flush(30) == 0
    committed = consume_all(broker.bootstrap, topic, "read_committed")
    uncommitted = consume_all(broker.bootstrap, topic, "read_uncommitted")
    assert sorted(committed) == sorted(uncommitted) == sorted(b"v%d" % i for i in range(N))
    # the wire answer at read_committed: LSO == high watermark, an empty aborted list
    req = FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=1,
        topics=[
            FetchTopic(
                topic=topic,
                partitions=[FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)],
            )
        ],
    )
    with WireClient(broker.bootstrap) as w:
        pd = w.send(req, FetchResponse, version=11).responses[0].partitions[0]
    assert pd.error_code == 0
    assert pd.last_stable_offset == pd.high_watermark > 0
    assert pd.aborted_transactions == []
    # ListOffsets at read_committed (librdkafka's offsets_for_times/watermarks ask it)
    c = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "rc-lo",
            "isolation.level": "read_committed",
            "logger": quiet_logger(),
        }
    )
    try:
        end = c.offsets_for_times([TopicPartition(topic, 0, -1)], timeout=10)[0].offset
        assert end == pd.high_watermark
    finally:
        c.close()
