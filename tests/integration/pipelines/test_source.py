"""The ``sftraffic`` PySpark data source against the real store (batch reads, JSON values,
the writer, clear errors)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pipelines import spark_schemas, transforms
from pipelines.source import JsonValues, SourceError
from tests.support.brokers import BrokerFactory
from tests.support.history import T0
from tests.support.pipelines import reader, topic_with

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def test_batch_reads_by_offset_and_by_time_range(spark: Any, broker_factory: BrokerFactory) -> None:
    b = broker_factory()
    topic_with(b.bootstrap, "t.range", [f"v{i}".encode() for i in range(10)])
    r = reader(spark, b.bootstrap, "t.range")
    rows = r.option("startingOffsets", json.dumps({"t.range": {"0": 3}})).load().collect()
    assert [x.offset for x in rows] == list(range(3, 10))
    assert rows[0].value == b"v3" and rows[0].key == b"k" and rows[0].topic == "t.range"
    by_time = r.option("startingTimestamp", T0 + 2000).option("endingTimestamp", T0 + 5000).load()
    assert [x.value for x in by_time.orderBy("offset").collect()] == [b"v2", b"v3", b"v4"]


def test_json_values_are_decoded_by_the_source_with_dead_letters_kept(
    spark: Any, broker_factory: BrokerFactory
) -> None:
    b = broker_factory()
    good = {"sensor_id": "s", "event_time": T0, "segment_id": "a", "speed_kmh": 30, "vehicle_class": "car"}
    values = [
        json.dumps(good).encode(),
        b"{oops",
        json.dumps({**good, "speed_kmh": "fast"}).encode(),
        json.dumps({**good, "lat": "north", "segment_id": "b"}).encode(),  # not a field we read
        json.dumps({k: v for k, v in good.items() if k != "event_time"}).encode(),
    ]
    topic_with(b.bootstrap, "t.json", values)
    vs = transforms.pruned(spark_schemas.TRAFFIC, spark_schemas.TRAFFIC_REQUIRED, ())
    raw = (
        reader(spark, b.bootstrap, "t.json")
        .option("startingOffsets", "earliest")
        .option("valueFormat", "json")
        .option("valueSchema", vs.json())
        .option("valueRequired", ",".join(spark_schemas.TRAFFIC_REQUIRED))
        .load()
    )
    assert raw.schema["json"].dataType.fieldNames() == [*vs.fieldNames(), "_corrupt_record"]
    assert "value" not in raw.columns, "the raw bytes stay in the Python workers"
    ok, bad = transforms.parse_json(raw, spark_schemas.TRAFFIC, spark_schemas.TRAFFIC_REQUIRED, ())
    assert sorted((r.segment_id, r.speed_kmh) for r in ok.collect()) == [("a", 30.0), ("b", 30.0)]
    assert sorted((r.offset, r.reason, r.raw) for r in bad.collect()) == [
        (1, "not a JSON object", "{oops"),
        (2, "missing or invalid speed_kmh", values[2].decode()),
        (4, "missing or invalid event_time", values[4].decode()),
    ]


def test_json_decoder_refuses_unsupported_schemas_with_a_message() -> None:
    from pyspark.sql.types import MapType, StringType, StructField, StructType

    bad = StructType([StructField("m", MapType(StringType(), StringType()))])
    with pytest.raises(SourceError, match="'m': type map<string,string> is not supported"):
        JsonValues(bad.json())
    with pytest.raises(SourceError, match="valueSchema must be a StructType"):
        JsonValues("not json")


def test_writer_round_trip_and_unknown_topic_error(spark: Any, broker_factory: BrokerFactory) -> None:
    b = broker_factory()
    topic_with(b.bootstrap, "t.out", [])
    df = spark.createDataFrame([("k1", "hello"), ("k2", "world")], "key string, value string")
    w = df.write.format("sftraffic").option("bootstrap", b.bootstrap).option("topic", "t.out")
    w.mode("append").save()
    got = reader(spark, b.bootstrap, "t.out").option("startingOffsets", "earliest").load().collect()
    assert sorted((r.key, r.value) for r in got) == [(b"k1", b"hello"), (b"k2", b"world")]
    with pytest.raises(Exception, match="topic 'nope' does not exist"):
        reader(spark, b.bootstrap, "nope").load().collect()


def test_json_decoder_keeps_right_typed_fields_of_a_bad_record_and_any_field_name() -> None:
    from pyspark.sql.types import ArrayType, DoubleType, LongType, StringType, StructField, StructType

    st = StructType(
        [
            StructField("class", StringType()),
            StructField("a-b", LongType()),
            StructField("x", ArrayType(DoubleType())),
        ]
    )
    rows = JsonValues(st.json(), ("class",)).column(
        [b'{"class": "c", "a-b": 3, "x": [1, 2]}', b'{"a-b": 4}', b'{"class": "d", "a-b": "no"}', None]
    )
    assert rows.to_pylist() == [
        {"class": "c", "a-b": 3, "x": [1.0, 2.0], "_corrupt_record": None},
        {"class": None, "a-b": 4, "x": None, "_corrupt_record": '{"a-b": 4}'},
        {"class": "d", "a-b": None, "x": None, "_corrupt_record": '{"class": "d", "a-b": "no"}'},
        {"class": None, "a-b": None, "x": None, "_corrupt_record": ""},
    ]
