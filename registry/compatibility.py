"""Compatibility levels and the check of a new schema against a subject's earlier ones.

The rules are Apache Avro's own (``avro.compatibility.ReaderWriterCompatibilityChecker``, a
port of the Java ``SchemaCompatibility``); this module only decides who reads whom:

* BACKWARD: the new schema reads data written with the latest one (consumers upgrade first);
* FORWARD: the latest schema reads data written with the new one (producers upgrade first);
* FULL: both; the ``_TRANSITIVE`` forms check every live version, not only the latest;
* NONE: no check.

An incompatibility becomes one message per problem in Confluent's shape
(``{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'...', additionalInfo:'b'}``),
naming the field by its path in the reader's schema. Pure functions; no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum
from typing import Any

import avro.schema
from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType

__all__ = ["DEFAULT_LEVEL", "Level", "check", "parse_level"]


class Level(Enum):
    BACKWARD = "BACKWARD"
    BACKWARD_TRANSITIVE = "BACKWARD_TRANSITIVE"
    FORWARD = "FORWARD"
    FORWARD_TRANSITIVE = "FORWARD_TRANSITIVE"
    FULL = "FULL"
    FULL_TRANSITIVE = "FULL_TRANSITIVE"
    NONE = "NONE"

    @property
    def transitive(self) -> bool:
        return self.value.endswith("_TRANSITIVE")

    @property
    def backward(self) -> bool:
        return self.value.startswith(("BACKWARD", "FULL"))

    @property
    def forward(self) -> bool:
        return self.value.startswith(("FORWARD", "FULL"))


DEFAULT_LEVEL = Level.BACKWARD


def parse_level(value: object) -> Level:
    """The level named by ``value`` (any case); ValueError when it names none."""
    if not isinstance(value, str):
        raise ValueError(f"not a compatibility level: {value!r}")
    try:
        return Level(value.upper())
    except ValueError:
        raise ValueError(f"not a compatibility level: {value!r}") from None


def check(
    new: avro.schema.Schema, earlier: Sequence[tuple[int, avro.schema.Schema]], level: Level
) -> list[str]:
    """Messages explaining why ``new`` is incompatible under ``level``; empty when it is not.

    ``earlier`` holds the subject's live versions, oldest first, as (version, schema).
    """
    if level is Level.NONE or not earlier:
        return []
    against = earlier if level.transitive else earlier[-1:]
    for version, old in reversed(against):
        messages: list[str] = []
        if level.backward:
            messages += _problems(reader=new, writer=old, reader_is_new=True)
        if level.forward:
            messages += _problems(reader=old, writer=new, reader_is_new=False)
        if messages:
            return [*messages, f"{{oldSchemaVersion: {version}}}", f"{{compatibility: '{level.value}'}}"]
    return []


def _problems(reader: avro.schema.Schema, writer: avro.schema.Schema, reader_is_new: bool) -> list[str]:
    checker = ReaderWriterCompatibilityChecker()  # type: ignore[no-untyped-call]
    result = checker.get_compatibility(reader, writer)
    if result.compatibility is SchemaCompatibilityType.compatible:
        return []
    which = "new" if reader_is_new else "old"
    other = "old" if reader_is_new else "new"
    reader_json = reader.to_json()
    paths = sorted(result.locations)
    details = sorted(result.messages, key=str)
    out = []
    for kind in result.incompatibilities:
        names = [_field_path(reader_json, p) for p in paths]
        where = ", ".join(f"'{n}' at path '{p}'" for n, p in zip(names, paths, strict=True))
        info = ", ".join(str(m) for m in details)
        out.append(
            f"{{errorType:'{kind.name.upper()}', description:'{_describe(kind.name, which, other, where)}', "
            f"additionalInfo:'{info}'}}"
        )
    return out


def _describe(kind: str, reader: str, writer: str, where: str) -> str:
    if kind == "reader_field_missing_default_value":
        return (
            f"The field {where} in the {reader} schema has no default value "
            f"and is missing in the {writer} schema"
        )
    if kind == "missing_enum_symbols":
        return f"The {reader} schema is missing enum symbols of the {writer} schema at {where}"
    if kind == "missing_union_branch":
        return f"The {reader} schema is missing a type inside a union field at {where}"
    if kind == "type_mismatch":
        return f"The type of {where} in the {reader} schema does not match the {writer} schema"
    if kind == "name_mismatch":
        return f"The name of {where} in the {reader} schema does not match the {writer} schema"
    if kind == "fixed_size_mismatch":
        return (
            f"The size of the fixed type at {where} in the {reader} schema does not match the {writer} schema"
        )
    return f"{kind} at {where} ({reader} schema reading {writer} schema data)"


def _field_path(schema_json: Any, pointer: str) -> str:
    """The dotted field names along a JSON-pointer-like location such as ``/fields/1/type``."""
    names: list[str] = []
    node = schema_json
    for part in [p for p in pointer.split("/") if p]:
        try:
            if isinstance(node, dict):
                node = node[part]
            elif isinstance(node, list):
                node = node[int(part)]
                if isinstance(node, dict) and "name" in node and "type" in node and "fields" not in node:
                    names.append(str(node["name"]))
            else:
                break
        except (KeyError, IndexError, ValueError):
            break
    return (
        ".".join(names) or (schema_json.get("name", "") if isinstance(schema_json, dict) else "") or pointer
    )
