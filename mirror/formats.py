"""Record layouts of the mirror's internal topics. Pure functions over bytes.

MM2's layouts (Kafka's protocol types: STRING = int16 length + UTF-8, INT16/32/64 big-endian),
so a Java tool reading MM2's topics (``RemoteClusterUtils``) reads ours:

* offset sync, ``mm2-offset-syncs.<alias>.internal``: key ``topic STRING, partition INT32``
  (the *source* topic), value ``upstreamOffset INT64, offset INT64``.
* checkpoint, ``<alias>.checkpoints.internal``: key ``group STRING, topic STRING, partition
  INT32`` (the *remote* topic), value ``version INT16 (0), upstreamOffset INT64, offset INT64,
  metadata STRING``.
* heartbeat, ``heartbeats``: key ``sourceClusterAlias STRING, targetClusterAlias STRING``,
  value ``version INT16 (0), timestamp INT64``.

Our offset syncs mean: every source record at ``upstreamOffset`` or later has a copy at
``offset`` or later in the remote partition (see :mod:`~mirror.offset_sync`).

The mirror's progress, ``mm2-offsets.<alias>.internal`` (compacted), is Connect's JSON as MM2
stores it: key ``["mirror-source", {"cluster": A, "topic": T, "partition": P}]``, value
``{"offset": O}``, O the last source offset whose copy the target acknowledged.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I64x2 = struct.Struct(">qq")


class FormatError(ValueError):
    """A record of an internal topic that does not have the expected layout."""


def _string(s: str) -> bytes:
    b = s.encode()
    return _I16.pack(len(b)) + b


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise FormatError(f"record too short: {len(self.data)} bytes")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def i16(self) -> int:
        return int(_I16.unpack(self.take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self.take(4))[0])

    def i64(self) -> int:
        return int(_I64.unpack(self.take(8))[0])

    def string(self) -> str:
        return self.take(self.i16()).decode()


@dataclass(frozen=True)
class OffsetSync:
    topic: str
    partition: int
    upstream: int
    downstream: int

    def key(self) -> bytes:
        return _string(self.topic) + _I32.pack(self.partition)

    def value(self) -> bytes:
        return _I64x2.pack(self.upstream, self.downstream)

    @classmethod
    def decode(cls, key: bytes, value: bytes) -> OffsetSync:
        k, v = _Reader(key), _Reader(value)
        return cls(k.string(), k.i32(), v.i64(), v.i64())


@dataclass(frozen=True)
class Checkpoint:
    group: str
    topic: str  # the remote topic
    partition: int
    upstream: int
    downstream: int
    metadata: str = ""

    def key(self) -> bytes:
        return _string(self.group) + _string(self.topic) + _I32.pack(self.partition)

    def value(self) -> bytes:
        return _I16.pack(0) + _I64x2.pack(self.upstream, self.downstream) + _string(self.metadata)

    @classmethod
    def decode(cls, key: bytes, value: bytes) -> Checkpoint:
        k, v = _Reader(key), _Reader(value)
        group, topic, partition = k.string(), k.string(), k.i32()
        if (version := v.i16()) != 0:
            raise FormatError(f"checkpoint version {version} unknown")
        return cls(group, topic, partition, v.i64(), v.i64(), v.string())


@dataclass(frozen=True)
class Heartbeat:
    source_alias: str
    target_alias: str
    timestamp_ms: int

    def key(self) -> bytes:
        return _string(self.source_alias) + _string(self.target_alias)

    def value(self) -> bytes:
        return _I16.pack(0) + _I64.pack(self.timestamp_ms)

    @classmethod
    def decode(cls, key: bytes, value: bytes) -> Heartbeat:
        k, v = _Reader(key), _Reader(value)
        src, dst = k.string(), k.string()
        if (version := v.i16()) != 0:
            raise FormatError(f"heartbeat version {version} unknown")
        return cls(src, dst, v.i64())


def progress_key(alias: str, topic: str, partition: int) -> bytes:
    body = {"cluster": alias, "partition": partition, "topic": topic}
    return json.dumps(["mirror-source", body], separators=(",", ":"), sort_keys=True).encode()


def progress_value(last_offset: int) -> bytes:
    return json.dumps({"offset": last_offset}, separators=(",", ":")).encode()


def decode_progress(key: bytes, value: bytes | None) -> tuple[str, str, int, int | None]:
    """(cluster alias, topic, partition, last copied offset or None for a tombstone)."""
    try:
        name, body = json.loads(key)
        if name != "mirror-source":
            raise FormatError(f"progress key for {name!r}")
        last = None if value is None else int(json.loads(value)["offset"])
        return str(body["cluster"]), str(body["topic"]), int(body["partition"]), last
    except (ValueError, KeyError, TypeError) as exc:
        raise FormatError(f"progress record {key[:80]!r}: {exc}") from None
