"""Event sinks: straight into the store with a Kafka producer, or over MQTT like real devices.

* :class:`KafkaSink` — confluent-kafka, idempotent (exactly once per partition), Kafka's
  murmur2 partitioner on the sensor id, CreateTime = the event's simulated time, JSON values.
* :class:`MqttSink` — devices publish ``sf/<stream>/<topic>/<sensor-id>`` at QoS 1 (MQTT 5).
  Thousands of simulated devices share a few connections (a device concentrator); at most
  ``window`` publishes per connection wait for their PUBACK, which bounds memory.
  With ``credentials`` (device -> password, :func:`read_credentials`) every device has its own
  connection and logs in as itself (username = sensor id), as Mosquitto's per-device ACLs
  require; ``tls`` (an :class:`ssl.SSLContext`) puts every connection in TLS.
"""

from __future__ import annotations

import functools
import logging
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import msgspec

from framework.client.producer import producer_config
from framework.client.security import secured
from framework.errors import StoreError
from sensors.layout import STREAM

_enc = msgspec.json.Encoder()
log = logging.getLogger("sftraffic.sensors")


def _quiet() -> logging.Logger:
    lg = logging.getLogger("sftraffic.librdkafka")
    lg.addHandler(logging.NullHandler())
    lg.propagate = False
    return lg


class _PerTopic(dict[str, Callable[[dict[str, Any]], bytes]]):
    """topic -> ``encode(topic, event)`` bound to the topic (made on first use)."""

    def __init__(self, encode: Callable[[str, dict[str, Any]], bytes]) -> None:
        super().__init__()
        self.encode = encode

    def __missing__(self, topic: str) -> Callable[[dict[str, Any]], bytes]:
        fn = self[topic] = functools.partial(self.encode, topic)
        return fn


