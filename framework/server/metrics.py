"""Prometheus metrics of a broker (``/metrics`` on ``metrics.listen``).

Counters and histograms are updated on the request path with cached label children (one dict
look-up each); per-partition gauges are computed when Prometheus scrapes, so the produce path
pays nothing for them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily

from framework.replication.partition import Partition

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
REQUEST_ERRORS = Counter(
    "sftraffic_request_errors",
    "Errors answered to clients (whole requests or single partitions, topics, resources), by Kafka error.",
    ["error"],
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
    def __init__(self, partitions: Callable[[], list[Partition]], connections: Callable[[], int]) -> None:
        self.partitions = partitions
        self.connections = connections

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
        for p in self.partitions():
            labels = [p.topic, str(p.index)]
            leo.add_metric(labels, p.log_end_offset)
            lso.add_metric(labels, p.log_start_offset)
            hw.add_metric(labels, p.high_watermark)
            size.add_metric(labels, p.log.size_bytes)
            if p.is_leader and len(p.isr) < len(p.replicas):
                under += 1
        urp.add_metric([], under)
        conns = GaugeMetricFamily("sftraffic_connections", "Open client connections.")
        conns.add_metric([], self.connections())
        yield from (leo, lso, hw, size, urp, conns)


def serve(
    host: str, port: int, partitions: Callable[[], list[Partition]], connections: Callable[[], int]
) -> None:
    REGISTRY.register(PartitionCollector(partitions, connections))
    start_http_server(port, addr=host, registry=REGISTRY)
