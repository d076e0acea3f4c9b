"""Edge gateway: MQTT devices → the store, without losing a message.

* Subscribes with a **shared subscription** (``$share/<group>/sf/#``, so malformed
  topics are caught too); several gateways split the devices' traffic. A persistent session
  (clean session off; with MQTT 5 a session expiry) makes Mosquitto keep unacknowledged messages for a gateway
  that restarts.
* Translates ``sf/<stream>/<topic>/<sensor-id>`` → Kafka topic ``<stream>.<topic>``, key
  ``<sensor-id>``, record timestamp = the event's ``event_time``; validates the JSON payload
  (:mod:`sensors.schema`).
* Forwards with an **idempotent producer** and acknowledges the MQTT message (QoS 1, manual
  acks) only **after the store acknowledged it** — a gateway crash loses nothing; Mosquitto
  redelivers what was not acknowledged (duplicates, if any, stay within the in-flight window
  and carry the same ``sensor_id``/``seq``, so consumers can drop them).
* **Store unreachable**: messages go to a bounded on-disk queue (fsynced) and are then
  acknowledged; when the store answers again the queue drains in order before live traffic
  resumes. A full queue stops acknowledging (MQTT backpressure) rather than dropping.
* **Invalid payloads** go to ``<stream>.dead_letter`` with the reason in a header, never
  silently dropped. Guarantee: **at-least-once**, not transactional. The dead letter goes
  through the same idempotent producer and its MQTT message is acknowledged only once the
  store acknowledged the dead letter (or it was parked in the disk queue), so none is lost; a
  gateway crash before that acknowledgement makes Mosquitto redeliver the message, which is
  then dead-lettered again (a duplicate with the same ``mqtt_topic`` and payload and a later
  ``received_ms``). Readers that count dead letters should drop such repeats.

Two implementations with these guarantees: :class:`sensors.gateway_async.AsyncGateway` (asyncio,
gmqtt; the default of ``sftraffic gateway``, ~5x the throughput) and :class:`Gateway` here
(paho-mqtt threads; ``--mqtt-client paho``). This module also holds what both share.
"""

from __future__ import annotations

import functools
import logging
import ssl
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sensors import schema
from sensors.disk_queue import DiskQueue, QueueFull
from sensors.layout import STREAM

log = logging.getLogger("sftraffic.gateway")

RETRIABLE_DOWN = {
    "_TRANSPORT",
    "_ALL_BROKERS_DOWN",
    "_MSG_TIMED_OUT",
    "_TIMED_OUT",
    "NOT_ENOUGH_REPLICAS",
    "_NO_BROKERS",
    "REQUEST_TIMED_OUT",
    "NETWORK_EXCEPTION",
    # credentials refused while running (checked at start: see gateway_cli): park, lose nothing
    "_AUTHENTICATION",
}


@dataclass
class GatewayStats:
    received: int = 0
    forwarded: int = 0
    dead_lettered: int = 0
    queued: int = 0
    drained: int = 0
    errors: int = 0
    started: float = field(default_factory=time.monotonic)


@dataclass(frozen=True)
class GatewayConfig:
    bootstrap: str
    mqtt_host: str = "127.0.0.1"
    mqtt_port: int = 1883
    gateway_id: str = "gw-1"
    share_group: str = "sftraffic-gateways"
    queue_dir: str = ".sftraffic/gateway-queue"
    queue_max_bytes: int = 1 << 30
    delivery_timeout_ms: int = 10_000
    session_expiry_s: int = 3600
    # MQTT 3.1.1 by default: paho's MQTT 5 receive path (properties and reason codes on every
    # PUBLISH/PUBACK) forwards 3-4x fewer messages per second here (the asyncio gateway does not
    # care); Mosquitto offers shared subscriptions and persistent sessions to 3.1.1 clients too.
    # 5 adds a session expiry.
    mqtt_version: int = 311
    dead_letter_topic: str | None = None  # default: <stream>.dead_letter
    # MQTT authentication (Mosquitto's password file) and TLS: mqtt_ca, a PEM CA file to trust
    # (TLS with it), or mqtt_tls with the system's CAs
    mqtt_username: str | None = None
    mqtt_password: str | None = field(default=None, repr=False)
    mqtt_ca: str | None = None
    mqtt_tls: bool = False
    # what goes to the store: the devices' JSON as received, or "avro" (Confluent's wire
    # format, schemas registered in registry_url: sensors.avro)
    value_format: str = "json"
    registry_url: str = "http://127.0.0.1:8081"


