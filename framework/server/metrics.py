"""Prometheus metrics of a broker (``/metrics`` on ``metrics.listen``; docs/reference/metrics.md).

Three kinds, each paid for where it is cheapest:

* **Request-path counters** (requests, errors, bytes and records in and out) are process-wide
  and updated with cached label children, one dict look-up each. Errors are counted from the
  response as it is sent, as Kafka's ``RequestChannel`` counts ``errorCounts()``: every
  ``*error_code`` field of the response, at any depth, that is not NONE counts once under
  ``(api, error)``, so request-level, per-topic, per-partition and per-member errors are all
  counted, wherever in the broker they were decided. The walk over a response is compiled
  once per response class (:func:`count_errors`).
* **Cluster events** (ISR shrinks and expands, leader elections, fenced brokers) are counted by
  :class:`QuorumWatch`, which the broker calls after each change the metadata quorum applies:
  it compares the partitions' leaders, epochs and ISRs and the brokers' fencing with what they
  were before the change, so every cause (a leader's AlterPartition, the controller fencing a
  broker, a re-registration) is counted the same way, and nothing runs on the produce or fetch
  path.
* **Client metrics** (KIP-714): what clients push with PushTelemetry, served as
  ``kafka_client_*`` gauges by the collector the broker passes in (``extra``;
  :class:`framework.server.client_metrics.TelemetryCollector`).
* **Gauges** (log offsets and sizes, under-replicated and offline partitions, the controller,
  consumer-group lag, connections, the broker's state) are computed by :class:`BrokerCollector`
  when Prometheus scrapes.

The endpoint is served on the broker's event loop (:class:`MetricsServer`), so a scrape reads
partitions, groups and quorum state from the thread that owns them.

Thread-safety: event-loop only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector

from framework.coordinator.group_service import GroupService
from framework.coordinator.groups import GroupState
from framework.errors import StoreError
from framework.metadata.cache import MetadataCache
from framework.metadata.quorum import ClusterState
from framework.protocol.api import ApiEntry
from framework.protocol.error_codes import ErrorCode
from framework.replication.replica_manager import ReplicaManager
from framework.server.lifecycle import BrokerLifecycle, BrokerState

if TYPE_CHECKING:
    from framework.server.listener import KafkaListener

log = logging.getLogger("sftraffic.metrics")

REGISTRY = CollectorRegistry(auto_describe=True)

# -- request path ----------------------------------------------------------------------------
REQUEST_LATENCY = Histogram(
    "sftraffic_request_latency_seconds",
    "Time from a request's arrival to its response being queued, by API (its _count counts requests).",
    ["api"],
    registry=REGISTRY,
    buckets=(
        0.0001,
        0.00025,
        0.0005,
        0.001,
        0.0025,
        0.005,
        0.01,
        0.025,
        0.05,
        0.1,
        0.25,
        0.5,
        1,
        2.5,
        5,
    ),
)
REQUEST_ERRORS = Counter(
    "sftraffic_request_errors",
    "Errors answered to clients, by API and Kafka error: each error code a response carries "
    "(for the whole request or one topic, partition, group, member or resource) counts once.",
    ["api", "error"],
    registry=REGISTRY,
)
BYTES_IN = Counter(
    "sftraffic_bytes_in", "Record bytes appended by producers, by topic.", ["topic"], registry=REGISTRY
)
MESSAGES_IN = Counter(
    "sftraffic_messages_in", "Records appended by producers, by topic.", ["topic"], registry=REGISTRY
)
BYTES_OUT = Counter(
    "sftraffic_bytes_out",
    "Record bytes served to consumers (not to follower replicas), by topic.",
    ["topic"],
    registry=REGISTRY,
)
REPLICATION_BYTES_OUT = Counter(
    "sftraffic_replication_bytes_out",
    "Record bytes served to follower replicas.",
    registry=REGISTRY,
)
RETENTION_BYTES = Counter(
    "sftraffic_retention_deleted_bytes", "Bytes reclaimed by retention.", registry=REGISTRY
)
BAD_FRAMES = Counter(
    "sftraffic_bad_frames", "Malformed requests that closed a connection.", registry=REGISTRY
)

# -- cluster events (QuorumWatch) -------------------------------------------------------------
ISR_SHRINKS = Counter(
    "sftraffic_isr_shrinks",
    "ISR changes that removed replicas, counted by the partition's leader when applied.",
    registry=REGISTRY,
)
ISR_EXPANDS = Counter(
    "sftraffic_isr_expands",
    "ISR changes that added replicas, counted by the partition's leader when applied.",
    registry=REGISTRY,
)
LEADER_ELECTIONS = Counter(
    "sftraffic_leader_elections",
    "Partitions given a leader at a new leader epoch, counted by the controller.",
    registry=REGISTRY,
)
UNCLEAN_LEADER_ELECTIONS = Counter(
    "sftraffic_unclean_leader_elections",
    "Leader elections that chose a replica outside the ISR, counted by the controller.",
    registry=REGISTRY,
)
BROKER_FENCINGS = Counter(
    "sftraffic_broker_fencings",
    "Brokers fenced (no longer live), counted by the controller.",
    registry=REGISTRY,
)

_children: dict[tuple[str, str], Any] = {}


def child(metric: Any, label: str) -> Any:
    key = (metric._name, label)
    c = _children.get(key)
    if c is None:
        c = _children[key] = metric.labels(label)
    return c


# -- errors answered ---------------------------------------------------------------------------
_ErrorWalk = Callable[[Any, Callable[[int], None]], None]
_walks: dict[type, _ErrorWalk | None] = {}
_error_counters: dict[int, tuple[_ErrorWalk, Callable[[int], None]]] = {}


def _struct(cls: type, name: str) -> type:
    found: type = getattr(sys.modules[cls.__module__], name)
    return found


def _has_errors(cls: type) -> bool:
    specs: dict[str, Any] = cls.SPECS  # type: ignore[attr-defined]
    return any(
        (s.type == "int16" and n.endswith("error_code") and not s.array)
        or (s.struct is not None and _has_errors(_struct(cls, s.struct)))
        for n, s in specs.items()
    )


def _emit(cls: type, var: str, indent: str, lines: list[str], depth: int) -> None:
    specs: dict[str, Any] = cls.SPECS  # type: ignore[attr-defined]
    for name, s in specs.items():
        if s.type == "int16" and name.endswith("error_code") and not s.array:
            lines += [f"{indent}c = {var}.{name}", f"{indent}if c:", f"{indent}    inc(c)"]
        elif s.struct is not None:
            sub = _struct(cls, s.struct)
            if not _has_errors(sub):
                continue
            item = f"x{depth}"
            if s.array:
                lines.append(f"{indent}for {item} in {var}.{name} or ():")
            else:
                lines += [f"{indent}{item} = {var}.{name}", f"{indent}if {item} is not None:"]
            _emit(sub, item, indent + "    ", lines, depth + 1)


def error_walk(response: type) -> _ErrorWalk | None:
    """A function calling ``inc(code)`` for each non-zero error code of a ``response``
    (straight-line code generated from the message's field specs, as the codec is); None when
    the message has no error code field."""
    if response in _walks:
        return _walks[response]
    walk: _ErrorWalk | None = None
    if _has_errors(response):
        lines = ["def walk(r, inc):"]
        _emit(response, "r", "    ", lines, 0)
        ns: dict[str, Any] = {}
        exec("\n".join(lines), ns)  # noqa: S102 - generated from our own message specs
        walk = ns["walk"]
    _walks[response] = walk
    return walk


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


def _no_errors(resp: Any, inc: Callable[[int], None]) -> None:
    return None


def _counter_for(entry: ApiEntry) -> tuple[_ErrorWalk, Callable[[int], None]]:
    api = entry.name
    cache: dict[int, Any] = {}

    def inc(code: int) -> None:
        c = cache.get(code)
        if c is None:
            c = cache[code] = REQUEST_ERRORS.labels(api, _error_name(code))
        c.inc()

    return error_walk(entry.response) or _no_errors, inc


def count_errors(entry: ApiEntry, resp: Any) -> None:
    """Count every error code ``resp`` (a response of ``entry``'s API) answers with."""
    f = _error_counters.get(entry.key)
    if f is None:
        f = _error_counters[entry.key] = _counter_for(entry)
    f[0](resp, f[1])


# -- cluster events ----------------------------------------------------------------------------
# (topic, index) -> (leader, leader epoch, ISR)
_Partitions = dict[tuple[str, int], tuple[int, int, frozenset[int]]]


class QuorumWatch:
    """Counts what each change applied by the metadata quorum did (call :meth:`applied` after
    every apply).

    * an ISR that lost replicas is one shrink, one that gained replicas one expand, counted on
      the broker that leads the partition after the change (Kafka's per-broker IsrShrinksPerSec
      and IsrExpandsPerSec), whoever caused it: the leader's AlterPartition or the controller
      fencing a follower;
    * a partition that gets a leader (>= 0) at a new (leader, leader epoch) is a leader
      election, and an unclean one when that leader was not in the ISR before; a broker that
      becomes fenced is a fencing. These are counted by the controller (the Raft leader), as
      Kafka's controller metrics are, so the cluster's figure is the sum over brokers.

    The journal replayed at start is history and is not counted: the first change applied once
    the quorum has replayed sets the baseline. The comparison costs one pass over the
    partitions per applied change (metadata changes are rare; nothing on the request path).
    """

    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        self._partitions: _Partitions | None = None
        self._fenced: set[int] = set()

    def applied(self, quorum: ClusterState | None) -> None:
        if quorum is None or not quorum.replayed:
            self._partitions = None
            return
        now: _Partitions = {
            (topic, i): (ps.leader, ps.leader_epoch, frozenset(ps.isr))
            for topic, states in quorum.pstates.items()
            for i, ps in enumerate(states)
        }
        fenced = {n for n, b in quorum.brokers.items() if b["fenced"]}
        before, self._partitions = self._partitions, now
        fenced_before, self._fenced = self._fenced, fenced
        if before is None:
            return
        controller = bool(quorum.is_controller)
        if controller and fenced - fenced_before:
            BROKER_FENCINGS.inc(len(fenced - fenced_before))
        for tp, (leader, epoch, isr) in now.items():
            old = before.get(tp)
            if old is None:
                continue  # a new partition: its first leader is no election
            old_leader, old_epoch, old_isr = old
            if isr != old_isr and leader == self.node_id:
                if old_isr - isr:
                    ISR_SHRINKS.inc()
                if isr - old_isr:
                    ISR_EXPANDS.inc()
            if controller and leader >= 0 and (leader, epoch) != (old_leader, old_epoch):
                LEADER_ELECTIONS.inc()
                if leader not in old_isr:
                    UNCLEAN_LEADER_ELECTIONS.inc()


# -- gauges at scrape time -----------------------------------------------------------------------
class BrokerParts(Protocol):
    """What the collector reads of a broker (``framework.server.broker.Broker``)."""

    node_id: int
    replicas: ReplicaManager
    groups: GroupService
    cache: MetadataCache
    listener: KafkaListener
    lifecycle: BrokerLifecycle  # its state, and ``stopping``


def _gauge(name: str, doc: str, labels: list[str] | None = None) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=labels)


class BrokerCollector:
    """The gauges, computed from the broker's parts when Prometheus scrapes."""

    def __init__(self, broker: BrokerParts) -> None:
        self.broker = broker

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield from self._partitions()
        yield from self._cluster()
        yield from self._group_lag()
        conns = _gauge("sftraffic_connections", "Open client connections.")
        conns.add_metric([], len(self.broker.listener.connections))
        yield conns
        state = _gauge(
            "sftraffic_broker_state",
            "The broker's state, by Kafka's BrokerState codes: "
            + ", ".join(f"{s.value} {s.name}" for s in BrokerState)
            + ".",
        )
        state.add_metric([], int(self.broker.lifecycle.state))
        yield state

    def _partitions(self) -> Iterator[GaugeMetricFamily]:
        tp = ["topic", "partition"]
        leo = _gauge("sftraffic_log_end_offset", "Next offset to be written.", tp)
        lso = _gauge("sftraffic_log_start_offset", "First readable offset.", tp)
        hw = _gauge("sftraffic_high_watermark", "Last offset visible to consumers + 1.", tp)
        size = _gauge("sftraffic_log_size_bytes", "Bytes on disk.", tp)
        under = leading = 0
        for p in self.broker.replicas.all_partitions():
            labels = [p.topic, str(p.index)]
            leo.add_metric(labels, p.log_end_offset)
            lso.add_metric(labels, p.log_start_offset)
            hw.add_metric(labels, p.high_watermark)
            size.add_metric(labels, p.log.size_bytes)
            if p.is_leader:
                leading += 1
                if len(p.isr) < len(p.replicas):
                    under += 1
        urp = _gauge(
            "sftraffic_under_replicated_partitions",
            "Partitions led by this broker whose ISR is smaller than their replica set.",
        )
        urp.add_metric([], under)
        leaders = _gauge("sftraffic_leader_partitions", "Partitions led by this broker.")
        leaders.add_metric([], leading)
        yield from (leo, lso, hw, size, urp, leaders)
        yield from self._throttles()

    def _throttles(self) -> Iterator[GaugeMetricFamily]:
        rm = self.broker.replicas
        moved = _gauge(
            "sftraffic_replication_throttled_bytes",
            "Record bytes of throttled replicas (leader.replication.throttled.replicas / "
            "follower.replication.throttled.replicas) moved while out of sync, by side, since start.",
            ["side"],
        )
        skips = _gauge(
            "sftraffic_replication_throttle_skips",
            "Times a throttled replica's fetch was held back because the side's replication "
            "throttle rate was exceeded, by side, since start.",
            ["side"],
        )
        rate = _gauge(
            "sftraffic_replication_throttle_rate",
            "The replication throttle in bytes/s, by side (9223372036854775807: none).",
            ["side"],
        )
        for q in (rm.leader_quota, rm.follower_quota):
            moved.add_metric([q.side], q.throttled_bytes)
            skips.add_metric([q.side], q.throttled_skips)
            rate.add_metric([q.side], q.rate)
        removed = _gauge(
            "sftraffic_replicas_removed",
            "Replicas this broker stopped and deleted because a reassignment moved them away, since start.",
        )
        removed.add_metric([], rm.removed_replicas)
        yield from (moved, skips, rate, removed)

    def _cluster(self) -> Iterator[GaugeMetricFamily]:
        quorum = self.broker.cache.quorum
        controller = quorum is None or bool(quorum.is_controller)
        offline_count = 0
        if quorum is not None and controller:
            offline_count = sum(
                1
                for states in quorum.pstates.values()
                for ps in states
                if ps.leader < 0 or not quorum.unfenced(ps.leader)
            )
        active = _gauge(
            "sftraffic_active_controller",
            "1 on the controller (the Raft leader of the metadata quorum; a single node is its "
            "own controller), else 0.",
        )
        active.add_metric([], 1 if controller else 0)
        offline = _gauge(
            "sftraffic_offline_partitions",
            "Partitions without a live leader, reported by the controller (0 elsewhere).",
        )
        offline.add_metric([], offline_count)
        yield from (active, offline)

    def _group_lag(self) -> Iterator[GaugeMetricFamily]:
        labels = ["group", "topic", "partition"]
        committed = _gauge(
            "sftraffic_consumer_group_committed_offset",
            "Committed offset of each group this broker coordinates, by partition.",
            labels,
        )
        lag = _gauge(
            "sftraffic_consumer_group_lag",
            "High watermark minus committed offset (at least 0) of each group this broker "
            "coordinates, for partitions with a replica on this broker.",
            labels,
        )
        held = self.broker.replicas.partitions
        for g in list(self.broker.groups.coordinator.groups.values()):
            if g.is_(GroupState.DEAD):
                continue
            for (topic, index), co in g.offsets.items():
                parts = held.get(topic)
                p = parts[index] if parts is not None and 0 <= index < len(parts) else None
                if p is None or co.offset < 0:
                    continue
                row = [g.group_id, topic, str(index)]
                committed.add_metric(row, co.offset)
                lag.add_metric(row, max(p.high_watermark - co.offset, 0))
        yield from (committed, lag)


# -- the endpoint --------------------------------------------------------------------------------
_STATUS = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 400: "Bad Request"}
# the classic text format, which every Prometheus reads (our names need no UTF-8 escaping)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class MetricsServer:
    """``GET /metrics`` (Prometheus text format 0.0.4) on the broker's event loop; ``extra``:
    more collectors (the clients' pushed metrics)."""

    def __init__(self, broker: BrokerParts, extra: Iterable[Collector] = ()) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(BrokerCollector(broker))
        for collector in extra:
            self.registry.register(collector)
        self.server: asyncio.base_events.Server | None = None
        self.port = 0
        self._closer: asyncio.Task[None] | None = None

    def render(self) -> bytes:
        return generate_latest(REGISTRY) + generate_latest(self.registry)

    async def start(self, host: str, port: int) -> int:
        """Listen on host:port; returns the port (the one chosen when ``port`` is 0)."""
        try:
            self.server = await asyncio.start_server(self._serve, host, port, reuse_address=True)
        except OSError as exc:
            raise StoreError(f"cannot serve metrics on {host}:{port}: {exc.strerror}") from None
        return int(self.server.sockets[0].getsockname()[1])

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(self._read_head(reader), 10)
            status, body = self._answer(head)
            writer.write(
                f"HTTP/1.1 {status} {_STATUS[status]}\r\n"
                f"Content-Type: {CONTENT_TYPE if status == 200 else 'text/plain'}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
            )
            if not head.startswith("HEAD "):
                writer.write(body)
            await writer.drain()
        except (TimeoutError, OSError, ValueError, asyncio.IncompleteReadError):
            pass  # a client that went away or never finished its request
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    @staticmethod
    async def _read_head(reader: asyncio.StreamReader) -> str:
        request = (await reader.readline()).decode("latin-1")
        while (await reader.readline()).strip():
            pass  # headers: nothing in them changes the answer
        return request

    def _answer(self, request: str) -> tuple[int, bytes]:
        parts = request.split()
        if len(parts) < 2:
            return 400, b"bad request\n"
        method, target = parts[0], parts[1].split("?", 1)[0]
        if method not in ("GET", "HEAD"):
            return 405, b"only GET\n"
        if target not in ("/metrics", "/"):
            return 404, b"try /metrics\n"
        return 200, self.render()


def host_port(text: str, what: str = "metrics.listen") -> tuple[str, int]:
    host, sep, port = text.strip().rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise StoreError(f"{what} {text!r} must look like HOST:PORT, e.g. 127.0.0.1:9092")
    p = int(port)
    if not 0 <= p <= 65535:
        raise StoreError(f"{what} port {p} is out of range")
    return host.strip("[]"), p


async def serve(broker: BrokerParts, host: str, port: int, extra: Iterable[Collector] = ()) -> MetricsServer:
    """Serve ``broker``'s metrics (and ``extra``'s) on host:port until it starts stopping
    (``lifecycle.stopping``)."""
    server = MetricsServer(broker, extra)
    bound = await server.start(host, port)
    server.port = bound
    server._closer = asyncio.get_running_loop().create_task(_close_when(broker.lifecycle.stopping, server))
    log.info("broker %d serving metrics on http://%s:%d/metrics", broker.node_id, host, bound)
    return server


async def _close_when(stopping: asyncio.Event, server: MetricsServer) -> None:
    await stopping.wait()
    server.close()
