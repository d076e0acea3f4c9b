"""One broker under continuous idempotent production for ``SFTRAFFIC_SOAK_SECONDS`` (default
600), with a consumer reading along (``./run soak``, or ``pytest --runslow -m slow``).

Three topics, small segments so the log rolls all the time:

* ``events`` (4 partitions, kept): keyed messages carrying their own sequence numbers. Every
  acknowledged message is consumed exactly once, at the offset its acknowledgement named, and
  each partition's order is the order the producer sent in.
* ``state`` (2 partitions, ``cleanup.policy=compact``): versioned values of a fixed key set.
  After the run the cleaner converges it: reading it gives the last acknowledged value of
  every key, and what remains on disk is the key set plus at most the uncleanable active
  segment.
* ``short`` (2 partitions, ``retention.ms`` 10 s): retention keeps its directory bounded
  throughout (sampled every second) and moves its log start offsets forward.

Finally the broker's RSS must be within 1.5x of its RSS after the warm-up (the first fifth
of the run).

Time is wall-clock by nature here; the producer paces itself with ``Producer.poll`` (which
serves delivery reports while it waits) and no step sleeps waiting for something it could
observe.
"""

from __future__ import annotations

import os
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from framework.client.producer import producer_config
from testing import BrokerProcess, wait_for
from tests.support.brokers import BrokerFactory, create_topic, quiet_logger

pytestmark = [pytest.mark.slow, pytest.mark.integration]

SECONDS = float(os.environ.get("SFTRAFFIC_SOAK_SECONDS", "600"))
RATE = int(os.environ.get("SFTRAFFIC_SOAK_RATE", "3000"))  # messages/s over the three topics

EVENTS, STATE, SHORT = "events", "state", "short"
EVENT_PARTITIONS, STATE_PARTITIONS, SHORT_PARTITIONS = 4, 2, 2
EVENT_KEYS = 64
STATE_KEYS = 300
SEGMENT = 256 * 1024
SMALL_SEGMENT = 64 * 1024
RETENTION_MS = 10_000
RSS_GROWTH = 1.5


