"""sensors/avro.py: the compiled encoder writes fastavro's bytes; the schemas hold the fleet's
events; v2 is compatible both ways."""

from __future__ import annotations

import io
import json
import time
from typing import Any

import fastavro
import pytest

from registry.compatibility import Level, check
from registry.schemas import parse_schema
from sensors import avro
from sensors.fleet import SensorFleet
from sensors.model import ModelConfig


def fastavro_bytes(schema: dict[str, Any], event: dict[str, Any]) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), event)
    return buf.getvalue()


def fleet_events() -> list[tuple[str, dict[str, Any]]]:
    f = SensorFleet(200, ModelConfig(seed=5))
    t = int(time.time() * 1000) // 60_000 * 60_000
    return [(topic.split(".", 1)[1], ev) for i in range(61) for topic, _, ev, _ in f.tick(t + i * 1000)]


def test_compiled_encoder_writes_fastavros_bytes_and_round_trips() -> None:
    events = fleet_events()
    assert {n for n, _ in events} == set(avro.SCHEMAS)
    for name, ev in events:
        schema = avro.SCHEMAS[name]
        data = avro.compile_encoder(schema)(ev)
        assert data == fastavro_bytes(schema, ev)
        back = fastavro.schemaless_reader(io.BytesIO(data), fastavro.parse_schema(schema), None)
        assert {k: v for k, v in back.items() if v is not None} == {  # type: ignore[union-attr]
            k: float(v) if k == "visibility_m" else v for k, v in ev.items()
        }


@pytest.mark.parametrize(
    "value",
    [0, -1, 1, 63, 64, -65, 2**31 - 1, -(2**31), 2**62, -(2**63), 1_795_502_078_000],
)
def test_longs(value: int) -> None:
    schema = {"type": "record", "name": "L", "fields": [{"name": "n", "type": "long"}]}
    assert avro.compile_encoder(schema)({"n": value}) == fastavro_bytes(schema, {"n": value})


def test_other_values() -> None:
    schema = {
        "type": "record",
        "name": "O",
        "fields": [
            {"name": "s", "type": "string"},
            {"name": "b", "type": "boolean"},
            {"name": "f", "type": "float"},
            {"name": "xs", "type": {"type": "array", "items": "long"}},
            {"name": "o", "type": ["null", "string"], "default": None},
            {"name": "d", "type": "string", "default": "dry"},
        ],
    }
    enc = avro.compile_encoder(schema)
    for ev in (
        {"s": "Café ☕", "b": True, "f": 1.5, "xs": [], "o": None},
        {"s": "", "b": False, "f": -0.25, "xs": [1, -2, 300], "o": "x", "d": "wet"},
    ):
        want = {"o": None, "d": "dry", **ev}
        assert enc(ev) == fastavro_bytes(schema, want)


def test_unsupported_schemas_fall_back_and_bad_events_raise() -> None:
    assert (
        avro.compile_encoder(
            {
                "type": "record",
                "name": "M",
                "fields": [{"name": "m", "type": {"type": "map", "values": "int"}}],
            }
        )
        is None
    )
    enc = avro.compile_encoder(avro.TRAFFIC)
    ev = dict(fleet_events()[0][1]) if fleet_events()[0][0] == "traffic" else None
    if ev is not None:
        with pytest.raises(KeyError):
            enc({k: v for k, v in ev.items() if k != "speed_kmh"})
        with pytest.raises((TypeError, AttributeError)):
            enc({**ev, "sensor_id": 5})


def test_v2_is_compatible_both_ways_and_v1_registers_cleanly() -> None:
    v1, v2 = (
        parse_schema(json.dumps(avro.TRAFFIC)),
        parse_schema(json.dumps(avro.TRAFFIC_V2)),
    )
    assert check(v2.avro, [(1, v1.avro)], Level.FULL_TRANSITIVE) == []
    for schema in avro.SCHEMAS.values():
        parse_schema(json.dumps(schema))  # valid, defaults included


class _Registry(avro.RegistryClient):
    """Ids without a registry: one per subject, in order of registration."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def register(self, subject: str, schema: dict[str, Any]) -> int:
        return self.ids.setdefault(subject, len(self.ids) + 1)


def test_by_topic_writes_confluent_frames_as_encode_does() -> None:
    enc = avro.AvroEncoder(_Registry())
    for name, ev in fleet_events()[:300]:
        topic = f"traffic_monitoring.{name}"
        data = enc.by_topic[topic](ev)
        assert data == enc.encode(topic, ev)
        assert data[:5] == b"\x00" + enc.schema_id(topic).to_bytes(4, "big")
        assert data[5:] == fastavro_bytes(avro.SCHEMAS[name], ev)


def test_strings_and_longs_from_the_caches_stay_right_when_they_are_cleared() -> None:
    schema = {
        "type": "record",
        "name": "C",
        "fields": [{"name": "s", "type": "string"}, {"name": "n", "type": "long"}],
    }
    enc = avro.compile_encoder(schema)
    for i in range(3 * avro._CACHE_MAX):  # every cache filled and cleared twice
        ev = {"s": f"sensor-{i}", "n": 1_795_502_078_000 + i * 97}
        assert enc(ev) == fastavro_bytes(schema, ev)
