"""Put realistic results into a store for dashboard tests (what the Spark jobs would write)."""

from __future__ import annotations

import json
import time
from typing import Any

import numpy as np
from confluent_kafka import Producer

from dashboard.data import TOPICS
from sensors import geo
from sensors.fleet import SensorFleet
from sensors.model import Model, ModelConfig, weather_reading
from tests.conftest import quiet_logger


def _iso(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(ms / 1000))


def seed(bootstrap: str, end_ms: int, minutes: int = 60, speed_offset: float = 0.0) -> None:
    m = Model(ModelConfig(seed=3, rain_share=0.3))
    rng = np.random.default_rng(1)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "logger": quiet_logger()})

    def send(topic: str, key: str, rec: dict[str, Any], ts: int) -> None:
        p.produce(topic, key=key.encode(), value=json.dumps(rec).encode(), timestamp=ts)

    start = end_ms - minutes * 60_000
    for k in range(minutes):
        t = start + k * 60_000
        speed, rate, _wx = m.segment_state(t)
        for i, s in enumerate(geo.SEGMENTS):
            v = float(speed[i]) + speed_offset
            send(
                TOPICS["aggregates"],
                s.segment_id,
                {
                    "segment_id": s.segment_id,
                    "window_start": _iso(t),
                    "window_end": _iso(t + 60_000),
                    "volume": int(rate[i] * 60 * s.lanes * 4) + 1,
                    "mean_speed_kmh": round(v, 2),
                    "p50_speed_kmh": round(v, 1),
                    "p85_speed_kmh": round(v * 1.12, 1),
                    "heavy_share": 0.08,
                },
                t,
            )
            if v < 0.5 * s.free_flow_kmh:
                send(
                    TOPICS["alerts"],
                    s.segment_id,
                    {
                        "segment_id": s.segment_id,
                        "window_start": _iso(t),
                        "window_end": _iso(t + 60_000),
                        "volume": 10,
                        "mean_speed_kmh": round(v, 1),
                        "baseline_kmh": s.free_flow_kmh,
                        "ratio": round(v / s.free_flow_kmh, 3),
                        "severity": "slow",
                    },
                    t,
                )
        for j, st in enumerate(geo.STATIONS):
            send(
                TOPICS["weather"],
                st.station_id,
                {
                    "type": "weather",
                    "sensor_id": st.station_id,
                    "seq": k,
                    "event_time": t,
                    "station": st.station_id,
                    "district": st.district,
                    "lat": st.lat,
                    "lon": st.lon,
                    **weather_reading(m, j, t, rng),
                },
                t,
            )
    for cond, f in (("fog", 0.9), ("rain", 0.85), ("heavy_rain", 0.72)):
        send(
            TOPICS["effects"],
            f"*|{cond}",
            {
                "segment_id": "*",
                "condition": cond,
                "n": 100,
                "windows": 1000,
                "speed_factor": f,
                "ci_low": f - 0.02,
                "ci_high": f + 0.02,
                "ols_factor": f,
                "ols_ci_low": f - 0.01,
                "ols_ci_high": f + 0.01,
                "congestion_delta": 0.01,
                "precip_corr": -0.2,
            },
            end_ms,
        )
    fleet = SensorFleet(300)
    for topic, key, ev, ts in fleet.tick(end_ms - 30_000):
        if topic == TOPICS["infra"] or topic == TOPICS["traffic"]:
            send(topic, key, ev, ts)
    assert p.flush(30) == 0
