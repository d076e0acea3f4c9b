"""What the pipeline tests share: a store with the demo's layout and result topics, traffic
events of the fixed simulated morning (:mod:`tests.support.history`), the jobs' configuration,
reading result topics as the dashboard reads them (read_committed), and the ``sftraffic`` data
source's reader."""

from __future__ import annotations

import datetime as dt
import json
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from pipelines import jobs
from sensors.layout import ensure_layout
from testing import BrokerProcess, wait_for
from tests.support.brokers import BrokerFactory, quiet_logger
from tests.support.history import KEEP, KEEP_TTL_MS, T0

MIN = 60_000


def store(broker_factory: BrokerFactory) -> BrokerProcess:
    b = broker_factory()
    ensure_layout(
        b.bootstrap,
        partitions=2,
        ttl_ms=KEEP_TTL_MS,
        extra_topics={jobs.t(n): {} for n in jobs.RESULT_TOPICS if n != "dead_letter"},
    )
    return b


def produce(bootstrap: str, events: list[tuple[str, float, int]], seq0: int = 0) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2, "logger": quiet_logger()})
    for i, (seg, speed, t) in enumerate(events):
        ev = {
            "type": "traffic",
            "sensor_id": f"s-{seg}",
            "seq": seq0 + i,
            "event_time": t,
            "segment_id": seg,
            "speed_kmh": speed,
            "vehicle_class": "car",
            "lat": 37.7,
            "lon": -122.4,
        }
        p.produce(jobs.t("traffic"), key=f"s-{seg}".encode(), value=json.dumps(ev).encode(), timestamp=t)
    assert p.flush(30) == 0


def results(bootstrap: str, name: str) -> list[dict[str, Any]]:
    """Every committed record of a result topic (read_committed: the streaming jobs write in
    transactions, an aborted attempt's records are never results), read to each partition's
    end (its last stable offset)."""
    topic = jobs.t(name)
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "res",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "logger": quiet_logger(),
        }
    )
    try:
        parts = list(c.list_topics(topic, timeout=10).topics[topic].partitions)
        c.assign([TopicPartition(topic, p, 0) for p in parts])
        out: list[dict[str, Any]] = []
        at_end: set[int] = set()
        deadline = time.monotonic() + 20
        while len(at_end) < len(parts) and time.monotonic() < deadline:
            for m in c.consume(1000, timeout=0.3):
                err = m.error()
                if err is None:
                    out.append(json.loads(m.value()))
                elif err.code() == KafkaError._PARTITION_EOF:
                    at_end.add(m.partition())
        return out
    finally:
        c.close()


def windows(bootstrap: str) -> Counter[tuple[str, str]]:
    return Counter((r["segment_id"], r["window_start"]) for r in results(bootstrap, "traffic_aggregates"))


def wstart(minute: int) -> str:
    return (dt.datetime.fromtimestamp(T0 / 1000, dt.UTC) + dt.timedelta(minutes=minute)).strftime(
        "%Y-%m-%dT%H:%M:%S.000Z"
    )


def cfg_for(b: BrokerProcess, tmp: Path) -> jobs.JobConfig:
    return jobs.JobConfig(
        bootstrap=b.bootstrap,
        checkpoint_dir=str(tmp / "ck"),
        output_dir=str(tmp / "out"),
        trigger="500 milliseconds",
        watermark="1 minute",
        starting_offsets="earliest",
    )


def minute_events(first: int, last: int) -> list[tuple[str, float, int]]:
    return [
        (seg, 30.0 + k, T0 + m * MIN + k * 10_000)
        for m in range(first, last + 1)
        for seg in ("a", "b")
        for k in range(3)
    ]


def stop_all(qs: list[Any]) -> None:
    jobs.stop_gracefully(qs)


def wait_running(qs: list[Any], cond: Callable[[], bool], what: str, timeout: float = 120) -> None:
    """Wait for ``cond`` while the queries run: ``jobs.supervise`` restarts one a transient start
    failure stopped (as ``sftraffic pipeline`` does) and raises at once for any other stop."""
    wait_for(lambda: jobs.supervise(qs) or cond(), timeout=timeout, interval=0.5, what=what)


def topic_with(bootstrap: str, name: str, values: list[bytes], partitions: int = 1) -> None:
    a = AdminClient({"bootstrap.servers": bootstrap, "logger": quiet_logger()})
    a.create_topics([NewTopic(name, partitions, 1, config=KEEP)])[name].result(10)
    p = Producer({"bootstrap.servers": bootstrap, "logger": quiet_logger()})
    for i, v in enumerate(values):
        p.produce(name, v, key=b"k", partition=0, timestamp=T0 + i * 1000)
    assert p.flush(30) == 0


def reader(spark: Any, bootstrap: str, topic: str) -> Any:
    return spark.read.format("sftraffic").option("bootstrap", bootstrap).option("subscribe", topic)


# the whole-day correlation tests' tolerance: the regression's estimate against the configured
# effect
TOLERANCE = {"rain": 0.03, "heavy_rain": 0.03, "fog": 0.04}
