"""Realistic results of the Spark jobs, written straight into a store: what the dashboard's
charts draw, without running Spark (dashboard tests and ``load/bench_dashboard.py``).

Per minute for ``minutes`` before ``end_ms``: aggregates of every segment (speeds from the
simulator's model), alerts of the slow ones, each station's weather; then the weather-effect
estimates (near the simulator's configured factors, as the correlation job recovers them).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from dashboard.data import TOPICS

if TYPE_CHECKING:
    import numpy as np

    from sensors.model import Model


def iso(ms: int) -> str:
    """UTC ISO-8601 with milliseconds, as the jobs write window bounds."""
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(ms / 1000))


def seed_results(bootstrap: str, end_ms: int, minutes: int, speed_offset: float = 0.0) -> int:
    """Write the results; returns how many records (all acknowledged, else RuntimeError).
    ``speed_offset`` (km/h) shifts every speed, to make a change visible."""
    import numpy as np
    from confluent_kafka import Producer

    from sensors.model import Model, ModelConfig
    from sensors.publish import _quiet

    m = Model(ModelConfig(seed=3, rain_share=0.3))
    rng = np.random.default_rng(1)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "logger": _quiet()})
    n = 0

    def send(topic: str, key: str, rec: dict[str, Any], ts: int) -> None:
        nonlocal n
        p.produce(TOPICS[topic], key=key.encode(), value=json.dumps(rec).encode(), timestamp=ts)
        n += 1

    start = end_ms - minutes * 60_000
    for k in range(minutes):
        t = start + k * 60_000
        for topic, key, rec in _minute(m, rng, k, t, speed_offset):
            send(topic, key, rec, t)
    for cond, eff in _effects():
        send("effects", f"*|{cond}", eff, end_ms)
    if p.flush(60):
        raise RuntimeError("seeding: results not acknowledged")
    return n


def _minute(
    m: Model, rng: np.random.Generator, k: int, t: int, speed_offset: float
) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """The results of minute ``k`` (starting at ``t``): (topic name in TOPICS, key, record)."""
    from sensors import geo
    from sensors.model import weather_reading

    speed, rate, _wx = m.segment_state(t)
    for i, s in enumerate(geo.SEGMENTS):
        v = float(speed[i]) + speed_offset
        agg = {
            "segment_id": s.segment_id,
            "window_start": iso(t),
            "window_end": iso(t + 60_000),
            "volume": int(rate[i] * 60 * s.lanes * 4) + 1,
            "mean_speed_kmh": round(v, 2),
            "p50_speed_kmh": round(v, 1),
            "p85_speed_kmh": round(v * 1.12, 1),
            "heavy_share": 0.08,
        }
        yield "aggregates", s.segment_id, agg
        if v < 0.5 * s.free_flow_kmh:
            alert = {
                **{k2: agg[k2] for k2 in ("segment_id", "window_start", "window_end", "volume")},
                "mean_speed_kmh": round(v, 1),
                "baseline_kmh": s.free_flow_kmh,
                "ratio": round(v / s.free_flow_kmh, 3),
                "severity": "slow",
            }
            yield "alerts", s.segment_id, alert
    for j, st in enumerate(geo.STATIONS):
        wx = {
            "type": "weather",
            "sensor_id": st.station_id,
            "seq": k,
            "event_time": t,
            "station": st.station_id,
            "district": st.district,
            "lat": st.lat,
            "lon": st.lon,
            **weather_reading(m, j, t, rng),
        }
        yield "weather", st.station_id, wx


def _effects() -> list[tuple[str, dict[str, Any]]]:
    """Estimates as the correlation job reports them: near the simulator's configured factors
    (0.90, 0.85, 0.72), each off by a little and with its own interval (illustrative figures)."""
    out = []
    for cond, ratio, ci, ols, ols_ci, cells in (
        ("fog", 0.897, 0.021, 0.904, 0.011, 64),
        ("rain", 0.846, 0.012, 0.853, 0.007, 212),
        ("heavy_rain", 0.731, 0.025, 0.727, 0.014, 71),
    ):
        eff = {
            "segment_id": "*",
            "condition": cond,
            "n": cells,
            "windows": cells * 14,
            "speed_factor": ratio,
            "ci_low": round(ratio - ci, 4),
            "ci_high": round(ratio + ci, 4),
            "ols_factor": ols,
            "ols_ci_low": round(ols - ols_ci, 4),
            "ols_ci_high": round(ols + ols_ci, 4),
            "congestion_delta": 0.01,
            "precip_corr": -0.2,
        }
        out.append((cond, eff))
    return out
