"""Reading what tests produced: every record of a topic's partitions with a consumer of its own
(:func:`consume_all`), or of one partition at an isolation level (:func:`consume`)."""

from __future__ import annotations

import time
import uuid
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from tests.support.brokers import quiet_logger


def consume_all(
    bootstrap: str, topic: str, partitions: int, expected: int, timeout: float = 60, **conf: Any
) -> list[Any]:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{topic}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "logger": quiet_logger(),
            **conf,
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[Any] = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < expected and time.monotonic() < deadline:
            for m in c.consume(10_000, timeout=0.5):
                if m.error() is None:
                    out.append(m)
    finally:
        c.close()
    return out


def consume(
    bootstrap: str,
    topic: str,
    isolation: str,
    partitions: int = 1,
    expect: int | None = None,
    idle_polls: int = 4,
) -> list[bytes]:
    """Every value from the start of ``topic``; stops after ``expect`` values, or when idle."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"t-{uuid.uuid4().hex[:8]}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "logger": quiet_logger(),
        }
    )
    out: list[bytes] = []
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        idle = 0
        while idle < idle_polls and (expect is None or len(out) < expect):
            msgs = c.consume(500, timeout=0.5)
            idle = 0 if msgs else idle + 1
            for m in msgs:
                if m.error() is not None:
                    continue
                out.append(bytes(m.value() or b""))
    finally:
        c.close()
    return out
