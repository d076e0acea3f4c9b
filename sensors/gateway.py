"""The edge gateway (``sftraffic gateway``): MQTT devices → the store, without losing a message.

* Subscribes with a **shared subscription** (``$share/<group>/sf/#``, so malformed
  topics are caught too); several gateways split the devices' traffic. A persistent session
  (clean session off; with MQTT 5 clean start off and a session expiry) makes Mosquitto keep
  unacknowledged messages for a gateway that restarts.
* Translates ``sf/<stream>/<topic>/<sensor-id>`` → Kafka topic ``<stream>.<topic>``, key
  ``<sensor-id>``, record timestamp = the event's ``event_time``; validates the JSON payload
  (:mod:`sensors.schema`).
* Forwards with an **idempotent producer** and acknowledges the MQTT message (QoS 1) only
  **after the store acknowledged it** — a gateway crash loses nothing; Mosquitto redelivers what
  was not acknowledged (duplicates, if any, stay within the in-flight window and carry the same
  ``sensor_id``/``seq``, so consumers can drop them).
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

How: one asyncio event-loop thread does everything (a Python MQTT packet loop in one thread and
the producer's poll thread in another would share the GIL and forward a fifth as much):

* **MQTT**: gmqtt opens the connection and handles CONNECT/CONNACK, SUBSCRIBE, keep-alive pings
  and reconnects. Incoming PUBLISH packets do not go through gmqtt's per-packet machinery: a
  thin protocol in front of gmqtt's (:class:`_Link`, installed with ``transport.set_protocol``)
  cuts the byte stream into packets, hands PUBLISH packets straight to the gateway and passes
  every other packet to gmqtt unchanged.
* **Acknowledge after the store**: each forwarded message's delivery report (from
  ``producer.poll``, called on the loop thread after each read and every millisecond while
  messages are in flight) queues its PUBACK; the PUBACKs of a poll go out in one write. A
  PUBACK is only sent on the connection the message came in on: after a reconnect Mosquitto
  redelivers what was not acknowledged (its packet ids may have been reused).
* **Store down**: messages are parked in the fsynced disk queue, one fsync per batch, then
  acknowledged; the drain task sends them in order once the store answers. A full queue stops
  reading from Mosquitto (and acknowledging) until there is room.
* **Validation**: msgspec parses the JSON; anything it or the quick checks reject is decided by
  :func:`sensors.schema.decode`, so the verdicts and reasons are exactly the schema's.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import ssl
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

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
    # MQTT 3.1.1 by default: Mosquitto offers shared subscriptions and persistent sessions to
    # 3.1.1 clients too; 5 adds a session expiry
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
    """The idempotent producer the gateway forwards with."""
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


Record = tuple[str, bytes, bytes, int]  # Kafka topic, key, value, timestamp (ms)

_PUBACK = [bytes((0x40, 2, mid >> 8, mid & 0xFF)) for mid in range(65536)]
_json = msgspec.json.Decoder().decode
_REQUIRED = {kind: frozenset(fields) for kind, fields in schema.REQUIRED.items()}
POLL_BUSY_S = 0.001  # producer.poll cadence while messages are in flight
POLL_IDLE_S = 0.05


INCOMPLETE, MALFORMED = -1, -2


def _varint(data: bytes, p: int, end: int) -> tuple[int, int]:
    """The MQTT variable byte integer at ``data[p:end]``: (value, index after it), or
    (INCOMPLETE, _) when the bytes end first, (MALFORMED, _) past the 4 bytes MQTT allows."""
    value, mult = 0, 1
    while p < end:
        b = data[p]
        p += 1
        value += (b & 127) * mult
        if not b & 128:
            return value, p
        mult *= 128
        if mult > 2_097_152:
            return MALFORMED, p
    return INCOMPLETE, p


def validate(payload: bytes) -> dict[str, Any]:
    """:func:`sensors.schema.decode`, with a fast path for valid events."""
    ev: Any
    try:
        ev = _json(payload)
    except msgspec.DecodeError:
        ev = None
    if type(ev) is dict:
        kind = ev.get("type")
        req = _REQUIRED.get(kind) if type(kind) is str else None
        if req is not None and ev.keys() >= req:
            t, s = ev["event_time"], ev["seq"]
            if type(t) is int and t > 0 and type(s) is int and s >= 0:
                return ev
    try:
        decided: dict[str, Any] = schema.decode(payload)  # the verdict and reason on the rest
        return decided
    except schema.InvalidEvent:
        raise
    except Exception as exc:  # e.g. an unhashable "type"
        raise schema.InvalidEvent(f"invalid event: {type(exc).__name__}: {exc}") from None


class _Link(asyncio.Protocol):
    """One MQTT connection's byte stream: PUBLISH packets to the gateway, the rest to gmqtt."""

    def __init__(self, transport: Any, inner: Any, gateway: Gateway, v5: bool) -> None:
        self.transport = transport
        self.inner = inner  # gmqtt's protocol
        self.gw = gateway
        self.v5 = v5
        self.rest = b""
        self.alive = True
        # Unacknowledged messages by packet id. Mosquitto numbers a session's messages when it
        # queues them, so a backlog of more than 65,535 arrives with ids in use twice, and a PUBACK
        # acknowledges the *oldest* message with its id: a PUBACK goes out only once that one is
        # stored (an id's messages are acknowledged in arrival order). A message's tag is
        # ``arrival number << 16 | packet id``; ``pending[id]`` is a tag, or a deque of tags.
        self.pending: dict[int, Any] = {}
        self.done: set[int] = set()  # stored, but an older message with the same id is not
        self.rx = 0

    # one function on purpose: it runs for every PUBLISH packet, where a call per message would add
    # to the gateway's per-message cost
    def data_received(self, data: bytes) -> None:  # noqa: PLR0915
        if self.rest:
            data = self.rest + data
            self.rest = b""
        n = len(data)
        pos = 0
        on_publish = self.gw._on_publish
        v5 = self.v5
        pending = self.pending
        other: list[bytes] = []
        while pos + 2 <= n:
            cmd = data[pos]
            b = data[pos + 1]
            start = pos + 2
            length = b & 127
            if b & 128:  # a multi-byte remaining length
                length, start = _varint(data, pos + 1, n)
                if length == MALFORMED:
                    return self._malformed()
                if length < 0:
                    break  # the length itself is incomplete
            end = start + length
            if end > n:
                break
            if cmd & 0xF0 == 0x30:  # PUBLISH
                tl = (data[start] << 8) | data[start + 1]
                p = start + 2 + tl
                topic = data[start + 2 : p]
                tag = None
                if cmd & 0x06:
                    mid = (data[p] << 8) | data[p + 1]
                    p += 2
                    tag = (self.rx << 16) | mid
                    self.rx += 1
                    q = pending.get(mid)
                    if q is None:
                        pending[mid] = tag
                    elif type(q) is int:
                        pending[mid] = deque((q, tag))
                    else:
                        q.append(tag)
                if v5:  # skip the properties (their length is a variable byte integer)
                    plen, p = _varint(data, p, end)
                    if plen < 0:
                        return self._malformed()
                    p += plen
                try:
                    on_publish(self, tag, topic, data[p:end])
                except Exception:
                    self.gw.stats.errors += 1
                    log.exception("could not handle a message on %r (left unacknowledged)", topic)
            else:
                other.append(data[pos:end])
            pos = end
        if pos < n:
            self.rest = data[pos:]
        if other:
            self.inner.data_received(b"".join(other))
        self.gw._after_read()

    def _malformed(self) -> None:
        log.error("malformed MQTT packet from the broker: closing the connection")
        self.transport.close()

    def eof_received(self) -> Any:
        return self.inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self.alive = False
        self.gw._link_lost(self)
        self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()


