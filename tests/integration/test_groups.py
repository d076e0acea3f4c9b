"""Consumer groups with real clients: load sharing, member loss, commits, restarts."""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections import Counter, defaultdict
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from testing import BrokerProcess, ManagedProcess, wait_for
from tests.support.brokers import BrokerFactory, create_topic, quiet_logger

pytestmark = pytest.mark.integration


def produce_range(bootstrap: str, topic: str, start: int, stop: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "logger": quiet_logger()})
    for i in range(start, stop):
        p.produce(topic, key=b"s%d" % (i % 500), value=b"%d" % i)
        if i % 5000 == 0:
            p.poll(0)
    assert p.flush(30) == 0


class Member:
    """A group member process and what it reported."""

    def __init__(self, bootstrap: str, group: str, topic: str, session_ms: int) -> None:
        self.assigned: set[int] = set()
        self.assign_times: list[tuple[float, set[int]]] = []
        self.msgs: list[tuple[int, int, int]] = []
        self.lock = threading.Lock()
        cmd = [sys.executable, "-m", "tests.support.group_consumer", bootstrap, group, topic, str(session_ms)]
        self.proc = ManagedProcess(f"member-{group}", cmd, grace=30.0)
        self.proc.on_line(self._line)
        self.proc.launch()

    def _line(self, line: str) -> None:
        kind, _, rest = line.partition(" ")
        with self.lock:
            if kind == "A":
                self.assigned = {int(x) for x in rest.split(",") if x}
                self.assign_times.append((time.monotonic(), set(self.assigned)))
            elif kind == "M":
                p, o, v = rest.split(" ")
                self.msgs.append((int(p), int(o), int(v)))

    def stop(self) -> None:
        self.proc.stop()


def test_four_members_share_twelve_partitions_and_survive_a_sigkill(
    broker_factory: BrokerFactory,
) -> None:
    b = broker_factory()
    create_topic(b.bootstrap, "shared", 12)
    produce_range(b.bootstrap, "shared", 0, 40_000)
    session_ms = 6000
    members = [Member(b.bootstrap, "g-share", "shared", session_ms) for _ in range(4)]
    try:

        def all_assigned() -> bool:
            parts = [m.assigned for m in members]
            return all(parts) and sorted(p for s in parts for p in s) == list(range(12))

        wait_for(all_assigned, timeout=60, what="12 partitions spread over 4 members")
        counts = [len(m.assigned) for m in members]
        assert sorted(counts) == [3, 3, 3, 3], counts

        def consumed() -> set[int]:
            out: set[int] = set()
            for m in members:
                with m.lock:
                    out.update(v for _, _, v in m.msgs)
            return out

        wait_for(lambda: len(consumed()) >= 40_000, timeout=60, what="the first 40k messages")
        victim = members[0]
        lost_parts = set(victim.assigned)
        victim.proc.kill()  # SIGKILL: no LeaveGroup, no final commit
        killed_at = time.monotonic()
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "g-share", "logger": quiet_logger()})
        committed = {
            tp.partition: tp.offset
            for tp in c.committed([TopicPartition("shared", p) for p in lost_parts], timeout=10)
        }
        c.close()
        produce_range(b.bootstrap, "shared", 40_000, 80_000)
        survivors = members[1:]

        def moved() -> bool:
            return sorted(p for m in survivors for p in m.assigned) == list(range(12))

        wait_for(moved, timeout=session_ms / 1000 + 30, what="the dead member's partitions to move")
        took = max(t for m in survivors for t, _ in m.assign_times) - killed_at
        assert took <= session_ms / 1000 + 10, f"rebalance took {took:.1f}s"
        wait_for(lambda: len(consumed()) >= 80_000, timeout=60, what="all 80k messages")
        assert consumed() == set(range(80_000)), "a message was lost"
        # duplicates: only what the dead member read after its last commit
        seen = Counter(v for m in members for _, _, v in m.msgs)
        dups = {v for v, n in seen.items() if n > 1}
        uncommitted = {v for p, o, v in victim.msgs if p in lost_parts and o >= committed.get(p, 0)}
        assert dups <= uncommitted, "duplicates outside the uncommitted window"
        assert len(dups) <= len(uncommitted)
    finally:
        for m in members:
            m.stop()


