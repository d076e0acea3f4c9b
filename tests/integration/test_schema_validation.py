"""Broker-side schema validation (Confluent Server's ``confluent.value.schema.validation`` and
``confluent.key.schema.validation``) against a real broker, a real ``sftraffic registry`` on
its ``_schemas`` topic, and confluent-kafka's SchemaRegistryClient, AvroSerializer and
Producer unmodified.

A topic with validation on accepts Avro records of a schema registered under its subject and
refuses, with INVALID_RECORD in the producer's delivery report (record_errors and
error_message naming the reason), plain JSON bytes, an unregistered id and an id registered
under another subject; a schema registered just now is accepted at once; turning validation
off with IncrementalAlterConfigs accepts again; a stream's policy applies to its topics; bad
values and other subject name strategies answer INVALID_CONFIG.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from deploy.local.registry import RegistryProcess
from framework.client.wire import WireClient
from framework.protocol import records as rb
from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.produce import (
    PartitionProduceData,
    PartitionProduceResponse,
    ProduceRequest,
    ProduceResponse,
    TopicProduceData,
)
from framework.protocol.messages.stream_admin import (
    ALTER,
    CREATE,
    StreamAdminRequest,
    StreamAdminResponse,
    StreamConfig,
)
from testing import BrokerProcess
from tests.support.brokers import quiet_logger

pytestmark = pytest.mark.integration

EVENT = {
    "type": "record",
    "name": "TrafficEvent",
    "namespace": "sf.traffic",
    "fields": [{"name": "sensor_id", "type": "string"}, {"name": "speed", "type": "int"}],
}
OTHER = {**EVENT, "name": "Other"}
ON = {"confluent.value.schema.validation": "true"}


@pytest.fixture(scope="module")
def registry(broker: BrokerProcess) -> Iterator[RegistryProcess]:
    """The registry on the broker's own ``_schemas`` (the topic the broker reads)."""
    r = RegistryProcess(broker.bootstrap, group=f"schema-registry-{uuid.uuid4().hex[:8]}")
    r.start(timeout=60)
    yield r
    r.stop()


@pytest.fixture(scope="module")
def client(registry: RegistryProcess) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": registry.url})


def new_topic(bootstrap: str, config: dict[str, str] | None = None, name: str | None = None) -> str:
    name = name or f"sv-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bootstrap, "logger": quiet_logger()})
    admin.create_topics([NewTopic(name, 1, 1, config=config or {})])[name].result(30)
    return name


def serializer(client: SchemaRegistryClient, schema: dict[str, Any]) -> AvroSerializer:
    return AvroSerializer(client, json.dumps(schema))


