"""The client-metrics manager (KIP-714): subscriptions, instance ids, push checks and values,
driven with a manual clock."""

from __future__ import annotations

import uuid

import crc32c
import pytest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    Gauge,
    Metric,
    MetricsData,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
    Sum,
)
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from framework.clock import ManualClock
from framework.protocol.error_codes import ErrorCode
from framework.protocol.fields import ZERO_UUID
from framework.protocol.messages.push_telemetry import PushTelemetryRequest
from framework.protocol.records import GZIP, NONE, ZSTD, compress
from framework.server.client_metrics import (
    ACCEPTED_COMPRESSION,
    DEFAULT_INTERVAL_MS,
    ClientIdentity,
    ClientMetrics,
    TelemetryCollector,
    subscription_id,
)

PRODUCER = ClientIdentity.of("app-1", ("librdkafka", "2.16.0"), "127.0.0.1:50000")
OTHER = ClientIdentity.of("other", ("kafka-java", "4.0.0"), "127.0.0.1:50001")
SUB = {
    "producers": {
        "metrics": ["org.apache.kafka.producer."],
        "interval.ms": 1000,
        "match": ["client_id=app-.*"],
    }
}


def payload(value: float = 7.0, name: str = "org.apache.kafka.producer.record.queue.count") -> bytes:
    gauge = Metric(
        name=name,
        gauge=Gauge(
            data_points=[
                NumberDataPoint(
                    as_double=value,
                    attributes=[KeyValue(key="topic", value=AnyValue(string_value="t"))],
                )
            ]
        ),
    )
    total = Metric(
        name="org.apache.kafka.producer.connection.creation.total",
        sum=Sum(data_points=[NumberDataPoint(as_int=3)], is_monotonic=True),
    )
    data = MetricsData(
        resource_metrics=[ResourceMetrics(scope_metrics=[ScopeMetrics(metrics=[gauge, total])])]
    )
    return data.SerializeToString()


def manager(
    subs: dict[str, dict[str, object]] | None = None, max_bytes: int = 1_048_576
) -> tuple[ClientMetrics, ManualClock]:
    clock = ManualClock()
    cm = ClientMetrics(clock, max_bytes)
    cm.update_subscriptions(subs if subs is not None else SUB)
    return cm, clock


def push(cm: ClientMetrics, iid: bytes, sid: int, metrics: bytes = b"", **kw: object) -> ErrorCode:
    req = PushTelemetryRequest(client_instance_id=iid, subscription_id=sid, metrics=metrics, **kw)  # type: ignore[arg-type]
    return ErrorCode(cm.push(req, PRODUCER).error_code)


def test_a_zero_instance_id_is_given_a_new_uuid_and_the_matched_subscription() -> None:
    cm, _ = manager()
    r = cm.get_subscriptions(ZERO_UUID, PRODUCER)
    assert r.error_code == ErrorCode.NONE
    assert r.client_instance_id != ZERO_UUID
    assert r.requested_metrics == ["org.apache.kafka.producer."]
    assert r.push_interval_ms == 1000
    assert r.telemetry_max_bytes == 1_048_576
    assert r.accepted_compression_types == list(ACCEPTED_COMPRESSION)
    assert r.subscription_id == subscription_id(["org.apache.kafka.producer."], 1000, r.client_instance_id)
    assert cm.get_subscriptions(ZERO_UUID, PRODUCER).client_instance_id != r.client_instance_id


def test_an_unmatched_client_is_asked_for_nothing_at_the_default_interval() -> None:
    cm, _ = manager()
    r = cm.get_subscriptions(ZERO_UUID, OTHER)
    assert r.error_code == ErrorCode.NONE
    assert r.requested_metrics == []
    assert r.push_interval_ms == DEFAULT_INTERVAL_MS


def test_no_subscriptions_ask_for_nothing() -> None:
    cm, _ = manager({})
    r = cm.get_subscriptions(ZERO_UUID, PRODUCER)
    assert (r.error_code, r.requested_metrics, r.push_interval_ms) == (
        ErrorCode.NONE,
        [],
        DEFAULT_INTERVAL_MS,
    )


def test_several_subscriptions_union_metrics_and_take_the_shortest_interval() -> None:
    cm, _ = manager({**SUB, "all": {"metrics": ["org.apache.kafka.consumer."], "interval.ms": 500}})
    r = cm.get_subscriptions(ZERO_UUID, PRODUCER)
    assert r.requested_metrics == ["org.apache.kafka.consumer.", "org.apache.kafka.producer."]
    assert r.push_interval_ms == 500
    cm.update_subscriptions({**SUB, "everything": {"metrics": ["*"]}})
    assert cm.get_subscriptions(ZERO_UUID, PRODUCER).requested_metrics == ["*"]