def _client_class() -> type:
    import gmqtt

    class Client(gmqtt.Client):  # type: ignore[misc]
        """gmqtt's client, with a :class:`_Link` in front of each new connection."""

        link_factory: Callable[[Any, Any], _Link]

        async def _create_connection(self, *args: Any, **kwargs: Any) -> Any:
            conn = await super()._create_connection(*args, **kwargs)
            transport = conn._transport
            transport.set_protocol(self.link_factory(transport, transport.get_protocol()))
            return conn

    return Client


class Gateway:
    """One gateway: :meth:`start` connects and subscribes, :meth:`stop` delivers what is in
    flight and disconnects. Not thread-safe: everything runs on the event loop it started on."""

    def __init__(self, cfg: GatewayConfig) -> None:
        if cfg.mqtt_version not in (311, 5):
            raise ValueError(f"mqtt_version must be 311 or 5, not {cfg.mqtt_version}")
        self.cfg = cfg
        self.stats = GatewayStats()
        self.queue = DiskQueue(Path(cfg.queue_dir) / cfg.gateway_id, max_bytes=cfg.queue_max_bytes)
        # drain what a previous run parked before taking live traffic
        self.degraded = not self.queue.empty()
        self.stopping = False
        logging.getLogger("gmqtt").setLevel(logging.WARNING)
        self.producer = gateway_producer(cfg, self._on_kafka_error)
        self._encode = value_encoder(cfg)
        self.client: Any = None
        self._link: _Link | None = None
        self._acks: list[int] = []  # mids of self._link to acknowledge at the next write
        self._parked: list[tuple[_Link | None, int | None, Record]] = []  # not yet on disk
        self._park_scheduled = False
        self._held = False  # reading paused: the disk queue is full
        self._topics: dict[tuple[str, str], str] = {}
        self._subscribed: asyncio.Event | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._poll_wake: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._connected_once = False  # a CONNACK accepted us (start returned)
        self._closed_early: asyncio.Event | None = None

    # -- lifecycle -------------------------------------------------------------------------
    async def start(self, timeout: float = 30.0) -> None:
        """Connect, subscribe (returns once Mosquitto confirmed it) and start forwarding."""
        from gmqtt.mqtt.constants import MQTTv50, MQTTv311

        self._loop = asyncio.get_running_loop()
        self._subscribed = asyncio.Event()
        self._poll_wake = asyncio.Event()
        v5 = self.cfg.mqtt_version == 5
        props: dict[str, Any] = (
            {"session_expiry_interval": self.cfg.session_expiry_s, "receive_maximum": 65535} if v5 else {}
        )
        client = _client_class()(f"sftraffic-gateway-{self.cfg.gateway_id}", clean_session=False, **props)
        client.link_factory = lambda transport, inner: self._new_link(transport, inner, v5)
        client.on_connect = self._on_connect
        client.on_subscribe = lambda *_: self._subscribed.set() if self._subscribed else None
        client.set_config({"reconnect_delay": 1})
        if self.cfg.mqtt_username:
            client.set_auth_credentials(self.cfg.mqtt_username, self.cfg.mqtt_password)
        self.client = client
        self._tasks = [
            asyncio.create_task(self._poll_loop(), name="poll"),
            asyncio.create_task(self._drain_loop(), name="drain"),
        ]
        where = f"Mosquitto at {self.cfg.mqtt_host}:{self.cfg.mqtt_port}"
        self._closed_early = asyncio.Event()
        connecting = asyncio.ensure_future(
            client.connect(
                self.cfg.mqtt_host,
                self.cfg.mqtt_port,
                ssl=mqtt_tls_context(self.cfg) or False,
                keepalive=30,
                version=MQTTv50 if v5 else MQTTv311,
            )
        )
        closed = asyncio.ensure_future(self._closed_early.wait())
        try:
            await asyncio.wait({connecting, closed}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            if not connecting.done():
                if closed.done():  # e.g. plain MQTT sent to a TLS listener
                    raise MqttRefused(
                        f"{where} closed the connection before a CONNACK (a TLS listener? --mqtt-ca)"
                    )
                raise TimeoutError
            connecting.result()
        except TimeoutError:
            raise MqttRefused(f"{where}: no CONNACK in {timeout:.0f} s") from None
        except OSError as exc:  # refused, TLS handshake failed (ssl.SSLError) ...
            raise MqttRefused(f"cannot connect to {where}: {exc}") from None
        except Exception as exc:  # gmqtt's MQTTConnectError: a refused CONNACK
            if type(exc).__name__ != "MQTTConnectError":
                raise
            raise MqttRefused(f"{where} refused the gateway: {exc}") from None
        finally:
            for f in (connecting, closed):
                f.cancel()
        self._connected_once = True
        await asyncio.wait_for(self._subscribed.wait(), timeout)
        log.info(
            "gateway %s forwarding MQTT %s:%d → %s",
            self.cfg.gateway_id,
            self.cfg.mqtt_host,
            self.cfg.mqtt_port,
            self.cfg.bootstrap,
        )

    async def stop(self, timeout: float = 30.0) -> None:
        """Stop taking messages, deliver (and acknowledge) what is in flight, then disconnect.

        The subscription stays: with a persistent session Mosquitto keeps queueing for this
        gateway id, and a gateway restarted with it gets what was published meanwhile and what
        it had received but not yet forwarded (never acknowledged). An UNSUBSCRIBE here would
        make Mosquitto drop what devices publish while no gateway of the group is subscribed.
        """
        self.stopping = True
        deadline = time.monotonic() + timeout
        if self._link is not None:
            self._link.transport.pause_reading()  # what Mosquitto sends from now on comes again
        self._flush_parked()
        while (len(self.producer) or self._parked) and time.monotonic() < deadline:
            self.producer.poll(0)
            self._write_acks()
            if self._parked:
                self._flush_parked()
            await asyncio.sleep(0.005)
        self.producer.poll(0)
        self._write_acks()
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.client is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.client.disconnect(), 5)

    def _subscription(self) -> str:
        return f"$share/{self.cfg.share_group}/sf/#"

    # -- MQTT side -------------------------------------------------------------------------
    def _new_link(self, transport: Any, inner: Any, v5: bool) -> _Link:
        link = _Link(transport, inner, self, v5)
        self._link = link
        self._acks = []
        if self._held or self.stopping:
            transport.pause_reading()
        return link

    def _link_lost(self, link: _Link) -> None:
        if not self._connected_once and self._closed_early is not None:
            self._closed_early.set()
        if link is self._link:
            self._link = None
            self._acks = []  # Mosquitto redelivers those on the next connection
            if not self.stopping:
                log.warning("MQTT connection lost: reconnecting (unacknowledged messages come again)")

    def _on_connect(self, client: Any, flags: Any, rc: Any, properties: Any) -> None:
        if rc:
            log.error("MQTT connect refused: %s", rc)
            return
        if not self.stopping:
            client.subscribe(self._subscription(), qos=1)

    def _ack(self, link: _Link | None, tag: int | None) -> None:
        """The message is stored (or parked): PUBACK it, once it is the oldest with its id."""
        if tag is None or link is not self._link or link is None:
            return  # QoS 0, or from a lost connection: Mosquitto sends it again
        mid = tag & 0xFFFF
        pending = link.pending
        q = pending.get(mid)
        if q == tag:
            del pending[mid]
            self._acks.append(mid)
        elif type(q) is deque:
            done = link.done
            done.add(tag)
            while q and q[0] in done:
                done.discard(q.popleft())
                self._acks.append(mid)
            if not q:
                del pending[mid]

    def _write_acks(self) -> None:
        acks = self._acks
        if acks:
            self._acks = []
            link = self._link
            if link is not None and link.alive:
                link.transport.write(b"".join([_PUBACK[m] for m in acks]))

    def _after_read(self) -> None:
        # Delivery reports and PUBACKs are left to the poll task (every POLL_BUSY_S): when reads are
        # small (Mosquitto slower than us), a poll and a write per read would cost more than the
        # messages themselves.
        wake = self._poll_wake
        if wake is not None and not wake.is_set():
            wake.set()

    def _on_publish(self, link: _Link, tag: int | None, raw_topic: bytes, payload: bytes) -> None:
        self.stats.received += 1
        topic = raw_topic.decode("utf-8", "replace")
        parts = topic.split("/")
        if len(parts) != 4 or parts[0] != "sf" or not (parts[1] and parts[2] and parts[3]):
            stream = parts[1] if len(parts) > 1 and parts[1] else STREAM
            reason = f"topic {topic!r} is not sf/<stream>/<topic>/<sensor-id>"
            self._dead_letter(link, tag, topic, payload, stream, reason)
            return
        _, stream, name, sensor = parts
        try:
            event = validate(payload)
        except schema.InvalidEvent as exc:
            self._dead_letter(link, tag, topic, payload, stream, str(exc))
            return
        if event["sensor_id"] != sensor:
            reason = f"payload sensor_id {event['sensor_id']!r} != topic sensor {sensor!r}"
            self._dead_letter(link, tag, topic, payload, stream, reason)
            return
        kafka_topic = self._topics.get((stream, name))
        if kafka_topic is None:
            if len(self._topics) > 10_000:
                self._topics.clear()
            kafka_topic = self._topics[(stream, name)] = f"{stream}.{name}"
        key, ts = sensor.encode(), int(event["event_time"])
        if self._encode is not None:
            try:
                payload = reencode(self._encode, kafka_topic, event)
            except schema.InvalidEvent as exc:
                self._dead_letter(link, tag, topic, payload, stream, str(exc))
                return
        if self.degraded:
            self._park(link, tag, (kafka_topic, key, payload, ts))
            return
        cb = functools.partial(self._delivered, link, tag)
        try:
            self.producer.produce(kafka_topic, payload, key, on_delivery=cb, timestamp=ts)
        except BufferError:
            self._produce(kafka_topic, key, payload, ts, cb)

    def _delivered(self, link: _Link, tag: int | None, err: Any, msg: Any) -> None:
        if err is None:
            self.stats.forwarded += 1
            self._ack(link, tag)
            return
        topic = msg.topic()
        if err.name() in RETRIABLE_DOWN or err.retriable():
            # the store did not take it: park it durably, then acknowledge the device
            self._enter_degraded(f"delivery failed: {err.str()}")
            self._park(link, tag, (topic, msg.key(), msg.value(), msg.timestamp()[1]))
        else:
            self.stats.errors += 1
            log.error("store rejected a message for %s: %s", topic, err.str())
            stream, _, name = topic.partition(".")
            mqtt_topic = f"sf/{stream}/{name}/{msg.key().decode(errors='replace')}"
            self._dead_letter(link, tag, mqtt_topic, msg.value(), stream, f"store rejected it: {err.str()}")

    def _produce(self, topic: str, key: bytes, value: bytes, ts: int, cb: Any, headers: Any = None) -> None:
        while True:
            try:
                self.producer.produce(topic, value, key, timestamp=ts, headers=headers, on_delivery=cb)
                return
            except BufferError:
                self.producer.poll(0.005)  # local queue full: deliver (and acknowledge) some first
                self._write_acks()

    def _dead_letter(
        self, link: _Link | None, tag: int | None, mqtt_topic: str, payload: bytes, stream: str, reason: str
    ) -> None:
        """At-least-once (see the module docstring): the MQTT message is acknowledged only after
        the store acknowledged the dead letter (or it was parked on disk); a crash before that
        makes Mosquitto redeliver it and it is dead-lettered again."""
        self.stats.dead_lettered += 1
        topic = self.cfg.dead_letter_topic or f"{stream}.dead_letter"
        now = int(time.time() * 1000)
        headers = [
            ("reason", reason.encode()),
            ("mqtt_topic", mqtt_topic.encode()),
            ("gateway", self.cfg.gateway_id.encode()),
            ("received_ms", str(now).encode()),
        ]
        log.info("dead letter from %s: %s", mqtt_topic, reason)

        def done(err: Any, m: Any) -> None:
            if err is None:
                self._ack(link, tag)
            else:
                self._enter_degraded(f"dead-letter delivery failed: {err.str()}")
                self._park(link, tag, (topic, mqtt_topic.encode(), payload, now))

        self._produce(topic, mqtt_topic.encode(), payload, now, done, headers)

    def _park(self, link: _Link | None, tag: int | None, record: Record) -> None:
        """Append to the disk queue (batched: one fsync for what arrived together), then ack."""
        self._parked.append((link, tag, record))
        if not self._park_scheduled and self._loop is not None:
            self._park_scheduled = True
            self._loop.call_soon(self._flush_parked)

    def _flush_parked(self) -> None:
        """Append what waits to be parked: all at once, or (near a full queue) what still fits."""
        self._park_scheduled = False
        batch = self._parked
        done, step, full = 0, len(batch), False
        while done < len(batch):
            chunk = batch[done : done + step]
            try:
                self.queue.append([r for _, _, r in chunk])
            except QueueFull:
                if step == 1:
                    full = True
                    break
                step //= 2
                continue
            for link, tag, _ in chunk:
                self._ack(link, tag)
            done += len(chunk)
        if done:
            self._parked = batch[done:]
            self.stats.queued += done
            self._write_acks()
        if not full:
            if self._held:
                self._hold(False)
            return
        if not self._held:
            log.warning("disk queue full: holding MQTT acknowledgements until the store is back")
            self._hold(True)
        # Not reading means no PINGRESP either: keep gmqtt from declaring the link dead (it
        # closes after 2 x keepalive without incoming data). Writes (PINGREQ) still go out, so
        # Mosquitto keeps the connection.
        with contextlib.suppress(AttributeError):
            self.client._connection._last_data_in = time.monotonic()
        if self._loop is not None and not self._park_scheduled:
            self._park_scheduled = True
            self._loop.call_later(0.5, self._flush_parked)

    def _hold(self, on: bool) -> None:
        """Stop (or resume) reading from Mosquitto: MQTT backpressure."""
        self._held = on
        link = self._link
        if link is not None and link.alive and not self.stopping:
            if on:
                link.transport.pause_reading()
            else:
                link.transport.resume_reading()

    # -- store side ------------------------------------------------------------------------
    def _on_kafka_error(self, err: Any) -> None:
        if err.name() in RETRIABLE_DOWN:
            self._enter_degraded(err.str())

    def _enter_degraded(self, why: str) -> None:
        if not self.degraded:
            log.warning("store unreachable (%s): parking messages on disk", why)
            self.degraded = True

    async def _poll_loop(self) -> None:
        """Serve delivery reports (and acknowledge) on this thread: no cross-thread hand-off."""
        poll, wake = self.producer.poll, self._poll_wake
        assert wake is not None
        while True:
            poll(0)
            self._write_acks()
            if len(self.producer):
                await asyncio.sleep(POLL_BUSY_S)
            else:
                wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wake.wait(), POLL_IDLE_S)

    def _store_up(self) -> bool:
        try:
            md = self.producer.list_topics(timeout=2)
            return bool(md.brokers)
        except Exception:
            return False

    async def _drain_loop(self) -> None:
        """While degraded: wait for the store, then send the parked messages in order."""
        loop = asyncio.get_running_loop()
        checked = False  # the store answered and the last batch went through
        while not self.stopping:
            if not self.degraded:
                checked = False
                await asyncio.sleep(0.2)
                continue
            if not checked:
                if not await loop.run_in_executor(None, self._store_up):
                    await asyncio.sleep(0.5)
                    continue
                checked = True
            if self.stopping:
                return
            self._flush_parked()
            items = self.queue.read(5000)
            if not items:
                if not self._parked and self.queue.empty():
                    self.degraded = False
                    log.info("store reachable again: disk queue drained, forwarding live")
                else:
                    await asyncio.sleep(0.05)
                continue
            done = loop.create_future()
            state = {"left": len(items), "failed": False}

            def cb(
                err: Any, m: Any, state: dict[str, Any] = state, done: asyncio.Future[None] = done
            ) -> None:
                if err is not None:
                    state["failed"] = True
                state["left"] -= 1
                if state["left"] == 0 and not done.done():
                    done.set_result(None)

            for it in items:
                self._produce(it.topic, it.key, it.value, it.timestamp_ms, cb)
            self._after_read()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(done), self.cfg.delivery_timeout_ms / 1000 + 5)
            if state["failed"] or not done.done():
                self.queue.rewind()  # try the same records again (idempotent per session)
                checked = False
            else:
                self.queue.commit(items[-1].position)
                self.stats.drained += len(items)


async def serve(
    cfg: GatewayConfig,
    stop: asyncio.Event,
    ready: Callable[[Gateway], None],
    every: float = 5.0,
    report: Callable[[Gateway], None] | None = None,
) -> None:
    """Run one gateway until ``stop`` is set: start, ``ready(gw)``, ``report(gw)`` every ``every`` s."""
    gw = Gateway(cfg)
    try:
        await gw.start()
        ready(gw)
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), every)
            if report is not None and not stop.is_set():
                report(gw)
    finally:
        await gw.stop()
