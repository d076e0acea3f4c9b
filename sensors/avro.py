"""The sensor events as Avro, in Confluent's wire format (``--format avro``).

The Avro schemas below mirror :mod:`sensors.schema` field for field, so a decoded event is the
same dict as the JSON one (``visibility_m`` comes back a float, a field the device left out
comes back None). Each topic's schema is
registered as subject ``<topic>-value`` (Confluent's TopicNameStrategy) in a schema registry
speaking Confluent's REST API (``sftraffic registry``, Confluent's, Karapace ...); a value is
``0x00``, the schema id (4 bytes, big-endian), then the Avro binary encoding
(a function compiled per schema, byte for byte what fastavro's schemaless writer makes),
exactly what Confluent's ``AvroSerializer`` writes, so any Confluent deserializer reads it.

Evolution: ``TRAFFIC_V2`` adds ``road_surface`` with a default, a BACKWARD (and FULL)
compatible change: consumers on v1 read v2 events (the field is ignored), consumers on v2 read
v1 events (the default fills it).

:class:`AvroEncoder` registers the schemas on first use (or, with ``auto_register=False``, looks
their ids up) and then encodes without a registry call; :class:`AvroDecoder` fetches a writer's
schema by id once and caches it.
"""

from __future__ import annotations

import io
import json
import struct
from typing import Any

import fastavro
import requests

from sensors.layout import STREAM
from sensors.schema import REQUIRED

NS = "sf.traffic"
CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


def _record(name: str, kind: str, doc: str, fields: list[tuple[str, Any]]) -> dict[str, Any]:
    """A record whose fields required by :data:`sensors.schema.REQUIRED` (and ``type``) are
    plain, the others optional (a union with null, default null): the gateway converts what
    devices send, and they may leave those out, as the JSON schema allows."""
    required = {"type", *REQUIRED[kind]}
    out = []
    for fname, ftype in fields:
        if fname in required:
            out.append({"name": fname, "type": ftype})
        else:
            out.append({"name": fname, "type": ["null", ftype], "default": None})
    return {"type": "record", "name": name, "namespace": NS, "doc": doc, "fields": out}


_COMMON = [("type", "string"), ("sensor_id", "string"), ("seq", "long"), ("event_time", "long")]

TRAFFIC: dict[str, Any] = _record(
    "TrafficEvent",
    "traffic",
    "One vehicle over a pavement sensor (sensors.schema.TrafficEvent); event_time in epoch ms.",
    [
        *_COMMON,
        ("segment_id", "string"),
        ("road", "string"),
        ("lat", "double"),
        ("lon", "double"),
        ("direction", "string"),
        ("lane", "int"),
        ("vehicle_class", "string"),
        ("weight_kg", "double"),
        ("axle_count", "int"),
        ("axle_distances_m", {"type": "array", "items": "double"}),
        ("speed_kmh", "double"),
    ],
)

# v2: a field with a default (compatible both ways)
TRAFFIC_V2: dict[str, Any] = {
    **TRAFFIC,
    "fields": [*TRAFFIC["fields"], {"name": "road_surface", "type": "string", "default": "dry"}],
}

WEATHER: dict[str, Any] = _record(
    "WeatherEvent",
    "weather",
    "A weather station's reading (sensors.schema.WeatherEvent).",
    [
        *_COMMON,
        ("station", "string"),
        ("district", "string"),
        ("lat", "double"),
        ("lon", "double"),
        ("temperature_c", "double"),
        ("precipitation_mm_h", "double"),
        ("wind_kmh", "double"),
        ("visibility_m", "double"),
        ("condition", "string"),
    ],
)

INFRASTRUCTURE: dict[str, Any] = _record(
    "InfrastructureEvent",
    "infrastructure",
    "Signals, bridges, tunnels and car parks: each kind fills its own optional fields.",
    [
        *_COMMON,
        ("kind", "string"),
        ("asset", "string"),
        ("lat", "double"),
        ("lon", "double"),
        ("signal_state", "string"),
        ("strain_microstrain", "double"),
        ("vibration_mm_s", "double"),
        ("co_ppm", "double"),
        ("no2_ppb", "double"),
        ("occupied", "int"),
        ("capacity", "int"),
    ],
)

