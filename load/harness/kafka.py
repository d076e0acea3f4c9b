"""Kafka-client helpers of the benchmarks (confluent-kafka; any Kafka-compatible broker)."""

from __future__ import annotations

import logging
import socket
import time
from typing import Any

from testing import wait_for


def quiet_logger() -> logging.Logger:
    """A logger for librdkafka that swallows its chatter (connection refused while a broker
    starts, etc.); the benchmarks report failures themselves."""
    lg = logging.getLogger("load.librdkafka")
    if not lg.handlers:
        lg.addHandler(logging.NullHandler())
    lg.propagate = False
    return lg


def produce_blocking(p: Any, topic: str, value: bytes, wait: float = 0.005, **kw: Any) -> None:
    """``p.produce``, waiting while librdkafka's local queue is full (it sends and serves
    delivery reports meanwhile)."""
    while True:
        try:
            p.produce(topic, value, **kw)
            return
        except BufferError:
            p.poll(wait)


def admin(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap}, logger=quiet_logger())


def answers_metadata(bootstrap: str, timeout: float = 2.0) -> bool:
    """True when ``bootstrap`` answers a Metadata request (a bound port is not enough)."""
    host, _, port = bootstrap.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=1):
            pass
        return bool(admin(bootstrap).list_topics(timeout=timeout).brokers)
    except Exception:
        return False


def create_topic(
    bootstrap: str,
    name: str,
    partitions: int = 1,
    replication: int = 1,
    config: dict[str, str] | None = None,
    timeout: float = 120.0,
) -> str:
    """Create ``name`` and wait until every broker of ``bootstrap`` (comma-separated) shows each
    partition with a leader: some brokers answer CreateTopics before the topic is servable, and
    the brokers of a cluster apply the change a moment apart."""
    from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

    client = admin(bootstrap)
    new = NewTopic(name, num_partitions=partitions, replication_factor=replication, config=config or {})
    for fut in client.create_topics([new], operation_timeout=timeout, request_timeout=timeout).values():
        fut.result(timeout=timeout)
    for one in bootstrap.split(","):

        def led(c: Any = admin(one)) -> bool:
            t = c.list_topics(name, timeout=10).topics.get(name)
            ok = t is not None and t.error is None and len(t.partitions) == partitions
            return ok and all(p.leader >= 0 for p in t.partitions.values())

        wait_for(led, timeout, 0.1, f"leaders of {name} on {one}")
    return name


def delete_topic(bootstrap: str, name: str, timeout: float = 30.0) -> str | None:
    """Best effort (keeps disk and memory of later phases bounded); returns the error."""
    client = admin(bootstrap)  # keep a reference: a collected client fails its futures
    try:
        for fut in client.delete_topics([name], operation_timeout=timeout).values():
            fut.result(timeout=timeout)
    except Exception as exc:
        return f"delete {name}: {exc}"
    return None


class EndOffsets:
    """Sum of the log end offsets (high watermarks) of topics' partitions, asked in one
    ListOffsets request per call."""

    def __init__(self, bootstrap: str, topics: list[str], partitions: int | None = None) -> None:
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]

        self.admin = admin(bootstrap)
        md = self.admin.list_topics(timeout=10).topics if partitions is None else {}
        parts = {t: list(md[t].partitions) if partitions is None else range(partitions) for t in topics}
        latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]  # an unannotated classmethod
        self.specs = {TopicPartition(t, p): latest for t in topics for p in parts[t]}

    def by_topic(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for tp, fut in self.admin.list_offsets(self.specs, request_timeout=10).items():
            out[tp.topic] = out.get(tp.topic, 0) + int(fut.result(timeout=15).offset)
        return out

    def total(self) -> int:
        return sum(self.by_topic().values())

    def wait_for(self, target: int, timeout: float, interval: float = 0.01) -> tuple[int, float]:
        """Poll until the sum reaches ``target``; (sum, perf_counter when seen)."""
        deadline = time.monotonic() + timeout
        while True:
            n = self.total()
            now = time.perf_counter()
            if n >= target or time.monotonic() > deadline:
                return n, now
            time.sleep(interval)


def producer(bootstrap: str, **conf: Any) -> tuple[Any, list[str]]:
    """A confluent-kafka producer and the list its delivery failures go to. Only failures get a
    delivery report: a Python callback per message would cost more than a broker spends on it."""
    from confluent_kafka import Producer

    failures: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            failures.append(str(err))

    conf |= {"delivery.report.only.error": True, "on_delivery": on_delivery}
    return Producer({"bootstrap.servers": bootstrap, "logger": quiet_logger(), **conf}), failures
