"""Parsing registered schemas: validity, the string kept for identity, and ``normalize``.

Only Avro is served (``/schemas/types`` says so); a schema is parsed with the ``avro``
package (Apache Avro's Python implementation), with the named types of its ``references``
(other subjects' schemas) known first. Two registrations are the same schema when their
canonical strings are equal: the JSON re-serialized compactly, key order kept (Confluent keeps
the schema's own text too, whitespace aside). With ``normalize`` the canonical string is the
parsed schema's own JSON (names resolved to full names, keys sorted), so that differently
written but equal schemas get one id. Pure functions; no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import avro.errors
import avro.io
import avro.name
import avro.schema

__all__ = ["SCHEMA_TYPES", "ParsedSchema", "parse_schema"]

# what /schemas/types lists: the types this registry can parse and check
SCHEMA_TYPES = ["AVRO"]


@dataclass(frozen=True, slots=True)
class ParsedSchema:
    """A valid schema: its canonical string (what is stored and compared) and the parsed form."""

    schema_type: str
    canonical: str
    avro: avro.schema.Schema


def parse_schema(
    text: str,
    schema_type: str = "AVRO",
    references: Sequence[str] = (),
    normalize: bool = False,
) -> ParsedSchema:
    """Parse ``text`` (after the referenced schemas' texts); ValueError says why it is invalid."""
    if schema_type != "AVRO":
        raise ValueError(f"unsupported schema type {schema_type!r} (this registry serves {SCHEMA_TYPES})")
    names = avro.name.Names()
    try:
        for ref in references:
            avro.schema.make_avsc_object(json.loads(ref), names)
        data = json.loads(text)
    except (json.JSONDecodeError, TypeError) as exc:
        raise ValueError(f"not JSON: {exc}") from exc
    except (avro.errors.AvroException, KeyError, AttributeError) as exc:
        raise ValueError(f"a referenced schema is invalid: {exc}") from exc
    try:
        parsed = avro.schema.make_avsc_object(data, names)
    except (avro.errors.AvroException, KeyError, AttributeError, TypeError, ValueError) as exc:
        raise ValueError(str(exc) or type(exc).__name__) from exc
    _check_defaults(parsed, set())
    if normalize and not references:
        canonical = json.dumps(parsed.to_json(), separators=(",", ":"), sort_keys=True)
    else:
        canonical = json.dumps(data, separators=(",", ":"))
    return ParsedSchema(schema_type, canonical, parsed)


def _check_defaults(schema: avro.schema.Schema, seen: set[int]) -> None:
    """Refuse a field whose default does not match its type (Avro's Java parser does too).

    A union's default must match its first branch; bytes and fixed defaults (JSON strings
    standing for bytes) are not checked.
    """
    if id(schema) in seen:
        return
    seen.add(id(schema))
    if isinstance(schema, avro.schema.RecordSchema):
        for field in schema.fields:
            if field.has_default and not _default_ok(field.type, field.default):
                raise ValueError(f"Invalid default for field {field.name}: {json.dumps(field.default)}")
            _check_defaults(field.type, seen)
    elif isinstance(schema, avro.schema.UnionSchema):
        for branch in schema.schemas:
            _check_defaults(branch, seen)
    elif isinstance(schema, avro.schema.ArraySchema):
        _check_defaults(schema.items, seen)
    elif isinstance(schema, avro.schema.MapSchema):
        _check_defaults(schema.values, seen)


def _default_ok(schema: avro.schema.Schema, default: object) -> bool:
    if isinstance(schema, avro.schema.UnionSchema):
        return bool(schema.schemas) and _default_ok(schema.schemas[0], default)
    if schema.type in ("bytes", "fixed"):
        return isinstance(default, str)
    if schema.type in ("float", "double") and isinstance(default, int) and not isinstance(default, bool):
        return True
    if schema.type in ("float", "double") and default in ("NaN", "Infinity", "-Infinity"):
        return True
    return bool(avro.io.validate(schema, default))