# topic (without the stream) -> its value schema
SCHEMAS: dict[str, dict[str, Any]] = {
    "traffic": TRAFFIC,
    "weather_conditions": WEATHER,
    "infrastructure": INFRASTRUCTURE,
}
_HEADER = struct.Struct(">bI")


# -- a compiled encoder for the events' flat records --------------------------------------------
# fastavro's schemaless_writer spends ~10 µs on an event, half of it on the optional fields'
# unions; a function generated per schema writes the same bytes in ~4 (tests compare both).
_SMALL = [bytes([n]) for n in range(128)]
_DOUBLE = struct.Struct("<d").pack
_FLOAT = struct.Struct("<f").pack


def _long(n: int) -> bytes:
    """Avro's int/long: zigzag, then a base-128 varint."""
    n = (n << 1) ^ (n >> 63)
    if n < 128:
        return _SMALL[n]
    out = bytearray()
    while n > 127:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _emit(t: Any, v: str, lines: list[str], ind: str, k: list[int]) -> bool:
    """Append the statements writing value expression ``v`` of type ``t``; False: unsupported."""
    k[0] += 1
    n = k[0]
    if t in ("int", "long"):
        lines.append(f"{ind}a(L({v}))")
    elif t == "double":
        lines.append(f"{ind}a(D({v}))")
    elif t == "float":
        lines.append(f"{ind}a(F({v}))")
    elif t == "boolean":
        lines.append(f"{ind}a(b'\\x01' if {v} else b'\\x00')")
    elif t == "string":
        lines += [f"{ind}s{n} = {v}.encode()", f"{ind}a(L(len(s{n}))); a(s{n})"]
    elif isinstance(t, dict) and t.get("type") == "array":
        lines += [
            f"{ind}xs{n} = {v}",
            f"{ind}if xs{n}:",
            f"{ind}    a(L(len(xs{n})))",
            f"{ind}    for x{n} in xs{n}:",
        ]
        if not _emit(t["items"], f"x{n}", lines, ind + "        ", k):
            return False
        lines.append(f"{ind}a(b'\\x00')")
    elif isinstance(t, list) and len(t) == 2 and t[0] == "null":
        lines += [f"{ind}o{n} = {v}", f"{ind}if o{n} is None:", f"{ind}    a(b'\\x00')", f"{ind}else:"]
        lines.append(f"{ind}    a(b'\\x02')")
        return _emit(t[1], f"o{n}", lines, ind + "    ", k)
    else:
        return False
    return True


def compile_encoder(schema: dict[str, Any]) -> Any:
    """``encode(event) -> bytes`` (the Avro body) for a record of primitives, arrays of them and
    ``["null", X]`` unions; None for any other schema (then fastavro writes it). A missing
    required field raises KeyError, a value of the wrong type TypeError/AttributeError/struct.error."""
    if schema.get("type") != "record":
        return None
    lines = ["def encode(e):", "    out = []", "    a = out.append"]
    k = [0]
    for f in schema["fields"]:
        name, t = f["name"], f["type"]
        v = f"e.get({name!r}, {f['default']!r})" if "default" in f else f"e[{name!r}]"
        if not _emit(t, v, lines, "    ", k):
            return None
    lines.append("    return b''.join(out)")
    ns: dict[str, Any] = {"L": _long, "D": _DOUBLE, "F": _FLOAT}
    exec(compile("\n".join(lines), f"<avro encoder {schema.get('name')}>", "exec"), ns)  # noqa: S102
    return ns["encode"]


