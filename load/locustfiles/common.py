"""locust users for the traffic system, and the ledger that proves nothing was lost.

Imported by the scenario locustfiles (``smoke.py``, ``steady.py``, ``rush_hour.py``,
``burst.py``), each of which adds one :class:`~locust.LoadTestShape`. ``sftraffic load`` sets
the configuration as the ``SFTRAFFIC_*`` environment variables read below (so locust's own
command line stays untouched). The users, the request names they report, the ledger and the
exit codes: ``docs/benchmarks.md``, "Load tests".

gevent rules (locust runs users as greenlets): librdkafka is never asked to block
(``poll(0)`` plus ``gevent.sleep``); paho runs its network loop in a (monkey-patched) thread.
"""

from __future__ import annotations

import json
import logging
import os
import random
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import gevent
from confluent_kafka import Consumer, Producer, TopicPartition
from locust import HttpUser, User, between, constant_throughput, events, task
from locust.env import Environment

from load.harness.kafka import quiet_logger
from sensors.layout import STREAM, topic

TOPIC = topic("traffic")
MQTT_TOPIC = f"sf/{STREAM}/traffic/{{sensor}}"
LOOPBACK = ("127.", "localhost", "::1")


env = os.environ.get  # set by sftraffic load
BOOTSTRAP = env("SFTRAFFIC_BOOTSTRAP", "127.0.0.1:9092")
MQTT_HOST, _, MQTT_PORT = env("SFTRAFFIC_MQTT", "127.0.0.1:1883").rpartition(":")
DASHBOARD = env("SFTRAFFIC_DASHBOARD", "http://127.0.0.1:8050")
USERS = int(env("SFTRAFFIC_LOAD_USERS", "50"))
DURATION = float(env("SFTRAFFIC_LOAD_DURATION", "60"))
RATE = float(env("SFTRAFFIC_LOAD_RATE", "5"))
QOS = int(env("SFTRAFFIC_LOAD_QOS", "1"))
DRAIN_S = float(env("SFTRAFFIC_LOAD_DRAIN", "60"))
SUMMARY = env("SFTRAFFIC_LOAD_SUMMARY", "")  # where the JSON summary goes (produced / consumed / missing)
RUN_ID = uuid.uuid4().hex[:8]
for _host, _what in (
    (BOOTSTRAP.rpartition(":")[0], "store"),
    (MQTT_HOST, "MQTT broker"),
    (urlparse(DASHBOARD).hostname or "", "dashboard"),
):
    if not _host.startswith(LOOPBACK):
        raise SystemExit(
            f"sftraffic load: {_what} {_host} is not a loopback address; load only targets 127.0.0.1"
        )


# -- realistic payloads -------------------------------------------------------------------------
class SensorIdentity:
    """A pavement sensor on a real SF road segment (positions from :mod:`sensors.geo`)."""

    _segments: list[Any] | None = None

    def __init__(self, kind: str) -> None:
        from sensors.geo import build_segments

        if SensorIdentity._segments is None:
            SensorIdentity._segments = build_segments()
        self.segment = random.choice(SensorIdentity._segments)
        self.sensor_id = f"load-{RUN_ID}-{kind}-{uuid.uuid4().hex[:8]}"
        self.seq = 0
        self.lane = random.randint(1, max(1, self.segment.lanes))

    def event(self) -> tuple[int, bytes]:
        """The next traffic event: (seq, JSON bytes); event_time is now (ms)."""
        seg = self.segment
        cls = random.choices(["car", "van", "bus", "truck", "motorcycle", "semi"], [70, 10, 4, 8, 5, 3])[0]
        axles = {"car": 2, "van": 2, "bus": 3, "truck": 3, "motorcycle": 2, "semi": 5}[cls]
        seq = self.seq
        self.seq += 1
        ev = {
            "type": "traffic",
            "sensor_id": self.sensor_id,
            "seq": seq,
            "event_time": int(time.time() * 1000),
            "segment_id": seg.segment_id,
            "road": seg.road,
            "lat": round(seg.mid[0], 6),
            "lon": round(seg.mid[1], 6),
            "direction": "N",
            "lane": self.lane,
            "vehicle_class": cls,
            "weight_kg": round(random.uniform(900, 30000 if axles > 2 else 3500), 1),
            "axle_count": axles,
            "axle_distances_m": [round(random.uniform(1.2, 6.0), 2) for _ in range(axles - 1)],
            "speed_kmh": round(max(3.0, random.gauss(seg.free_flow_kmh * 0.8, 8)), 1),
        }
        return seq, json.dumps(ev, separators=(",", ":")).encode()


