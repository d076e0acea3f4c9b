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

A registry that wants HTTP Basic credentials gets them from the URL
(``https://user:password@host:8081``, Confluent's ``basic.auth.credentials.source=URL``); they
are taken out of it (:func:`split_url`) so that no message shows them. An https registry's
certificate is checked against the system's CAs, or those of ``$REQUESTS_CA_BUNDLE``.
"""

from __future__ import annotations

import functools
import io
import json
import struct
import urllib.parse
from collections.abc import Callable, Mapping
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
# unions. compile_encoder generates, per schema, one function returning ``b"".join((...))`` of
# one expression per field (no Python call per field where it can be helped), byte for byte
# fastavro's (tests compare both): ~2 µs a traffic event (JSON's msgspec ~1.1). What makes it
# cheap: a string's encoding (length + UTF-8, after the union's branch for an optional field)
# is looked up in a per-field cache (the fleet's strings repeat: ids, roads, classes); a long v
# in [0, 64) is one indexed byte, a larger one its zigzag's low group ((v & 63) << 1, more to
# come) and the varint of v >> 6 from a cache (event times and sequence numbers share their high
# bits for long runs); adjacent doubles are packed by one struct call, an optional double with
# its branch byte by one, an array of doubles with its count and end by one. The caches are
# bounded (cleared when full): memory stays flat whatever the values.
_SMALL = [bytes([n]) for n in range(128)]
_CONT2 = [bytes([n << 1 | 0x80]) for n in range(64)]  # the low group of 2v, more to come
_DOUBLE = struct.Struct("<d").pack
_FLOAT = struct.Struct("<f").pack
_OPT_DOUBLE = struct.Struct("<Bd").pack  # a [null, double] union's branch (2: zigzag 1) and value
_OPT_FLOAT = struct.Struct("<Bf").pack
_CACHE_MAX = 1 << 14


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


def _varint(z: int) -> bytes:
    """The varint of a zigzagged ``z`` (>= 0)."""
    out = bytearray()
    while z > 127:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


class _Cache(dict[Any, bytes]):
    """``cache[key]``: ``make(key)``, computed on a miss (``__missing__``: a hit costs one
    subscript) and kept; cleared when full, so memory stays bounded whatever the values."""

    __slots__ = ("make",)

    def __init__(self, make: Any) -> None:
        super().__init__()
        self.make = make

    def __missing__(self, key: Any) -> bytes:
        out: bytes = self.make(key)
        if len(self) >= _CACHE_MAX:
            self.clear()
        self[key] = out
        return out


def _string(s: str) -> bytes:
    b = s.encode()
    return _long(len(b)) + b


def _doubles_packers(branch: bytes) -> list[Any]:
    """``P[n](*xs)``: ``branch`` (a union's, or none), then an array of ``n`` doubles (its count,
    the values, the end 0; an empty array is the end only), for n < 64 (one count byte)."""
    out: list[Any] = [lambda: branch + b"\x00"]
    for n in range(1, 64):
        pack = struct.Struct("<" + "B" * len(branch) + f"B{n}dx").pack
        out.append(functools.partial(pack, *branch, n << 1))
    return out


def _doubles(branch: bytes) -> Any:
    """``branch`` then an array of doubles of any length (what P does not cover)."""

    def write(*xs: float) -> bytes:
        return branch + _long(len(xs)) + struct.pack(f"<{len(xs)}d", *xs) + b"\x00"

    return write


class _Gen:
    """The source of one encoder: expressions per field, helpers in ``ns``."""

    def __init__(self) -> None:
        self.ns: dict[str, Any] = {
            "L": _long, "D": _DOUBLE, "F": _FLOAT, "OD": _OPT_DOUBLE, "OF": _OPT_FLOAT,
            "SM": _SMALL, "C2": _CONT2,
            "OSM": [b"\x02" + x for x in _SMALL], "OC2": [b"\x02" + x for x in _CONT2],
            "AD": _doubles_packers(b""), "ADX": _doubles(b""),
            "OAD": _doubles_packers(b"\x02"), "OADX": _doubles(b"\x02"),
        }  # fmt: skip
        self.ns["H"] = _Cache(_varint)  # v >> 6 (the zigzag's high part) -> its varint
        self.helpers: list[str] = []
        self.k = 0

    def name(self) -> int:
        self.k += 1
        return self.k

    def expr(self, t: Any, v: str, branch: bytes = b"") -> str | None:
        """An expression writing ``branch`` (a union's, or nothing) then value expression ``v``
        of type ``t``; None: unsupported."""
        n = self.name()
        o = "O" if branch else ""  # the tables and packers that start with the branch
        if t in ("int", "long"):
            # v >= 64: the zigzag (2v) has low group (v & 63) << 1 and high part v >> 6
            return (
                f"({o}C2[v{n} & 63] + H[v{n} >> 6] if (v{n} := {v}) >= 64 "
                f"else {o}SM[v{n} << 1] if v{n} >= 0 else {branch!r} + L(v{n}))"
            )
        if t == "double":
            return f"OD(2, {v})" if branch else f"D({v})"
        if t == "float":
            return f"OF(2, {v})" if branch else f"F({v})"
        if t == "string":
            self.ns[f"S{n}"] = _Cache(lambda x: branch + _string(x))
            return f"S{n}[{v}]"
        if isinstance(t, dict) and t.get("type") == "array":
            if t["items"] == "double":
                return f"({o}AD[l{n}] if (l{n} := len(xs{n} := {v})) < 64 else {o}ADX)(*xs{n})"
            item = self.expr(t["items"], "x")
            if item is None:
                return None
            self.helpers += [
                f"def A{n}(xs):",
                "    if not xs:",
                "        return b'\\x00'",
                f"    return L(len(xs)) + J([{item} for x in xs]) + b'\\x00'",
            ]
            return f"{branch!r} + A{n}({v})" if branch else f"A{n}({v})"
        if t == "boolean":
            true, false = branch + b"\x01", branch + b"\x00"
            return f"({true!r} if {v} else {false!r})"
        if isinstance(t, list) and len(t) == 2 and t[0] == "null" and not branch:
            inner = self.expr(t[1], f"o{n}", b"\x02")
            return None if inner is None else f"(b'\\x00' if (o{n} := {v}) is None else {inner})"
        return None


def compile_encoder(schema: dict[str, Any], prefix: bytes = b"") -> Any:
    """``encode(event) -> bytes``: ``prefix`` then the Avro body, for a record of primitives,
    arrays of them and ``["null", X]`` unions; None for any other schema (then fastavro writes
    it). A missing required field raises KeyError, a value of the wrong type
    TypeError/AttributeError/struct.error."""
    if schema.get("type") != "record":
        return None
    g = _Gen()
    parts = [repr(prefix)] if prefix else []
    doubles: list[str] = []  # adjacent plain doubles, packed by one call

    def flush() -> None:
        if len(doubles) == 1:
            parts.append(f"D({doubles.pop()})")
        if doubles:
            g.ns[f"DS{len(parts)}"] = struct.Struct("<" + "d" * len(doubles)).pack
            parts.append(f"DS{len(parts)}({', '.join(doubles)})")
            doubles.clear()

    for f in schema["fields"]:
        name, t = f["name"], f["type"]
        default = f.get("default")
        v = (
            f"e[{name!r}]"
            if "default" not in f
            else f"e.get({name!r}, {default!r})"
            if default is not None
            else f"e.get({name!r})"
        )
        if t == "double":
            doubles.append(v)
            continue
        flush()
        e = g.expr(t, v)
        if e is None:
            return None
        parts.append(e)
    flush()
    g.ns["J"] = b"".join
    body = "".join(f"\n        {p}," for p in parts)
    lines = [*g.helpers, "def encode(e):", f"    return J(({body}\n    ))"]
    exec(compile("\n".join(lines), f"<avro encoder {schema.get('name')}>", "exec"), g.ns)  # noqa: S102
    return g.ns["encode"]


def split_url(url: str) -> tuple[str, tuple[str, str] | None]:
    """``https://user:password@host:port/x`` → (``https://host:port/x``, (user, password));
    a URL without credentials comes back as it is, with None."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None:
        return url, None
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port is not None:
        netloc += f":{parts.port}"
    user = urllib.parse.unquote(parts.username)
    password = urllib.parse.unquote(parts.password or "")
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc)), (user, password)


