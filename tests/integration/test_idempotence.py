"""Exactly-once per partition through a faulty network.

A fault-injection proxy between a confluent-kafka producer and the broker drops produce
responses after the broker applied them and cuts connections before requests arrive. With
idempotence every message is in the partition exactly once, in the order sent; the same run
without idempotence shows duplicates, proving the test can see them.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from framework.client.producer import producer_config
from testing import free_port
from tests.support.brokers import BrokerFactory, create_topic, quiet_logger
from tests.support.clients import consume_all
from tests.support.fault_proxy import FaultProxy

pytestmark = pytest.mark.integration

N = 200_000


def run_through_faults(
    broker_factory: BrokerFactory, idempotent: bool, in_flight: int = 5
) -> tuple[list[int], FaultProxy]:
    port = free_port()
    proxy = FaultProxy(("127.0.0.1", port), drop_response=0.05, drop_request=0.03, seed=7)
    b = broker_factory(port=port, extra_args=["--advertise", f"127.0.0.1:{proxy.port}"])
    create_topic(b.bootstrap, "eo", 1)
    conf: dict[str, Any] = {
        "bootstrap.servers": f"127.0.0.1:{proxy.port}",
        "enable.idempotence": idempotent,
        "acks": "all",
        "linger.ms": 2,
        "batch.num.messages": 1000,
        "retries": 1_000_000,
        "retry.backoff.ms": 5,
        "reconnect.backoff.ms": 5,
        "message.timeout.ms": 300_000,
        "max.in.flight.requests.per.connection": in_flight,
        "logger": quiet_logger(),
    }
    p = Producer(conf)
    errors: list[Any] = []
    for i in range(N):
        while True:
            try:
                p.produce("eo", value=b"%d" % i, on_delivery=lambda e, m: e and errors.append(e))
                break
            except BufferError:
                p.poll(0.01)
        if i % 2000 == 0:
            p.poll(0)
    assert p.flush(240) == 0
    assert errors == [], errors[:3]
    proxy.enabled.clear()
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "eo-hw", "logger": quiet_logger()})
    _, high = c.get_watermark_offsets(TopicPartition("eo", 0), timeout=10)
    c.close()
    msgs = consume_all(b.bootstrap, "eo", 1, high, timeout=60)
    assert len(msgs) == high
    proxy.close()
    return [int(m.value()) for m in msgs], proxy


def test_idempotent_producer_writes_each_message_once_in_order(
    broker_factory: BrokerFactory,
) -> None:
    ids, proxy = run_through_faults(broker_factory, idempotent=True)
    assert proxy.stats.responses_dropped > 0 and proxy.stats.requests_dropped > 0, "no faults were injected"
    assert len(ids) == N, f"{len(ids) - N:+d} messages"
    assert ids == list(range(N))


def test_without_idempotence_the_same_faults_duplicate(broker_factory: BrokerFactory) -> None:
    ids, proxy = run_through_faults(broker_factory, idempotent=False)
    assert proxy.stats.responses_dropped > 0
    assert set(ids) == set(range(N)), "at-least-once must not lose messages"
    dups = sum(c - 1 for c in Counter(ids).values())
    assert dups > 0, "expected retried batches to be written twice without idempotence"


def test_one_request_in_flight_keeps_order_without_idempotence(
    broker_factory: BrokerFactory,
) -> None:
    """MapR's parallel_flushers=False: duplicates may still occur, reordering may not."""
    conf = producer_config("x", exactly_once=False, parallel_flushers=False)
    ids, _ = run_through_faults(
        broker_factory, idempotent=False, in_flight=conf["max.in.flight.requests.per.connection"]
    )
    assert set(ids) == set(range(N))
    first_seen: list[int] = []
    seen: set[int] = set()
    for i in ids:
        if i not in seen:
            seen.add(i)
            first_seen.append(i)
    assert first_seen == list(range(N)), "messages were reordered"
