"""Put realistic results into a store for dashboard tests (what the Spark jobs would write)."""

from __future__ import annotations

import json

from confluent_kafka import Producer

from dashboard.data import TOPICS
from dashboard.demo_data import seed_results
from sensors.fleet import SensorFleet
from tests.support.brokers import quiet_logger


def seed(bootstrap: str, end_ms: int, minutes: int = 60, speed_offset: float = 0.0) -> None:
    """The jobs' results for ``minutes`` before ``end_ms``, plus one tick of raw traffic and
    infrastructure events of a 300-sensor fleet 30 s before it."""
    seed_results(bootstrap, end_ms, minutes, speed_offset)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "logger": quiet_logger()})
    for topic, key, ev, ts in SensorFleet(300).tick(end_ms - 30_000):
        if topic in (TOPICS["infra"], TOPICS["traffic"]):
            p.produce(topic, key=key.encode(), value=json.dumps(ev).encode(), timestamp=ts)
    assert p.flush(30) == 0


def rainy_hour_end(now_ms: int, station: str = "wx-fidi", search_hours: int = 24) -> int:
    """The latest minute, at least 5 minutes before ``now_ms``, whose past hour at ``station``
    (in the weather :func:`seed_results` writes) holds clear spells and rain, preferably heavy
    rain too: seeded there, the speed series shows every band of the weather story."""
    from sensors import geo
    from sensors.model import CONDITIONS, Model, ModelConfig

    m = Model(ModelConfig(seed=3, rain_share=0.3))
    j = [s.station_id for s in geo.STATIONS].index(station)
    latest = now_ms - 5 * 60_000
    latest -= latest % 60_000
    best, best_score = latest, 0
    for back in range(search_hours * 6):
        end = latest - back * 600_000
        seen = {CONDITIONS[int(m.station_conditions(end - k * 60_000)[j])] for k in range(0, 60, 5)}
        score = ("rain" in seen) + ("heavy_rain" in seen) + bool(seen & {"clear", "cloudy"})
        if score == 3:
            return end
        if score > best_score:
            best, best_score = end, score
    return best
