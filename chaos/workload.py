"""The clients of a ``sftraffic chaos`` run: producers, a live reader, the final read.

Everything here talks to the cluster through confluent-kafka only, so a run works against any
Kafka-compatible cluster. Every event is written into one :class:`~chaos.checker.History`
(under a lock) with the time in seconds since the run's start (``clock``).

* :class:`ProducerWorker`: a thread producing ``"<name>:<seq>"`` at a fixed rate, to partition
  ``seq % partitions``, recording each value sent, each acknowledgement (partition, offset,
  arrival time) and each delivery error. After a fatal client error (an idempotent producer
  that can no longer guarantee order) it starts a new client under a new name (``p1.2``), so
  that the order check never compares two clients' sequences.
* :class:`Reader`: a thread with a plain consumer (no group; ``assign`` of every partition from
  the beginning) recording every record it reads.
* :func:`final_read`: every partition from its start to its high watermark.
* :func:`partition_states`: leader, replicas and ISR of each partition from Metadata.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

# defined in the C extension and imported, not re-exported, by confluent_kafka.admin
from confluent_kafka.cimpl import NewTopic

from chaos.checker import Ack, History, PartitionState, Read

Clock = Callable[[], float]


def quiet_logger() -> logging.Logger:
    """librdkafka logs every broker disconnect; a chaos run has many."""
    lg = logging.getLogger("sftraffic.chaos.librdkafka")
    lg.addHandler(logging.NullHandler())
    lg.propagate = False
    return lg


class Recorder:
    """The history of a run, written by several threads."""

    def __init__(self, history: History, clock: Clock) -> None:
        self.history = history
        self.clock = clock
        self.lock = threading.Lock()
        self.fatal: list[str] = []  # fatal client errors (each made a producer start over)

    def sent(self, value: str, partition: int) -> None:
        with self.lock:
            self.history.sent[value] = partition

    def delivered(self, err: Any, msg: Any) -> None:
        t = self.clock()
        value = msg.value().decode()
        with self.lock:
            if err is None:
                self.history.acks.append(Ack(value, msg.partition(), msg.offset(), t))
            else:
                self.history.failed[value] = err.name() if hasattr(err, "name") else str(err)

    def read(self, partition: int, offset: int, value: str) -> None:
        t = self.clock()
        with self.lock:
            self.history.reads.append(Read(partition, offset, value, t))


def record(m: Message) -> tuple[int, int, str]:
    """(partition, offset, value) of a record a consumer read without error (no value: "")."""
    partition, offset = m.partition(), m.offset()
    assert partition is not None and offset is not None, "a consumed record has both"
    return partition, offset, (m.value() or b"").decode("utf-8", "replace")


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap}, logger=quiet_logger())


def create_topic(
    bootstrap: str, topic: str, partitions: int, replication: int, min_isr: int, timeout: float = 60
) -> None:
    """Create ``topic``, retrying while too few brokers are unfenced for ``replication``.

    A broker that was slow to heartbeat on a loaded machine is briefly fenced, and the
    controller then answers INVALID_REPLICATION_FACTOR (as Kafka's does) until it is back.
    """
    deadline = time.monotonic() + timeout
    while True:
        a = admin(bootstrap)  # kept referenced until the future is done
        fut = a.create_topics(
            [
                NewTopic(
                    topic,
                    num_partitions=partitions,
                    replication_factor=replication,
                    config={"min.insync.replicas": str(min_isr)},
                )
            ],
            request_timeout=30,
        )
        try:
            fut[topic].result(timeout)
            return
        except KafkaException as exc:
            err = exc.args[0]
            if err.code() != KafkaError.INVALID_REPLICATION_FACTOR or time.monotonic() > deadline:
                raise
        time.sleep(0.5)


def partition_states(bootstrap: str, topics: list[str], timeout: float = 10) -> list[PartitionState]:
    """Each partition of ``topics`` (those that exist) as Metadata describes it."""
    md = admin(bootstrap).list_topics(timeout=timeout)
    out = []
    for name in topics:
        t = md.topics.get(name)
        if t is None or t.error is not None:
            continue
        for p in sorted(t.partitions.values(), key=lambda p: p.id):
            out.append(PartitionState(name, p.id, p.leader, tuple(p.replicas), tuple(p.isrs)))
    return out


def leaders(bootstrap: str, topic: str, timeout: float = 3) -> dict[int, list[int]]:
    """broker id -> partitions of ``topic`` it leads (empty when Metadata does not answer)."""
    try:
        states = partition_states(bootstrap, [topic], timeout)
    except KafkaException:
        return {}
    out: dict[int, list[int]] = {}
    for s in states:
        out.setdefault(s.leader, []).append(s.partition)
    return out


class ProducerWorker(threading.Thread):
    """One producer writing unique values at ``rate`` per second until :meth:`finish`."""

    def __init__(
        self,
        name: str,
        bootstrap: str,
        topic: str,
        partitions: int,
        rate: float,
        recorder: Recorder,
        *,
        acks: str = "all",
        idempotence: bool = True,
        message_timeout_ms: int = 60_000,
    ) -> None:
        super().__init__(name=f"chaos-{name}", daemon=True)
        self.logical = name
        self.generation = 1
        self.topic = topic
        self.partitions = partitions
        self.rate = rate
        self.recorder = recorder
        self.conf: dict[str, Any] = {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "enable.idempotence": idempotence,
            "linger.ms": 5,
            "message.timeout.ms": message_timeout_ms,
            "request.timeout.ms": 10_000,
            # a request to a broker cut off by a partition is given up after this long (the
            # default, 60 s, keeps an idempotent producer's partition waiting for it that long
            # before it moves to the new leader)
            "socket.timeout.ms": 10_000,
            "error_cb": self._error,
            "logger": quiet_logger(),
        }
        self.producer = Producer(self.conf)
        self._halt = threading.Event()
        self._fatal = threading.Event()
        self.seq = 0

    def _error(self, err: KafkaError) -> None:
        if err.fatal():
            self.recorder.fatal.append(f"{self.current_name}: {err.str()}")
            self._fatal.set()

    @property
    def current_name(self) -> str:
        return self.logical if self.generation == 1 else f"{self.logical}.{self.generation}"

    def run(self) -> None:
        t0 = time.monotonic()
        sent = 0
        while not self._halt.is_set():
            if self._fatal.is_set():
                self._start_over()
            due = int((time.monotonic() - t0) * self.rate)
            while sent < due and not self._halt.is_set():
                value = f"{self.current_name}:{self.seq}"
                part = self.seq % self.partitions
                try:
                    self.producer.produce(
                        self.topic, value=value.encode(), partition=part, on_delivery=self.recorder.delivered
                    )
                except BufferError:
                    break  # the client's queue is full: try again after serving reports
                except KafkaException as exc:  # fatal state: start over on the next round
                    self.recorder.fatal.append(f"{self.current_name}: {exc}")
                    self._fatal.set()
                    break
                self.recorder.sent(value, part)
                self.seq += 1
                sent += 1
            self.producer.poll(0.005)

    def _start_over(self) -> None:
        """A fatal error: this client can no longer write; its queued messages fail now."""
        self.producer.purge()
        self.producer.flush(1)
        self.generation += 1
        self.seq = 0
        self._fatal.clear()
        self.producer = Producer(self.conf)

    def stop_producing(self) -> None:
        self._halt.set()
        self.join(10)

    def finish(self, timeout: float) -> int:
        """Wait up to ``timeout`` s for every outstanding delivery report; returns how many
        messages are still without one."""
        self.stop_producing()
        return int(self.producer.flush(timeout))


class Reader(threading.Thread):
    """A plain consumer reading every partition from the beginning, recording each record."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, recorder: Recorder) -> None:
        super().__init__(name="chaos-reader", daemon=True)
        self.recorder = recorder
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"chaos-reader-{topic}",  # required by the client; never joined
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "logger": quiet_logger(),
            }
        )
        self.consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        self._halt = threading.Event()
        self.errors = 0

    def run(self) -> None:
        while not self._halt.is_set():
            for m in self.consumer.consume(1000, timeout=0.2):
                if m.error() is not None:
                    self.errors += 1
                    continue
                self.recorder.read(*record(m))
        self.consumer.close()

    def stop(self) -> None:
        self._halt.set()
        self.join(15)


def final_read(
    bootstrap: str, topic: str, partitions: int, timeout: float = 120
) -> tuple[dict[int, list[tuple[int, str]]], dict[int, tuple[int, int]], bool]:
    """Every record of every partition up to its high watermark: (records, (low, high) per
    partition, whether every record below the high watermarks was read within ``timeout``)."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"chaos-final-{topic}",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
            "logger": quiet_logger(),
        }
    )
    try:
        marks = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30) for p in range(partitions)}
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        got: dict[int, dict[int, str]] = {p: {} for p in range(partitions)}
        nxt = {p: marks[p][0] for p in range(partitions)}
        deadline = time.monotonic() + timeout
        while (complete := all(nxt[p] >= marks[p][1] for p in nxt)) is False:
            if time.monotonic() > deadline:
                break
            for m in c.consume(10_000, timeout=0.5):
                if m.error() is None:
                    partition, offset, value = record(m)
                    got[partition][offset] = value
                    nxt[partition] = max(nxt[partition], offset + 1)
        out = {p: sorted((o, v) for o, v in records.items() if o < marks[p][1]) for p, records in got.items()}
        return out, marks, complete
    finally:
        c.close()
