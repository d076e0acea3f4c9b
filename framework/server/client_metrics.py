"""Client metrics (KIP-714): which clients push which metrics, how often, and their latest values.

Kafka's ``ClientMetricsManager`` in one class, :class:`ClientMetrics`:

* **Subscriptions** are the CLIENT_METRICS config resources (``kafka-client-metrics.sh``;
  IncrementalAlterConfigs), kept in the metadata store and replicated like other configs, so
  every broker holds the same set. Each names metric prefixes (``metrics``), a push interval
  (``interval.ms``) and which clients it applies to (``match``: selector=regex, every pattern
  matching the whole value). The broker calls :meth:`ClientMetrics.update_subscriptions` with
  the whole set whenever it changes.
* **Client instances**: a client asks GetTelemetrySubscriptions with a zero id and is given a
  random Uuid, its *client instance id*, which it sends from then on. Each instance is matched
  once against the subscriptions: the union of the matched prefixes (just ``*`` when one asks
  for everything), the shortest matched interval (default 300000 ms) and a *subscription id*,
  Kafka's CRC32C of the metric set and interval XORed with the Uuid's hash. A change to the
  subscriptions re-matches an instance on its next request, so its pushes carry a stale id and
  are answered UNKNOWN_SUBSCRIPTION_ID, and the client asks again.
* **Push checks**, in Kafka's order: a zero id is INVALID_REQUEST, so is a push after a
  terminating one; a push sooner than the interval after the previous push is
  THROTTLING_QUOTA_EXCEEDED (except the first after a GetTelemetrySubscriptions, and a
  terminating push); then UNKNOWN_SUBSCRIPTION_ID, UNSUPPORTED_COMPRESSION_TYPE,
  TELEMETRY_TOO_LARGE (``telemetry.max.bytes``, compressed size), and INVALID_RECORD for a
  payload that does not decompress or decode as OTLP ``MetricsData``. A GetTelemetrySubscriptions
  sooner than the interval after the last request is throttled too, unless the last push failed
  with UNKNOWN_SUBSCRIPTION_ID or UNSUPPORTED_COMPRESSION_TYPE (the client must re-ask at once:
  KIP-714's rule; Kafka's ``validateGetRequest`` tests it with ``||``, so never exempts).
* **Values**: Kafka hands the payload to a ``ClientTelemetryReceiver`` plugin; here the latest
  value of each gauge and sum data point is kept per instance and served on the broker's
  ``/metrics`` by :class:`TelemetryCollector`, as ``kafka_client_<metric name, dots as
  underscores>`` with labels ``client_instance_id``, ``client_id``, ``client_software_name``,
  ``client_software_version`` and the data point's own attributes. Clients are told cumulative
  temporality (``delta_temporality`` false), so a value is the total since the client started.
  Histograms and summaries are not kept.

Bounded memory: a payload may decompress to at most 32 times ``telemetry.max.bytes`` (more is
INVALID_RECORD), at most ``max_instances`` instances (the least recently seen goes first), each
dropped once it has sent nothing for three push intervals (at least ``expiry_ms``), and at most
``max_points`` data points per instance.

Time is the broker's monotonic clock (tests pass a ``ManualClock``). Thread-safety: event-loop only.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import cramjam
import crc32c
from google.protobuf.message import DecodeError
from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData, NumberDataPoint
from prometheus_client.core import GaugeMetricFamily

from framework.clock import Clock
from framework.errors import StoreError
from framework.protocol.error_codes import ErrorCode
from framework.protocol.fields import ZERO_UUID
from framework.protocol.messages.get_telemetry_subscriptions import GetTelemetrySubscriptionsResponse
from framework.protocol.messages.push_telemetry import PushTelemetryRequest, PushTelemetryResponse
from framework.protocol.records import GZIP, LZ4, NONE, SNAPPY, ZSTD, InvalidBatch, decompress

log = logging.getLogger("sftraffic.client_metrics")

DEFAULT_INTERVAL_MS = 300_000  # Kafka's ClientMetricsConfigs.DEFAULT_INTERVAL_MS
ALL_METRICS = "*"
# offered in Kafka's order (librdkafka uses the first it can); NONE is always accepted
ACCEPTED_COMPRESSION = (ZSTD, LZ4, GZIP, SNAPPY)
_DECOMPRESSES = frozenset((NONE, *ACCEPTED_COMPRESSION))
PREFIX = "kafka_client_"
DECOMPRESSED_RATIO = 32  # a payload may decompress to 32 times telemetry.max.bytes
IDENTITY_LABELS = ("client_instance_id", "client_id", "client_software_name", "client_software_version")
_NOT_LABEL = re.compile(r"[^a-zA-Z0-9_]")


@dataclass(frozen=True, slots=True)
class Subscription:
    """One CLIENT_METRICS resource, parsed (Kafka's ``SubscriptionInfo``)."""

    name: str
    metrics: frozenset[str]
    interval_ms: int
    match: Mapping[str, re.Pattern[str]]

    @classmethod
    def from_configs(cls, name: str, configs: Mapping[str, Any]) -> Subscription:
        """From the stored configs (already validated by the metadata store)."""
        patterns = {}
        for item in configs.get("match") or ():
            selector, _, regex = item.partition("=")
            patterns[selector.strip()] = re.compile(regex.strip())
        return cls(
            name,
            frozenset(configs.get("metrics") or ()),
            int(configs.get("interval.ms", DEFAULT_INTERVAL_MS)),
            patterns,
        )


@dataclass(frozen=True, slots=True)
class ClientIdentity:
    """What a subscription's ``match`` selects on (Kafka's ``ClientMetricsInstanceMetadata``)."""

    client_id: str
    software_name: str
    software_version: str
    source_address: str
    source_port: str

    @classmethod
    def of(cls, client_id: str | None, software: tuple[str, str], peer: str) -> ClientIdentity:
        """From a request's client id, its connection's ApiVersions software name and version,
        and its peer (``address:port``)."""
        address, _, port = peer.rpartition(":")
        return cls(client_id or "", software[0], software[1], address.strip("[]"), port)

    def attributes(self, instance_id: bytes) -> dict[str, str]:
        return {
            "client_instance_id": str(uuid.UUID(bytes=instance_id)),
            "client_id": self.client_id,
            "client_software_name": self.software_name,
            "client_software_version": self.software_version,
            "client_source_address": self.source_address,
            "client_source_port": self.source_port,
        }

    def matches(self, instance_id: bytes, patterns: Mapping[str, re.Pattern[str]]) -> bool:
        """Every pattern matches its attribute whole; no patterns match every client."""
        attrs = self.attributes(instance_id)
        return all(p.fullmatch(attrs.get(sel, "")) is not None for sel, p in patterns.items())


# (labels, value) of one data point; labels are (name, value) pairs after the identity labels
Point = tuple[tuple[tuple[str, str], ...], float]


@dataclass(slots=True)
class ClientInstance:
    """One client instance: its matched subscription and push state (Kafka's ``ClientMetricsInstance``)."""

    instance_id: bytes
    identity: ClientIdentity
    subscription_id: int
    subscription_version: int
    metrics: tuple[str, ...]
    interval_ms: int
    last_get_ms: int | None = None
    last_push_ms: int | None = None
    last_seen_ms: int = 0
    asked_since_push: bool = False  # a GetTelemetrySubscriptions was answered since the last push
    terminating: bool = False
    last_error: ErrorCode = ErrorCode.NONE
    # metric name -> its data points, as of the latest accepted push
    values: dict[str, list[Point]] = field(default_factory=dict)

    def may_get(self, now: int) -> bool:
        """A GetTelemetrySubscriptions at least one interval after the last request (noted)."""
        last = max(self.last_get_ms or 0, self.last_push_ms or 0)
        if (self.last_get_ms is None and self.last_push_ms is None) or now - last >= self.interval_ms:
            self.got(now)
            return True
        return False

    def got(self, now: int) -> None:
        """Note a GetTelemetrySubscriptions answered: the next push may come early."""
        self.last_get_ms = now
        self.asked_since_push = True

    def may_push(self, now: int) -> bool:
        """The first push after a GetTelemetrySubscriptions (the client jitters its first push),
        or one at least one interval after the previous push (noted)."""
        if self.asked_since_push or self.last_push_ms is None or now - self.last_push_ms >= self.interval_ms:
            self.last_push_ms = now
            self.asked_since_push = False
            return True
        return False


class TelemetryError(StoreError):
    """A telemetry request refused with ``code``."""

    def __init__(self, message: str, code: ErrorCode) -> None:
        super().__init__(message)
        self.code = code


def subscription_id(metrics: Iterable[str], interval_ms: int, instance_id: bytes) -> int:
    """Kafka's ``computeSubscriptionId``: CRC32C of the metric set (as Java prints a set, here in
    sorted order) followed by the interval, XORed with the Uuid's ``hashCode``; a signed int32."""
    text = "[" + ", ".join(sorted(metrics)) + "]" + str(interval_ms)
    crc = crc32c.crc32c(text.encode())
    msb = int.from_bytes(instance_id[:8], "big")
    lsb = int.from_bytes(instance_id[8:], "big")
    x = msb ^ lsb
    h = ((x >> 32) ^ x) & 0xFFFFFFFF
    v = (crc ^ h) & 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


class ClientMetrics:
    """Subscriptions, client instances and their latest pushed values (see the module doc)."""

    def __init__(
        self,
        clock: Clock,
        max_bytes: int = 1_048_576,
        *,
        max_instances: int = 16_384,
        expiry_ms: int = 60_000,
        max_points: int = 2_000,
    ) -> None:
        self.clock = clock
        self.max_bytes = max_bytes
        self.max_instances = max_instances
        self.expiry_ms = expiry_ms
        self.max_points = max_points
        self.subscriptions: dict[str, Subscription] = {}
        self.version = 0  # bumped on every change of the subscriptions
        self.instances: OrderedDict[bytes, ClientInstance] = OrderedDict()  # least recently seen first

    # -- subscriptions ----------------------------------------------------------------------
    def update_subscriptions(self, configs: Mapping[str, Mapping[str, Any]]) -> None:
        """Replace the subscriptions with ``configs`` (name → configs, as the metadata store keeps them)."""
        subs = {name: Subscription.from_configs(name, c) for name, c in configs.items() if c}
        if subs != self.subscriptions:
            self.subscriptions = subs
            self.version += 1

    def _match(self, instance_id: bytes, identity: ClientIdentity) -> ClientInstance:
        interval = DEFAULT_INTERVAL_MS
        metrics: set[str] = set()
        for sub in self.subscriptions.values():
            if identity.matches(instance_id, sub.match):
                metrics |= sub.metrics
                interval = min(interval, sub.interval_ms)
        if ALL_METRICS in metrics:
            metrics = {ALL_METRICS}
        sid = subscription_id(metrics, interval, instance_id)
        return ClientInstance(instance_id, identity, sid, self.version, tuple(sorted(metrics)), interval)

    def _instance(self, instance_id: bytes, identity: ClientIdentity, now: int) -> ClientInstance:
        """The instance, created (or re-matched after a subscription change) as needed; noted as seen."""
        while self.instances:  # the least recently seen, while expired (a scrape sweeps them all)
            oldest = next(iter(self.instances.values()))
            if not self._expired(oldest, now):
                break
            self.instances.popitem(last=False)
        inst = self.instances.get(instance_id)
        if inst is None or inst.subscription_version != self.version:
            # a push may reach a broker that never saw the instance's GetTelemetrySubscriptions:
            # matching is deterministic, so it computes the same subscription id
            fresh = self._match(instance_id, inst.identity if inst is not None else identity)
            if inst is not None:
                fresh.values = inst.values
            inst = self.instances[instance_id] = fresh
            while len(self.instances) > self.max_instances:
                self.instances.popitem(last=False)
        inst.last_seen_ms = now
        self.instances.move_to_end(instance_id)
        return inst

    def _expired(self, inst: ClientInstance, now: int) -> bool:
        return now - inst.last_seen_ms >= max(self.expiry_ms, 3 * inst.interval_ms)

    def _now(self) -> int:
        """Milliseconds on the monotonic clock: intervals are durations, and a wall clock that
        steps back must not throttle every client."""
        return int(self.clock.monotonic() * 1000)

    def expire(self) -> None:
        """Forget every instance that sent nothing for three push intervals (at least ``expiry_ms``)."""
        now = self._now()
        for iid in [i.instance_id for i in self.instances.values() if self._expired(i, now)]:
            del self.instances[iid]

    # -- requests -----------------------------------------------------------------------------
    def get_subscriptions(
        self, instance_id: bytes, identity: ClientIdentity
    ) -> GetTelemetrySubscriptionsResponse:
        now = self._now()
        if instance_id == ZERO_UUID:
            instance_id = self._new_id()
        inst = self._instance(instance_id, identity, now)
        exempt = inst.last_error in (
            ErrorCode.UNKNOWN_SUBSCRIPTION_ID,
            ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
        )
        if not inst.may_get(now):
            if not exempt:
                return GetTelemetrySubscriptionsResponse(error_code=ErrorCode.THROTTLING_QUOTA_EXCEEDED)
            inst.got(now)
        inst.last_error = ErrorCode.NONE
        return GetTelemetrySubscriptionsResponse(
            error_code=ErrorCode.NONE,
            client_instance_id=instance_id,
            subscription_id=inst.subscription_id,
            accepted_compression_types=list(ACCEPTED_COMPRESSION),
            push_interval_ms=inst.interval_ms,
            telemetry_max_bytes=self.max_bytes,
            delta_temporality=False,
            requested_metrics=list(inst.metrics),
        )

    def _new_id(self) -> bytes:
        while True:
            candidate = uuid.uuid4().bytes
            if candidate not in self.instances:
                return candidate

    def push(self, req: PushTelemetryRequest, identity: ClientIdentity) -> PushTelemetryResponse:
        try:
            self._push(req, identity)
        except TelemetryError as exc:
            log.debug(
                "push from client instance %s refused: %s", uuid.UUID(bytes=req.client_instance_id), exc
            )
            return PushTelemetryResponse(error_code=exc.code)
        return PushTelemetryResponse(error_code=ErrorCode.NONE)

    def _push(self, req: PushTelemetryRequest, identity: ClientIdentity) -> None:
        if req.client_instance_id == ZERO_UUID:
            raise TelemetryError("a push needs the client instance id", ErrorCode.INVALID_REQUEST)
        now = self._now()
        inst = self._instance(req.client_instance_id, identity, now)
        try:
            self._check_push(inst, req, now)
        except TelemetryError as exc:
            inst.last_error = exc.code
            raise
        finally:
            inst.terminating = req.terminating
        if req.metrics:
            try:
                inst.values = self._decode(req.compression_type, req.metrics)
            except TelemetryError as exc:
                inst.last_error = exc.code
                raise
        inst.last_error = ErrorCode.NONE

    def _check_push(self, inst: ClientInstance, req: PushTelemetryRequest, now: int) -> None:
        if inst.terminating:
            raise TelemetryError("the client already sent its terminating push", ErrorCode.INVALID_REQUEST)
        if not inst.may_push(now) and not req.terminating:
            raise TelemetryError("pushed before its push interval", ErrorCode.THROTTLING_QUOTA_EXCEEDED)
        if req.subscription_id != inst.subscription_id:
            raise TelemetryError("unknown subscription id", ErrorCode.UNKNOWN_SUBSCRIPTION_ID)
        if req.compression_type not in _DECOMPRESSES:
            raise TelemetryError(
                f"compression type {req.compression_type}", ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
            )
        if len(req.metrics) > self.max_bytes:
            raise TelemetryError(
                f"{len(req.metrics)} bytes > telemetry.max.bytes {self.max_bytes}",
                ErrorCode.TELEMETRY_TOO_LARGE,
            )

    def _decode(self, codec: int, payload: bytes) -> dict[str, list[Point]]:
        """The latest value of each gauge and sum data point of an OTLP ``MetricsData`` payload."""
        try:
            raw = bounded_decompress(codec, payload, DECOMPRESSED_RATIO * self.max_bytes)
            data = MetricsData.FromString(raw)
        except (InvalidBatch, DecodeError) as exc:
            raise TelemetryError(f"undecodable metrics payload: {exc}", ErrorCode.INVALID_RECORD) from None
        values: dict[str, list[Point]] = {}
        count = 0
        for rm in data.resource_metrics:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    kind = metric.WhichOneof("data")
                    if kind == "gauge":
                        points = metric.gauge.data_points
                    elif kind == "sum":
                        points = metric.sum.data_points
                    else:
                        continue
                    out = values.setdefault(metric.name, [])
                    for dp in points:
                        if count >= self.max_points:
                            return values
                        out.append((_labels(dp), _number(dp)))
                        count += 1
        return values


_INTO = {
    GZIP: cramjam.gzip.decompress_into,
    LZ4: cramjam.lz4.decompress_into,
    ZSTD: cramjam.zstd.decompress_into,
}


def bounded_decompress(codec: int, payload: bytes, limit: int) -> bytes:
    """A pushed payload decompressed, refused (InvalidBatch) once it would pass ``limit`` bytes:
    a megabyte of zstd can hold gigabytes. gzip, lz4 and zstd decompress into a buffer of bounded
    size (64 times the payload first, then ``limit``); snappy cannot expand more than about 21
    times, so it is decompressed whole."""
    into = _INTO.get(codec)
    if into is None:
        return decompress(codec, payload)
    for size in sorted({min(64 * len(payload), limit), limit}):
        buf = bytearray(size + 1)
        try:
            n = int(into(payload, buf))
        except cramjam.DecompressionError as exc:
            if "whole buffer" not in str(exc):
                raise InvalidBatch(f"cannot decompress the metrics payload: {exc}") from None
            n = size + 1  # more than this buffer holds
        if n <= size:
            return bytes(buf[:n])
    raise InvalidBatch(f"the metrics payload decompresses to more than {limit} bytes")


def _number(dp: NumberDataPoint) -> float:
    return float(dp.as_int) if dp.WhichOneof("value") == "as_int" else dp.as_double


def _labels(dp: NumberDataPoint) -> tuple[tuple[str, str], ...]:
    out = []
    for kv in dp.attributes:
        name = _label_name(kv.key)
        if name in IDENTITY_LABELS:
            continue
        v = kv.value
        kind = v.WhichOneof("value")
        text = (
            str(getattr(v, kind)).lower() if kind == "bool_value" else str(getattr(v, kind)) if kind else ""
        )
        out.append((name, text))
    return tuple(sorted(out))


def _label_name(key: str) -> str:
    name = _NOT_LABEL.sub("_", key)
    return "_" + name if name[:1].isdigit() else name


def metric_name(name: str) -> str:
    """The Prometheus name of a pushed metric: ``kafka_client_`` and its name, dots (and any
    character Prometheus does not allow) as underscores."""
    return PREFIX + _NOT_LABEL.sub("_", name)


class TelemetryCollector:
    """The pushed metrics' latest values, when Prometheus scrapes (see the module doc)."""

    def __init__(self, metrics: ClientMetrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[GaugeMetricFamily]:
        cm = self.metrics
        cm.expire()
        # metric -> extra label names; then one family per metric
        rows: dict[str, list[tuple[list[str], dict[str, str], float]]] = {}
        extra: dict[str, set[str]] = {}
        for inst in cm.instances.values():
            attrs = inst.identity.attributes(inst.instance_id)
            ident = [attrs[k] for k in IDENTITY_LABELS]
            for name, points in inst.values.items():
                prom = metric_name(name)
                names = extra.setdefault(prom, set())
                for labels, value in points:
                    d = dict(labels)
                    names.update(d)
                    rows.setdefault(prom, []).append((ident, d, value))
        for prom, samples in sorted(rows.items()):
            more = sorted(extra[prom])
            family = GaugeMetricFamily(
                prom,
                "A metric pushed by Kafka clients (KIP-714): its latest value.",
                labels=[*IDENTITY_LABELS, *more],
            )
            seen: set[tuple[str, ...]] = set()
            for ident, d, value in samples:
                key = (*ident, *(d.get(m, "") for m in more))
                if key in seen:  # the same series twice in one push: the first counts
                    continue
                seen.add(key)
                family.add_metric(list(key), value)
            yield family
