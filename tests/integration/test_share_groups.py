"""Share groups (KIP-932) with librdkafka's ShareConsumer: a topic read as a queue."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer

from testing import sftraffic
from tests.support.brokers import BrokerFactory, create_topic, quiet_logger

pytestmark = pytest.mark.integration

TOPIC = "queue"
# short locks and a low delivery limit, so redelivery and archiving show within seconds
FAST = {
    "share.auto.offset.reset": "earliest",
    "group.share.record.lock.duration.ms": 3000,
    "group.share.delivery.count.limit": 3,
    "group.share.heartbeat.interval.ms": 500,
}


def share_consumer(bootstrap: str, group: str, explicit: bool = False) -> ShareConsumer:
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "group.id": group, "logger": quiet_logger()}
    if explicit:
        conf["share.acknowledgement.mode"] = "explicit"
    return ShareConsumer(conf)


def produce(bootstrap: str, n: int, partitions: int = 1) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "logger": quiet_logger()})
    for i in range(n):
        p.produce(TOPIC, value=f"r{i}".encode(), partition=i % partitions)
    assert p.flush(30) == 0


def test_four_consumers_on_eight_partitions_get_every_record_once(broker_factory: BrokerFactory) -> None:
    b = broker_factory(FAST | {"group.share.record.lock.duration.ms": 30_000})
    create_topic(b.bootstrap, TOPIC, 8)
    produce(b.bootstrap, 800, partitions=8)
    consumers = [share_consumer(b.bootstrap, "workers") for _ in range(4)]
    for c in consumers:
        c.subscribe([TOPIC])
    seen: Counter[tuple[int, int]] = Counter()
    by_consumer: Counter[int] = Counter()
    deadline = time.monotonic() + 60
    try:
        while len(seen) < 800:
            assert time.monotonic() < deadline, f"only {len(seen)} of 800 records delivered"
            for i, c in enumerate(consumers):
                for m in c.poll(0.2):
                    assert m.error() is None, m.error()
                    seen[(m.partition(), m.offset())] += 1
                    by_consumer[i] += 1
    finally:
        for c in consumers:
            c.close()
    assert sorted(seen) == sorted((p, o) for p in range(8) for o in range(100))
    assert [k for k, n in seen.items() if n > 1] == [], "records delivered twice"
    assert len(by_consumer) >= 2, f"one consumer read everything: {by_consumer}"


CHILD = textwrap.dedent(
    """
    import sys, time
    from confluent_kafka import ShareConsumer
    c = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": "crashy",
                       "share.acknowledgement.mode": "explicit"})
    c.subscribe(["queue"])
    while True:
        msgs = [m for m in c.poll(0.5) if m.error() is None]
        if msgs:
            print(" ".join(str(m.offset()) for m in msgs), flush=True)
            time.sleep(3600)  # holds its records, never acknowledges
    """
)


def held_by_a_child(bootstrap: str) -> tuple[subprocess.Popen[str], set[int]]:
    """A consumer in another process that acquired records and holds them."""
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, bootstrap], stdout=subprocess.PIPE, text=True, env=os.environ.copy()
    )
    assert child.stdout is not None
    held = {int(o) for o in child.stdout.readline().split()}
    if not held:
        child.kill()
        child.wait()
    assert held, "the first consumer got nothing"
    return child, held


def read_again(bootstrap: str, held: set[int], timeout: float) -> dict[int, int]:
    """Another member reads the whole partition: offset -> delivery count."""
    c = share_consumer(bootstrap, "crashy")
    c.subscribe([TOPIC])
    again: dict[int, int] = {}
    t0 = time.monotonic()
    try:
        while not (held <= set(again) and len(again) == 20):
            assert time.monotonic() - t0 < timeout, f"not delivered again: {sorted(held - set(again))}"
            for m in c.poll(0.5):
                assert m.error() is None, m.error()
                again[m.offset()] = m.delivery_count()
    finally:
        c.close()
    return again


def test_a_killed_consumers_records_come_again_when_its_connection_closes(
    broker_factory: BrokerFactory,
) -> None:
    b = broker_factory(FAST | {"group.share.record.lock.duration.ms": 60_000})
    create_topic(b.bootstrap, TOPIC, 1)
    produce(b.bootstrap, 20)
    child, held = held_by_a_child(b.bootstrap)
    child.send_signal(signal.SIGKILL)
    child.wait()
    # the closed connection ends its share session: the records are free long before the
    # 60 s lock, and that delivery, never processed, is not counted (as Kafka)
    again = read_again(b.bootstrap, held, timeout=30)
    assert {again[o] for o in held} == {1}
    assert set(again) == set(range(20))


def test_a_hung_consumers_records_come_again_after_the_lock(broker_factory: BrokerFactory) -> None:
    b = broker_factory(FAST)
    create_topic(b.bootstrap, TOPIC, 1)
    produce(b.bootstrap, 20)
    child, held = held_by_a_child(b.bootstrap)
    child.send_signal(signal.SIGSTOP)  # alive, connected, silent
    try:
        again = read_again(b.bootstrap, held, timeout=30)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    # its records come again once their 3 s locks expire, as a second delivery (a closed
    # session would not have counted the first)
    assert {again[o] for o in held} == {2}
    assert set(again) == set(range(20))


def test_released_records_are_archived_at_the_delivery_limit(broker_factory: BrokerFactory) -> None:
    b = broker_factory(FAST)
    create_topic(b.bootstrap, TOPIC, 1)
    produce(b.bootstrap, 10)
    c = share_consumer(b.bootstrap, "picky", explicit=True)
    c.subscribe([TOPIC])
    deliveries: Counter[int] = Counter()
    accepted: set[int] = set()
    deadline = time.monotonic() + 40
    try:
        # offset 0 is poison (released every time), 1 is rejected once, the rest accepted
        while accepted != set(range(2, 10)) or deliveries[0] < 3:
            assert time.monotonic() < deadline, f"deliveries {dict(deliveries)}, accepted {sorted(accepted)}"
            for m in c.poll(0.5):
                assert m.error() is None, m.error()
                o = m.offset()
                deliveries[o] += 1
                assert m.delivery_count() == deliveries[o]
                if o == 0:
                    c.acknowledge(m, AcknowledgeType.RELEASE)
                elif o == 1:
                    c.acknowledge(m, AcknowledgeType.REJECT)
                else:
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
                    accepted.add(o)
            c.commit_sync()
        # nothing more comes: 0 reached the limit of 3 deliveries, 1 was rejected
        produce(b.bootstrap, 1)
        late: list[int] = []
        while not late:
            assert time.monotonic() < deadline, "the record produced last never came"
            late = [m.offset() for m in c.poll(0.5) if m.error() is None]
            for m in late:
                c.acknowledge_offset(TOPIC, 0, m, AcknowledgeType.ACCEPT)
        assert late == [10]
    finally:
        c.close()
    assert deliveries[0] == 3 and deliveries[1] == 1


def cli(*args: str) -> str:
    """What an ``sftraffic`` command prints; it must succeed."""
    r = subprocess.run(sftraffic(*args), check=False, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_groups_list_and_describe_show_a_share_group(broker_factory: BrokerFactory) -> None:
    b = broker_factory(FAST)
    create_topic(b.bootstrap, TOPIC, 2)
    produce(b.bootstrap, 6, partitions=2)
    c = share_consumer(b.bootstrap, "cli-workers")
    c.subscribe([TOPIC])
    got = 0
    deadline = time.monotonic() + 30
    try:
        while got < 6:
            assert time.monotonic() < deadline, f"only {got} of 6 records delivered"
            got += sum(1 for m in c.poll(0.5) if m.error() is None)
        c.commit_sync()
        groups = json.loads(cli("groups", "list", "-o", "json", "-b", b.bootstrap))["groups"]
        assert {
            "group_id": "cli-workers",
            "state": "Stable",
            "type": "share",
            "is_simple_consumer_group": False,
        } in groups
        out = cli("groups", "describe", "cli-workers", "-o", "json", "-b", b.bootstrap)
        (g,) = json.loads(out)["groups"]
        assert (g["type"], g["state"], g["partition_assignor"]) == ("share", "Stable", "simple")
        (m,) = g["members"]
        assert m["subscribed_topics"] == [TOPIC]
        assert m["assignment"] == [{"topic": TOPIC, "partition": p} for p in (0, 1)]
    finally:
        c.close()
    produce(b.bootstrap, 2)  # both to partition 0, unread
    out = cli("groups", "describe", "cli-workers", "-o", "json", "-b", b.bootstrap)
    (g,) = json.loads(out)["groups"]
    assert (g["state"], g["members"]) == ("Empty", [])
    assert g["offsets"] == [
        {"topic": TOPIC, "partition": 0, "start_offset": 3, "lag": 2},
        {"topic": TOPIC, "partition": 1, "start_offset": 3, "lag": 0},
    ]
    assert g["total_lag"] == 2
    assert "nothing changed" in cli(
        "groups", "reset-offsets", "cli-workers", "-t", TOPIC, "--to-earliest", "-b", b.bootstrap
    )
    cli(
        "groups", "reset-offsets", "cli-workers", "-t", TOPIC, "--to-earliest", "--execute", "-b", b.bootstrap
    )
    (g,) = json.loads(cli("groups", "describe", "cli-workers", "-o", "json", "-b", b.bootstrap))["groups"]
    assert [(o["start_offset"], o["lag"]) for o in g["offsets"]] == [(0, 5), (0, 3)]
    assert "deleted group cli-workers" in cli("groups", "delete", "cli-workers", "-b", b.bootstrap)
    listed = json.loads(cli("groups", "list", "-o", "json", "-b", b.bootstrap))["groups"]
    assert "cli-workers" not in {x["group_id"] for x in listed}
