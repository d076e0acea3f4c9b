"""What the cluster tests share: the settings of a 3-broker test cluster (quick failure
detection), topic creation and partition views as one broker reports them (Metadata sent to that
very broker), waiting for full ISRs, reading every partition to its high watermark, an
acks=all producer that keeps every delivery report (:class:`Traffic`), and reassignment helpers."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from framework.client.wire import WireClient
from framework.protocol.messages.create_topics import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from framework.protocol.messages.metadata import MetadataRequest, MetadataResponse
from testing import BrokerProcess, ClusterProcesses, wait_for
from tests.support.brokers import quiet_logger

OVERRIDES: dict[str, object] = {
    "broker.session.timeout.ms": 2000,
    "replica.lag.time.max.ms": 3000,
    "group.initial.rebalance.delay.ms": 0,
}


View = dict[int, tuple[int, list[int], list[int]]]  # partition -> (leader, replicas, isr)


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "logger": quiet_logger()})


def create_topic(
    bootstrap: str,
    name: str,
    partitions: int = 3,
    replication: int = 3,
    config: dict[str, str] | None = None,
) -> None:
    a = admin(bootstrap)  # referenced until the result is in: a destroyed client fails its futures
    fut = a.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=replication, config=config or {})]
    )
    fut[name].result(30)


def metadata_of(b: BrokerProcess) -> MetadataResponse:
    """Metadata as this very broker answers it (librdkafka may ask any broker it learned of)."""
    with WireClient(b.bootstrap, timeout=5) as c:
        return c.send(MetadataRequest(topics=None, allow_auto_topic_creation=False), MetadataResponse)


def partitions_of(b: BrokerProcess, topic: str) -> View | None:
    """The topic's partitions as broker ``b`` reports them; None if it lists no such topic."""
    for t in metadata_of(b).topics:
        if t.name == topic and t.error_code == 0:
            return {p.partition_index: (p.leader_id, p.replica_nodes, p.isr_nodes) for p in t.partitions}
    return None


def led_view(b: BrokerProcess, topic: str, timeout: float = 10) -> View:
    """The topic's partitions once broker ``b`` has applied its creation and each has a leader
    (a topic created through one broker reaches the others' metadata a moment later)."""
    found: View = {}

    def ready() -> bool:
        view = partitions_of(b, topic)
        if view is None or any(leader < 0 for leader, _r, _i in view.values()):
            return False
        found.update(view)
        return True

    wait_for(ready, timeout, 0.05, f"{topic} with leaders on broker {b.node_id}")
    return found


def full_isr(b: BrokerProcess, topic: str, partitions: list[int] | None = None) -> bool:
    view = partitions_of(b, topic)
    return view is not None and all(
        leader >= 0 and sorted(isr) == sorted(replicas)
        for part, (leader, replicas, isr) in view.items()
        if partitions is None or part in partitions
    )


def settle(cluster: ClusterProcesses, topic: str, partitions: int) -> None:
    """One acks=all record per partition, then wait for every ISR to be full: the tests that
    kill a broker start from fully replicated partitions whose followers have all fetched.

    (Until 07d5b22 a new leader dropped the followers it had not heard from yet at its first
    ISR check, test_new_topics_keep_their_full_isr_while_every_broker_is_healthy; settling
    keeps that failure mode from showing up as a different test's failover failure.)"""
    for part in range(partitions):
        assert delivery_of(cluster.bootstrap, topic, part, acks="all") is None
    for b in running(cluster):
        wait_for(lambda b=b: full_isr(b, topic), 15, 0.05, f"{topic} fully in sync on broker {b.node_id}")


def running(cluster: ClusterProcesses) -> list[BrokerProcess]:
    return [b for b in cluster.brokers if b.proc is not None and b.proc.poll() is None]


def bootstrap_of(brokers: list[BrokerProcess]) -> str:
    return ",".join(b.bootstrap for b in brokers)


def healthy(cluster: ClusterProcesses) -> bool:
    """Every broker runs, lists all brokers, and every partition has a leader and its full ISR."""
    ids = sorted(b.node_id for b in cluster.brokers)
    try:
        for b in cluster.brokers:
            md = metadata_of(b)
            if sorted(x.node_id for x in md.brokers) != ids:
                return False
            for t in md.topics:
                for p in t.partitions:
                    if p.leader_id < 0 or sorted(p.isr_nodes) != sorted(p.replica_nodes):
                        return False
    except Exception:
        return False
    return True


def delivery_of(bootstrap: str, topic: str, partition: int, **conf: Any) -> KafkaError | None:
    """Produce one message and return its delivery error (None: acknowledged)."""
    out: list[KafkaError | None] = []
    p = Producer({"bootstrap.servers": bootstrap, "logger": quiet_logger(), **conf})
    p.produce(topic, value=b"probe", partition=partition, on_delivery=lambda e, _m: out.append(e))
    left = p.flush(30)
    assert left == 0 and len(out) == 1, "no delivery report"
    return out[0]


