"""Records for the mirror tests and reading them back: numbered records with headers and
timestamps (:func:`produce_numbered`), a partition read to its end at an isolation level
(:func:`read_partition`), and the sum of topics' end offsets (:func:`end_offsets`)."""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition

from tests.support.brokers import quiet_logger

BASE_TS = int(time.time() * 1000) - 3_600_000  # an hour ago: within every retention


def produce_numbered(
    bootstrap: str, topic: str, start: int, stop: int, parts: int, pace: float = 0.0
) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "logger": quiet_logger(), "linger.ms": 5})
    for i in range(start, stop):
        p.produce(
            topic,
            f"{topic}-{i}".encode(),
            f"k{i % 97}".encode(),
            partition=i % parts,
            timestamp=BASE_TS + i,
            headers=[("seq", str(i).encode()), ("empty", b"")],
        )
        if pace and i % 100 == 0:
            p.poll(0)
            time.sleep(pace)
    assert p.flush(30) == 0


def read_partition(
    bootstrap: str, topic: str, partition: int, isolation: str = "read_committed"
) -> list[Any]:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "reader-of-everything",
            "logger": quiet_logger(),
            "enable.partition.eof": True,
            "isolation.level": isolation,
        }
    )
    try:
        low, high = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        out: list[Any] = []
        if high <= low:
            return out
        c.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        while True:
            for m in c.consume(5000, 1.0):
                if m.error() is None:
                    out.append(m)
                    if m.offset() >= high - 1:
                        return out
                elif m.error().code() == KafkaError._PARTITION_EOF:
                    return out
    finally:
        c.close()


def end_offsets(bootstrap: str, topics: dict[str, int]) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe", "logger": quiet_logger()})
    try:
        total = 0
        for t, n in topics.items():
            for p in range(n):
                try:
                    total += c.get_watermark_offsets(TopicPartition(t, p), timeout=5)[1]
                except Exception:
                    pass
        return total
    finally:
        c.close()