# -- the ledger ---------------------------------------------------------------------------------
class Ledger:
    """Acknowledged messages of this run versus those the auditor saw in the store."""

    def __init__(self) -> None:
        self.acked: set[tuple[str, int]] = set()
        self.seen: set[tuple[str, int]] = set()
        self.duplicates = 0
        self.failed_sends = 0
        self.by_source: dict[str, int] = {}

    def ack(self, source: str, sensor: str, seq: int) -> None:
        self.acked.add((sensor, seq))
        self.by_source[source] = self.by_source.get(source, 0) + 1

    def saw(self, sensor: str, seq: int) -> None:
        key = (sensor, seq)
        if key in self.seen:
            self.duplicates += 1
        else:
            self.seen.add(key)

    def missing(self) -> set[tuple[str, int]]:
        return self.acked - self.seen


LEDGER = Ledger()


def _fire(
    environment: Environment, kind: str, name: str, t0: float, size: int, exc: BaseException | None = None
) -> None:
    environment.events.request.fire(
        request_type=kind,
        name=name,
        response_time=(time.perf_counter() - t0) * 1000.0,
        response_length=size,
        exception=exc,
        context={},
    )


# -- users --------------------------------------------------------------------------------------
class MqttDeviceUser(User):
    """A pavement sensor publishing over MQTT to Mosquitto, forwarded by the gateway."""

    weight = 6
    wait_time = constant_throughput(RATE)

    def on_start(self) -> None:
        import paho.mqtt.client as mqtt
        from paho.mqtt.enums import CallbackAPIVersion

        self.identity = SensorIdentity("mqtt")
        self.pending: dict[int, tuple[float, int, int]] = {}
        self.connected = gevent.event.Event()
        client = mqtt.Client(
            CallbackAPIVersion.VERSION2, client_id=self.identity.sensor_id, protocol=mqtt.MQTTv5
        )
        client.max_inflight_messages_set(100)
        client.on_connect = lambda c, u, f, rc, p=None: self.connected.set()
        client.on_publish = self._on_publish
        client.connect(MQTT_HOST, int(MQTT_PORT), keepalive=30)
        client.loop_start()
        self.client = client
        if not self.connected.wait(15):
            raise RuntimeError(f"MQTT broker {MQTT_HOST}:{MQTT_PORT} did not accept the connection")

    def _on_publish(self, client: Any, userdata: Any, mid: int, rc: Any = None, props: Any = None) -> None:
        t0, seq, size = self.pending.pop(mid, (0.0, -1, 0))
        if seq < 0:
            return
        failed = rc is not None and getattr(rc, "is_failure", False)
        if QOS == 0:  # written to the socket, nothing acknowledged: not in the ledger
            LEDGER.by_source["mqtt-qos0-sent"] = LEDGER.by_source.get("mqtt-qos0-sent", 0) + 1
        exc = RuntimeError(f"PUBACK reason {rc}") if failed else None
        _fire(self.environment, "MQTT", f"publish qos{QOS}", t0, size, exc)
        if failed:
            LEDGER.failed_sends += 1
        elif QOS > 0:
            LEDGER.ack("mqtt", self.identity.sensor_id, seq)

    @task
    def publish(self) -> None:
        seq, payload = self.identity.event()
        t0 = time.perf_counter()
        info = self.client.publish(MQTT_TOPIC.format(sensor=self.identity.sensor_id), payload, qos=QOS)
        if info.rc != 0:
            LEDGER.failed_sends += 1
            _fire(self.environment, "MQTT", f"publish qos{QOS}", t0, 0, RuntimeError(f"publish rc={info.rc}"))
            return
        self.pending[info.mid] = (t0, seq, len(payload))

    def on_stop(self) -> None:
        deadline = time.monotonic() + 10
        while self.pending and time.monotonic() < deadline:  # let the last PUBACKs arrive
            gevent.sleep(0.05)
        for _mid, (t0, _seq, _size) in self.pending.items():
            LEDGER.failed_sends += 1
            _fire(self.environment, "MQTT", f"publish qos{QOS}", t0, 0, TimeoutError("no PUBACK in 10 s"))
        self.client.disconnect()
        self.client.loop_stop()


