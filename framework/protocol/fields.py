"""Field declarations for Kafka protocol messages.

A message is a slotted dataclass whose ``SPECS`` class attribute maps each field name to a
:class:`FieldSpec`: its wire type, the versions it exists in, the versions in which it may be
null and, for flexible versions, its tag. This mirrors the ``versions`` / ``nullableVersions``
/ ``taggedVersions`` / ``tag`` attributes of Kafka's JSON message schemas, so a field is
declared once for all versions. :mod:`framework.protocol.codec` compiles these declarations
into one encoder and one decoder per (message, version).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

#: A bytes-like object: record data travels as memoryviews of frames or of files.
Buffer: TypeAlias = bytes | bytearray | memoryview

ZERO_UUID = bytes(16)

PRIMITIVES = frozenset(
    {
        "int8",
        "int16",
        "int32",
        "int64",
        "uint16",
        "uint32",
        "uint64",
        "float64",
        "bool",
        "string",
        "bytes",
        "records",
        "uuid",
        "struct",
    }
)


@dataclass(frozen=True, slots=True)
class VersionRange:
    """Inclusive version range; ``lo > hi`` means "no version"."""

    lo: int
    hi: int

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.lo <= version <= self.hi

    @classmethod
    def parse(cls, text: str) -> VersionRange:
        text = text.strip()
        if text == "none":
            return cls(1, 0)
        if text.endswith("+"):
            return cls(int(text[:-1]), 32767)
        if "-" in text:
            lo, hi = text.split("-", 1)
            return cls(int(lo), int(hi))
        v = int(text)
        return cls(v, v)


NO_VERSIONS = VersionRange(1, 0)


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """Wire description of one field (see the module docstring)."""

    type: str
    versions: VersionRange
    array: bool = False
    struct: str | None = None
    nullable: VersionRange = NO_VERSIONS
    tag: int | None = None
    tagged: VersionRange = NO_VERSIONS


def spec(
    type_: str,
    versions: str = "0+",
    *,
    array: bool = False,
    struct: str | None = None,
    nullable: str = "none",
    tag: int | None = None,
    tagged: str | None = None,
) -> FieldSpec:
    """Declare a field; ``tagged`` defaults to ``versions`` when a ``tag`` is given."""
    if type_ not in PRIMITIVES:
        raise ValueError(f"unknown field type {type_!r}")
    vr = VersionRange.parse(versions)
    tr = NO_VERSIONS
    if tag is not None:
        tr = VersionRange.parse(tagged) if tagged is not None else vr
    return FieldSpec(
        type=type_,
        versions=vr,
        array=array,
        struct=struct,
        nullable=VersionRange.parse(nullable),
        tag=tag,
        tagged=tr,
    )
