"""registry/schemas.py: what is a valid schema, its canonical string, normalize."""

from __future__ import annotations

import json

import pytest

from registry.schemas import parse_schema

REC = {"type": "record", "name": "T", "namespace": "sf", "fields": [{"name": "a", "type": "int"}]}


def test_canonical_ignores_whitespace_only() -> None:
    pretty = json.dumps(REC, indent=4)
    assert parse_schema(pretty).canonical == parse_schema(json.dumps(REC)).canonical
    reordered = json.dumps({"name": "T", "type": "record", "namespace": "sf", "fields": REC["fields"]})
    assert parse_schema(reordered).canonical != parse_schema(json.dumps(REC)).canonical


def test_normalize_makes_equal_schemas_one_string() -> None:
    reordered = json.dumps({"name": "T", "type": "record", "namespace": "sf", "fields": REC["fields"]})
    full_name = json.dumps({"type": "record", "name": "sf.T", "fields": REC["fields"]})
    forms = {parse_schema(s, normalize=True).canonical for s in (json.dumps(REC), reordered, full_name)}
    assert len(forms) == 1


@pytest.mark.parametrize(
    "text",
    [
        "{bad",
        "5",
        '{"type": "nope"}',
        '{"type": "record", "name": "T"}',
        '["null", "null"]',
        '{"type": "record", "name": "T", "fields": [{"name": "a", "type": "int", "default": "x"}]}',
        '{"type": "record", "name": "T", "fields": [{"name": "a", "type": ["null", "int"], "default": 1}]}',
        '{"type": "enum", "name": "E", "symbols": ["A", "A"]}',
    ],
)
def test_invalid(text: str) -> None:
    with pytest.raises(ValueError):
        parse_schema(text)


def test_valid_defaults() -> None:
    fields = [
        {"name": "u", "type": ["null", "int"], "default": None},
        {"name": "l", "type": "long", "default": 3},
        {"name": "d", "type": "double", "default": 1},
        {"name": "b", "type": "bytes", "default": "\u00ff"},
        {"name": "xs", "type": {"type": "array", "items": "int"}, "default": []},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A"]}, "default": "A"},
    ]
    parse_schema(json.dumps({"type": "record", "name": "T", "fields": fields}))


def test_references_resolve_named_types() -> None:
    kind = json.dumps({"type": "enum", "name": "Kind", "namespace": "sf", "symbols": ["CAR"]})
    uses = json.dumps(
        {"type": "record", "name": "E", "namespace": "sf", "fields": [{"name": "k", "type": "Kind"}]}
    )
    with pytest.raises(ValueError):
        parse_schema(uses)
    parse_schema(uses, references=[kind])


def test_only_avro() -> None:
    with pytest.raises(ValueError, match="unsupported"):
        parse_schema('{"type": "object"}', "JSON")