class _SharedProducer:
    """One librdkafka producer per locust process (its own threads do the I/O); a greenlet
    serves delivery reports with poll(0)."""

    producer: Producer | None = None

    @classmethod
    def get(cls) -> Producer:
        if cls.producer is None:
            conf = {"acks": "all", "enable.idempotence": True, "linger.ms": 2, "logger": quiet_logger()}
            cls.producer = Producer({"bootstrap.servers": BOOTSTRAP, **conf})
            gevent.spawn(cls._serve)
        return cls.producer

    @classmethod
    def _serve(cls) -> None:
        while cls.producer is not None:
            cls.producer.poll(0)
            gevent.sleep(0.005)


class KafkaProducerUser(User):
    """A sensor producing straight into the store (the fleet's direct path), acks=all."""

    weight = 3
    wait_time = constant_throughput(RATE)

    def on_start(self) -> None:
        self.identity = SensorIdentity("kafka")
        self.producer = _SharedProducer.get()
        self.outstanding = 0

    def _report(self, seq: int, t0: float, size: int) -> Callable[[Any, Any], None]:
        def cb(err: Any, _msg: Any) -> None:
            self.outstanding -= 1
            exc = RuntimeError(str(err)) if err is not None else None
            _fire(self.environment, "kafka", "produce", t0, size, exc)
            if err is None:
                LEDGER.ack("kafka", self.identity.sensor_id, seq)
            else:
                LEDGER.failed_sends += 1

        return cb

    @task
    def produce(self) -> None:
        seq, payload = self.identity.event()
        t0 = time.perf_counter()
        self.outstanding += 1
        report = self._report(seq, t0, len(payload))
        self.producer.produce(TOPIC, payload, key=self.identity.sensor_id, on_delivery=report)

    def on_stop(self) -> None:
        deadline = time.monotonic() + 15
        while self.outstanding > 0 and time.monotonic() < deadline:
            gevent.sleep(0.02)


class KafkaConsumerUser(User):
    """A member of a consumer group on the traffic topic; reports end-to-end latency."""

    fixed_count = 2
    wait_time = between(0.0, 0.0)

    def on_start(self) -> None:
        conf = {"group.id": f"load-{RUN_ID}", "auto.offset.reset": "latest", "enable.auto.commit": True}
        self.consumer = Consumer(
            {"bootstrap.servers": BOOTSTRAP, "session.timeout.ms": 10000, "logger": quiet_logger(), **conf}
        )
        self.consumer.subscribe([TOPIC])
        self.prefix = f"load-{RUN_ID}-".encode()

    @task
    def consume(self) -> None:
        msgs = self.consumer.consume(500, 0)
        now_ms = time.time() * 1000.0
        for m in msgs:
            if m.error() is not None or not (m.key() or b"").startswith(self.prefix):
                continue
            self.environment.events.request.fire(
                request_type="kafka",
                name="end-to-end",
                response_time=max(0.0, now_ms - m.timestamp()[1]),
                response_length=len(m.value() or b""),
                exception=None,
                context={},
            )
        if not msgs:
            gevent.sleep(0.05)

    def on_stop(self) -> None:
        self.consumer.close()


