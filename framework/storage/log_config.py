"""The effective settings of one partition log, resolved from topic, stream and broker."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from framework import config as cfg


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1_073_741_824
    segment_ms: int = 7 * cfg.DAY_MS
    segment_jitter_ms: int = 0
    # a segment rolls when its offset index (8-byte entries) or time index (12-byte entries)
    # holds segment.index.bytes (Kafka's index isFull)
    max_index_entries: int = 10_485_760 // 8
    max_time_index_entries: int = 10_485_760 // 12
    retention_ms: int = 7 * cfg.DAY_MS
    retention_bytes: int = -1
    index_interval_bytes: int = 4096
    flush_messages: int = cfg.LONG_MAX
    flush_ms: int = cfg.LONG_MAX
    max_message_bytes: int = 1_048_588
    log_append_time: bool = False
    timestamp_before_max_ms: int = cfg.LONG_MAX
    timestamp_after_max_ms: int = cfg.LONG_MAX
    delete: bool = True
    compact: bool = False
    delete_retention_ms: int = cfg.DAY_MS
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = cfg.LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    min_insync_replicas: int = 1
    producer_id_expiration_ms: int = 7 * cfg.DAY_MS
    # Confluent's confluent.key/value.schema.validation: the produce path checks schema ids
    key_schema_validation: bool = False
    value_schema_validation: bool = False

    @classmethod
    def from_values(cls, v: Mapping[str, Any]) -> LogConfig:
        """Build from a mapping of resolved topic-key values (every key present)."""
        policy = v["cleanup.policy"]
        return cls(
            segment_bytes=v["segment.bytes"],
            segment_ms=v["segment.ms"],
            segment_jitter_ms=v["segment.jitter.ms"],
            max_index_entries=v["segment.index.bytes"] // 8,
            max_time_index_entries=v["segment.index.bytes"] // 12,
            retention_ms=v["retention.ms"],
            retention_bytes=v["retention.bytes"],
            index_interval_bytes=v["index.interval.bytes"],
            flush_messages=v["flush.messages"],
            flush_ms=v["flush.ms"],
            max_message_bytes=v["max.message.bytes"],
            log_append_time=v["message.timestamp.type"] == "LogAppendTime",
            timestamp_before_max_ms=v["message.timestamp.before.max.ms"],
            timestamp_after_max_ms=v["message.timestamp.after.max.ms"],
            delete="delete" in policy,
            compact="compact" in policy,
            delete_retention_ms=v["delete.retention.ms"],
            min_compaction_lag_ms=v["min.compaction.lag.ms"],
            max_compaction_lag_ms=v["max.compaction.lag.ms"],
            min_cleanable_dirty_ratio=v["min.cleanable.dirty.ratio"],
            min_insync_replicas=v["min.insync.replicas"],
            producer_id_expiration_ms=v["producer.id.expiration.ms"],
            key_schema_validation=v["confluent.key.schema.validation"],
            value_schema_validation=v["confluent.value.schema.validation"],
        )


def resolve(
    topic_overrides: Mapping[str, Any],
    stream_values: Mapping[str, Any],
    broker: cfg.BrokerConfig,
) -> dict[str, tuple[Any, str]]:
    """Every topic key → (value, source) where source is topic | stream | broker | default."""
    out: dict[str, tuple[Any, str]] = {}
    for k in cfg.keys(cfg.TOPIC):
        if k.name in topic_overrides:
            out[k.name] = (topic_overrides[k.name], "topic")
        elif k.name in stream_values:
            out[k.name] = (stream_values[k.name], "stream")
        elif (k.broker_name and k.broker_name in broker.values) or k.name in broker.values:
            out[k.name] = (broker.topic_default(k.name), "broker")
        else:
            out[k.name] = (k.default, "default")
    return out