def produce(bootstrap: str, topic: str, values: list[bytes | None], key: bytes | None = None) -> list[Any]:
    """Each value's delivery outcome: None (delivered) or its KafkaError."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": 1, "logger": quiet_logger()})
    out: list[Any] = []
    for v in values:
        p.produce(topic, value=v, key=key, on_delivery=lambda err, msg: out.append(err))
        p.flush(30)  # one batch per record: each one's own verdict
    assert len(out) == len(values)
    return out


def produce_wire(bootstrap: str, topic: str, records: bytes) -> PartitionProduceResponse:
    req = ProduceRequest(
        acks=1,
        timeout_ms=5000,
        topic_data=[
            TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=0, records=records)])
        ],
    )
    with WireClient(bootstrap) as c:
        return c.send(req, ProduceResponse, version=9).responses[0].partition_responses[0]


def count(bootstrap: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}"})
    try:
        return int(c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1])
    finally:
        c.close()


def alter(bootstrap: str, topic: str, name: str, value: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "logger": quiet_logger()})
    res = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic,
        incremental_configs=[ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)],
    )
    admin.incremental_alter_configs([res])[res].result(30)


def test_registered_avro_passes_and_anything_else_is_refused_with_invalid_record(
    broker: BrokerProcess, client: SchemaRegistryClient
) -> None:
    topic = new_topic(broker.bootstrap, ON)
    good = serializer(client, EVENT)(
        {"sensor_id": "s-1", "speed": 42}, SerializationContext(topic, MessageField.VALUE)
    )
    sid = int.from_bytes(good[1:5], "big")
    # an id registered under another subject (and one nobody registered)
    elsewhere = serializer(client, OTHER)(
        {"sensor_id": "s", "speed": 1}, SerializationContext("elsewhere", MessageField.VALUE)
    )
    other_id = int.from_bytes(elsewhere[1:5], "big")
    assert other_id != sid
    unknown = b"\x00" + (999_999).to_bytes(4, "big") + good[5:]
    plain_json = json.dumps({"sensor_id": "s-1", "speed": 42}).encode()

    errs = produce(broker.bootstrap, topic, [good, plain_json, unknown, elsewhere, None, good])
    assert errs[0] is None and errs[4] is None and errs[5] is None  # a null value carries no schema
    for err in errs[1:4]:
        assert err is not None and err.code() == KafkaError.INVALID_RECORD, err
    assert count(broker.bootstrap, topic) == 3  # nothing refused was stored

    # the reasons, per record, in the response (record_errors and error_message, KIP-467)
    batch = rb.build_batch(
        [(None, good), (None, plain_json), (None, unknown), (None, elsewhere), (None, None)],
        timestamp_ms=int(time.time() * 1000),
        compression=rb.LZ4,  # compressed batches are checked too
    )
    r = produce_wire(broker.bootstrap, topic, batch)
    assert r.error_code == ErrorCode.INVALID_RECORD
    reasons = {e.batch_index: e.batch_index_error_message or "" for e in r.record_errors}
    assert sorted(reasons) == [1, 2, 3]
    assert "value has no schema id" in reasons[1]
    assert f"value schema id 999999 is not registered under subject {topic}-value" == reasons[2]
    assert f"value schema id {other_id} is not registered under subject {topic}-value" == reasons[3]
    assert "3 record(s) refused" in (r.error_message or "")
    assert count(broker.bootstrap, topic) == 3


def test_a_schema_registered_just_now_is_accepted_at_once(
    broker: BrokerProcess, client: SchemaRegistryClient
) -> None:
    topic = new_topic(broker.bootstrap, ON)
    fresh = {**EVENT, "name": f"Fresh{uuid.uuid4().hex[:6]}"}
    for i in range(3):  # auto-registered by the serializer right before the produce
        ctx = SerializationContext(topic, MessageField.VALUE)
        schema = {**fresh, "fields": [*fresh["fields"], {"name": f"f{i}", "type": "int", "default": 0}]}  # type: ignore[misc]
        value = serializer(client, schema)({"sensor_id": "s", "speed": i, f"f{i}": i}, ctx)
        assert produce(broker.bootstrap, topic, [value]) == [None]


def test_validation_turned_off_and_on_with_incremental_alter_configs(
    broker: BrokerProcess, client: SchemaRegistryClient
) -> None:
    topic = new_topic(broker.bootstrap, ON)
    plain = [b"not avro"]
    assert produce(broker.bootstrap, topic, plain)[0].code() == KafkaError.INVALID_RECORD
    alter(broker.bootstrap, topic, "confluent.value.schema.validation", "false")
    assert produce(broker.bootstrap, topic, plain) == [None]
    alter(broker.bootstrap, topic, "confluent.value.schema.validation", "true")
    assert produce(broker.bootstrap, topic, plain)[0].code() == KafkaError.INVALID_RECORD


def test_key_validation(broker: BrokerProcess, client: SchemaRegistryClient) -> None:
    topic = new_topic(broker.bootstrap, {"confluent.key.schema.validation": "true"})
    key = serializer(client, EVENT)(
        {"sensor_id": "k", "speed": 0}, SerializationContext(topic, MessageField.KEY)
    )
    assert produce(broker.bootstrap, topic, [b"any value"], key=key) == [None]
    err = produce(broker.bootstrap, topic, [b"any value"], key=b"plain-key")[0]
    assert err.code() == KafkaError.INVALID_RECORD
    r = produce_wire(
        broker.bootstrap, topic, rb.build_batch([(b"\x00\x00\x00\x00\x07k", b"v")], timestamp_ms=0)
    )
    assert [e.batch_index_error_message for e in r.record_errors] == [
        f"key schema id 7 is not registered under subject {topic}-key"
    ]


def test_a_stream_policy_applies_to_its_topics(broker: BrokerProcess, client: SchemaRegistryClient) -> None:
    stream = f"sv{uuid.uuid4().hex[:8]}"
    req = StreamAdminRequest(
        operation=CREATE, names=[stream], configs=[StreamConfig("confluent.value.schema.validation", "true")]
    )
    with WireClient(broker.bootstrap) as c:
        resp = c.send(req, StreamAdminResponse, version=0)
    assert resp.streams[0].error_code == 0, resp.streams[0].error_message
    topic = new_topic(broker.bootstrap, name=f"{stream}.events")
    good = serializer(client, EVENT)(
        {"sensor_id": "s", "speed": 1}, SerializationContext(topic, MessageField.VALUE)
    )
    errs = produce(broker.bootstrap, topic, [good, b"{}"])
    assert errs[0] is None and errs[1].code() == KafkaError.INVALID_RECORD
    # DescribeConfigs shows where the topic's value comes from
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "logger": quiet_logger()})
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entry = admin.describe_configs([res])[res].result(30)["confluent.value.schema.validation"]
    assert entry.value == "true" and not entry.is_default
    # the stream's policy altered: its topics follow
    req = StreamAdminRequest(
        operation=ALTER, names=[stream], configs=[StreamConfig("confluent.value.schema.validation", "false")]
    )
    with WireClient(broker.bootstrap) as c:
        assert c.send(req, StreamAdminResponse, version=0).streams[0].error_code == 0
    assert produce(broker.bootstrap, topic, [b"{}"]) == [None]


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("confluent.value.schema.validation", "maybe"),
        ("confluent.key.schema.validation", "maybe"),
        (
            "confluent.value.subject.name.strategy",
            "io.confluent.kafka.serializers.subject.RecordNameStrategy",
        ),
        (
            "confluent.key.subject.name.strategy",
            "io.confluent.kafka.serializers.subject.TopicRecordNameStrategy",
        ),
    ],
)
def test_bad_values_are_refused_with_invalid_config(broker: BrokerProcess, name: str, value: str) -> None:
    topic = f"sv-bad-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "logger": quiet_logger()})
    with pytest.raises(KafkaException) as info:
        admin.create_topics([NewTopic(topic, 1, 1, config={name: value})])[topic].result(30)
    assert info.value.args[0].code() == KafkaError.INVALID_CONFIG
    existing = new_topic(broker.bootstrap)
    with pytest.raises(KafkaException) as info:
        alter(broker.bootstrap, existing, name, value)
    assert info.value.args[0].code() == KafkaError.INVALID_CONFIG
    # the default strategy, written out, is accepted
    alter(
        broker.bootstrap,
        existing,
        "confluent.value.subject.name.strategy",
        "io.confluent.kafka.serializers.subject.TopicNameStrategy",
    )