def value_encoder(cfg: GatewayConfig) -> Any:
    """``encode(topic, event) -> bytes`` for ``cfg.value_format`` (None: forward the JSON as is)."""
    if cfg.value_format == "json":
        return None
    if cfg.value_format != "avro":
        raise ValueError(f"value_format must be json or avro, not {cfg.value_format!r}")
    import requests

    from framework.errors import StoreError
    from sensors.avro import SCHEMAS, AvroEncoder, RegistryError, split_url

    enc = AvroEncoder(cfg.registry_url)
    try:  # the stream's schemas now: a registry that is not there is one line at start, not dead letters
        for name in SCHEMAS:
            enc.schema_id(f"{STREAM}.{name}")
    except (requests.RequestException, OSError, RegistryError) as exc:
        raise StoreError(f"schema registry {split_url(cfg.registry_url)[0]}: {exc}") from None
    return enc.encode


def reencode(encode: Any, topic: str, event: dict[str, Any]) -> bytes:
    """The event in the store's format; InvalidEvent (dead-lettered) when it cannot be."""
    try:
        return bytes(encode(topic, event))
    except Exception as exc:  # a field of the wrong type, no schema for the topic, registry down
        raise schema.InvalidEvent(f"cannot be encoded for the store ({type(exc).__name__}): {exc}") from None


def mqtt_tls_context(cfg: GatewayConfig) -> ssl.SSLContext | None:
    """The TLS context towards Mosquitto (None: plain TCP); the server's certificate must chain
    to ``mqtt_ca`` (or a system CA) and name the host."""
    if not (cfg.mqtt_ca or cfg.mqtt_tls):
        return None
    return ssl.create_default_context(cafile=cfg.mqtt_ca or None)


class MqttRefused(Exception):
    """Mosquitto refused the connection (credentials) or no TLS session could be made."""


def gateway_producer(cfg: GatewayConfig, error_cb: Any) -> Any:
    """The idempotent producer both gateway implementations forward with."""
    from confluent_kafka import Producer

    from framework.client.producer import producer_config
    from framework.client.security import secured
    from sensors.publish import _quiet

    return Producer(
        secured(
            producer_config(
                cfg.bootstrap,
                exactly_once=True,
                client_id=f"sftraffic-gateway-{cfg.gateway_id}",
                linger_ms=5,
                extra={
                    "message.timeout.ms": cfg.delivery_timeout_ms,
                    "queue.buffering.max.messages": 200_000,
                    "error_cb": error_cb,
                    "logger": _quiet(),
                },
            )
        )
    )