class RegistryClient:
    """The few calls of Confluent's REST API the application makes (requests, one session)."""

    def __init__(self, url: str, timeout: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.session = requests.Session()
        self.session.headers.update({"Content-Type": CONTENT_TYPE, "Accept": CONTENT_TYPE})

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        r = self.session.request(
            method, self.url + path, data=None if body is None else json.dumps(body), timeout=self.timeout
        )
        if r.status_code >= 300:
            try:
                err = r.json()
            except ValueError:
                err = {"error_code": r.status_code, "message": r.text}
            raise RegistryError(int(err.get("error_code", r.status_code)), str(err.get("message")))
        return r.json()

    def register(self, subject: str, schema: dict[str, Any]) -> int:
        return int(self._call("POST", f"/subjects/{subject}/versions", {"schema": json.dumps(schema)})["id"])

    def lookup(self, subject: str, schema: dict[str, Any]) -> int:
        return int(self._call("POST", f"/subjects/{subject}", {"schema": json.dumps(schema)})["id"])

    def schema(self, schema_id: int) -> dict[str, Any]:
        return dict(json.loads(self._call("GET", f"/schemas/ids/{schema_id}")["schema"]))


class RegistryError(Exception):
    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(f"{error_code}: {message}")
        self.error_code = error_code


def subject(topic: str) -> str:
    return f"{topic}-value"


def schema_for(topic: str) -> dict[str, Any]:
    """The value schema of a stream topic (``traffic_monitoring.traffic`` → TRAFFIC)."""
    name = topic.split(".", 1)[1] if "." in topic else topic
    try:
        return SCHEMAS[name]
    except KeyError:
        raise ValueError(f"no Avro schema for topic {topic!r} (known: {', '.join(SCHEMAS)})") from None


class AvroEncoder:
    """Event dict → Confluent-framed Avro bytes, one registered schema per topic."""

    def __init__(
        self,
        registry: str | RegistryClient,
        auto_register: bool = True,
        schemas: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        self.registry = registry if isinstance(registry, RegistryClient) else RegistryClient(registry)
        self.auto_register = auto_register
        self.overrides = schemas or {}
        self._writers: dict[str, tuple[bytes, Any, Any]] = {}

    def _writer(self, topic: str) -> tuple[bytes, Any, Any]:
        schema = self.overrides.get(topic) or schema_for(topic)
        sid = (self.registry.register if self.auto_register else self.registry.lookup)(subject(topic), schema)
        w = (_HEADER.pack(0, sid), fastavro.parse_schema(schema), compile_encoder(schema))
        self._writers[topic] = w
        return w

    def schema_id(self, topic: str) -> int:
        header, _, _ = self._writers.get(topic) or self._writer(topic)
        return int(_HEADER.unpack(header)[1])

    def encode(self, topic: str, event: dict[str, Any]) -> bytes:
        header, parsed, compiled = self._writers.get(topic) or self._writer(topic)
        if compiled is not None:
            return header + compiled(event)
        buf = io.BytesIO()
        buf.write(header)
        fastavro.schemaless_writer(buf, parsed, event)
        return buf.getvalue()


class AvroDecoder:
    """Confluent-framed Avro bytes → dict, with the writer's schema from the registry (cached)
    and an optional reader schema (its defaults fill fields older writers lacked)."""

    def __init__(self, registry: str | RegistryClient, reader: dict[str, Any] | None = None) -> None:
        self.registry = registry if isinstance(registry, RegistryClient) else RegistryClient(registry)
        self.reader = fastavro.parse_schema(reader) if reader is not None else None
        self._writers: dict[int, Any] = {}

    def decode(self, data: bytes) -> dict[str, Any]:
        if len(data) < 5 or data[0] != 0:
            raise ValueError("not Confluent's wire format (magic byte 0, then a 4-byte schema id)")
        sid = int.from_bytes(data[1:5], "big")
        writer = self._writers.get(sid)
        if writer is None:
            writer = self._writers[sid] = fastavro.parse_schema(self.registry.schema(sid))
        out = fastavro.schemaless_reader(io.BytesIO(data[5:]), writer, self.reader)
        return dict(out)  # type: ignore[arg-type]


def register_all(registry: str | RegistryClient, stream: str = STREAM) -> dict[str, int]:
    """Register every topic's schema (what ``sftraffic up --format avro`` does first)."""
    enc = AvroEncoder(registry)
    return {f"{stream}.{t}": enc.schema_id(f"{stream}.{t}") for t in SCHEMAS}
