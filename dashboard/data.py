"""What the dashboard shows, kept in memory by background consumers (never by callbacks).

A consumer thread reads the result and sensor topics (assign, no group, starting a few hours
back by time) into bounded caches; another thread polls store health (brokers, partitions
with a short ISR, end offsets for throughput, consumer-group lag). Dash callbacks only read
these caches under a lock, so a slow or dead store can never stall the page: when the store
stops answering, ``store_ok`` turns false and the page shows a banner.

Memory is bounded: per segment at most ``history`` minutes of aggregates, per station a few
hours of weather, the latest event per sensor (10k entries for a 10k fleet), the last 200
alerts.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import msgspec

from framework.client.security import client_security
from sensors.layout import STREAM, topic
from sensors.model import CONDITIONS, WeatherEffect

if TYPE_CHECKING:
    from dashboard.status import Facts

TOPICS = {
    "aggregates": topic("traffic_aggregates"),
    "effects": topic("weather_effects"),
    "alerts": topic("congestion_alerts"),
    "weather": topic("weather_conditions"),
    "infra": topic("infrastructure"),
    "traffic": topic("traffic"),
}


def _quiet() -> logging.Logger:
    lg = logging.getLogger("sftraffic.dashboard.librdkafka")
    lg.addHandler(logging.NullHandler())
    lg.propagate = False
    return lg


_avro: list[Any] = []  # the AvroDecoder, made on first use


def _from_avro(value: bytes) -> bytes | None:
    """An Avro event (writer's schema from $SFTRAFFIC_REGISTRY) as the JSON the caches hold."""
    if not _avro:
        import os

        from sensors.avro import AvroDecoder

        _avro.append(AvroDecoder(os.environ.get("SFTRAFFIC_REGISTRY", "http://127.0.0.1:8081")))
    try:
        return msgspec.json.encode({k: v for k, v in _avro[0].decode(value).items() if v is not None})
    except Exception:  # an unknown id, a registry down, a damaged value: the record is skipped
        return None


class _Live(msgspec.Struct):
    """The few fields of a raw traffic event the live view needs (decoded without the rest)."""

    segment_id: str
    speed_kmh: float
    event_time: int


_live_decoder = msgspec.json.Decoder(_Live)


def _iso_ms(text: str) -> int:
    import datetime as dt

    return int(dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


@dataclass
class Health:
    store_ok: bool = False
    last_ok: float = 0.0
    error: str = ""
    brokers: list[str] = field(default_factory=list)
    partitions: int = 0
    under_replicated: int = 0
    throughput: dict[str, float] = field(default_factory=dict)  # topic -> msgs/s
    lag: dict[str, int] = field(default_factory=dict)  # group -> total lag
    pipeline_lag_s: float | None = None  # now - newest aggregate window end
    topics: dict[str, int] = field(default_factory=dict)  # topic -> records (sum of end offsets)


DEFAULT_EFFECTS = {
    c: WeatherEffect().speed_factor(CONDITIONS.index(c)) for c in ("fog", "rain", "heavy_rain")
}


class DashboardData:
    def __init__(
        self,
        bootstrap: str,
        history_minutes: int = 360,
        lookback_ms: int = 3 * 3_600_000,
        window_ms: int | None = None,
        watermark_ms: int | None = None,
    ) -> None:
        """``window_ms`` / ``watermark_ms``: the Spark jobs' (default: ``pipelines.jobs``'), to
        tell when their first window is due (:mod:`dashboard.status`)."""
        from dashboard.status import job_timing

        window, watermark, self.effects_every_s = job_timing()
        self.window_ms = window_ms or window
        self.watermark_ms = watermark_ms or watermark
        self.bootstrap = bootstrap
        self.history_minutes = history_minutes
        self.lookback_ms = lookback_ms
        self.started_ms = int(time.time() * 1000)
        self.health_checked = False
        # event times of the sensor events received (the data clock); 0 = none yet
        self.oldest_event_ms = 0
        self.newest_event_ms = 0
        self.lock = threading.Lock()
        self.aggregates: dict[str, deque[dict[str, Any]]] = {}
        self.latest_agg: dict[str, dict[str, Any]] = {}
        self.weather: dict[str, deque[dict[str, Any]]] = {}
        self.effects: dict[tuple[str, str], dict[str, Any]] = {}
        self.alerts: deque[dict[str, Any]] = deque(maxlen=200)
        self.infra: dict[str, dict[str, Any]] = {}
        self.sensors: dict[str, bytes] = {}  # latest raw event per sensor (parsed on demand)
        # live view before Spark's windows close: per segment [minute, count, speed sum]
        self.live: dict[str, list[float]] = {}
        self.events_seen = 0
        self.health = Health()
        self.updated = 0.0
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.ground_truth: dict[str, dict[str, Any]] = {}  # sensors.ground_truth records
        self._truth_due = 0.0

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> DashboardData:
        for target in (self._consume_loop, self._health_loop):
            th = threading.Thread(target=target, daemon=True, name=target.__name__)
            th.start()
            self._threads.append(th)
        return self

    def stop(self) -> None:
        self._stop.set()
        for th in self._threads:
            th.join(5)

    # -- ingestion -------------------------------------------------------------------------
    def ingest(self, topic: str, key: bytes | None, value: bytes | None) -> None:
        """Apply one record to the caches (also used directly by tests)."""
        if value is None:
            return
        if value[:1] == b"\x00":  # Avro in Confluent's wire format (sftraffic up --format avro)
            value = _from_avro(value)
            if value is None:
                return
        if topic == TOPICS["traffic"]:
            self._ingest_event(key, value)
            return
        try:
            rec = json.loads(value)
        except ValueError:
            return
        with self.lock:
            self._ingest_result(topic, rec)
            self.updated = time.time()

    def _ingest_event(self, key: bytes | None, value: bytes) -> None:
        """A raw sensor event: the latest per sensor, the data clock, this minute's live view."""
        if key is not None:
            self.sensors[key.decode()] = value
        self.events_seen += 1
        try:
            ev = _live_decoder.decode(value)
        except msgspec.DecodeError:
            return
        self.newest_event_ms = max(self.newest_event_ms, ev.event_time)
        if ev.event_time < self.oldest_event_ms or not self.oldest_event_ms:
            self.oldest_event_ms = ev.event_time
        minute = ev.event_time // 60_000 * 60_000
        cur = self.live.get(ev.segment_id)
        if cur is None or cur[0] < minute:
            self.live[ev.segment_id] = [minute, 1, ev.speed_kmh]
        elif cur[0] == minute:
            cur[1] += 1
            cur[2] += ev.speed_kmh

    def _ingest_result(self, topic: str, rec: Any) -> None:
        """A result of the pipelines (or an infrastructure reading), under the lock."""
        if topic == TOPICS["aggregates"]:
            self._add_aggregate(rec)
        elif topic == TOPICS["weather"]:
            q = self.weather.setdefault(rec["station"], deque(maxlen=self.history_minutes))
            q.append(rec)
        elif topic == TOPICS["effects"]:
            self.effects[(rec["segment_id"], rec["condition"])] = rec
        elif topic == TOPICS["alerts"]:
            rec["t"] = _iso_ms(rec["window_start"])
            self.alerts.append(rec)
        elif topic == TOPICS["infra"]:
            self.infra[rec["sensor_id"]] = rec

    def _add_aggregate(self, rec: dict[str, Any]) -> None:
        seg = rec["segment_id"]
        rec["t"] = _iso_ms(rec["window_start"])
        q = self.aggregates.setdefault(seg, deque(maxlen=self.history_minutes))
        if q and q[-1]["t"] >= rec["t"]:
            # out of order (several partitions): keep the series sorted
            items = [r for r in q if r["t"] != rec["t"]] + [rec]
            items.sort(key=lambda r: r["t"])
            q.clear()
            q.extend(items[-self.history_minutes :])
        else:
            q.append(rec)
        cur = self.latest_agg.get(seg)
        if cur is None or cur["t"] <= rec["t"]:
            self.latest_agg[seg] = rec

    def _consume_loop(self) -> None:
        from confluent_kafka import Consumer, KafkaError, TopicPartition

        consumer = None
        assigned: set[str] = set()
        while not self._stop.is_set():
            try:
                if consumer is None:
                    consumer = Consumer(
                        {
                            **client_security(),
                            "bootstrap.servers": self.bootstrap,
                            "group.id": "sftraffic-dashboard",
                            "enable.auto.commit": False,
                            # the streaming jobs write results in transactions: never an aborted one
                            "isolation.level": "read_committed",
                            "logger": _quiet(),
                            "socket.timeout.ms": 5000,
                            "enable.partition.eof": False,
                            "fetch.wait.max.ms": 200,
                        }
                    )
                missing = [t for t in TOPICS.values() if t not in assigned]
                if missing:
                    md = consumer.list_topics(timeout=5)
                    since = int(time.time() * 1000) - self.lookback_ms
                    tps = []
                    for t in missing:
                        tm = md.topics.get(t)
                        if tm is None or tm.error is not None:
                            continue
                        want = [TopicPartition(t, p, since) for p in tm.partitions]
                        tps.extend(consumer.offsets_for_times(want, timeout=5))
                        assigned.add(t)
                    if tps:
                        for tp in tps:
                            if tp.offset < 0:
                                tp.offset = -1  # OFFSET_END: nothing newer than the look-back
                        consumer.incremental_assign(tps)
                msgs = consumer.consume(2000, timeout=0.5)
                for m in msgs:
                    err = m.error()
                    if err is not None:
                        if err.code() != KafkaError._PARTITION_EOF:
                            raise RuntimeError(err.str())
                        continue
                    self.ingest(cast(str, m.topic()), m.key(), m.value())  # a record has its topic
            except Exception as exc:
                self.health.error = str(exc)
                if consumer is not None:
                    try:
                        consumer.close()
                    except Exception as close_exc:
                        logging.getLogger("sftraffic.dashboard").debug("consumer close: %s", close_exc)
                consumer = None
                assigned.clear()
                self._stop.wait(2.0)
        if consumer is not None:
            consumer.close()

    def configured_effects(self) -> dict[str, float]:
        """Each regime's speed factor the simulator runs with: what the running fleet published
        (``sensors.ground_truth``), else the model's defaults (a fleet started elsewhere)."""
        published = self.ground_truth.get("weather_effect", {}).get("speed_factor")
        if isinstance(published, dict) and published:
            return {str(k): float(v) for k, v in published.items()}
        return dict(DEFAULT_EFFECTS)

    def _refresh_ground_truth(self, md: Any) -> None:
        """Read the ground-truth topic when it exists (a compacted topic of a few records)."""
        from sensors import ground_truth

        if ground_truth.TOPIC not in md.topics or time.monotonic() < self._truth_due:
            return
        self._truth_due = time.monotonic() + 60
        try:
            self.ground_truth = ground_truth.read(self.bootstrap, timeout=3)
        except Exception as exc:
            logging.getLogger("sftraffic.dashboard").debug("ground truth: %s", exc)

    def _health_loop(self) -> None:
        from confluent_kafka import Consumer, TopicPartition
        from confluent_kafka.admin import AdminClient

        prev: dict[str, tuple[float, int]] = {}
        while not self._stop.is_set():
            h = Health(throughput=dict(self.health.throughput), lag=dict(self.health.lag))
            known = self.health.topics
            try:
                # AdminClient's stub types the values str/int/float/bool; it takes a logger as every client
                admin_conf: dict[str, Any] = {
                    **client_security(),
                    "bootstrap.servers": self.bootstrap,
                    "logger": _quiet(),
                    "socket.timeout.ms": 3000,
                }
                admin = AdminClient(admin_conf)
                md = admin.list_topics(timeout=3)
                h.brokers = [f"{b.id}@{b.host}:{b.port}" for b in md.brokers.values()]
                c = Consumer(
                    {
                        **client_security(),
                        "bootstrap.servers": self.bootstrap,
                        "group.id": "sftraffic-dashboard-health",
                        "logger": _quiet(),
                        "enable.auto.commit": False,
                    }
                )
                try:
                    now = time.monotonic()
                    for name, tm in md.topics.items():
                        if name.startswith("__"):
                            continue
                        h.topics[name] = known.get(name, 0)
                        h.partitions += len(tm.partitions)
                        h.under_replicated += sum(
                            1 for p in tm.partitions.values() if len(p.isrs) < len(p.replicas)
                        )
                        if name.startswith(STREAM + ".") and all(
                            p.leader >= 0 for p in tm.partitions.values()
                        ):
                            try:
                                end = sum(
                                    c.get_watermark_offsets(TopicPartition(name, p), timeout=3, cached=False)[
                                        1
                                    ]
                                    for p in tm.partitions
                                )
                            except Exception:  # a leader moving (cluster failover), or the store
                                # stopping: skip the rest of the round (each further topic would
                                # wait its 3 s too, ~30 s before the banner with a dozen topics)
                                prev.pop(name, None)
                                break
                            h.topics[name] = end
                            if name in prev and now > prev[name][0]:
                                h.throughput[name] = max(0.0, (end - prev[name][1]) / (now - prev[name][0]))
                            prev[name] = (now, end)
                    h.lag = self._group_lag(admin, c)
                finally:
                    c.close()
                h.store_ok = True
                h.last_ok = time.time()
                self._refresh_ground_truth(md)
                with self.lock:
                    newest = max((r["t"] for r in self.latest_agg.values()), default=None)
                h.pipeline_lag_s = (
                    None if newest is None else max(0.0, time.time() - (newest + 60_000) / 1000)
                )
            except Exception as exc:
                h.store_ok = False
                h.error = str(exc) or exc.__class__.__name__
                h.last_ok = self.health.last_ok
            self.health = h
            self.health_checked = True
            self._stop.wait(2.0)

    @staticmethod
    def _group_lag(admin: Any, consumer: Any) -> dict[str, int]:
        from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

        out: dict[str, int] = {}
        groups = admin.list_consumer_groups(request_timeout=3).result().valid
        for g in groups[:20]:
            if g.group_id.startswith("sftraffic-dashboard"):
                continue
            try:
                res = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(g.group_id)])[
                    g.group_id
                ].result()
            except Exception as exc:  # a group may vanish meanwhile, or the store stop: the
                # next round (2 s on) asks again, instead of each group waiting its time-out here
                logging.getLogger("sftraffic.dashboard").debug("lag of %s: %s", g.group_id, exc)
                break
            total = 0
            for tp in res.topic_partitions:
                if tp.offset >= 0:
                    end = consumer.get_watermark_offsets(TopicPartition(tp.topic, tp.partition), timeout=3)[1]
                    total += max(0, end - tp.offset)
            out[g.group_id] = total
        return out

    # -- queries for callbacks (cheap, lock-protected copies) -------------------------------
    def snapshot_latest(self) -> dict[str, dict[str, Any]]:
        """Newest window per segment: Spark's closed window, or the live partial minute when newer."""
        with self.lock:
            out = dict(self.latest_agg)
        for seg, (minute, n, total) in list(self.live.items()):
            cur = out.get(seg)
            if n and (cur is None or cur["t"] < minute):
                out[seg] = {
                    "segment_id": seg,
                    "t": int(minute),
                    "volume": int(n),
                    "mean_speed_kmh": round(total / n, 2),
                    "live": True,
                }
        return out

    def series(self, segment: str, since_ms: int) -> list[dict[str, Any]]:
        with self.lock:
            return [r for r in self.aggregates.get(segment, ()) if r["t"] >= since_ms]

    def weather_series(self, station: str, since_ms: int) -> list[dict[str, Any]]:
        with self.lock:
            return [r for r in self.weather.get(station, ()) if r["event_time"] >= since_ms]

    def latest_weather(self) -> dict[str, dict[str, Any]]:
        with self.lock:
            return {s: q[-1] for s, q in self.weather.items() if q}

    def effects_overall(self) -> list[dict[str, Any]]:
        with self.lock:
            return [v for (seg, _), v in self.effects.items() if seg == "*"]

    def recent_alerts(self, since_ms: int) -> list[dict[str, Any]]:
        with self.lock:
            return sorted((a for a in self.alerts if a["t"] >= since_ms), key=lambda a: -a["t"])

    def infrastructure(self) -> list[dict[str, Any]]:
        with self.lock:
            return sorted(self.infra.values(), key=lambda r: r["sensor_id"])

    def facts(self) -> Facts:
        """What the empty states are computed from (:mod:`dashboard.status`)."""
        from dashboard.status import Facts

        h = self.health
        with self.lock:
            newest_window = max((r["t"] for r in self.latest_agg.values()), default=None)
            conditions = frozenset(r.get("condition", "") for q in self.weather.values() for r in q) - {""}
            return Facts(
                bootstrap=self.bootstrap,
                now_ms=int(time.time() * 1000),
                started_ms=self.started_ms,
                lookback_ms=self.lookback_ms,
                window_ms=self.window_ms,
                watermark_ms=self.watermark_ms,
                effects_every_s=self.effects_every_s,
                store_checked=self.health_checked,
                store_ok=h.store_ok,
                error=h.error,
                topics=dict(h.topics),
                events_seen=self.events_seen,
                oldest_event_ms=self.oldest_event_ms or None,
                newest_event_ms=self.newest_event_ms or None,
                segments_with_windows=len(self.latest_agg),
                newest_window_ms=newest_window,
                effects=sum(1 for seg, _ in self.effects if seg == "*"),
                weather_readings=sum(len(q) for q in self.weather.values()),
                conditions_seen=conditions,
                infra_readings=len(self.infra),
            )

    def sensor(self, sensor_id: str) -> dict[str, Any] | None:
        raw = self.sensors.get(sensor_id)
        return json.loads(raw) if raw is not None else None