def test_match_on_software_name_must_match_the_whole_value() -> None:
    cm, _ = manager({"rd": {"metrics": ["*"], "match": ["client_software_name=librd"]}})
    assert cm.get_subscriptions(ZERO_UUID, PRODUCER).requested_metrics == []
    cm.update_subscriptions({"rd": {"metrics": ["*"], "match": ["client_software_name=librd.*"]}})
    assert cm.get_subscriptions(ZERO_UUID, PRODUCER).requested_metrics == ["*"]


def test_a_push_is_kept_and_a_push_before_the_interval_is_throttled() -> None:
    cm, clock = manager()
    r = cm.get_subscriptions(ZERO_UUID, PRODUCER)
    iid, sid = r.client_instance_id, r.subscription_id
    assert push(cm, iid, sid, payload(1.0)) == ErrorCode.NONE  # the first after the get
    clock.advance(500)
    assert push(cm, iid, sid, payload(2.0)) == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    clock.advance(500)
    assert push(cm, iid, sid, payload(3.0)) == ErrorCode.NONE
    (inst,) = cm.instances.values()
    assert inst.values["org.apache.kafka.producer.record.queue.count"] == [((("topic", "t"),), 3.0)]
    assert inst.values["org.apache.kafka.producer.connection.creation.total"] == [((), 3.0)]


def test_a_get_before_the_interval_is_throttled() -> None:
    cm, clock = manager()
    iid = cm.get_subscriptions(ZERO_UUID, PRODUCER).client_instance_id
    assert cm.get_subscriptions(iid, PRODUCER).error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    clock.advance(1000)
    assert cm.get_subscriptions(iid, PRODUCER).error_code == ErrorCode.NONE


def test_a_changed_subscription_makes_the_old_id_unknown_and_the_client_may_ask_at_once() -> None:
    cm, _ = manager()
    r = cm.get_subscriptions(ZERO_UUID, PRODUCER)
    cm.update_subscriptions({"producers": {**SUB["producers"], "interval.ms": 2000}})
    assert push(cm, r.client_instance_id, r.subscription_id, payload()) == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
    again = cm.get_subscriptions(r.client_instance_id, PRODUCER)  # not throttled after that error
    assert again.error_code == ErrorCode.NONE
    assert again.push_interval_ms == 2000
    assert again.subscription_id != r.subscription_id
    assert push(cm, r.client_instance_id, again.subscription_id, payload()) == ErrorCode.NONE


def test_compressed_payloads_decode_and_unknown_codecs_are_refused() -> None:
    cm, clock = manager()
    r = cm.get_subscriptions(ZERO_UUID, PRODUCER)
    iid, sid = r.client_instance_id, r.subscription_id
    assert push(cm, iid, sid, compress(ZSTD, payload(5.0)), compression_type=ZSTD) == ErrorCode.NONE
    clock.advance(1000)
    assert push(cm, iid, sid, compress(GZIP, payload(6.0)), compression_type=GZIP) == ErrorCode.NONE
    clock.advance(1000)
    assert push(cm, iid, sid, payload(), compression_type=9) == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


def test_too_large_and_undecodable_payloads_are_refused() -> None:
    cm, clock = manager(max_bytes=64)
    r = cm.get_subscriptions(ZERO_UUID, PRODUCER)
    iid, sid = r.client_instance_id, r.subscription_id
    assert push(cm, iid, sid, b"x" * 65) == ErrorCode.TELEMETRY_TOO_LARGE
    clock.advance(1000)
    assert push(cm, iid, sid, b"\xff\xff\xff", compression_type=NONE) == ErrorCode.INVALID_RECORD
    clock.advance(1000)
    assert push(cm, iid, sid, b"\x00garbage", compression_type=GZIP) == ErrorCode.INVALID_RECORD


def test_a_zero_id_push_is_invalid_and_nothing_follows_a_terminating_push() -> None:
    cm, _ = manager()
    assert push(cm, ZERO_UUID, 0) == ErrorCode.INVALID_REQUEST
    r = cm.get_subscriptions(ZERO_UUID, PRODUCER)
    iid, sid = r.client_instance_id, r.subscription_id
    assert push(cm, iid, sid, payload()) == ErrorCode.NONE
    assert push(cm, iid, sid, payload(), terminating=True) == ErrorCode.NONE  # not throttled
    assert push(cm, iid, sid, payload()) == ErrorCode.INVALID_REQUEST


def test_a_push_to_a_broker_that_never_saw_the_get_matches_the_same_id() -> None:
    cm, _ = manager()
    other, _ = manager()
    r = cm.get_subscriptions(ZERO_UUID, PRODUCER)
    assert push(other, r.client_instance_id, r.subscription_id, payload()) == ErrorCode.NONE


