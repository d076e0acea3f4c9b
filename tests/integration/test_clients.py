"""The broker as a real process, used by unmodified Kafka clients over TCP on 127.0.0.1.

confluent-kafka (librdkafka, flexible protocol versions, topic ids), kafka-python (idempotent
by default, asks for fetch sessions) and aiokafka (old non-flexible versions) each produce
100k keyed messages and read them back in order with keys, values, headers and timestamps.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from framework.client.producer import partition_for, producer_config
from testing import BrokerProcess
from tests.support.brokers import create_topic, quiet_logger
from tests.support.clients import consume_all

pytestmark = pytest.mark.integration

N = 100_000
KEYS = 97
PARTS = 4


def _value(i: int) -> bytes:
    return b"%08d:" % i + b"x" * 90


def check_order_and_content(
    msgs: list[tuple[int, int, bytes, bytes, list[tuple[str, bytes]]]],
) -> None:
    """(partition, offset, key, value, headers): offsets dense per partition, per-key order kept."""
    by_part: dict[int, list[int]] = defaultdict(list)
    last_by_key: dict[bytes, int] = {}
    part_of_key: dict[bytes, int] = {}
    for part, off, key, value, headers in msgs:
        by_part[part].append(off)
        i = int(value[:8])
        assert key == b"sensor-%d" % (i % KEYS)
        assert value == _value(i)
        assert ("seq", b"%d" % i) in headers
        assert last_by_key.get(key, -1) < i, "per-key order broken"
        last_by_key[key] = i
        assert part_of_key.setdefault(key, part) == part, "same key in two partitions"
    for offs in by_part.values():
        assert offs == list(range(len(offs))), "offsets not dense and increasing"


def test_confluent_kafka_roundtrip(broker: BrokerProcess, topic_name: Any) -> None:
    topic = topic_name("ck")
    create_topic(broker.bootstrap, topic, PARTS)
    p = Producer(producer_config(broker.bootstrap, extra={"logger": quiet_logger()}))
    errors: list[Any] = []
    t_sent = int(time.time() * 1000) - 5000
    for i in range(N):
        while True:
            try:
                p.produce(
                    topic,
                    key=b"sensor-%d" % (i % KEYS),
                    value=_value(i),
                    headers=[("seq", b"%d" % i)],
                    timestamp=t_sent + i,
                    on_delivery=lambda e, m: e and errors.append(e),
                )
                break
            except BufferError:
                p.poll(0.05)
        if i % 5000 == 0:
            p.poll(0)
    assert p.flush(60) == 0
    assert errors == []
    msgs = consume_all(broker.bootstrap, topic, PARTS, N)
    assert len(msgs) == N
    check_order_and_content([(m.partition(), m.offset(), m.key(), m.value(), m.headers()) for m in msgs])
    # CreateTime timestamps come back as sent
    for m in msgs[:1000]:
        ttype, ts = m.timestamp()
        assert ttype == 1  # TIMESTAMP_CREATE_TIME
        assert ts == t_sent + int(m.value()[:8])
    # murmur2 partitioner: same partition as Kafka's Java default (our helper)
    for m in msgs[:2000]:
        assert m.partition() == partition_for(m.key(), PARTS)


def test_kafka_python_roundtrip(broker: BrokerProcess, topic_name: Any) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTP

    topic = topic_name("kp")
    create_topic(broker.bootstrap, topic, PARTS)
    prod = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=5, batch_size=256 * 1024)
    futs = [
        prod.send(topic, key=b"sensor-%d" % (i % KEYS), value=_value(i), headers=[("seq", b"%d" % i)])
        for i in range(N)
    ]
    prod.flush(60)
    metas = [f.get(timeout=30) for f in futs]
    prod.close()
    # kafka-python's default partitioner is murmur2 (Java's): ours must agree
    assert all(md.partition == partition_for(b"sensor-%d" % (i % KEYS), PARTS) for i, md in enumerate(metas))
    cons = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        enable_auto_commit=False,
        consumer_timeout_ms=5000,
        max_partition_fetch_bytes=4 * 1024 * 1024,
    )
    cons.assign([KTP(topic, p) for p in range(PARTS)])
    cons.seek_to_beginning()
    msgs = []
    for m in cons:
        msgs.append(m)
        if len(msgs) == N:
            break
    cons.close()
    assert len(msgs) == N
    check_order_and_content([(m.partition, m.offset, m.key, m.value, list(m.headers)) for m in msgs])


def test_aiokafka_roundtrip_and_offsets_for_times(broker: BrokerProcess, topic_name: Any) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka import TopicPartition as ATP

    topic = topic_name("aio")
    create_topic(broker.bootstrap, topic, PARTS)
    base_ts = int(time.time() * 1000) - 3_600_000  # an hour ago, one ms per message

    async def run() -> tuple[list[Any], dict[Any, Any], dict[Any, Any]]:
        prod = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=5, max_batch_size=256 * 1024)
        await prod.start()
        try:
            batch: list[Any] = []
            for i in range(N):
                batch.append(
                    prod.send(
                        topic,
                        key=b"sensor-%d" % (i % KEYS),
                        value=_value(i),
                        headers=[("seq", b"%d" % i)],
                        timestamp_ms=base_ts + i,
                    )
                )
                if len(batch) >= 5000:
                    await asyncio.gather(*batch)
                    batch = []
            await asyncio.gather(*batch)
            await prod.flush()
        finally:
            await prod.stop()
        cons = AIOKafkaConsumer(
            bootstrap_servers=broker.bootstrap,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        await cons.start()
        try:
            tps = [ATP(topic, p) for p in range(PARTS)]
            cons.assign(tps)
            await cons.seek_to_beginning()
            got: list[Any] = []
            deadline = time.monotonic() + 60
            while len(got) < N and time.monotonic() < deadline:
                res = await cons.getmany(timeout_ms=500, max_records=20_000)
                for ms in res.values():
                    got.extend(ms)
            # seek by time: the first record at or after base_ts + 50_000 in each partition
            target = base_ts + 50_000
            found = await cons.offsets_for_times(dict.fromkeys(tps, target))
            ends = await cons.end_offsets(tps)
            return got, found, ends
        finally:
            await cons.stop()

    got, found, ends = asyncio.run(run())
    assert len(got) == N
    check_order_and_content([(m.partition, m.offset, m.key, m.value, list(m.headers)) for m in got])
    assert sum(ends.values()) == N
    first_at_or_after: dict[int, tuple[int, int]] = {}
    for m in got:
        if m.timestamp >= base_ts + 50_000 and m.partition not in first_at_or_after:
            first_at_or_after[m.partition] = (m.offset, m.timestamp)
    for tp, ot in found.items():
        assert ot is not None
        assert (ot.offset, ot.timestamp) == first_at_or_after[tp.partition]


def test_offsets_for_times_with_confluent(broker: BrokerProcess, topic_name: Any) -> None:
    topic = topic_name("oft")
    create_topic(broker.bootstrap, topic, 1, {"segment.bytes": "65536", "index.interval.bytes": "1024"})
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 2, "logger": quiet_logger()})
    base = int(time.time() * 1000) - 100_000
    for i in range(20_000):
        p.produce(topic, value=_value(i), timestamp=base + i * 5)
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "oft", "logger": quiet_logger()})
    try:
        for target_i in (0, 1, 777, 10_001, 19_999):
            res = c.offsets_for_times([TopicPartition(topic, 0, base + target_i * 5 - 3)], timeout=10)
            assert res[0].offset == target_i
        beyond = c.offsets_for_times([TopicPartition(topic, 0, base + 10**9)], timeout=10)
        assert beyond[0].offset == -1  # no record that late: end (librdkafka reports -1)
    finally:
        c.close()


def test_log_append_time_topic(broker: BrokerProcess, topic_name: Any) -> None:
    topic = topic_name("lat")
    create_topic(broker.bootstrap, topic, 1, {"message.timestamp.type": "LogAppendTime"})
    p = Producer({"bootstrap.servers": broker.bootstrap, "logger": quiet_logger()})
    before = int(time.time() * 1000)
    for i in range(100):
        p.produce(topic, value=_value(i), timestamp=1_000_000)  # producer's (ignored) event time
    assert p.flush(30) == 0
    after = int(time.time() * 1000)
    msgs = consume_all(broker.bootstrap, topic, 1, 100)
    assert len(msgs) == 100
    for m in msgs:
        ttype, ts = m.timestamp()
        assert ttype == 2  # TIMESTAMP_LOG_APPEND_TIME
        assert before - 5 <= ts <= after + 5


def test_same_key_same_partition_for_each_client(broker: BrokerProcess, topic_name: Any) -> None:
    """Per client: a key always maps to one partition (defaults differ: docs/concepts/partitions.md)."""
    from kafka import KafkaProducer

    topic = topic_name("keys")
    create_topic(broker.bootstrap, topic, 8)
    keys = [b"sensor-%d" % i for i in range(50)]
    # librdkafka default (consistent_random = CRC32)
    p = Producer({"bootstrap.servers": broker.bootstrap, "logger": quiet_logger()})
    seen: dict[bytes, set[int]] = defaultdict(set)

    def cb(err: Any, msg: Any) -> None:
        assert err is None
        seen[msg.key()].add(msg.partition())

    for _ in range(5):
        for k in keys:
            p.produce(topic, key=k, value=b"v", on_delivery=cb)
    assert p.flush(30) == 0
    assert all(len(v) == 1 for v in seen.values())
    # kafka-python (murmur2) agrees with our helper, i.e. with the Java client
    kp = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for k in keys:
        assert kp.send(topic, key=k, value=b"v").get(timeout=10).partition == partition_for(k, 8)
    kp.close()