class Gateway:
    def __init__(self, cfg: GatewayConfig) -> None:
        import paho.mqtt.client as mqtt

        self.cfg = cfg
        self.stats = GatewayStats()
        self.queue = DiskQueue(Path(cfg.queue_dir) / cfg.gateway_id, max_bytes=cfg.queue_max_bytes)
        self.degraded = threading.Event()
        if not self.queue.empty():
            self.degraded.set()  # drain what a previous run parked before taking live traffic
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._taking = threading.Lock()  # held by the MQTT thread while it takes a message
        self.producer = gateway_producer(cfg, self._on_kafka_error)
        self._encode = value_encoder(cfg)
        if cfg.mqtt_version not in (311, 5):
            raise ValueError(f"mqtt_version must be 311 or 5, not {cfg.mqtt_version}")
        v5 = cfg.mqtt_version == 5
        self.mqtt = mqtt.Client(
            mqtt.CallbackAPIVersion.VERSION2,
            client_id=f"sftraffic-gateway-{cfg.gateway_id}",
            protocol=mqtt.MQTTv5 if v5 else mqtt.MQTTv311,
            clean_session=None if v5 else False,  # a persistent session: Mosquitto keeps what we did not ack
            manual_ack=True,
        )
        self.mqtt.max_inflight_messages_set(65535)
        if cfg.mqtt_username:
            self.mqtt.username_pw_set(cfg.mqtt_username, cfg.mqtt_password)
        context = mqtt_tls_context(cfg)
        if context is not None:
            self.mqtt.tls_set_context(context)
        self._connected = threading.Event()
        self._refused: str | None = None
        self.mqtt.on_disconnect = self._on_disconnect
        self.mqtt.on_connect = self._on_connect
        self.mqtt.on_message = self._on_message
        self._threads: list[threading.Thread] = []
        self._mqtt_mod = mqtt

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        from paho.mqtt.packettypes import PacketTypes
        from paho.mqtt.properties import Properties

        if self.cfg.mqtt_version == 5:
            props = Properties(PacketTypes.CONNECT)
            props.SessionExpiryInterval = self.cfg.session_expiry_s
            props.ReceiveMaximum = 65535
            connect = functools.partial(
                self.mqtt.connect,
                self.cfg.mqtt_host,
                self.cfg.mqtt_port,
                keepalive=30,
                clean_start=False,
                properties=props,
            )
        else:
            connect = functools.partial(
                self.mqtt.connect, self.cfg.mqtt_host, self.cfg.mqtt_port, keepalive=30
            )
        where = f"Mosquitto at {self.cfg.mqtt_host}:{self.cfg.mqtt_port}"
        try:
            connect()
        except (ssl.SSLError, OSError) as exc:
            raise MqttRefused(f"cannot connect to {where}: {exc}") from None
        self.mqtt.loop_start()
        if not self._connected.wait(30) or self._refused:
            self.mqtt.loop_stop()
            raise MqttRefused(f"{where} refused the gateway: {self._refused or 'no CONNACK in 30 s'}")
        for target in (self._poll_loop, self._drain_loop):
            t = threading.Thread(target=target, daemon=True, name=target.__name__)
            t.start()
            self._threads.append(t)
        log.info(
            "gateway %s forwarding MQTT %s:%d → %s",
            self.cfg.gateway_id,
            self.cfg.mqtt_host,
            self.cfg.mqtt_port,
            self.cfg.bootstrap,
        )

    def stop(self, timeout: float = 30.0) -> None:
        """Stop taking messages, deliver what is in flight, then disconnect.

        No UNSUBSCRIBE: the persistent session keeps the subscription, so Mosquitto queues what
        devices publish until this gateway id is back (with an UNSUBSCRIBE it would drop it while
        no gateway of the group is subscribed); messages that arrive from now on are left
        unacknowledged and come again then."""
        with self._taking:  # a message being handed to the producer now is flushed below
            self.stopping.set()
        self.producer.flush(timeout)
        self.producer.poll(0)
        # disconnect() first: the network thread sends the last PUBACKs, then DISCONNECT, and ends
        self.mqtt.disconnect()
        self.mqtt.loop_stop()
        for t in self._threads:
            t.join(5)

    def _subscription(self) -> str:
        return f"$share/{self.cfg.share_group}/sf/#"

    # -- MQTT side -------------------------------------------------------------------------
    def _on_connect(
        self, client: Any, userdata: Any, flags: Any, reason: Any, properties: Any = None
    ) -> None:
        if getattr(reason, "is_failure", False):
            log.error("MQTT connect refused: %s", reason)
            self._refused = str(reason)
            self._connected.set()
            return
        self._connected.set()
        client.subscribe(self._subscription(), qos=1)

    def _on_disconnect(self, client: Any, userdata: Any, *rest: Any) -> None:
        if not self._connected.is_set():  # before any CONNACK: e.g. plain MQTT on a TLS listener
            self._refused = "the connection was closed before a CONNACK (a TLS listener? --mqtt-ca)"
            self._connected.set()

    def _ack(self, msg: Any) -> None:
        self.mqtt.ack(msg.mid, msg.qos)

    def _on_message(self, client: Any, userdata: Any, msg: Any) -> None:
        with self._taking:
            if self.stopping.is_set():
                return  # not acknowledged: Mosquitto redelivers it to this session
            self._take(msg)

    def _take(self, msg: Any) -> None:
        self.stats.received += 1
        parts = msg.topic.split("/")
        if len(parts) != 4 or parts[0] != "sf" or not all(parts[1:]):
            self._dead_letter(
                msg,
                parts[1] if len(parts) > 1 and parts[1] else STREAM,
                f"topic {msg.topic!r} is not sf/<stream>/<topic>/<sensor-id>",
            )
            return
        _, stream, name, sensor = parts
        try:
            event = schema.decode(msg.payload)
        except schema.InvalidEvent as exc:
            self._dead_letter(msg, stream, str(exc))
            return
        if event["sensor_id"] != sensor:
            self._dead_letter(
                msg, stream, f"payload sensor_id {event['sensor_id']!r} != topic sensor {sensor!r}"
            )
            return
        value = bytes(msg.payload)
        if self._encode is not None:
            try:
                value = reencode(self._encode, f"{stream}.{name}", event)
            except schema.InvalidEvent as exc:
                self._dead_letter(msg, stream, str(exc))
                return
        self._forward(msg, f"{stream}.{name}", sensor.encode(), value, int(event["event_time"]))

    def _forward(self, msg: Any, topic: str, key: bytes, value: bytes, ts: int) -> None:
        if self.degraded.is_set():
            self._park(msg, [(topic, key, value, ts)])
            return

        def done(err: Any, m: Any) -> None:
            if err is None:
                self.stats.forwarded += 1
                self._ack(msg)
                return
            if err.name() in RETRIABLE_DOWN or err.retriable():
                # the store did not take it: park it durably, then acknowledge the device
                self._enter_degraded(f"delivery failed: {err.str()}")
                self._park(msg, [(topic, key, value, ts)])
            else:
                self.stats.errors += 1
                log.error("store rejected a message for %s: %s", topic, err.str())
                self._dead_letter(msg, topic.split(".", 1)[0], f"store rejected it: {err.str()}")

        self._produce(topic, value, key, ts, done)

    def _produce(self, topic: str, value: bytes, key: bytes, ts: int, cb: Any, headers: Any = None) -> None:
        while True:
            try:
                self.producer.produce(topic, value, key, timestamp=ts, headers=headers, on_delivery=cb)
                return
            except BufferError:
                time.sleep(0.005)  # local queue full: the poll thread is draining it

    def _park(self, msg: Any, items: list[tuple[str, bytes, bytes, int]]) -> None:
        while not self.stopping.is_set():
            try:
                with self._lock:
                    self.queue.append(items)
                self.stats.queued += len(items)
                if msg is not None:
                    self._ack(msg)
                return
            except QueueFull:
                log.warning("disk queue full: holding MQTT acknowledgements until the store is back")
                time.sleep(0.5)

    def _dead_letter(self, msg: Any, stream: str, reason: str) -> None:
        """At-least-once (see the module docstring): the MQTT ack waits for the store's."""
        self.stats.dead_lettered += 1
        topic = self.cfg.dead_letter_topic or f"{stream}.dead_letter"
        headers = [
            ("reason", reason.encode()),
            ("mqtt_topic", msg.topic.encode()),
            ("gateway", self.cfg.gateway_id.encode()),
            ("received_ms", str(int(time.time() * 1000)).encode()),
        ]
        log.info("dead letter from %s: %s", msg.topic, reason)

        def done(err: Any, m: Any) -> None:
            if err is None:
                self._ack(msg)
            else:
                self._enter_degraded(f"dead-letter delivery failed: {err.str()}")
                self._park(msg, [(topic, msg.topic.encode(), bytes(msg.payload), int(time.time() * 1000))])

        self._produce(topic, bytes(msg.payload), msg.topic.encode(), int(time.time() * 1000), done, headers)

    # -- store side ------------------------------------------------------------------------
    def _on_kafka_error(self, err: Any) -> None:
        if err.name() in RETRIABLE_DOWN:
            self._enter_degraded(err.str())

    def _enter_degraded(self, why: str) -> None:
        if not self.degraded.is_set():
            log.warning("store unreachable (%s): parking messages on disk", why)
            self.degraded.set()

    def _poll_loop(self) -> None:
        while not self.stopping.is_set():
            self.producer.poll(0.05)

    def _store_up(self) -> bool:
        try:
            md = self.producer.list_topics(timeout=2)
            return bool(md.brokers)
        except Exception:
            return False

    def _drain_loop(self) -> None:
        """While degraded: wait for the store, then send the parked messages in order."""
        while not self.stopping.is_set():
            if not self.degraded.wait(0.5):
                continue
            if not self._store_up():
                time.sleep(0.5)
                continue
            with self._lock:
                items = self.queue.read(5000)
            if not items:
                with self._lock:
                    if self.queue.empty():
                        self.degraded.clear()
                        log.info("store reachable again: disk queue drained, forwarding live")
                continue
            failed = threading.Event()
            left = [len(items)]
            all_done = threading.Event()

            def cb(
                err: Any,
                m: Any,
                failed: threading.Event = failed,
                left: list[int] = left,
                all_done: threading.Event = all_done,
            ) -> None:
                if err is not None:
                    failed.set()
                left[0] -= 1
                if left[0] == 0:
                    all_done.set()

            for it in items:
                self._produce(it.topic, it.value, it.key, it.timestamp_ms, cb)
            all_done.wait(self.cfg.delivery_timeout_ms / 1000 + 5)
            with self._lock:
                if failed.is_set() or not all_done.is_set():
                    self.queue.rewind()  # try the same records again (idempotent per session)
                else:
                    self.queue.commit(items[-1].position)
                    self.stats.drained += len(items)