def test_silent_instances_are_evicted_and_the_count_is_bounded() -> None:
    clock = ManualClock()
    cm = ClientMetrics(clock, max_instances=2, expiry_ms=10_000)
    cm.update_subscriptions(SUB)
    ids = [cm.get_subscriptions(ZERO_UUID, PRODUCER).client_instance_id for _ in range(3)]
    assert list(cm.instances) == ids[1:]  # the least recently seen went first
    clock.advance(3 * 1000 + 10_000)
    cm.expire()
    assert not cm.instances


def test_the_collector_serves_values_with_the_client_labels() -> None:
    cm, _ = manager()
    r = cm.get_subscriptions(ZERO_UUID, PRODUCER)
    assert push(cm, r.client_instance_id, r.subscription_id, payload(4.0)) == ErrorCode.NONE
    registry = CollectorRegistry(auto_describe=False)
    registry.register(TelemetryCollector(cm))
    text = generate_latest(registry).decode()
    samples = {s.name: s for f in text_string_to_metric_families(text) for s in f.samples}
    gauge = samples["kafka_client_org_apache_kafka_producer_record_queue_count"]
    assert gauge.value == 4.0
    assert gauge.labels == {
        "client_instance_id": str(uuid.UUID(bytes=r.client_instance_id)),
        "client_id": "app-1",
        "client_software_name": "librdkafka",
        "client_software_version": "2.16.0",
        "topic": "t",
    }
    assert samples["kafka_client_org_apache_kafka_producer_connection_creation_total"].value == 3.0


@pytest.mark.parametrize("instance", [uuid.UUID(int=1).bytes, uuid.UUID(int=(1 << 128) - 1).bytes])
def test_subscription_ids_are_signed_int32(instance: bytes) -> None:
    sid = subscription_id(["*"], 1000, instance)
    assert -(1 << 31) <= sid < 1 << 31


def test_subscription_id_is_kafkas_crc32c_of_the_set_and_interval_xor_the_uuid_hash() -> None:
    iid = uuid.UUID("0123456789abcdef0011223344556677").bytes
    x = 0x0123456789ABCDEF ^ 0x0011223344556677
    expected = (crc32c.crc32c(b"[a, b]1000") ^ (((x >> 32) ^ x) & 0xFFFFFFFF)) & 0xFFFFFFFF
    expected -= 1 << 32 if expected >= 1 << 31 else 0
    assert subscription_id(["b", "a"], 1000, iid) == expected


def test_every_match_pattern_must_match() -> None:
    both = ["client_id=app-.*", "client_source_address=127\\.0\\.0\\.1", "client_source_port=5000[0-9]"]
    cm, _ = manager({"s": {"metrics": ["*"], "match": both}})
    assert cm.get_subscriptions(ZERO_UUID, PRODUCER).requested_metrics == ["*"]
    cm.update_subscriptions({"s": {"metrics": ["*"], "match": [*both, "client_software_version=3\\..*"]}})
    assert cm.get_subscriptions(ZERO_UUID, PRODUCER).requested_metrics == []


def test_a_later_push_replaces_the_values_and_silence_for_three_intervals_forgets_them() -> None:
    cm, clock = manager({"producers": {**SUB["producers"], "interval.ms": 30_000}})
    r = cm.get_subscriptions(ZERO_UUID, PRODUCER)
    assert push(cm, r.client_instance_id, r.subscription_id, payload(1.0)) == ErrorCode.NONE
    clock.advance(30_000)
    assert push(cm, r.client_instance_id, r.subscription_id, payload(2.0)) == ErrorCode.NONE
    (inst,) = cm.instances.values()
    assert inst.values["org.apache.kafka.producer.record.queue.count"] == [((("topic", "t"),), 2.0)]
    clock.advance(89_999)
    cm.expire()
    assert cm.instances
    clock.advance(1)
    cm.expire()
    assert not cm.instances


def test_data_points_per_instance_are_bounded() -> None:
    cm = ClientMetrics(ManualClock(), max_points=1)
    cm.update_subscriptions(SUB)
    r = cm.get_subscriptions(ZERO_UUID, PRODUCER)
    assert push(cm, r.client_instance_id, r.subscription_id, payload()) == ErrorCode.NONE
    assert sum(len(v) for v in cm.instances[r.client_instance_id].values.values()) == 1


def test_a_payload_that_decompresses_past_the_bound_is_an_invalid_record() -> None:
    cm, _ = manager(max_bytes=1024)
    r = cm.get_subscriptions(ZERO_UUID, PRODUCER)
    bomb = compress(ZSTD, b"\x00" * (32 * 1024 + 1))
    assert len(bomb) <= 1024
    assert (
        push(cm, r.client_instance_id, r.subscription_id, bomb, compression_type=ZSTD)
        == ErrorCode.INVALID_RECORD
    )
