"""How ``sftraffic consume`` prints a record, and the escapes both console commands read.

A format string (``consume -f``) takes kcat's letters:

====  ===========================================================================
%t    topic
%p    partition
%o    offset
%k    key (empty for a null key; ``NULL`` with ``-Z``)
%K    key length in bytes, -1 for a null key
%v    value (``%s`` is the same: kcat's letter; empty for a null value, ``NULL`` with ``-Z``)
%S    value length in bytes, -1 for a null value
%R    value length as a 4-byte big-endian signed integer (binary), -1 for a null value
%T    timestamp, milliseconds since the epoch (-1 when the record has none)
%h    headers as ``name=value`` separated by commas (``NULL`` for a null header value)
%%    a percent sign
====  ===========================================================================

and the escapes ``\\n \\t \\r \\\\ \\xHH`` (as kcat and rpk). A key or value decoded from
Avro (see :class:`Record`) prints as its JSON.

``--format json`` prints one JSON object per line::

    {"topic": "t", "partition": 0, "offset": 7, "timestamp": 1764620000000,
     "timestamp_type": "CreateTime", "key": "k", "value": "v",
     "headers": [{"key": "source", "value": "cli"}]}

``timestamp_type`` is Kafka's name (``CreateTime``, ``LogAppendTime``, or null when the
record has no timestamp). A key, value or header value that is valid UTF-8 is a string; one
that is not is base64, and the object then says so: ``"key_encoding": "base64"``,
``"value_encoding": "base64"``, or ``"encoding": "base64"`` inside the header. Null is ``null``
(and an empty value ``""``, so a tombstone and an empty record stay apart). A value that is
JSON text stays a string (``json.loads(record["value"])`` gives it back). A key or value
decoded from Avro is the decoded JSON value itself, with ``"key_schema_id"`` /
``"value_schema_id"`` naming the registry's schema id it was written with.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from framework.errors import StoreError

TIMESTAMP_TYPES = {0: None, 1: "CreateTime", 2: "LogAppendTime"}
LETTERS = "tpokKvsSRTh%"

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "0": "\0"}


@dataclass(frozen=True)
class Record:
    """One consumed record, as the formatters see it.

    ``key_schema_id`` / ``value_schema_id`` are set when that part was decoded from Avro (the
    Confluent wire format); ``key_data`` / ``value_data`` then hold the decoded value.
    """

    topic: str
    partition: int
    offset: int
    timestamp: int | None
    timestamp_type: str | None
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    key_schema_id: int | None = None
    key_data: Any = None
    value_schema_id: int | None = None
    value_data: Any = None


def unescape(text: str, what: str) -> bytes:
    """``text`` as UTF-8 with ``\\n \\t \\r \\\\ \\0 \\xHH`` replaced (``\\xHH`` is one byte); any
    other backslash is kept as it is."""
    out = bytearray()
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "\\" or i + 1 == len(text):
            out += ch.encode("utf-8", "surrogateescape")
            i += 1
            continue
        nxt = text[i + 1]
        if nxt in _ESCAPES:
            out += _ESCAPES[nxt].encode()
            i += 2
        elif nxt == "x":
            digits = text[i + 2 : i + 4]
            if len(digits) != 2 or any(c not in "0123456789abcdefABCDEF" for c in digits):
                raise StoreError(f"{what} {text!r}: \\x needs two hex digits")
            out.append(int(digits, 16))
            i += 4
        else:
            out += b"\\"
            i += 1
    return bytes(out)


# a compiled format: literal bytes, or the letter of a field
Piece = bytes | str


def compile_format(fmt: str) -> list[Piece]:
    """The pieces of a kcat-style format string; an unknown ``%`` letter is an error."""
    pieces: list[Piece] = []
    literal: list[str] = []
    i = 0
    while i < len(fmt):
        ch = fmt[i]
        if ch != "%":
            literal.append(ch)
            i += 1
            continue
        if i + 1 == len(fmt):
            raise StoreError(f"--format {fmt!r}: a lone % at the end (%% prints a percent sign)")
        letter = fmt[i + 1]
        if letter not in LETTERS:
            raise StoreError(f"--format {fmt!r}: unknown %{letter} (known: %{' %'.join(LETTERS[:-1])} %%)")
        if letter == "%":
            literal.append("%")
        else:
            if literal:
                pieces.append(unescape("".join(literal), "--format"))
                literal = []
            pieces.append(letter)
        i += 2
    if literal:
        pieces.append(unescape("".join(literal), "--format"))
    return pieces


def _json_default(obj: object) -> object:
    """JSON for what an Avro decoder returns beyond JSON's types (bytes as Avro's JSON encoding
    writes them: one code point per byte)."""
    if isinstance(obj, bytes):
        return obj.decode("latin-1")
    if isinstance(obj, datetime.datetime | datetime.date | datetime.time):
        return obj.isoformat()
    if isinstance(obj, decimal.Decimal | uuid.UUID):
        return str(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


def decoded_json(data: Any) -> str:
    """A decoded Avro value as compact JSON text."""
    return json.dumps(data, default=_json_default, separators=(",", ":"), ensure_ascii=False)


def _part(raw: bytes | None, schema_id: int | None, data: Any, null: bytes) -> bytes:
    if schema_id is not None:
        return decoded_json(data).encode()
    if raw is None:
        return null
    return raw


def _headers_text(headers: Sequence[tuple[str, bytes | None]]) -> bytes:
    return b",".join(name.encode() + b"=" + (b"NULL" if value is None else value) for name, value in headers)


Formatter = Callable[[Record], bytes]


def text_formatter(fmt: str, null: bytes = b"") -> Formatter:
    """A function printing a record by ``fmt`` (``null``: what a null key or value prints as)."""
    pieces = compile_format(fmt)

    def field(letter: str, r: Record) -> bytes:
        if letter in {"v", "s"}:
            return _part(r.value, r.value_schema_id, r.value_data, null)
        if letter == "k":
            return _part(r.key, r.key_schema_id, r.key_data, null)
        if letter == "t":
            return r.topic.encode()
        if letter == "p":
            return str(r.partition).encode()
        if letter == "o":
            return str(r.offset).encode()
        if letter == "K":
            return str(-1 if r.key is None else len(r.key)).encode()
        if letter == "S":
            return str(-1 if r.value is None else len(r.value)).encode()
        if letter == "R":
            return (-1 if r.value is None else len(r.value)).to_bytes(4, "big", signed=True)
        if letter == "T":
            return str(-1 if r.timestamp is None else r.timestamp).encode()
        return _headers_text(r.headers)  # "h"

    def render(r: Record) -> bytes:
        return b"".join(p if isinstance(p, bytes) else field(p, r) for p in pieces)

    return render


def _bytes_field(out: dict[str, Any], name: str, raw: bytes | None, encoding_key: str) -> None:
    if raw is None:
        out[name] = None
        return
    try:
        out[name] = raw.decode("utf-8")
    except UnicodeDecodeError:
        out[name] = base64.b64encode(raw).decode("ascii")
        out[encoding_key] = "base64"


def json_object(r: Record) -> dict[str, Any]:
    """The JSON object of ``--format json`` (see the module docstring)."""
    out: dict[str, Any] = {
        "topic": r.topic,
        "partition": r.partition,
        "offset": r.offset,
        "timestamp": r.timestamp,
        "timestamp_type": r.timestamp_type,
    }
    if r.key_schema_id is not None:
        out["key"] = r.key_data
        out["key_schema_id"] = r.key_schema_id
    else:
        _bytes_field(out, "key", r.key, "key_encoding")
    if r.value_schema_id is not None:
        out["value"] = r.value_data
        out["value_schema_id"] = r.value_schema_id
    else:
        _bytes_field(out, "value", r.value, "value_encoding")
    headers = []
    for name, value in r.headers:
        h: dict[str, Any] = {"key": name}
        _bytes_field(h, "value", value, "encoding")
        headers.append(h)
    out["headers"] = headers
    return out


def json_formatter(r: Record) -> bytes:
    return (json.dumps(json_object(r), default=_json_default, ensure_ascii=False) + "\n").encode()
