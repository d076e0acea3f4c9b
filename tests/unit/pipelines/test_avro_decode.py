"""pipelines/avro_decode.py: the compiled decoder reads what fastavro reads."""

from __future__ import annotations

import io
import json
import time
from typing import Any

import fastavro
import pytest

from pipelines.avro_decode import compile_decoder
from sensors import avro
from sensors.fleet import SensorFleet
from sensors.model import ModelConfig


def events() -> list[tuple[str, dict[str, Any]]]:
    f = SensorFleet(200, ModelConfig(seed=9))
    t = int(time.time() * 1000) // 60_000 * 60_000
    return [(topic.split(".", 1)[1], ev) for i in range(61) for topic, _, ev, _ in f.tick(t + i * 1000)]


def body(schema: dict[str, Any], ev: dict[str, Any]) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), ev)
    return b"\x00\x00\x00\x00\x01" + buf.getvalue()


def test_same_values_as_fastavro() -> None:
    for name, ev in events():
        schema = avro.SCHEMAS[name]
        data = body(schema, ev)
        want = fastavro.schemaless_reader(io.BytesIO(data[5:]), fastavro.parse_schema(schema), None)
        assert compile_decoder(schema)(data, 5) == want  # type: ignore[misc]


def test_projection_skips_fields_and_fills_defaults() -> None:
    ev = next(e for n, e in events() if n == "traffic")
    dec = compile_decoder(avro.TRAFFIC, ["speed_kmh", "road_surface", "sensor_id"], {"road_surface": "dry"})
    assert dec(body(avro.TRAFFIC, ev), 5) == (ev["speed_kmh"], "dry", ev["sensor_id"])  # type: ignore[misc]
    v2 = compile_decoder(avro.TRAFFIC_V2, ["road_surface"])
    assert v2(body(avro.TRAFFIC_V2, {**ev, "road_surface": "wet"}), 5) == ("wet",)  # type: ignore[misc]


@pytest.mark.parametrize("cut", [1, 7, 20])
def test_damaged_bodies_raise(cut: int) -> None:
    ev = next(e for n, e in events() if n == "traffic")
    data = body(avro.TRAFFIC, ev)
    dec = compile_decoder(avro.TRAFFIC)
    with pytest.raises((IndexError, ValueError, UnicodeDecodeError, Exception)):
        dec(data[:-cut], 5)  # type: ignore[misc]
    with pytest.raises(ValueError):
        dec(data + b"\x00", 5)  # type: ignore[misc]


def test_other_schemas_are_left_to_fastavro() -> None:
    assert compile_decoder({"type": "map", "values": "int"}) is None
    assert (
        compile_decoder(
            {
                "type": "record",
                "name": "E",
                "fields": [{"name": "e", "type": {"type": "enum", "name": "K", "symbols": ["A"]}}],
            }
        )
        is None
    )


# -- the columnar decoder: the same column as the record-by-record path -----------------------
REGISTRY = "http://127.0.0.1:9"  # refused at once: the writer schemas are cached first


def _values(schema: dict[str, Any], evs: list[dict[str, Any]], sid: int) -> list[bytes]:
    enc = avro.compile_encoder(schema, b"\x00" + sid.to_bytes(4, "big"))
    return [enc(e) for e in evs]


def _decoder(fields: list[tuple[str, Any]], reader: dict[str, Any], required: tuple[str, ...] = ()) -> Any:
    from pyspark.sql.types import StructField, StructType

    from pipelines import source

    source.remember_writer_schema(REGISTRY, 11, avro.TRAFFIC)
    source.remember_writer_schema(REGISTRY, 12, avro.TRAFFIC_V2)
    source.remember_writer_schema(REGISTRY, 13, avro.WEATHER)
    vs = StructType([StructField(n, t) for n, t in fields]).json()
    return source.AvroValues(vs, REGISTRY, json.dumps(reader), required)


def _per_record(dec: Any, values: list[Any]) -> Any:
    return dec._per_record(values)  # the record-by-record path only


def _traffic(n: int = 400) -> list[dict[str, Any]]:
    base = [e for name, e in events() if name == "traffic"]
    evs = [dict(base[i % len(base)]) for i in range(n)]
    # optional fields left out now and then, as the gateway's devices may
    for i, e in enumerate(evs):
        if i % 7 == 0:
            e = evs[i] = {k: v for k, v in e.items() if k not in ("weight_kg", "road", "axle_distances_m")}
        if i % 11 == 0:
            e["axle_distances_m"] = [1.5] * (i % 70)  # up to 69 items: a count of two bytes
    return evs


def test_columns_equal_the_record_by_record_column() -> None:
    from pyspark.sql.types import DoubleType, IntegerType, LongType, StringType

    fields = [
        ("sensor_id", StringType()),
        ("event_time", LongType()),
        ("seq", LongType()),
        ("road", StringType()),
        ("lane", IntegerType()),
        ("weight_kg", DoubleType()),
        ("speed_kmh", DoubleType()),
        ("road_surface", StringType()),  # v1 writers lack it: the reader's default
    ]
    evs = _traffic()
    for schema, sid in ((avro.TRAFFIC, 11), (avro.TRAFFIC_V2, 12)):
        dec = _decoder(fields, avro.TRAFFIC_V2, ("sensor_id", "speed_kmh"))
        values = _values(schema, [{**e, "road_surface": "wet"} for e in evs], sid)
        fast = dec.column(values)
        assert dec._batch(values) is not None  # the columnar path answered
        assert fast.equals(_per_record(dec, values))
        assert fast.field("road_surface").to_pylist() == ["dry" if sid == 11 else "wet"] * len(evs)
    # v1 and v2 interleaved, a JSON value from before a switch, a damaged one: each id's values
    # at once, the others record by record, the rows in their order
    dec = _decoder(fields, avro.TRAFFIC_V2, ("sensor_id", "speed_kmh"))
    v1, v2 = _values(avro.TRAFFIC, evs, 11), _values(avro.TRAFFIC_V2, evs, 12)
    mixed: list[Any] = [v for pair in zip(v1, v2, strict=True) for v in pair]
    mixed[7], mixed[8] = json.dumps(evs[3]).encode(), mixed[8][:-2]
    assert dec._batch(mixed) is None and dec._mixed(mixed) is not None
    assert dec.column(mixed).equals(_per_record(dec, mixed))


