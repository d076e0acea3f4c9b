"""KIP-848 consumer groups (``group.protocol=consumer``) with librdkafka: the broker assigns."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.support.brokers import BrokerFactory, create_topic, quiet_logger

pytestmark = pytest.mark.integration

TOPIC = "kip848"
GROUP = "kip848-app"
FAST = {"group.consumer.heartbeat.interval.ms": 300, "group.consumer.session.timeout.ms": 10_000}


def consumer(bootstrap: str, **extra: Any) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "logger": quiet_logger(),
        }
        | extra
    )


def poll_until(consumers: list[Consumer], done: Any, timeout: float, what: str, seen: list[Any]) -> None:
    """Poll every consumer in turn (they heartbeat from their own threads) until ``done()``."""
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        for c in consumers:
            m = c.poll(0.1)
            if m is not None and m.error() is None:
                seen.append((c, m.partition(), m.offset(), m.value()))


def parts(c: Consumer) -> set[int]:
    return {tp.partition for tp in c.assignment()}


def test_two_consumers_share_a_topic_then_one_takes_all(broker_factory: BrokerFactory) -> None:
    b = broker_factory(FAST)
    create_topic(b.bootstrap, TOPIC, 4)
    a, c = consumer(b.bootstrap), consumer(b.bootstrap)
    a.subscribe([TOPIC])
    c.subscribe([TOPIC])
    seen: list[Any] = []
    try:
        # both members hold two partitions each (the records come after: without commits a
        # partition moving on would be read again from the start)
        poll_until([a, c], lambda: len(parts(a)) == 2 and len(parts(c)) == 2, 60, "two members", seen)
        p = Producer({"bootstrap.servers": b.bootstrap, "logger": quiet_logger()})
        for i in range(40):
            p.produce(TOPIC, value=b"%d" % i, partition=i % 4)
        assert p.flush(30) == 0
        poll_until([a, c], lambda: len(seen) >= 40, 60, "every record", seen)
        assert parts(a) | parts(c) == {0, 1, 2, 3}
        assert sorted(int(v) for _, _, _, v in seen) == list(range(40))

        # the group as AdminClient sees it: a consumer group with both members
        admin = AdminClient({"bootstrap.servers": b.bootstrap, "logger": quiet_logger()})
        desc = admin.describe_consumer_groups([GROUP])[GROUP].result(timeout=30)
        assert desc.state == ConsumerGroupState.STABLE
        assert len(desc.members) == 2
        described = {tp.partition for m in desc.members for tp in m.assignment.topic_partitions}
        assert described == {0, 1, 2, 3}

        # committed offsets, read back by the member's epoch
        a.commit(asynchronous=False)
        mine = parts(a)
        committed = a.committed([TopicPartition(TOPIC, q) for q in sorted(mine)], timeout=30)
        assert all(tp.error is None and tp.offset == 10 for tp in committed), committed

        # one member leaves: the other gets all four partitions
        c.close()
        poll_until([a], lambda: parts(a) == {0, 1, 2, 3}, 60, "every partition on the remaining member", seen)
        listed = admin.list_consumer_groups().result(timeout=30)
        assert [g.group_id for g in listed.valid] == [GROUP]
    finally:
        a.close()
    # a new member of the empty group resumes from the committed offsets
    seen.clear()
    d = consumer(b.bootstrap)
    d.subscribe([TOPIC])
    try:
        poll_until([d], lambda: len(parts(d)) == 4 and len(seen) >= 40 - 20, 60, "a rejoin", seen)
        # the two partitions committed above are not read again
        assert {q for _, q, _, _ in seen} == {0, 1, 2, 3} - mine
    finally:
        d.close()


def test_a_regex_subscription_picks_up_a_topic_created_later(broker_factory: BrokerFactory) -> None:
    b = broker_factory(FAST)
    create_topic(b.bootstrap, "re-first", 2)
    create_topic(b.bootstrap, "other", 1)
    c = consumer(b.bootstrap)
    c.subscribe(["^re-.*"])  # librdkafka sends it as SubscribedTopicRegex: the broker resolves it
    seen: list[Any] = []
    try:
        poll_until([c], lambda: {tp.topic for tp in c.assignment()} == {"re-first"}, 60, "re-first", seen)
        create_topic(b.bootstrap, "re-later", 1)
        p = Producer({"bootstrap.servers": b.bootstrap, "logger": quiet_logger()})
        for topic in ("re-later", "other"):
            p.produce(topic, value=topic.encode())
        assert p.flush(30) == 0
        poll_until([c], lambda: any(v == b"re-later" for *_, v in seen), 60, "the new topic", seen)
        assert {tp.topic for tp in c.assignment()} == {"re-first", "re-later"}
        admin = AdminClient({"bootstrap.servers": b.bootstrap, "logger": quiet_logger()})
        (member,) = admin.describe_consumer_groups([GROUP])[GROUP].result(timeout=30).members
        assert {tp.topic for tp in member.assignment.topic_partitions} == {"re-first", "re-later"}
    finally:
        c.close()
    assert b"other" not in [v for *_, v in seen]


def test_a_static_member_restarting_gets_its_partitions_back(broker_factory: BrokerFactory) -> None:
    b = broker_factory(FAST)
    create_topic(b.bootstrap, TOPIC, 4)
    a = consumer(b.bootstrap, **{"group.instance.id": "host-a"})
    c = consumer(b.bootstrap, **{"group.instance.id": "host-c"})
    for m in (a, c):
        m.subscribe([TOPIC])
    seen: list[Any] = []
    try:
        poll_until([a, c], lambda: len(parts(a)) == 2 and len(parts(c)) == 2, 60, "two members", seen)
        held = parts(c)
        admin = AdminClient({"bootstrap.servers": b.bootstrap, "logger": quiet_logger()})
        c.close()  # a static member leaves for now (epoch -2): its partitions wait for it
        # no event marks "no rebalance": a polls through five of its heartbeats (300 ms) and
        # must keep its two partitions
        until = time.monotonic() + 1.5
        while time.monotonic() < until:
            a.poll(0.1)
            assert len(parts(a)) == 2, "the group rebalanced while the static member was away"
        c = consumer(b.bootstrap, **{"group.instance.id": "host-c"})
        c.subscribe([TOPIC])
        most = [0]

        def back() -> bool:
            most[0] = max(most[0], len(parts(a)))
            return parts(c) == held

        poll_until([a, c], back, 60, "the restarted member's partitions", seen)
        assert most[0] == 2, "the group rebalanced while the static member restarted"
        desc = admin.describe_consumer_groups([GROUP])[GROUP].result(timeout=30)
        assert sorted(m.group_instance_id for m in desc.members) == ["host-a", "host-c"]
    finally:
        a.close()
        c.close()
