"""The reference application's stream layout, created when missing.

Stream ``traffic_monitoring`` (TTL six months) with topics ``traffic``, ``infrastructure``,
``weather_conditions`` and ``dead_letter`` (gateway rejects, with the reason in a header).
On sftraffic the policy lives on the stream and the topics inherit it; on Apache Kafka or
Redpanda (no streams) the same retention is set on each topic, so the apps run on both.
"""

from __future__ import annotations

import logging
from typing import Any

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
    admin = AdminClient({"bootstrap.servers": bootstrap, "logger": quiet})
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
    from framework.client.wire import WireClient
    from framework.protocol.messages.stream_admin import (
        CREATE,
        StreamAdminRequest,
        StreamAdminResponse,
        StreamConfig,
    )

    try:
        with WireClient(bootstrap, timeout=10, client_id="sftraffic-layout") as w:
            if w.version_for(StreamAdminRequest.API_KEY) is None:
                return False
            configs: list[Any] = [
                StreamConfig("retention.ms", str(ttl_ms)),
                StreamConfig("num.partitions", str(partitions)),
                StreamConfig("default.replication.factor", str(rf)),
            ]
            resp = w.send(
                StreamAdminRequest(operation=CREATE, names=[stream], configs=configs), StreamAdminResponse
            )
            code = resp.streams[0].error_code
            if code not in (0, 36):  # 36 TOPIC_ALREADY_EXISTS: the stream exists
                raise RuntimeError(f"cannot create stream {stream}: {resp.streams[0].error_message}")
            return True
    except OSError:
        return False
