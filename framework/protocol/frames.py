"""Request/response framing and headers (sans-io).

A frame is an int32 size followed by that many bytes. Request header v1: api_key int16,
api_version int16, correlation_id int32, client_id nullable int16-length string; v2 (flexible
requests) adds a tagged-field section. Response header v0 is the correlation id; v1 (flexible
responses) adds an empty tagged-field section, except for ApiVersions, whose response header
is always v0 so that a client can read it before knowing the broker's versions.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, TypeVar

from framework.protocol.api import API_TABLE
from framework.protocol.codec import DecodeError, decode, encode_into, read_uvarint

_HDR = struct.Struct(">hhih")
_I = struct.Struct(">i")
API_VERSIONS_KEY = 18
T = TypeVar("T")


@dataclass(slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def peek_header(frame: Any) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) of a request frame body; DecodeError if short."""
    if len(frame) < 8:
        raise DecodeError("request shorter than its header")
    key, version, corr = struct.unpack_from(">hhi", frame, 0)
    return int(key), int(version), int(corr)


def parse_request_header(frame: Any, flexible: bool) -> tuple[RequestHeader, int]:
    """Parse the header of a request frame body; return it and the body position."""
    if len(frame) < 10:
        raise DecodeError("request shorter than its header")
    api_key, version, corr, n = _HDR.unpack_from(frame, 0)
    pos = 10
    client_id = None
    if n >= 0:
        if pos + n > len(frame):
            raise DecodeError("client id past end of frame")
        client_id = str(frame[pos : pos + n], "utf-8", "replace")
        pos += n
    if flexible:
        try:
            ntags, pos = read_uvarint(frame, pos)
            for _ in range(ntags):
                _, pos = read_uvarint(frame, pos)
                size, pos = read_uvarint(frame, pos)
                pos += size
        except IndexError:
            raise DecodeError("header tagged fields past end of frame") from None
        if pos > len(frame):
            raise DecodeError("header tagged fields past end of frame")
    return RequestHeader(api_key, version, corr, client_id), pos


def request_is_flexible(api_key: int, version: int) -> bool:
    entry = API_TABLE.get(api_key)
    return entry is not None and entry.request_flexible(version)


def encode_response(api_key: int, version: int, correlation_id: int, body: Any) -> list[Any]:
    """Size-prefixed response frame as a list of buffers for ``writelines``."""
    out = bytearray(8)
    _I.pack_into(out, 4, correlation_id)
    flexible = version >= type(body).FLEXIBLE
    if flexible and api_key != API_VERSIONS_KEY:
        out.append(0)
    parts: list[Any] = [out]
    tail = bytearray()
    encode_into(body, version, tail, parts)
    parts.append(tail)
    # parts[0] is `out` (its later content was moved into parts by encode_into only via tail)
    size = sum(len(p) for p in parts) - 4
    _I.pack_into(out, 0, size)
    return parts


def encode_request(
    api_key: int, version: int, correlation_id: int, client_id: str | None, body: Any
) -> bytes:
    """A whole request frame (used by our own admin client and tests)."""
    out = bytearray(4)
    cid = client_id.encode() if client_id is not None else None
    out += _HDR.pack(api_key, version, correlation_id, -1 if cid is None else len(cid))
    if cid:
        out += cid
    if request_is_flexible(api_key, version):
        out.append(0)
    parts: list[Any] = []
    encode_into(body, version, out, parts)
    if parts:
        parts.append(out)
        data = bytearray(b"".join(parts))
    else:
        data = out
    _I.pack_into(data, 0, len(data) - 4)
    return bytes(data)


def decode_response(data: bytes, corr: int, api_key: int, version: int, response_cls: type[T]) -> T:
    """Decode a response frame's body (after its size) for request ``corr`` of ``api_key``."""
    (got,) = struct.unpack_from(">i", data, 0)
    if got != corr:
        raise DecodeError(f"response correlation id {got} does not match request {corr}")
    pos = 4
    flexible = version >= response_cls.FLEXIBLE  # type: ignore[attr-defined]
    if flexible and api_key != API_VERSIONS_KEY:  # ApiVersions responses keep the v0 header
        ntags, pos = read_uvarint(data, pos)
        for _ in range(ntags):
            _, pos = read_uvarint(data, pos)
            size, pos = read_uvarint(data, pos)
            pos += size
    obj, _ = decode(response_cls, version, memoryview(data), pos)
    return obj
