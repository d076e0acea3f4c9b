"""Fetch as a consumer with librdkafka's default settings sees it: how many round trips a backlog
takes and how much each response carries (framework/server/handlers/fetch.py and the storage
read path). Counted from the client's own statistics, never timed.

librdkafka asks for max.partition.fetch.bytes = 1 MiB per partition and fetches again as soon
as a response is in. A broker that answers with less than it was asked for while a backlog
remains costs the consumer round trips; one that answers with more than it was asked for
(several MB per response) breaks the client's memory bound. Either shows up here as the number
of Fetch requests and the bytes per response.
"""

from __future__ import annotations

import json
import math
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.support.brokers import create_topic, quiet_logger

pytestmark = pytest.mark.integration

N = 80_000
VALUE = 100
BATCH = 64 * 1024  # producer batch.size: a response cut at a batch boundary is still ~full
ASKED = 1_048_576  # librdkafka's default max.partition.fetch.bytes
RECORD_MAX = VALUE + 20  # a stored 100-byte record with its record and batch overheads, at most


def _fill(bootstrap: str, topic: str) -> None:
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 5,
            "batch.size": BATCH,
            "queue.buffering.max.messages": 2 * N,
            "logger": quiet_logger(),
        }
    )
    value = b"v" * VALUE
    for _ in range(N):
        p.produce(topic, value, partition=0)
    assert p.flush(60) == 0


def _default_consumer_stats(bootstrap: str, topic: str) -> dict[str, Any]:
    """Read the topic from offset 0 with the client's default fetch settings; the statistics of
    the broker connection that served the fetches, taken once everything was read."""
    reports: list[dict[str, Any]] = []
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"fetch-{topic}",
            "enable.auto.commit": False,
            "statistics.interval.ms": 100,
            "stats_cb": lambda s: reports.append(json.loads(s)),
            "logger": quiet_logger(),
        }
    )
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        got, deadline = 0, time.monotonic() + 60
        while got < N and time.monotonic() < deadline:
            got += sum(1 for m in c.consume(10_000, 0.5) if m.error() is None)
        assert got == N

        def fetched(r: dict[str, Any]) -> int:
            return int(r["topics"].get(topic, {}).get("partitions", {}).get("0", {}).get("rxmsgs", 0))

        # the first statistics report taken once the whole backlog had come in: the client goes on
        # fetching at the log end (empty long polls), more of them the longer a busy machine
        # takes to hand over a later report, and those are not the backlog's round trips
        while not any(fetched(r) >= N for r in reports) and time.monotonic() < deadline:
            c.poll(0.05)
    finally:
        c.close()
    first = next(r for r in reports if fetched(r) >= N)
    return max(first["brokers"].values(), key=lambda b: b["req"].get("Fetch", 0))


def test_a_default_consumer_reads_a_backlog_in_full_responses(broker: Any, topic_name: Any) -> None:
    topic = topic_name("fetch")
    create_topic(broker.bootstrap, topic)
    _fill(broker.bootstrap, topic)
    stats = _default_consumer_stats(broker.bootstrap, topic)
    fetches, received = stats["req"]["Fetch"], stats["rxbytes"]
    # The backlog needs this many responses of at least ASKED minus one batch (a response may
    # stop at a batch boundary); the last one or two fetches may find the log end (empty).
    backlog = N * RECORD_MAX
    assert fetches <= math.ceil(backlog / (ASKED - BATCH)) + 2, (fetches, received)
    # ... and none carries much more than it was asked for (KIP-74: one whole batch over the
    # limit at most, only when it alone is larger).
    assert received <= fetches * (ASKED + BATCH + 1024) + 64 * 1024, (fetches, received)
    assert received >= N * VALUE  # every value came over this connection
