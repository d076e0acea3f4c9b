"""Producer helpers over confluent-kafka: Kafka's partitioner and MapR's publishing modes.

* :func:`partition_for` is Kafka's default key partitioner (murmur2, as the Java client), so a
  key lands in the same partition whichever of our components or a Java service produced it.
  confluent-kafka agrees with it only with ``partitioner=murmur2_random``, which
  :func:`producer_config` sets (librdkafka's own default, ``consistent_random``, uses CRC32).
* Publishing modes (MapR's "Modes of Publishing"): at-least-once is the default of any Kafka
  producer (a retried batch may be written twice); ``exactly_once=True`` turns on idempotence
  (producer id + sequence numbers, duplicates dropped by the broker, order kept with up to 5
  requests in flight).
* ``parallel_flushers`` is MapR's ``streams.parallel.flushers.per.partition``: True (the
  default) lets the client send the next request to a partition before the previous one is
  acknowledged (up to 5 in flight) — fast, but without idempotence a retry can reorder
  messages; False waits for each acknowledgement (one request in flight), so order is kept
  even without idempotence, at a cost in throughput.
"""

from __future__ import annotations

from typing import Any


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 hash (``org.apache.kafka.common.utils.Utils.murmur2``), signed 32-bit."""
    length = len(data)
    seed = 0x9747B28C
    m = 0x5BD1E995
    r = 24
    h = (seed ^ length) & 0xFFFFFFFF
    length4 = length // 4
    for i in range(length4):
        i4 = i * 4
        k = (
            (data[i4] & 0xFF)
            + ((data[i4 + 1] & 0xFF) << 8)
            + ((data[i4 + 2] & 0xFF) << 16)
            + ((data[i4 + 3] & 0xFF) << 24)
        )
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    extra = length % 4
    idx = length & ~3
    if extra == 3:
        h ^= (data[idx + 2] & 0xFF) << 16
    if extra >= 2:
        h ^= (data[idx + 1] & 0xFF) << 8
    if extra >= 1:
        h ^= data[idx] & 0xFF
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - 0x100000000 if h >= 0x80000000 else h


def partition_for(key: bytes, num_partitions: int) -> int:
    """The partition Kafka's default partitioner picks for a non-empty key."""
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


def producer_config(
    bootstrap: str,
    *,
    exactly_once: bool = True,
    parallel_flushers: bool = True,
    acks: str = "all",
    linger_ms: int = 5,
    client_id: str = "sftraffic",
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """confluent-kafka producer settings for a publishing mode (see the module docstring)."""
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "client.id": client_id,
        "partitioner": "murmur2_random",
        "linger.ms": linger_ms,
        "enable.idempotence": exactly_once,
        "acks": "all" if exactly_once else acks,
        "max.in.flight.requests.per.connection": 5 if parallel_flushers else 1,
    }
    if not exactly_once:
        # at-least-once: retries may duplicate, and with several requests in flight reorder
        conf["retries"] = 2147483647
    conf.update(extra or {})
    return conf
