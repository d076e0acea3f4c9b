"""Prometheus metrics of a broker (``/metrics`` on ``metrics.listen``).

Counters and histograms are updated on the request path with cached label children (one dict
look-up each); per-partition gauges are computed when Prometheus scrapes, so the produce path
pays nothing for them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily

if TYPE_CHECKING:
    from framework.server.broker import Broker

REGISTRY = CollectorRegistry(auto_describe=True)

REQUEST_LATENCY = Histogram(
    "sftraffic_request_latency_seconds",
    "Time from a request's arrival to its response being queued, by API.",
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
REQUESTS = Counter("sftraffic_requests", "Requests served, by API.", ["api"], registry=REGISTRY)
REQUEST_ERRORS = Counter(
    "sftraffic_request_errors",
    "Error codes returned, by API and error.",
    ["api", "error"],
    registry=REGISTRY,
)
BYTES_IN = Counter("sftraffic_bytes_in", "Record bytes appended, by topic.", ["topic"], registry=REGISTRY)
BYTES_OUT = Counter(
    "sftraffic_bytes_out",
    "Record bytes served to fetchers, by topic.",
    ["topic"],
    registry=REGISTRY,
)
MESSAGES_IN = Counter("sftraffic_messages_in", "Records appended, by topic.", ["topic"], registry=REGISTRY)
RETENTION_BYTES = Counter(
    "sftraffic_retention_deleted_bytes", "Bytes reclaimed by retention.", registry=REGISTRY
)
BAD_FRAMES = Counter(
    "sftraffic_bad_frames", "Malformed requests that closed a connection.", registry=REGISTRY
)

_children: dict[tuple[str, str], Any] = {}


def child(metric: Any, label: str) -> Any:
    key = (metric._name, label)
    c = _children.get(key)
    if c is None:
        c = _children[key] = metric.labels(label)
    return c


class PartitionCollector:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def collect(self) -> Iterator[GaugeMetricFamily]:
        leo = GaugeMetricFamily(
            "sftraffic_log_end_offset", "Next offset to be written.", labels=["topic", "partition"]
        )
        lso = GaugeMetricFamily(
            "sftraffic_log_start_offset", "First readable offset.", labels=["topic", "partition"]
        )
        hw = GaugeMetricFamily(
            "sftraffic_high_watermark",
            "Last offset visible to consumers + 1.",
            labels=["topic", "partition"],
        )
        size = GaugeMetricFamily("sftraffic_log_size_bytes", "Bytes on disk.", labels=["topic", "partition"])
        urp = GaugeMetricFamily(
            "sftraffic_under_replicated_partitions",
            "Partitions whose ISR is smaller than their replica set.",
        )
        under = 0
        for topic, parts in list(self.broker.partitions.items()):
            for p in parts:
                if p is None:
                    continue
                labels = [topic, str(p.index)]
                leo.add_metric(labels, p.log_end_offset)
                lso.add_metric(labels, p.log_start_offset)
                hw.add_metric(labels, p.high_watermark)
                size.add_metric(labels, p.log.size_bytes)
                if p.is_leader and len(p.isr) < len(p.replicas):
                    under += 1
        urp.add_metric([], under)
        conns = GaugeMetricFamily("sftraffic_connections", "Open client connections.")
        conns.add_metric([], len(self.broker.connections))
        yield from (leo, lso, hw, size, urp, conns)


def serve(host: str, port: int, broker: Broker) -> None:
    REGISTRY.register(PartitionCollector(broker))
    start_http_server(port, addr=host, registry=REGISTRY)
