"""A decoder generated per Avro record schema, for the data source's Python workers.

fastavro's ``schemaless_reader`` costs ~13 µs for a traffic event here; a function generated from
the writer's schema (flat records of primitives, arrays of them and ``["null", X]`` unions, what
the application writes) reads the same values in a fraction of that. Any other schema returns
None from :func:`compile_decoder` and the caller uses fastavro. The generated function takes the
value's bytes and the offset of the Avro body (5: after Confluent's header) and returns a dict
of the writer's fields; it raises IndexError/struct.error/UnicodeDecodeError on a damaged body.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any

_DOUBLE = struct.Struct("<d").unpack_from
_FLOAT = struct.Struct("<f").unpack_from


def _long(b: bytes, p: int) -> tuple[int, int]:
    x = b[p]
    p += 1
    if x < 128:
        return (x >> 1) ^ -(x & 1), p
    n = x & 0x7F
    shift = 7
    while True:
        x = b[p]
        p += 1
        n |= (x & 0x7F) << shift
        if x < 128:
            return (n >> 1) ^ -(n & 1), p
        shift += 7


def _emit(t: Any, target: str, lines: list[str], ind: str, k: list[int]) -> bool:
    """Statements reading a value of type ``t`` at ``p`` into ``target`` (advancing ``p``)."""
    k[0] += 1
    n = k[0]
    if t in ("int", "long"):  # one byte (|value| < 64) inline, longer ones through L
        lines += [
            f"{ind}x{n} = b[p]",
            f"{ind}if x{n} < 128:",
            f"{ind}    {target} = (x{n} >> 1) ^ -(x{n} & 1)",
        ]
        lines += [f"{ind}    p += 1", f"{ind}else:", f"{ind}    {target}, p = L(b, p)"]
    elif t == "double":
        lines += [f"{ind}{target} = D(b, p)[0]", f"{ind}p += 8"]
    elif t == "float":
        lines += [f"{ind}{target} = F(b, p)[0]", f"{ind}p += 4"]
    elif t == "boolean":
        lines += [f"{ind}{target} = b[p] == 1", f"{ind}p += 1"]
    elif t == "string":  # a length under 64: one byte, inline
        lines += [f"{ind}n{n} = b[p]", f"{ind}if n{n} < 128:", f"{ind}    n{n} >>= 1", f"{ind}    p += 1"]
        lines += [f"{ind}else:", f"{ind}    n{n}, p = L(b, p)"]
        if target != "_":
            lines.append(f"{ind}{target} = b[p:p + n{n}].decode()")
        lines.append(f"{ind}p += n{n}")
    elif t == "bytes":
        lines += [f"{ind}n{n}, p = L(b, p)", f"{ind}{target} = b[p:p + n{n}]", f"{ind}p += n{n}"]
    elif isinstance(t, dict) and t.get("type") == "array":
        lines += [
            f"{ind}xs{n} = []",
            f"{ind}while True:",
            f"{ind}    c{n}, p = L(b, p)",
            f"{ind}    if c{n} == 0:",
        ]
        lines += [
            f"{ind}        break",
            f"{ind}    if c{n} < 0:",
            f"{ind}        c{n} = -c{n}",
            f"{ind}        _, p = L(b, p)",
        ]
        lines.append(f"{ind}    for _i{n} in range(c{n}):")
        if not _emit(t["items"], f"x{n}", lines, ind + "        ", k):
            return False
        lines += [f"{ind}        xs{n}.append(x{n})", f"{ind}{target} = xs{n}"]
    elif isinstance(t, list) and len(t) == 2 and t[0] == "null":
        lines += [
            f"{ind}p += 1",  # the branch: 0 (null) or 2 (zigzag 1), one byte
            f"{ind}if b[p - 1] == 0:",
            f"{ind}    {target} = None",
            f"{ind}else:",
        ]
        return _emit(t[1], target, lines, ind + "    ", k)
    else:
        return False
    return True


def compile_decoder(
    schema: Any, project: Sequence[str] | None = None, defaults: dict[str, Any] | None = None
) -> Callable[[bytes, int], Any] | None:
    """``decode(value, offset)`` for a flat record schema (see the module docstring): a dict of
    the writer's fields, or with ``project`` a tuple of those fields' values in that order (a
    field the writer lacks: its value in ``defaults``, else None; the others are skipped)."""
    if not isinstance(schema, dict) or schema.get("type") != "record":
        return None
    lines = ["def decode(b, p):"]
    if project is None:
        lines.append("    r = {}")
    k = [0]
    wanted = {name: i for i, name in enumerate(project or ())}
    for f in schema.get("fields", []):
        name = f["name"]
        target = f"r[{name!r}]" if project is None else f"v{wanted[name]}" if name in wanted else "_"
        if not _emit(f["type"], target, lines, "    ", k):
            return None
    lines += ["    if p != len(b):", "        raise ValueError('bytes left after the record')"]
    ns: dict[str, Any] = {"L": _long, "D": _DOUBLE, "F": _FLOAT}
    if project is None:
        lines.append("    return r")
    else:
        have = {f["name"] for f in schema.get("fields", [])}
        out = []
        for i, name in enumerate(project):
            if name in have:
                out.append(f"v{i}")
            else:
                ns[f"d{i}"] = (defaults or {}).get(name)
                out.append(f"d{i}")
        lines.append(f"    return ({', '.join(out)}{',' if len(out) == 1 else ''})")
    exec(compile("\n".join(lines), f"<avro decoder {schema.get('name')}>", "exec"), ns)  # noqa: S102
    return ns["decode"]  # type: ignore[no-any-return]