def test_commits_survive_a_coordinator_restart(broker_factory: BrokerFactory) -> None:
    b = broker_factory()
    create_topic(b.bootstrap, "resume", 3)
    produce_range(b.bootstrap, "resume", 0, 3000)
    conf = {
        "bootstrap.servers": b.bootstrap,
        "group.id": "g-resume",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "logger": quiet_logger(),
    }
    c = Consumer(conf)
    c.subscribe(["resume"])
    got: list[Any] = []
    deadline = time.monotonic() + 30
    while len(got) < 1500 and time.monotonic() < deadline:
        got.extend(m for m in c.consume(100, timeout=0.5) if m.error() is None)
    c.commit(asynchronous=False)
    positions = {
        tp.partition: tp.offset for tp in c.position([TopicPartition("resume", p) for p in range(3)])
    }
    c.close()
    b.stop()
    b.start()
    c2 = Consumer(conf)
    committed = {
        tp.partition: tp.offset
        for tp in c2.committed([TopicPartition("resume", p) for p in range(3)], timeout=10)
    }
    assert committed == positions
    c2.subscribe(["resume"])
    rest: list[Any] = []
    deadline = time.monotonic() + 30
    while len(got) + len(rest) < 3000 and time.monotonic() < deadline:
        rest.extend(m for m in c2.consume(500, timeout=0.5) if m.error() is None)
    c2.close()
    values = sorted(int(m.value()) for m in got + rest)
    assert values == list(range(3000)), "resumed consumer skipped or re-read messages"


def test_aiokafka_group_shares_partitions_and_commits(broker: BrokerProcess, topic_name: Any) -> None:
    from aiokafka import AIOKafkaConsumer
    from aiokafka import TopicPartition as ATP

    topic = topic_name("aiog")
    create_topic(broker.bootstrap, topic, 6)
    produce_range(broker.bootstrap, topic, 0, 6000)

    async def run() -> tuple[list[set[int]], int, dict[int, int]]:
        consumers = [
            AIOKafkaConsumer(
                topic,
                bootstrap_servers=broker.bootstrap,
                group_id="g-aio",
                auto_offset_reset="earliest",
                enable_auto_commit=False,
                session_timeout_ms=10000,
                heartbeat_interval_ms=500,
            )
            for _ in range(3)
        ]
        for c in consumers:
            await c.start()
        seen: set[int] = set()
        deadline = time.monotonic() + 60
        while len(seen) < 6000 and time.monotonic() < deadline:
            for c in consumers:
                res = await c.getmany(timeout_ms=200)
                for ms in res.values():
                    seen.update(int(m.value) for m in ms)
        for c in consumers:
            await c.commit()
        parts = [{tp.partition for tp in c.assignment()} for c in consumers]
        committed = {p: await consumers[0].committed(ATP(topic, p)) for p in range(6)}
        for c in consumers:
            await c.stop()
        return parts, len(seen), committed

    parts, n, committed = asyncio.run(run())
    assert n == 6000
    assert sorted(p for s in parts for p in s) == list(range(6))
    assert all(s for s in parts), "a member got no partition"
    assert sum(committed.values()) == 6000


def test_static_member_restart_keeps_assignment_without_rebalance(
    broker: BrokerProcess, topic_name: Any
) -> None:
    topic = topic_name("static")
    create_topic(broker.bootstrap, topic, 4)
    produce_range(broker.bootstrap, topic, 0, 400)

    def member(instance: str) -> Consumer:
        c = Consumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": f"g-{topic}",
                "group.instance.id": instance,
                "session.timeout.ms": 30000,
                "auto.offset.reset": "earliest",
                "logger": quiet_logger(),
            }
        )
        c.subscribe([topic])
        return c

    a, bm = member("a"), member("b")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (not a.assignment() or not bm.assignment()):
        a.consume(10, timeout=0.2)
        bm.consume(10, timeout=0.2)
    before = {tp.partition for tp in a.assignment()}
    assert before and {tp.partition for tp in bm.assignment()} == set(range(4)) - before
    a.close()  # a static member's close does not leave the group
    gen_before = broker_groups_generation(broker, f"g-{topic}")
    a2 = member("a")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not a2.assignment():
        a2.consume(10, timeout=0.2)
        bm.consume(10, timeout=0.2)
    assert {tp.partition for tp in a2.assignment()} == before
    assert broker_groups_generation(broker, f"g-{topic}") == gen_before, "a rebalance happened"
    a2.close()
    bm.close()


