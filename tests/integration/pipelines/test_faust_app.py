"""faust-streaming runs unmodified on the store, with processing_guarantee="exactly_once"
(transactions); its tables survive a SIGKILLed worker exactly."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from pipelines.faust_app import apply_event
from sensors import layout
from testing import ManagedProcess, wait_for
from tests.support.brokers import BrokerFactory, create_topic, quiet_logger

pytestmark = pytest.mark.integration

SENSORS = 40
SEGMENTS = 8
TOPIC = layout.topic("traffic")


def produce(bootstrap: str, start: int, n: int) -> None:
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 5,
            "enable.idempotence": True,
            "logger": quiet_logger(),
        }
    )
    now = int(time.time() * 1000)
    for i in range(start, start + n):
        sensor = i % SENSORS
        ev = {
            "type": "traffic",
            "sensor_id": f"s{sensor}",
            "seq": i // SENSORS,
            "event_time": now + i,
            "segment_id": f"seg{sensor % SEGMENTS}",
            "speed_kmh": 15 + (i % 30),
            "vehicle_class": "car",
            "lat": 37.7749,
            "lon": -122.4194,
        }
        p.produce(TOPIC, key=ev["sensor_id"].encode(), value=json.dumps(ev).encode())
        if i % 2000 == 0:
            p.poll(0)
    assert p.flush(30) == 0


def table(bootstrap: str, topic: str) -> dict[str, Any]:
    """Latest committed value per key of a changelog topic (what a restarted worker restores:
    the app writes it in transactions, read_committed, to each partition's last stable offset)."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "changelog-reader",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "logger": quiet_logger(),
        }
    )
    try:
        md = c.list_topics(topic, timeout=10).topics.get(topic)
        if md is None or md.error is not None:
            return {}
        c.assign([TopicPartition(topic, p, 0) for p in md.partitions])
        latest: dict[bytes, bytes | None] = {}
        pending = set(md.partitions)
        deadline = time.monotonic() + 20
        while pending and time.monotonic() < deadline:
            for m in c.consume(2000, timeout=0.5):
                err = m.error()
                if err is None:
                    latest[m.key()] = m.value()
                elif err.code() == KafkaError._PARTITION_EOF:
                    pending.discard(m.partition())
        return {json.loads(k): json.loads(v) for k, v in latest.items() if v is not None}
    finally:
        c.close()


def repartitioned(bootstrap: str) -> list[tuple[str, int]]:
    """(sensor_id, seq) of every committed record of the app's repartition topic."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "repartition-reader",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "logger": quiet_logger(),
        }
    )
    try:
        (name,) = [t for t in c.list_topics(timeout=10).topics if t.endswith("-segment-repartition")]
        parts = list(c.list_topics(name, timeout=10).topics[name].partitions)
        c.assign([TopicPartition(name, p, 0) for p in parts])
        out: list[tuple[str, int]] = []
        at_end: set[int] = set()
        deadline = time.monotonic() + 30
        while len(at_end) < len(parts) and time.monotonic() < deadline:
            for m in c.consume(2000, timeout=0.5):
                err = m.error()
                if err is None:
                    ev = json.loads(m.value())
                    out.append((ev["sensor_id"], ev["seq"]))
                elif err.code() == KafkaError._PARTITION_EOF:
                    at_end.add(m.partition())
        return out
    finally:
        c.close()


def worker(bootstrap: str, cwd: Path) -> ManagedProcess:
    """A faust worker (started, not waited for), its output appended to ``<cwd>/faust.log``."""
    env = {"SFTRAFFIC_BOOTSTRAP": bootstrap, "SFTRAFFIC_FAUST_APP": "faust-test"}
    cmd = [sys.executable, "-m", "faust", "-A", "pipelines.faust_app", "worker", "-l", "warn"]
    return ManagedProcess("faust", cmd, cwd=cwd, env=env, log=cwd / "faust.log", grace=30.0).launch()


def counts(bootstrap: str) -> dict[str, int]:
    return {k: v.get("count", 0) for k, v in table(bootstrap, "faust-test-segment_counts-changelog").items()}


def test_faust_tables_are_exact_after_a_killed_worker_restarts(
    broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    b = broker_factory()
    create_topic(b.bootstrap, TOPIC, 4)
    produce(b.bootstrap, 0, 8_000)
    w = worker(b.bootstrap, tmp_path)
    try:
        wait_for(
            lambda: sum(counts(b.bootstrap).values()) >= 2000,
            timeout=90,
            interval=0.5,
            what="faust to count",
        )
        w.kill()
        produce(b.bootstrap, 8_000, 8_000)
        w = worker(b.bootstrap, tmp_path)
        expected = {f"seg{s}": 16_000 // SEGMENTS for s in range(SEGMENTS)}
        last: list[dict[str, int]] = [{}]

        def exact() -> bool:
            last[0] = counts(b.bootstrap)
            return last[0] == expected

        try:
            wait_for(exact, timeout=120, interval=0.5, what="exact counts after restart")
        except TimeoutError as exc:
            raise AssertionError(f"{exc}: last counts {last[0]}") from None
        got = counts(b.bootstrap)
        assert got == expected, got
        # nothing lost on the way (the per-sensor seq would hide duplicates, not losses): every
        # event is in the repartition topic at read_committed. Sent in the destination
        # partition's transaction (faust's own choice) 14-44 events were missing here; see
        # pipelines/faust_app.py. Repeats are printed, not asserted: with the offsets of acked
        # events only committed while the transaction held forwards of events in flight, a kill
        # repeated 1-2 (2 runs); with their offsets committed with the forwards, none in 11 runs
        # of 13, 3 and 4 in two (the traced one: no restart involved, a produce retry appended
        # twice, it seems); the seq absorbs them.
        records = repartitioned(b.bootstrap)
        forwarded = set(records)
        print(f"\nrepartition topic: {len(records)} records, {len(records) - len(forwarded)} repeated")
        assert len(forwarded) == 16_000, f"{16_000 - len(forwarded)} events not forwarded"
    finally:
        w.stop()
    assert "Traceback" not in (tmp_path / "faust.log").read_text()


def test_apply_event_is_idempotent() -> None:
    ev = {"sensor_id": "s1", "seq": 3, "event_time": 120_000, "speed_kmh": 40.0}
    s1 = apply_event({}, ev)
    assert s1 is not None and s1["count"] == 1
    assert apply_event(s1, ev) is None  # redelivered: not counted twice
    assert apply_event(s1, {**ev, "seq": 2}) is None  # older: already covered
    s2 = apply_event(s1, {**ev, "seq": 4, "event_time": 125_000})
    assert s2 is not None and s2["count"] == 2 and s2["windows"] == {"120000": 2}
