"""The reference application's stream layout, created when missing.

Stream ``traffic_monitoring`` (TTL six months) with topics ``traffic``, ``infrastructure``,
``weather_conditions`` and ``dead_letter`` (gateway rejects, with the reason in a header).
On sftraffic the policy lives on the stream and the topics inherit it; on Apache Kafka or
Redpanda (no streams) the same retention is set on each topic, so the apps run on both.

These names are declared here once: the gateway, the fleet, the pipelines, the dashboard, the
deployment and the tests use :data:`STREAM`, :data:`TOPICS` and :func:`topic`.
"""

from __future__ import annotations

import logging

STREAM = "traffic_monitoring"
TOPICS = ("traffic", "infrastructure", "weather_conditions", "dead_letter")
TTL_MS = 183 * 86_400_000  # six months

log = logging.getLogger("sftraffic.layout")


def topic(name: str, stream: str = STREAM) -> str:
    return f"{stream}.{name}"


def ensure_layout(
    bootstrap: str,
    partitions: int = 6,
    replication_factor: int = 1,
    stream: str = STREAM,
    ttl_ms: int = TTL_MS,
    extra_topics: dict[str, dict[str, str]] | None = None,
) -> list[str]:
    """Create the stream (when the store has streams) and its topics; returns created topics."""
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    has_streams = _ensure_stream(bootstrap, stream, partitions, replication_factor, ttl_ms)
    quiet = logging.getLogger("sftraffic.librdkafka")
    quiet.addHandler(logging.NullHandler())
    quiet.propagate = False
    from framework.client.security import secured

    admin = AdminClient(secured({"bootstrap.servers": bootstrap, "logger": quiet}))
    existing = set(admin.list_topics(timeout=15).topics)
    wanted: dict[str, dict[str, str]] = {}
    for name in TOPICS:
        wanted[topic(name, stream)] = {} if has_streams else {"retention.ms": str(ttl_ms)}
    for name, conf in (extra_topics or {}).items():
        wanted[name] = conf
    new = [
        NewTopic(t, num_partitions=partitions, replication_factor=replication_factor, config=c)
        for t, c in wanted.items()
        if t not in existing
    ]
    created: list[str] = []
    if new:
        for name, fut in admin.create_topics(new, operation_timeout=30).items():
            try:
                fut.result(30)
                created.append(name)
            except Exception as exc:
                if "TOPIC_ALREADY_EXISTS" not in str(exc):
                    raise
    if created:
        log.info("created topics %s", ", ".join(created))
    return created


def _ensure_stream(bootstrap: str, stream: str, partitions: int, rf: int, ttl_ms: int) -> bool:
    """Create the stream if the store supports streams; False on a plain Kafka cluster."""
    from framework.client.admin import ensure_stream

    configs = {
        "retention.ms": str(ttl_ms),
        "num.partitions": str(partitions),
        "default.replication.factor": str(rf),
    }
    try:
        return ensure_stream(bootstrap, stream, configs, client_id="sftraffic-layout")
    except OSError:
        return False