@dataclass
class Acks:
    """What the broker acknowledged, from the producer's delivery reports."""

    events: dict[int, list[tuple[int, bytes]]] = field(default_factory=lambda: defaultdict(list))
    state: dict[bytes, tuple[int, bytes]] = field(default_factory=dict)  # key -> (version, value)
    short_bytes: int = 0
    errors: list[Any] = field(default_factory=list)

    def delivered(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors.append(err)
            return
        topic = msg.topic()
        if topic == EVENTS:
            self.events[msg.partition()].append((msg.offset(), msg.value()))
        elif topic == STATE:
            version = int(msg.value().split(b"=")[1])
            if version > self.state.get(msg.key(), (-1, b""))[0]:
                self.state[msg.key()] = (version, msg.value())
        else:
            self.short_bytes += len(msg.value())


class Reader(threading.Thread):
    """Reads ``events`` from the beginning while the producer writes it."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(name="soak-reader", daemon=True)
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "soak-reader",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "fetch.wait.max.ms": 100,
                "logger": quiet_logger(),
            }
        )
        self.consumer.assign([TopicPartition(EVENTS, p, 0) for p in range(EVENT_PARTITIONS)])
        self.got: dict[int, list[tuple[int, bytes]]] = defaultdict(list)
        self.errors: list[Any] = []
        self.until: dict[int, int] | None = None  # end offsets to reach, once production stopped
        self.done = threading.Event()

    def caught_up(self) -> bool:
        return self.until is not None and all(
            (self.got[p][-1][0] + 1 if self.got[p] else 0) >= end for p, end in self.until.items()
        )

    def run(self) -> None:
        try:
            while not self.caught_up():
                for m in self.consumer.consume(num_messages=2000, timeout=0.5):
                    if m.error():
                        if m.error().code() != KafkaError._PARTITION_EOF:
                            self.errors.append(m.error())
                        continue
                    self.got[m.partition()].append((m.offset(), m.value()))
        finally:
            self.consumer.close()
            self.done.set()


def dir_bytes(data_dir: Path, topic: str) -> int:
    return sum(f.stat().st_size for f in data_dir.glob(f"{topic}-*/*.log"))


def segment_count(data_dir: Path, topic: str) -> int:
    return sum(1 for _ in data_dir.glob(f"{topic}-*/*.log"))


def watermarks(bootstrap: str, topic: str, partitions: int) -> dict[int, tuple[int, int]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "soak-wm", "logger": quiet_logger()})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in range(partitions)}
    finally:
        c.close()


def read_all(bootstrap: str, topic: str, partitions: int) -> list[Any]:
    ends = {p: hi for p, (_, hi) in watermarks(bootstrap, topic, partitions).items()}
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"soak-read-{topic}",
            "enable.auto.commit": False,
            "logger": quiet_logger(),
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])  # 0: the earliest still there
    out: list[Any] = []
    pos = dict.fromkeys(ends, -1)
    deadline = time.monotonic() + 120
    try:
        while any(pos[p] + 1 < ends[p] for p in ends) and time.monotonic() < deadline:
            for m in c.consume(num_messages=5000, timeout=0.5):
                if not m.error():
                    out.append(m)
                    pos[m.partition()] = m.offset()
    finally:
        c.close()
    return out


def _create_topics(bootstrap: str) -> None:
    create_topic(bootstrap, EVENTS, EVENT_PARTITIONS, {"segment.bytes": str(SEGMENT)})
    create_topic(
        bootstrap,
        STATE,
        STATE_PARTITIONS,
        {
            "cleanup.policy": "compact",
            "segment.bytes": str(SMALL_SEGMENT),
            "min.cleanable.dirty.ratio": "0.01",
            "delete.retention.ms": "1000",
        },
    )
    create_topic(
        bootstrap,
        SHORT,
        SHORT_PARTITIONS,
        {"retention.ms": str(RETENTION_MS), "segment.bytes": str(SMALL_SEGMENT), "segment.ms": "2000"},
    )


@dataclass
class Run:
    """What the producer sent over the run, and what was sampled meanwhile."""

    sent: dict[int, int] = field(default_factory=lambda: defaultdict(int))  # event key: next sequence number
    versions: dict[int, int] = field(default_factory=lambda: defaultdict(int))  # state key: last version
    short_sizes: list[int] = field(default_factory=list)  # the short topic's bytes on disk, every second
    warmup_rss: int = 0
    final_rss: int = 0
    elapsed: float = 0.0
    n: int = 0  # messages produced

    def next_message(self) -> tuple[str, bytes, bytes]:
        """The ``n``-th message: (topic, key, value)."""
        n = self.n
        kind = n % 6
        if kind < 4:  # two thirds: events
            k = n % EVENT_KEYS
            key = b"k%d" % k
            value = b"%s:%d:" % (key, self.sent[k]) + b"e" * 60
            self.sent[k] += 1
            return EVENTS, key, value
        if kind == 4:
            k = (n // 6 * 7919) % STATE_KEYS  # 7919 is prime: every key in turn
            key = b"s%d" % k
            self.versions[k] += 1
            return STATE, key, b"%s=%d" % (key, self.versions[k])
        return SHORT, b"x%d" % (n % 16), b"s" * 200


def _produce_for_the_run(broker: BrokerProcess, producer: Producer, acks: Acks) -> Run:
    """Produce at RATE for SECONDS, sampling the short topic's size every second and the
    broker's RSS after the warm-up; the broker stays alive throughout and acknowledges all."""
    proc = psutil.Process(broker.pid)
    run = Run()
    tick = 0.05
    per_tick = max(3, int(RATE * tick))
    start = time.monotonic()
    next_tick = start
    next_sample = start + 1
    while (now := time.monotonic()) - start < SECONDS:
        for _ in range(per_tick):
            topic, key, value = run.next_message()
            while True:
                try:
                    producer.produce(topic, value=value, key=key, on_delivery=acks.delivered)
                    break
                except BufferError:
                    producer.poll(0.05)
            run.n += 1
        next_tick += tick
        while (left := next_tick - time.monotonic()) > 0:  # pace, serving delivery reports
            producer.poll(left)
        if now >= next_sample:
            next_sample += 1
            run.short_sizes.append(dir_bytes(broker.data_dir, SHORT))
            if not run.warmup_rss and now - start >= SECONDS / 5:
                run.warmup_rss = proc.memory_info().rss
        assert broker.alive(), broker.tail(40)
    run.elapsed = time.monotonic() - start
    assert producer.flush(120) == 0
    assert acks.errors == [], acks.errors[:5]
    run.final_rss = proc.memory_info().rss
    return run


def _assert_every_event_once_in_order(reader: Reader, acks: Acks, run: Run) -> int:
    """Every acknowledged event once, at its offset, in the order sent; their number."""
    reader.until = {p: offs[-1][0] + 1 for p, offs in acks.events.items()}
    assert reader.done.wait(300), "the reader did not catch up"
    assert reader.errors == [], reader.errors[:5]
    acked = sum(len(v) for v in acks.events.values())
    for p, expected in acks.events.items():
        got = reader.got[p]
        assert len(got) == len(set(got)), f"partition {p}: duplicates"
        assert got == sorted(expected), f"partition {p}: lost, duplicated or moved messages"
        last: dict[bytes, int] = {}
        for _, value in got:  # per key (so per partition): sequence numbers 0, 1, 2 ... in order
            key, seq, _ = value.split(b":", 2)
            assert int(seq) == last.get(key, -1) + 1, f"partition {p}: {key!r} out of order at {int(seq)}"
            last[key] = int(seq)
    assert sum(run.sent.values()) == acked
    return acked


def _assert_state_compacted_to_latest(broker: BrokerProcess, acks: Acks, run: Run) -> tuple[int, int]:
    """The cleaner converges the state topic to the latest value per key: (records left,
    records produced)."""
    bootstrap, data = broker.bootstrap, broker.data_dir
    produced_state = sum(run.versions.values())
    record_bound = STATE_KEYS * 40 + STATE_PARTITIONS * SMALL_SEGMENT  # one record per key + active segments
    wait_for(
        lambda: dir_bytes(data, STATE) <= record_bound,
        timeout=120,
        interval=1,
        what=f"the cleaner to compact {STATE} (now {dir_bytes(data, STATE)} bytes)",
    )
    msgs = read_all(bootstrap, STATE, STATE_PARTITIONS)
    latest = {m.key(): m.value() for m in msgs}
    assert latest == {k: v for k, (_, v) in acks.state.items()}
    assert len(msgs) < produced_state / 4, (len(msgs), produced_state)
    return len(msgs), produced_state


def _assert_short_retention_bounded(bootstrap: str, acks: Acks, run: Run) -> tuple[int, float]:
    """Retention kept the short topic's directory bounded and moved its log start: (the most it
    held after the warm-up, the bound)."""
    rate = acks.short_bytes / run.elapsed
    # kept: what was written over retention.ms + segment.ms + the check interval (+ slack), and
    # the overhead of record batches; a partly filled active segment per partition on top
    size_bound = 1.5 * rate * (RETENTION_MS / 1000 + 2 + 1 + 2) + SHORT_PARTITIONS * SMALL_SEGMENT
    assert acks.short_bytes > 2 * size_bound, "the run was too short to exercise retention"
    after_warmup = run.short_sizes[len(run.short_sizes) // 5 :]
    assert max(after_warmup) <= size_bound, (max(after_warmup), size_bound)
    starts = watermarks(bootstrap, SHORT, SHORT_PARTITIONS)
    assert all(lo > 0 for lo, _ in starts.values()), starts
    return max(after_warmup), size_bound


@pytest.mark.timeout(int(SECONDS) + 600)
def test_broker_soak(broker_factory: BrokerFactory) -> None:
    broker = broker_factory({"log.cleaner.backoff.ms": 1000, "log.retention.check.interval.ms": 1000})
    bootstrap, data = broker.bootstrap, broker.data_dir
    _create_topics(bootstrap)
    acks = Acks()
    producer = Producer(
        producer_config(
            bootstrap,
            linger_ms=5,
            extra={"logger": quiet_logger(), "message.timeout.ms": 120_000, "queue.buffering.max.ms": 5},
        )
    )
    reader = Reader(bootstrap)
    reader.start()
    run = _produce_for_the_run(broker, producer, acks)

    # -- events: every acknowledged message once, at its offset, in the order sent --------------
    acked = _assert_every_event_once_in_order(reader, acks, run)

    # -- state: the cleaner converges it to the latest value per key ------------------------------
    state_left, produced_state = _assert_state_compacted_to_latest(broker, acks, run)

    # -- short: retention kept its directory bounded and moved the log start ----------------------
    short_max, size_bound = _assert_short_retention_bounded(bootstrap, acks, run)

    # -- memory --------------------------------------------------------------------------------------
    elapsed, warmup_rss, final_rss, n = run.elapsed, run.warmup_rss, run.final_rss, run.n
    assert warmup_rss > 0
    print(
        f"\nsoak {elapsed:.0f} s: {n} messages ({n / elapsed:.0f}/s), {acked} events; "
        f"{STATE}: {state_left} records of {produced_state} after cleaning, "
        f"{segment_count(data, STATE)} segment files; {SHORT}: max {short_max} bytes "
        f"(bound {size_bound:.0f}); broker RSS {warmup_rss >> 20} MiB after warm-up, "
        f"{final_rss >> 20} MiB at the end"
    )
    assert final_rss <= RSS_GROWTH * warmup_rss, (warmup_rss, final_rss)
