"""The sensor fleet: 10,000 simulated sensors in one process, ticking through simulated time.

Per simulated second (a *tick*) the model gives every segment a mean speed and a vehicle rate;
each pavement sensor's vehicle count is drawn at once for the whole fleet (numpy Poisson), so
the per-sensor state is just a few arrays (sequence numbers, positions) and memory stays
bounded whatever the fleet size. Weather stations report every minute, infrastructure assets
every 10-60 seconds.

Time: ``speed=1`` runs live (event time = wall clock); ``speed=60`` replays a day an hour per
minute; ``speed=0`` runs as fast as the sink accepts. Events carry their simulated event time
as JSON ``event_time`` and as the Kafka record timestamp (CreateTime). ``catch_up`` ties the
simulated clock to the wall clock: a start in the past is generated as fast as the sink takes
it until the fleet reaches now, then it runs live (how ``sftraffic up`` continues a backfill
without a gap).

Sequence numbers run on across processes when the fleet's state is saved and restored
(:meth:`SensorFleet.seq_state`, :meth:`SensorFleet.restore_seq`): a live fleet after a replay of
the same sensors, or after a restart, goes on from the last number each sensor sent.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from sensors import geo
from sensors.layout import STREAM
from sensors.model import (
    CLASS_AXLES,
    CLASS_P,
    CLASS_SPEED,
    CLASS_WEIGHT,
    VEHICLE_CLASSES,
    Model,
    ModelConfig,
    weather_reading,
)

TRAFFIC, WEATHER, INFRA = "traffic", "weather_conditions", "infrastructure"


class Sink(Protocol):
    """Where events go: the store directly (Kafka) or MQTT devices."""

    def send(self, topic: str, key: str, value: dict[str, Any], ts_ms: int) -> None: ...

    def poll(self) -> None: ...

    def flush(self, timeout: float = 30.0) -> int: ...


@dataclass
class FleetStats:
    events: int = 0
    by_topic: dict[str, int] = field(default_factory=lambda: {TRAFFIC: 0, WEATHER: 0, INFRA: 0})
    sim_ms: int = 0
    started: float = field(default_factory=time.monotonic)

    @property
    def rate(self) -> float:
        dt = time.monotonic() - self.started
        return self.events / dt if dt > 0 else 0.0


class SensorFleet:
    def __init__(
        self,
        n_sensors: int = 10_000,
        cfg: ModelConfig | None = None,
        stream: str = STREAM,
        shard: tuple[int, int] = (0, 1),
        prefix: str = "",
        infrastructure: bool = True,
        assets: bool = True,
    ) -> None:
        """``shard=(i, n)``: this process simulates every n-th pavement sensor starting at i;
        shard 0 also runs the weather stations and infrastructure assets (unless
        ``infrastructure`` is off; ``assets`` off keeps the stations only). ``prefix`` is put
        before every pavement-sensor id, so two fleets (e.g. MQTT devices and direct producers)
        never share a sensor id."""
        self.model = Model(cfg)
        self.cfg = self.model.cfg
        self.stream = stream
        full = geo.build_fleet(n_sensors)
        i, n = shard
        extras = i == 0 and infrastructure
        self.fleet = geo.Fleet(
            full.traffic[i::n], full.stations if extras else [], full.assets if extras and assets else []
        )
        self.rng = np.random.default_rng([self.cfg.seed, 7, i])
        tr = self.fleet.traffic
        self.n_traffic = len(tr)
        self.sensor_ids = [prefix + s.sensor_id for s in tr]
        self.sensor_seg = np.array([self.model.seg_index[s.segment_id] for s in tr], dtype=np.int32)
        self.sensor_meta = [(s.segment_id, s.direction, s.lane, s.lat, s.lon) for s in tr]
        self.road_of_seg = [s.road for s in self.model.segments]
        self.kind_of_seg = [s.kind for s in self.model.segments]
        self.seq_traffic: list[int] = [0] * self.n_traffic  # a list: per-event numpy item access is slow
        self.seq_weather = np.zeros(len(self.fleet.stations), dtype=np.int64)
        self.seq_infra = np.zeros(len(self.fleet.assets), dtype=np.int64)
        self.stats = FleetStats()
        kinds = sorted(CLASS_P)
        self._cdf_matrix = np.array([np.cumsum(CLASS_P[k]) for k in kinds])
        code = {k: i for i, k in enumerate(kinds)}
        self._seg_kind_code = np.array([code[s.kind] for s in self.model.segments])
        self._class_speed = np.array([CLASS_SPEED[c] for c in VEHICLE_CLASSES])
        self._w_mean = np.array([CLASS_WEIGHT[c][0] for c in VEHICLE_CLASSES], dtype=float)
        self._w_sd = np.array([CLASS_WEIGHT[c][1] for c in VEHICLE_CLASSES], dtype=float)

    def _axle_distances(self, cls: np.ndarray, afac: np.ndarray) -> list[list[float]]:
        """Per event, its class's axle distances scaled by the event's factor (2 decimals),
        computed per class with numpy rather than per event in Python."""
        out: list[list[float]] = [[] for _ in range(len(cls))]
        for c in np.unique(cls).tolist():
            rows = np.nonzero(cls == c)[0]
            base = np.asarray(CLASS_AXLES[VEHICLE_CLASSES[c]], dtype=float)
            vals = np.round(np.outer(afac[rows], base), 2).tolist()
            for r, v in zip(rows.tolist(), vals, strict=True):
                out[r] = v
        return out

    def topic(self, name: str) -> str:
        return f"{self.stream}.{name}"

    # -- sequence numbers across processes ---------------------------------------------------
    def seq_state(self) -> dict[str, int]:
        """The next sequence number of every sensor this fleet runs, by sensor id."""
        out = dict(zip(self.sensor_ids, self.seq_traffic, strict=True))
        out.update(zip((s.station_id for s in self.fleet.stations), self.seq_weather.tolist(), strict=True))
        out.update(zip((a.asset_id for a in self.fleet.assets), self.seq_infra.tolist(), strict=True))
        return out

    def restore_seq(self, state: dict[str, int]) -> int:
        """Go on from ``state`` (sensor id -> next sequence number; others keep theirs);
        returns how many of this fleet's sensors it named."""
        n = 0
        for i, sid in enumerate(self.sensor_ids):
            if sid in state:
                self.seq_traffic[i] = max(self.seq_traffic[i], int(state[sid]))
                n += 1
        for arr, ids in (
            (self.seq_weather, [s.station_id for s in self.fleet.stations]),
            (self.seq_infra, [a.asset_id for a in self.fleet.assets]),
        ):
            for j, sid in enumerate(ids):
                if sid in state:
                    arr[j] = max(int(arr[j]), int(state[sid]))
                    n += 1
        return n

    # -- generation ------------------------------------------------------------------------
    def tick(self, t_ms: int, dt_ms: int = 1000) -> Iterator[tuple[str, str, dict[str, Any], int]]:
        """Events for simulated time [t_ms, t_ms + dt_ms): (topic, key, event, timestamp)."""
        speed, rate, _wx = self.model.segment_state(t_ms)
        yield from self._traffic(t_ms, dt_ms, speed, rate)
        sec = t_ms // 1000
        if sec % 60 == 0:
            yield from self._weather(t_ms)
        yield from self._infrastructure(t_ms, sec, rate)

    def _traffic(
        self, t_ms: int, dt_ms: int, speed: np.ndarray, rate: np.ndarray
    ) -> Iterator[tuple[str, str, dict[str, Any], int]]:
        """The pavement sensors' vehicles in [t_ms, t_ms + dt_ms), in time order."""
        lam = rate[self.sensor_seg] * (dt_ms / 1000)
        counts = self.rng.poisson(lam)
        idx = np.repeat(np.arange(self.n_traffic), counts)
        n = len(idx)
        if n:
            segs = self.sensor_seg[idx]
            ts_l = (t_ms + np.sort(self.rng.integers(0, dt_ms, size=n))).tolist()
            kinds = self._seg_kind_code[segs]
            cls = (self.rng.random(n)[:, None] > self._cdf_matrix[kinds]).sum(axis=1)
            cls = np.minimum(cls, len(VEHICLE_CLASSES) - 1)
            speeds = np.round(
                speed[segs] * self.rng.lognormal(0.0, self.cfg.speed_noise, size=n) * self._class_speed[cls],
                1,
            )
            weights = np.round(
                np.maximum(80.0, self._w_mean[cls] + self._w_sd[cls] * self.rng.normal(size=n)), 1
            )
            afac = 1 + self.rng.normal(scale=0.008, size=n)
            axle_lists = self._axle_distances(cls, afac)
            topic = self.topic(TRAFFIC)
            ids = self.sensor_ids
            meta = self.sensor_meta
            roads = self.road_of_seg
            seq_l = self.seq_traffic
            # per-sensor sequence numbers: events of one sensor within a tick get consecutive seqs
            idx_l = idx.tolist()
            for i, si, c, sp, w, ts, axle_d in zip(
                idx_l,
                segs.tolist(),
                cls.tolist(),
                speeds.tolist(),
                weights.tolist(),
                ts_l,
                axle_lists,
                strict=True,
            ):
                seg_id, direction, lane, lat, lon = meta[i]
                seq = seq_l[i]
                seq_l[i] = seq + 1
                sid = ids[i]
                yield (
                    topic,
                    sid,
                    {
                        "type": "traffic",
                        "sensor_id": sid,
                        "seq": seq,
                        "event_time": ts,
                        "segment_id": seg_id,
                        "road": roads[si],
                        "lat": lat,
                        "lon": lon,
                        "direction": direction,
                        "lane": lane,
                        "vehicle_class": VEHICLE_CLASSES[c],
                        "weight_kg": w,
                        "axle_count": len(axle_d) + 1,
                        "axle_distances_m": axle_d,
                        "speed_kmh": sp,
                    },
                    ts,
                )

    def _weather(self, t_ms: int) -> Iterator[tuple[str, str, dict[str, Any], int]]:
        """Every weather station's reading (on the minute)."""
        for j, st in enumerate(self.fleet.stations):
            reading = weather_reading(self.model, j, t_ms, self.rng)
            seq = int(self.seq_weather[j])
            self.seq_weather[j] = seq + 1
            yield (
                self.topic(WEATHER),
                st.station_id,
                {
                    "type": "weather",
                    "sensor_id": st.station_id,
                    "seq": seq,
                    "event_time": t_ms,
                    "station": st.station_id,
                    "district": st.district,
                    "lat": st.lat,
                    "lon": st.lon,
                    **reading,
                },
                t_ms,
            )

    def _infrastructure(
        self, t_ms: int, sec: int, rate: np.ndarray
    ) -> Iterator[tuple[str, str, dict[str, Any], int]]:
        for j, a in enumerate(self.fleet.assets):
            every = {"signal": 30, "bridge": 10, "tunnel": 30, "parking": 60}[a.kind]
            if (sec + j) % every:
                continue
            seq = int(self.seq_infra[j])
            self.seq_infra[j] = seq + 1
            ev: dict[str, Any] = {
                "type": "infrastructure",
                "sensor_id": a.asset_id,
                "seq": seq,
                "event_time": t_ms,
                "kind": a.kind,
                "asset": a.name,
                "lat": a.lat,
                "lon": a.lon,
            }
            load = float(rate[self.model.seg_index[a.segment_id]]) * 3600 if a.segment_id else 0.0
            if a.kind == "signal":
                cycle = (sec + j * 7) % 90
                ev["signal_state"] = "green" if cycle < 45 else ("yellow" if cycle < 49 else "red")
            elif a.kind == "bridge":
                ev["strain_microstrain"] = round(120 + load * 0.08 + float(self.rng.normal(scale=5)), 1)
                ev["vibration_mm_s"] = round(0.4 + load * 0.0006 + abs(float(self.rng.normal(scale=0.05))), 3)
            elif a.kind == "tunnel":
                ev["co_ppm"] = round(2 + load * 0.012 + abs(float(self.rng.normal(scale=0.5))), 2)
                ev["no2_ppb"] = round(15 + load * 0.05 + abs(float(self.rng.normal(scale=2))), 1)
            else:
                from sensors.model import profile

                occ = min(
                    a.capacity, int(a.capacity * (0.15 + 0.8 * profile(t_ms)) + self.rng.normal(scale=5))
                )
                ev["occupied"] = max(0, occ)
                ev["capacity"] = a.capacity
            yield self.topic(INFRA), a.asset_id, ev, t_ms

    # -- running ---------------------------------------------------------------------------
    def run(
        self,
        sink: Sink,
        start_ms: int,
        duration_s: float | None = None,
        speed: float = 1.0,
        stop: Callable[[], bool] = lambda: False,
        on_second: Callable[[FleetStats], None] | None = None,
        tick_ms: int = 1000,
        catch_up: bool = False,
    ) -> FleetStats:
        """Generate from ``start_ms`` for ``duration_s`` simulated seconds (None: forever).

        ``catch_up``: simulated time is wall-clock time (``speed`` is ignored): the tick of
        ``[t, t + tick)`` is sent once the wall clock reaches ``t``, so a past start is caught up
        as fast as the sink takes it and a future one waits."""
        wall0 = time.monotonic()
        t = start_ms - start_ms % tick_ms
        end = None if duration_s is None else start_ms + int(duration_s * 1000)
        st = self.stats
        send = sink.send
        while not stop() and (end is None or t < end):
            if catch_up:
                delay = t / 1000 - time.time()
                if delay > 0:
                    time.sleep(min(delay, 1.0))  # stop() is checked at least every second
                    continue
            counts: dict[str, int] = {}
            for topic, key, ev, ts in self.tick(t, tick_ms):
                send(topic, key, ev, ts)
                counts[topic] = counts.get(topic, 0) + 1
            for topic, n in counts.items():
                st.events += n
                st.by_topic[topic.rsplit(".", 1)[-1]] += n
            st.sim_ms = t
            sink.poll()
            t += tick_ms
            if on_second is not None:
                on_second(st)
            if speed > 0 and not catch_up:
                due = wall0 + (t - start_ms) / 1000 / speed
                delay = due - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
        return st


def load_seq_state(path: Path) -> dict[str, int]:
    """Sequence numbers saved by :func:`save_seq_state` (``path`` and any ``path.<worker>``
    files a sharded run left), empty when there are none."""
    out: dict[str, int] = {}
    for f in sorted(path.parent.glob(path.name + "*")) if path.parent.exists() else []:
        if f.name != path.name and not f.name.removeprefix(path.name + ".").isdigit():
            continue
        try:
            for k, v in json.loads(f.read_text()).items():
                out[k] = max(out.get(k, 0), int(v))
        except (OSError, ValueError):
            continue  # a torn file: those sensors start from 0 again
    return out


def save_seq_state(path: Path, state: dict[str, int]) -> None:
    """Write ``state`` atomically (a crash leaves the previous file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(state, separators=(",", ":")))
    os.replace(tmp, path)