def broker_groups_generation(broker: BrokerProcess, group: str) -> int:
    """How many rebalances the broker started for ``group`` (from its log)."""
    return broker.logs().count(f"group {group}: preparing rebalance")


def test_bad_group_requests_get_kafka_errors(broker: BrokerProcess) -> None:
    from framework.client.wire import WireClient
    from framework.protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
    from framework.protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
    from framework.protocol.messages.offset_commit import (
        OffsetCommitRequest,
        OffsetCommitRequestPartition,
        OffsetCommitRequestTopic,
        OffsetCommitResponse,
    )
    from framework.protocol.messages.sync_group import SyncGroupRequest, SyncGroupResponse

    with WireClient(broker.bootstrap) as w:
        # a client retries NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS: a fresh Kafka makes
        # its offsets topic on the first FindCoordinator and loads the group's shard after it
        hb = HeartbeatResponse()

        def answered() -> bool:
            nonlocal hb
            w.send(FindCoordinatorRequest(coordinator_keys=["nope"]), FindCoordinatorResponse)
            hb = w.send(
                HeartbeatRequest(group_id="nope", generation_id=1, member_id="ghost"), HeartbeatResponse
            )
            return hb.error_code not in (14, 15, 16)

        wait_for(answered, timeout=30, interval=0.2, what="the group's coordinator")
        assert hb.error_code == 25  # UNKNOWN_MEMBER_ID
        ghost = SyncGroupRequest(
            group_id="nope",
            generation_id=1,
            member_id="ghost",
            protocol_type="consumer",
            protocol_name="range",
        )
        assert w.send(ghost, SyncGroupResponse).error_code == 25  # UNKNOWN_MEMBER_ID
        # v5+ without protocol type and name: INCONSISTENT_GROUP_PROTOCOL, as Kafka answers
        sy = w.send(SyncGroupRequest(group_id="nope", generation_id=1, member_id="ghost"), SyncGroupResponse)
        assert sy.error_code == 23
        oc = w.send(
            OffsetCommitRequest(
                group_id="standalone",
                generation_id_or_member_epoch=-1,
                member_id="",
                topics=[
                    OffsetCommitRequestTopic(
                        name="no-such-topic",
                        partitions=[OffsetCommitRequestPartition(partition_index=0, committed_offset=5)],
                    )
                ],
            ),
            OffsetCommitResponse,
        )
        assert oc.topics[0].partitions[0].error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION
        stale = OffsetCommitRequest(
            group_id="never-joined",
            generation_id_or_member_epoch=7,
            member_id="x",
            topics=[
                OffsetCommitRequestTopic(
                    name="__consumer_offsets",
                    partitions=[OffsetCommitRequestPartition(partition_index=0, committed_offset=5)],
                )
            ],
        )
        # a generation for a group that does not exist: GROUP_ID_NOT_FOUND from v9 on (KIP-848),
        # ILLEGAL_GENERATION before, as Kafka's OffsetMetadataManager answers
        for version, code in ((9, 69), (8, 22)):
            got = w.send(stale, OffsetCommitResponse, version=version).topics[0].partitions[0].error_code
            assert got == code, (version, got)


def test_consumer_lag_is_visible(broker: BrokerProcess, topic_name: Any) -> None:
    topic = topic_name("lag")
    create_topic(broker.bootstrap, topic, 2)
    produce_range(broker.bootstrap, topic, 0, 1000)
    c = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"g-{topic}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "logger": quiet_logger(),
        }
    )
    c.assign([TopicPartition(topic, 0, 0), TopicPartition(topic, 1, 0)])
    got: dict[int, int] = defaultdict(int)
    deadline = time.monotonic() + 20
    while sum(got.values()) < 300 and time.monotonic() < deadline:
        for m in c.consume(10, timeout=0.2):
            if m.error() is None:
                got[m.partition()] += 1
    c.commit(asynchronous=False)
    committed = {
        tp.partition: tp.offset
        for tp in c.committed([TopicPartition(topic, p) for p in range(2)], timeout=10)
    }
    ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(2)}
    c.close()
    # lag = log end - committed (a partition without a commit counts from 0)
    lag = sum(ends[p] - max(committed[p], 0) for p in range(2))
    assert lag == 1000 - sum(got.values())
