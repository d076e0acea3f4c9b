"""registry/compatibility.py: each mode's verdict on the usual schema changes.

The rules are the avro package's (ReaderWriterCompatibilityChecker); these cases pin down who
reads whom in each mode, and that a refusal names the field.
"""

from __future__ import annotations

import json

import pytest

from registry.compatibility import Level, check, parse_level
from registry.schemas import parse_schema

ENUM = {"type": "enum", "name": "Kind", "symbols": ["CAR", "BUS"]}


def record(*fields: dict[str, object]) -> str:
    return json.dumps({"type": "record", "name": "Event", "namespace": "sf", "fields": list(fields)})


A = {"name": "a", "type": "int"}
KIND = {"name": "kind", "type": ENUM}
SPEED = {"name": "speed", "type": ["null", "int"], "default": None}
V1 = record(A, KIND, SPEED)

# change → the new schema
CHANGES = {
    "add field with default": record(A, KIND, SPEED, {"name": "lane", "type": "int", "default": 0}),
    "add field without default": record(A, KIND, SPEED, {"name": "lane", "type": "int"}),
    "remove field": record(KIND, SPEED),
    "rename with alias": record({"name": "count", "type": "int", "aliases": ["a"]}, KIND, SPEED),
    "int to long": record({"name": "a", "type": "long"}, KIND, SPEED),
    "int to string": record({"name": "a", "type": "string"}, KIND, SPEED),
    "enum symbol added": record(
        A, {"name": "kind", "type": {**ENUM, "symbols": ["CAR", "BUS", "BIKE"]}}, SPEED
    ),
    "union widened": record(A, KIND, {"name": "speed", "type": ["null", "int", "string"], "default": None}),
}
B, F, FULL = "BACKWARD", "FORWARD", "FULL"
# which of BACKWARD / FORWARD each change passes (FULL needs both, NONE passes everything)
PASSES = {
    "add field with default": {B, F},
    "add field without default": {F},
    "remove field": {B},
    "rename with alias": {B},
    "int to long": {B},
    "int to string": set(),
    "enum symbol added": {B},
    "union widened": {B},
}
# the field a refusal names
NAMES = {
    "add field without default": "lane",
    "remove field": "a",
    "rename with alias": "a",
    "int to long": "a",
    "int to string": "a",
    "enum symbol added": "kind",
    "union widened": "speed",
}


def expected(change: str, level: Level) -> bool:
    passes = PASSES[change]
    if level is Level.NONE:
        return True
    if level.backward and level.forward:
        return passes == {B, F}
    return (B if level.backward else F) in passes


@pytest.mark.parametrize("level", list(Level), ids=lambda lv: lv.value)
@pytest.mark.parametrize("change", list(CHANGES))
def test_matrix(change: str, level: Level) -> None:
    problems = check(parse_schema(CHANGES[change]).avro, [(1, parse_schema(V1).avro)], level)
    assert (not problems) == expected(change, level), problems
    if problems:
        assert f"'{NAMES[change]}'" in problems[0] or NAMES[change] in problems[0], problems
        assert f"{{compatibility: '{level.value}'}}" in problems


def versions(*texts: str) -> list[tuple[int, object]]:
    return [(i + 1, parse_schema(t).avro) for i, t in enumerate(texts)]


def test_backward_transitive_checks_every_version() -> None:
    v1 = record(A)
    v2 = record(A, {"name": "b", "type": "string", "default": "x"})
    v3 = record(A, {"name": "b", "type": "string"})  # reads v2's data, not v1's
    earlier = versions(v1, v2)
    assert check(parse_schema(v3).avro, earlier, Level.BACKWARD) == []  # type: ignore[arg-type]
    problems = check(parse_schema(v3).avro, earlier, Level.BACKWARD_TRANSITIVE)  # type: ignore[arg-type]
    assert "{oldSchemaVersion: 1}" in problems and "'b'" in problems[0]


def test_forward_transitive_checks_every_version() -> None:
    v1 = record(A, {"name": "b", "type": "string"})
    v2 = record(A, {"name": "b", "type": "string", "default": "x"})
    v3 = record(A)  # v2 reads it (b has a default), v1 does not
    earlier = versions(v1, v2)
    assert check(parse_schema(v3).avro, earlier, Level.FORWARD) == []  # type: ignore[arg-type]
    assert check(parse_schema(v3).avro, earlier, Level.FULL_TRANSITIVE)  # type: ignore[arg-type]
    assert check(parse_schema(v3).avro, earlier, Level.FORWARD_TRANSITIVE)  # type: ignore[arg-type]


def test_first_version_needs_no_check() -> None:
    assert check(parse_schema(V1).avro, [], Level.FULL_TRANSITIVE) == []


def test_parse_level() -> None:
    assert parse_level("full_transitive") is Level.FULL_TRANSITIVE
    for bad in ("bogus", "", None, 3):
        with pytest.raises(ValueError):
            parse_level(bad)
