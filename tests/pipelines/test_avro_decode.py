"""pipelines/avro_decode.py: the compiled decoder reads what fastavro reads (issue 20)."""

from __future__ import annotations

import io
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