def read_partitions(bootstrap: str, topic: str, partitions: int) -> list[Any]:
    """Every message below each partition's high watermark (read with assign, no group)."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{topic}",
            "enable.auto.commit": False,
            "logger": quiet_logger(),
        }
    )
    try:
        highs = {
            p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=15)[1] for p in range(partitions)
        }
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: list[Any] = []
        last: dict[int, int] = {p: -1 for p in range(partitions)}
        deadline = time.monotonic() + 60
        while any(last[p] + 1 < highs[p] for p in highs) and time.monotonic() < deadline:
            for m in c.consume(10_000, timeout=0.5):
                if m.error() is None:
                    out.append(m)
                    last[m.partition()] = max(last[m.partition()], m.offset())
        assert all(last[p] + 1 >= highs[p] for p in highs), f"read up to {last}, high watermarks {highs}"
        return out
    finally:
        c.close()


def create_raw(b: BrokerProcess, topic: str, partitions: int, replication: int, **config: str) -> int:
    """CreateTopics sent to exactly this broker (librdkafka sends it to the controller)."""
    with WireClient(b.bootstrap, timeout=20) as c:
        resp = c.send(
            CreateTopicsRequest(
                topics=[
                    CreatableTopic(
                        name=topic,
                        num_partitions=partitions,
                        replication_factor=replication,
                        configs=[CreatableTopicConfig(name=k, value=v) for k, v in config.items()],
                    )
                ],
                timeout_ms=15_000,
            ),
            CreateTopicsResponse,
        )
    assert [t.name for t in resp.topics] == [topic], resp
    return resp.topics[0].error_code


def start_cluster(tmp_path: Path, **extra: object) -> ClusterProcesses:
    """Three brokers with :data:`OVERRIDES` (and ``extra``), started."""
    return ClusterProcesses(tmp_path, 3, overrides={**OVERRIDES, **extra}).start()


class Traffic:
    """An idempotent acks=all producer writing until stopped; every delivery report kept."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "logger": quiet_logger(),
            }
        )
        self.topic, self.partitions = topic, partitions
        self.acked: list[tuple[int, int | None, bytes]] = []  # (partition, offset, value)
        self.failed: list[KafkaError] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _report(self, err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            self.failed.append(err)
        else:
            self.acked.append((msg.partition(), msg.offset(), msg.value()))

    def _run(self) -> None:
        n = 0
        while not self.stop.is_set():
            value = f"v{n}".encode()
            try:
                self.producer.produce(
                    self.topic, value, partition=n % self.partitions, on_delivery=self._report
                )
                n += 1
            except BufferError:
                pass
            self.producer.poll(0.002)
        assert self.producer.flush(60) == 0

    def lost(self, got: dict[tuple[int, int], bytes]) -> str:
        """Empty when every acknowledged record is in ``got`` ((partition, offset) -> value),
        else a description of the first missing ones and what is there.

        A record acknowledged with an offset must be at that offset. One acknowledged without
        (librdkafka's "implicitly acked by subsequent batch success": its batch failed, e.g.
        NOT_LEADER_OR_FOLLOWER from a leader moved away, but the new leader, which had it from
        replication, accepted the next sequence numbers) must be in its partition somewhere.
        """
        where = {v: po for po, v in got.items()}

        def kept(p: int, o: int | None, v: bytes) -> bool:
            return got.get((p, o)) == v if o is not None else where.get(v, (-1, -1))[0] == p

        missing = [(p, o, v) for p, o, v in self.acked if not kept(p, o, v)]
        if not missing:
            return ""

        def say(p: int, o: int | None, v: bytes) -> str:
            at = "without an offset" if o is None else f"at {p}:{o}, found {got.get((p, o))!r} there"
            return f"{v!r} acked {at}, itself at {where.get(v)}"

        shown = [say(*m) for m in missing[:8]]
        return f"{len(missing)} of {len(self.acked)} acknowledged records missing: " + "; ".join(shown)

    def __enter__(self) -> Traffic:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(90)


def create(bootstrap: str, topic: str, assignment: list[list[int]], **config: str) -> None:
    a = admin(bootstrap)
    fs = a.create_topics(
        [NewTopic(topic, num_partitions=len(assignment), replica_assignment=assignment, config=config)]
    )
    fs[topic].result(30)


def fill(bootstrap: str, topic: str, partition: int, n: int, size: int) -> None:
    """``n`` acks=all records of ``size`` bytes."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20, "logger": quiet_logger()})
    for i in range(n):
        while True:
            try:
                p.produce(topic, value=bytes([i % 251]) * size, partition=partition)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    assert p.flush(60) == 0


def done_moving(c: ClusterProcesses, topic: str, target: dict[int, list[int]]) -> bool:
    """Every running broker reports each partition on exactly its target replicas, all in sync."""
    for b in c.brokers:
        if not b.alive():
            continue
        view = partitions_of(b, topic)
        if view is None:
            return False
        for p, replicas in target.items():
            leader, have, isr = view[p]
            if have != replicas or sorted(isr) != sorted(replicas) or leader not in replicas:
                return False
    return True