class KafkaSink:
    def __init__(
        self,
        bootstrap: str,
        client_id: str = "sftraffic-sensors",
        exactly_once: bool = True,
        extra: dict[str, Any] | None = None,
        encode: Callable[[str, dict[str, Any]], bytes] | None = None,
        encoders: Mapping[str, Callable[[dict[str, Any]], bytes]] | None = None,
    ) -> None:
        """The value's bytes: JSON by default; ``encoders[topic](event)`` when given (a mapping
        that makes a topic's encoder on first use, e.g. :attr:`sensors.avro.AvroEncoder.by_topic`:
        one subscript and one call per event, as cheap as JSON's), else ``encode(topic, event)``."""
        from confluent_kafka import Producer

        conf = producer_config(
            bootstrap,
            exactly_once=exactly_once,
            client_id=client_id,
            linger_ms=20,
            extra={
                "batch.size": 1_000_000,
                "batch.num.messages": 50_000,
                "queue.buffering.max.messages": 500_000,
                "compression.type": "lz4",
                "logger": _quiet(),
                # a Python callback per delivered message costs ~1 µs: report failures only
                "delivery.report.only.error": True,
                # one callback for every message, set once: a per-call on_delivery costs ~1 µs
                "on_delivery": self._cb,
                **(extra or {}),
            },
        )
        self.producer = Producer(secured(conf))
        if encoders is None and encode is not None:
            encoders = _PerTopic(encode)
        self._encoders = encoders
        self.errors = 0
        self.sent = 0
        self.last_error: str | None = None

    def _cb(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors += 1
            self.last_error = str(err)

    def send(self, topic: str, key: str, value: dict[str, Any], ts_ms: int) -> None:
        data = _enc.encode(value) if self._encoders is None else self._encoders[topic](value)
        while True:
            try:
                self.producer.produce(topic, data, key, timestamp=ts_ms)  # str key: UTF-8 in C
                self.sent += 1
                return
            except BufferError:
                self.producer.poll(0.05)  # full local queue: wait for the store (bounded memory)

    def poll(self) -> None:
        self.producer.poll(0)

    def flush(self, timeout: float = 30.0) -> int:
        return int(self.producer.flush(timeout))


def read_credentials(path: str | Path) -> dict[str, str]:
    """``device:password`` lines (Mosquitto users), one-line errors."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise StoreError(f"MQTT credentials {path}: {exc.strerror or exc}") from None
    out: dict[str, str] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        user, sep, password = line.partition(":")
        if not sep or not user:
            raise StoreError(f"MQTT credentials {path}, line {n}: expected DEVICE:PASSWORD")
        out[user] = password
    return out


class MqttSink:
    def __init__(
        self,
        host: str,
        port: int,
        stream: str = STREAM,
        connections: int = 2,
        window: int = 1000,
        client_prefix: str = "sftraffic-devices",
        credentials: Mapping[str, str] | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        import paho.mqtt.client as mqtt
        from paho.mqtt.enums import CallbackAPIVersion

        self.stream = stream
        self.window = window
        self.clients = []
        self.inflight: list[threading.Semaphore] = []
        self.published = 0
        self.acked = 0
        self.refused = 0  # PUBACKs with a failure reason (MQTT 5: e.g. not authorized by the ACL)
        self._lock = threading.Lock()
        self.host, self.port, self.tls = host, port, tls
        self.credentials = credentials
        self._devices: dict[str, int] = {}  # device -> index of its own client (with credentials)
        if credentials is not None:
            self._rr = 0
            return
        for i in range(connections):
            c = mqtt.Client(
                CallbackAPIVersion.VERSION2, client_id=f"{client_prefix}-{i}", protocol=mqtt.MQTTv5
            )
            c.max_inflight_messages_set(window)
            c.max_queued_messages_set(0)
            sem = threading.Semaphore(window)
            c.on_publish = self._on_publish(sem)
            if tls is not None:
                c.tls_set_context(tls)
            c.connect(host, port, keepalive=30)
            c.loop_start()
            self.clients.append(c)
            self.inflight.append(sem)
        self._rr = 0

    def connect_devices(self, devices: list[str], timeout: float = 60.0) -> None:
        """Connect ``devices`` (each as itself) all at once and wait for every CONNACK: a fleet
        calls it before it starts, so that hundreds of TLS handshakes and logins overlap and do
        not compete with the catch-up for the GIL. A refused device raises (one line)."""
        pending = [(d, *self._start_device(d)) for d in devices if d not in self._devices]
        deadline = time.monotonic() + timeout
        for device, c, sem, connected, answer in pending:
            connected.wait(max(0.0, deadline - time.monotonic()))
            self._accept(device, c, sem, answer, timeout)

    def _device_client(self, device: str) -> int:
        """The index of ``device``'s own client, connected (and accepted) on first use."""
        c, sem, connected, answer = self._start_device(device)
        connected.wait(60)
        return self._accept(device, c, sem, answer, 60)

    def _start_device(self, device: str) -> tuple[Any, threading.Semaphore, threading.Event, list[Any]]:
        import paho.mqtt.client as mqtt
        from paho.mqtt.enums import CallbackAPIVersion

        assert self.credentials is not None
        password = self.credentials.get(device)
        if password is None:
            raise StoreError(f"no MQTT password for device {device!r} in the credentials")
        c = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=device, protocol=mqtt.MQTTv5)
        c.username_pw_set(device, password)
        if self.tls is not None:
            c.tls_set_context(self.tls)
        window = min(self.window, 100)
        c.max_inflight_messages_set(window)
        c.max_queued_messages_set(0)
        sem = threading.Semaphore(window)
        c.on_publish = self._on_publish(sem)
        answer: list[Any] = []
        connected = threading.Event()

        def on_connect(client: Any, userdata: Any, flags: Any, reason: Any, properties: Any = None) -> None:
            answer.append(reason)
            connected.set()

        def on_disconnect(client: Any, userdata: Any, *rest: Any) -> None:
            if not connected.is_set():  # closed before any CONNACK: e.g. plain MQTT on a TLS port
                answer.append("the connection was closed before a CONNACK (a TLS listener? --mqtt-ca)")
                connected.set()

        c.on_connect = on_connect
        c.on_disconnect = on_disconnect
        try:
            c.connect(self.host, self.port, keepalive=30)
        except (ssl.SSLError, OSError) as exc:
            raise StoreError(
                f"device {device}: cannot connect to MQTT {self.host}:{self.port}: {exc}"
            ) from None
        c.loop_start()
        return c, sem, connected, answer

    def _accept(self, device: str, c: Any, sem: threading.Semaphore, answer: list[Any], waited: float) -> int:
        if not answer or isinstance(answer[0], str) or getattr(answer[0], "is_failure", False):
            c.loop_stop()
            why = answer[0] if answer else f"no CONNACK in {waited:.0f} s"
            raise StoreError(f"device {device}: MQTT {self.host}:{self.port} refused it: {why}")
        self.clients.append(c)
        self.inflight.append(sem)
        self._devices[device] = len(self.clients) - 1
        return self._devices[device]

    def _on_publish(self, sem: threading.Semaphore) -> Any:
        def cb(client: Any, userdata: Any, mid: int, reason_code: Any = None, properties: Any = None) -> None:
            sem.release()
            with self._lock:
                self.acked += 1
                if getattr(reason_code, "is_failure", False):
                    if not self.refused:
                        log.warning("MQTT broker refused a publish: %s", reason_code)
                    self.refused += 1

        return cb

    def send(self, topic: str, key: str, value: dict[str, Any], ts_ms: int) -> None:
        name = topic.split(".", 1)[1] if "." in topic else topic
        mqtt_topic = f"sf/{self.stream}/{name}/{key}"
        if self.credentials is not None:
            i = self._devices.get(key)
            if i is None:
                i = self._device_client(key)
        else:
            i = self._rr = (self._rr + 1) % len(self.clients)
        self.inflight[i].acquire()
        self.clients[i].publish(mqtt_topic, _enc.encode(value), qos=1)
        self.published += 1

    def poll(self) -> None:
        pass

    def flush(self, timeout: float = 30.0) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if self.acked >= self.published:
                    return 0
            time.sleep(0.01)
        return self.published - self.acked

    def close(self) -> None:
        for c in self.clients:
            c.disconnect()  # before loop_stop: the other order waits up to a second per client
            c.loop_stop()
