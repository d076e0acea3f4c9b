"""Put realistic results into a store for dashboard tests (what the Spark jobs would write)."""

from __future__ import annotations

import json

from confluent_kafka import Producer

from dashboard.data import TOPICS
from dashboard.demo_data import seed_results
from sensors.fleet import SensorFleet
from tests.conftest import quiet_logger


def seed(bootstrap: str, end_ms: int, minutes: int = 60, speed_offset: float = 0.0) -> None:
    """The jobs' results for ``minutes`` before ``end_ms``, plus one tick of raw traffic and
    infrastructure events of a 300-sensor fleet 30 s before it."""
    seed_results(bootstrap, end_ms, minutes, speed_offset)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "logger": quiet_logger()})
    for topic, key, ev, ts in SensorFleet(300).tick(end_ms - 30_000):
        if topic in (TOPICS["infra"], TOPICS["traffic"]):
            p.produce(topic, key=key.encode(), value=json.dumps(ev).encode(), timestamp=ts)
    assert p.flush(30) == 0