class RegistryClient:
    """The few calls of Confluent's REST API the application makes (requests, one session);
    ``url`` may carry Basic credentials (``https://user:password@host:8081``)."""

    def __init__(self, url: str, timeout: float = 10.0) -> None:
        url, auth = split_url(url)
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.session = requests.Session()
        self.session.auth = auth
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


class _Encoders(dict[str, Any]):
    """topic -> ``encode(event)`` (Confluent-framed Avro bytes), made on first use."""

    def __init__(self, enc: AvroEncoder) -> None:
        super().__init__()
        self.enc = enc

    def __missing__(self, topic: str) -> Any:
        _, _, compiled = self.enc._writers.get(topic) or self.enc._writer(topic)
        fn = self[topic] = compiled or functools.partial(self.enc.encode, topic)
        return fn


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
        # topic -> encode(event): the compiled function itself when there is one (no call between)
        self.by_topic: Mapping[str, Callable[[dict[str, Any]], bytes]] = _Encoders(self)

    def _writer(self, topic: str) -> tuple[bytes, Any, Any]:
        schema = self.overrides.get(topic) or schema_for(topic)
        sid = (self.registry.register if self.auto_register else self.registry.lookup)(subject(topic), schema)
        header = _HEADER.pack(0, sid)
        w = (header, fastavro.parse_schema(schema), compile_encoder(schema, header))
        self._writers[topic] = w
        return w

    def schema_id(self, topic: str) -> int:
        header, _, _ = self._writers.get(topic) or self._writer(topic)
        return int(_HEADER.unpack(header)[1])

    def encode(self, topic: str, event: dict[str, Any]) -> bytes:
        header, parsed, compiled = self._writers.get(topic) or self._writer(topic)
        if compiled is not None:
            return bytes(compiled(event))  # the header included
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