class DashboardUser(HttpUser):
    """An operator's browser: the page, the health endpoint, a sensor lookup."""

    fixed_count = 1
    host = DASHBOARD
    wait_time = between(1.0, 2.0)

    @task(3)
    def health(self) -> None:
        self.client.get("/api/health", name="/api/health")

    @task(2)
    def sensor(self) -> None:
        sensors = sorted({s for s, _ in list(LEDGER.acked)[:200]})
        if sensors:
            with self.client.get(
                f"/api/sensor/{random.choice(sensors)}", name="/api/sensor/<id>", catch_response=True
            ) as r:
                if r.status_code in (200, 404):  # 404 until the dashboard saw that sensor
                    r.success()

    @task(1)
    def page(self) -> None:
        self.client.get("/", name="/")


# -- the auditor --------------------------------------------------------------------------------
class Auditor:
    """Reads this run's messages from every partition of the topic, from the offsets at start."""

    def __init__(self) -> None:
        conf = {"group.id": f"load-audit-{RUN_ID}", "enable.auto.commit": False, "logger": quiet_logger()}
        self.consumer = Consumer({"bootstrap.servers": BOOTSTRAP, **conf})
        meta = self.consumer.list_topics(TOPIC, timeout=15).topics.get(TOPIC)
        if meta is None or meta.error is not None:
            raise SystemExit(
                f"sftraffic load: topic {TOPIC} is missing on {BOOTSTRAP}; start the services first "
                "(sftraffic up) or use sftraffic load smoke"
            )
        parts = [TopicPartition(TOPIC, p) for p in meta.partitions]
        ends = [self.consumer.get_watermark_offsets(tp, timeout=10)[1] for tp in parts]
        self.consumer.assign(
            [TopicPartition(TOPIC, tp.partition, hi) for tp, hi in zip(parts, ends, strict=True)]
        )
        self.prefix = f"load-{RUN_ID}-".encode()
        self.running = True
        self.greenlet = gevent.spawn(self._run)

    def _run(self) -> None:
        while self.running:
            msgs = self.consumer.consume(1000, 0)
            for m in msgs:
                key = m.key()
                if m.error() is not None or key is None or not key.startswith(self.prefix):
                    continue
                LEDGER.saw(key.decode(), json.loads(m.value() or b"{}")["seq"])
            if not msgs:
                gevent.sleep(0.02)

    def finish(self, environment: Environment) -> dict[str, Any]:
        deadline = time.monotonic() + DRAIN_S
        while LEDGER.missing() and time.monotonic() < deadline:
            gevent.sleep(0.1)
        self.running = False
        self.greenlet.join(timeout=5)
        self.consumer.close()
        missing = sorted(LEDGER.missing())
        summary = {
            "run_id": RUN_ID,
            "acknowledged": len(LEDGER.acked),
            "acknowledged_by_source": LEDGER.by_source,
            "consumed": len(LEDGER.seen & LEDGER.acked),
            "missing": len(missing),
            "missing_sample": [f"{s}#{q}" for s, q in missing[:20]],
            "duplicates": LEDGER.duplicates,
            "failed_sends": LEDGER.failed_sends,
            "requests": environment.stats.total.num_requests,
            "failures": environment.stats.total.num_failures,
        }
        if SUMMARY:
            Path(SUMMARY).write_text(json.dumps(summary, indent=1))
        return summary


_auditor: list[Auditor] = []


@events.test_start.add_listener
def _start_audit(environment: Environment, **_kw: Any) -> None:
    LEDGER.__init__()  # type: ignore[misc]  # a new run in the web UI starts a new ledger
    _auditor.append(Auditor())


@events.test_stop.add_listener
def _finish_audit(environment: Environment, **_kw: Any) -> None:
    """After every user stopped: wait for the store to show each acknowledged message."""
    if not _auditor:
        return
    summary = _auditor.pop().finish(environment)
    counts = ", ".join(f"{summary[k]} {k}" for k in ("acknowledged", "consumed", "missing", "duplicates"))
    logging.getLogger("sftraffic.load").info("ledger: %s", counts)
    if summary["missing"]:
        environment.process_exit_code = 3