def _registry_answers(status: int) -> Any:
    """A stand-in for requests.get: the registry answers ``status`` to everything."""
    import requests

    def get(url: str, **kw: Any) -> requests.Response:
        r = requests.Response()
        r.status_code, r.url, r.reason = status, url, "Not Found" if status == 404 else "Unauthorized"
        r._content = json.dumps({"error_code": status * 100 + 3, "message": "no"}).encode()
        return r

    return get


def test_batches_it_does_not_cover_go_record_by_record(monkeypatch: pytest.MonkeyPatch) -> None:
    import requests
    from pyspark.sql.types import DoubleType, StringType

    monkeypatch.setattr(requests, "get", _registry_answers(404))  # an id nobody registered
    fields = [("sensor_id", StringType()), ("weight_kg", DoubleType()), ("speed_kmh", DoubleType())]
    evs = _traffic(200)
    good = _values(avro.TRAFFIC, evs, 11)
    cases = {
        "damaged body": [*good[:50], good[50][:-3], *good[51:]],
        "bytes left": [*good[:50], good[50] + b"\x00", *good[51:]],
        "bad UTF-8": [*good[:50], good[50].replace(b"ts-", b"\xff\xfe-", 1), *good[51:]],
        "a huge length": [*good[:50], good[50][:5] + b"\x0e" + b"\xff" * 8 + good[50][14:], *good[51:]],
        "two schema ids": [*good[:100], *_values(avro.TRAFFIC_V2, evs[100:], 12)],
        "JSON among Avro": [*good[:100], json.dumps(evs[100]).encode(), *good[101:]],
        "a null value": [*good[:100], None, *good[101:]],
        "an unknown id": [b"\x00\x00\x00\x03\xe7" + v[5:] for v in good],
    }
    for name, values in cases.items():
        dec = _decoder(fields, avro.TRAFFIC, ("sensor_id", "weight_kg"))
        got = dec.column(values)
        assert got.equals(_per_record(dec, values)), name
        assert len(got) == len(values)
    # weight_kg is left out by every seventh event: required, those rows are corrupt
    dec = _decoder(fields, avro.TRAFFIC, ("sensor_id", "weight_kg"))
    assert dec._batch(good) is None
    assert dec.column(good).field("_corrupt_record").null_count == len(good) - len(good[::7])


def test_a_registry_down_or_refusing_fails_the_batch_instead_of_its_records(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An unknown id makes corrupt records; a registry that cannot be reached or refuses the
    credentials is no fault of the records: the query fails (Spark retries the task) rather
    than sending every record to the dead letters."""
    import requests
    from pyspark.sql.types import StringType

    from pipelines.source import SourceError

    values = [b"\x00\x00\x00\x03\xe8" + v[5:] for v in _values(avro.TRAFFIC, _traffic(100), 11)]
    for path in (_per_record, lambda dec, vs: dec.column(vs)):
        dec = _decoder([("sensor_id", StringType())], avro.TRAFFIC)  # REGISTRY: connection refused
        with pytest.raises(SourceError, match="ConnectionError reading schema 1000"):
            path(dec, values)
    monkeypatch.setattr(requests, "get", _registry_answers(401))
    with pytest.raises(SourceError, match=r"401 Unauthorized .*schemaRegistryPassword"):
        _decoder([("sensor_id", StringType())], avro.TRAFFIC).column(values)


def test_weather_columns() -> None:
    from pipelines import spark_schemas, transforms

    evs = [e for name, e in events() if name == "weather_conditions"] * 20
    vs = transforms.pruned(spark_schemas.WEATHER, spark_schemas.WEATHER_REQUIRED, ())
    fields = [(f.name, f.dataType) for f in vs.fields]
    dec = _decoder(fields, avro.WEATHER, spark_schemas.WEATHER_REQUIRED)
    values = _values(avro.WEATHER, evs, 13)
    assert dec._batch(values) is not None
    assert dec.column(values).equals(_per_record(dec, values))


def test_damaged_batches_read_as_the_record_by_record_path_reads_them() -> None:
    """Bytes flipped, cut or inserted here and there (seeded): whatever the columnar decoder
    makes of a batch equals the record-by-record column (it gives damaged batches up)."""
    import random

    from pyspark.sql.types import DoubleType, IntegerType, LongType, StringType

    fields = [
        ("sensor_id", StringType()),
        ("weight_kg", DoubleType()),
        ("speed_kmh", DoubleType()),
        ("lane", IntegerType()),
        ("event_time", LongType()),
    ]
    good = _values(avro.TRAFFIC, _traffic(100), 11)
    rng = random.Random(3)
    for _ in range(150):
        values = list(good)
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(values))
            v = bytearray(values[i])
            j, op = rng.randrange(5, len(v)), rng.random()
            if op < 0.4:
                v[j] = rng.randrange(256)
            elif op < 0.7:
                del v[j:]
            else:
                v[j:j] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 4)))
            values[i] = bytes(v)
        dec = _decoder(fields, avro.TRAFFIC, ("sensor_id",))
        assert dec.column(values).equals(_per_record(dec, values))
