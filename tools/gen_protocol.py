#!/usr/bin/env python3
"""Generate ``framework/protocol/messages/*.py`` from kio's per-version schema classes.

kio (PyPI) ships one frozen dataclass per Kafka message *version*, generated from Apache
Kafka's JSON message schemas (``clients/src/main/resources/common/message/*.json``). This tool
merges those per-version classes back into one declaration per message, the way Kafka's own
JSON describes it: every field with the versions it exists in, the versions it is nullable in,
and its tag in the flexible versions. The output is plain, typed Python that our codec compiles
into straight-line encoders/decoders (``framework/protocol/codec.py``).

Only a developer runs this (``python tools/gen_protocol.py``), after upgrading kio; kio is not a
runtime dependency. ``tests/unit/protocol/test_messages_vs_kio.py`` checks the generated layout
against kio for every version we serve.
"""

from __future__ import annotations

import dataclasses
import importlib
import keyword
import pkgutil
import re
import sys
import uuid
from dataclasses import MISSING
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)
from kio.static.constants import EntityType

# The APIs this project serves (module names in kio.schema) and the data schemas it reads.
APIS = [
    "produce",
    "fetch",
    "list_offsets",
    "metadata",
    "offset_commit",
    "offset_fetch",
    "find_coordinator",
    "join_group",
    "heartbeat",
    "leave_group",
    "sync_group",
    "describe_groups",
    "list_groups",
    "sasl_handshake",
    "api_versions",
    "create_topics",
    "delete_topics",
    "delete_records",
    "init_producer_id",
    "offset_for_leader_epoch",
    "describe_configs",
    "alter_configs",
    "sasl_authenticate",
    "create_partitions",
    "delete_groups",
    "incremental_alter_configs",
    "offset_delete",
    "describe_cluster",
    "describe_producers",
    "describe_log_dirs",
    "elect_leaders",
    "describe_user_scram_credentials",
    "alter_user_scram_credentials",
    "describe_acls",
    "create_acls",
    "delete_acls",
    "describe_client_quotas",
    "alter_client_quotas",
    "add_partitions_to_txn",
    "add_offsets_to_txn",
    "end_txn",
    "write_txn_markers",
    "txn_offset_commit",
    "describe_transactions",
    "list_transactions",
    "describe_quorum",
    "describe_topic_partitions",
    "alter_partition_reassignments",
    "list_partition_reassignments",
    "unregister_broker",
    # Kafka 4's protocols: KIP-848 consumer groups, KIP-714 client metrics, KIP-932 share
    # groups, KIP-853 a quorum that changes
    "consumer_group_heartbeat",
    "consumer_group_describe",
    "get_telemetry_subscriptions",
    "push_telemetry",
    "list_config_resources",
    "share_group_heartbeat",
    "share_group_describe",
    "share_fetch",
    "share_acknowledge",
    "describe_share_group_offsets",
    "alter_share_group_offsets",
    "delete_share_group_offsets",
    "add_raft_voter",
    "remove_raft_voter",
    "update_raft_voter",
]
DATA = ["consumer_protocol_subscription", "consumer_protocol_assignment"]

TYPE_MAP = {
    "timedelta_i32": "int32",
    "timedelta_i64": "int64",
    "datetime_i64": "int64",
    "error_code": "int16",
}
PY_TYPES = {
    "int8": "int",
    "int16": "int",
    "int32": "int",
    "int64": "int",
    "uint16": "int",
    "uint32": "int",
    "uint64": "int",
    "float64": "float",
    "bool": "bool",
    "string": "str",
    "bytes": "bytes",
    "records": "Buffer",
    "uuid": "bytes",
}

OUT = Path(__file__).resolve().parent.parent / "framework" / "protocol" / "messages"


@dataclasses.dataclass
class MField:
    name: str
    type: str  # primitive kafka type or "struct"
    array: bool
    struct: str | None
    versions: set[int] = dataclasses.field(default_factory=set)
    nullable: set[int] = dataclasses.field(default_factory=set)
    tagged: set[int] = dataclasses.field(default_factory=set)
    tag: int | None = None
    default: Any = None
    has_default: bool = False


@dataclasses.dataclass
class MStruct:
    name: str
    fields: list[MField] = dataclasses.field(default_factory=list)
    versions: set[int] = dataclasses.field(default_factory=set)

    def get(self, name: str) -> MField | None:
        for f in self.fields:
            if f.name == name:
                return f
        return None


def _field_name(f: dataclasses.Field[Any], kafka_type: str | None) -> str:
    name = f.name
    if kafka_type in ("timedelta_i32", "timedelta_i64", "datetime_i64") and not name.endswith("_ms"):
        name += "_ms"
    if keyword.iskeyword(name):
        name += "_"
    return name


def _convert_default(value: Any, kafka_type: str | None) -> Any:
    if value is None and kafka_type in ("datetime_i64", "timedelta_i64", "timedelta_i32"):
        return -1
    if isinstance(value, timedelta):
        return int(value.total_seconds() * 1000)
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, uuid.UUID):
        return value.bytes
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value)
    return value


def merge_entity(cls: type, version: int, structs: dict[str, MStruct], order: list[str]) -> None:
    name = cls.__name__
    st = structs.get(name)
    if st is None:
        st = structs[name] = MStruct(name)
    st.versions.add(version)
    prev: str | None = None
    for f in dataclasses.fields(cls):
        fc = classify_field(f)
        tag = get_field_tag(f)
        kafka_type: str | None
        if isinstance(fc, (PrimitiveField, PrimitiveTupleField)):
            kafka_type = get_schema_field_type(f)
            ftype = TYPE_MAP.get(kafka_type, kafka_type)
            struct = None
        else:
            kafka_type = None
            ftype = "struct"
            assert isinstance(fc, (EntityField, EntityTupleField))
            struct = fc.type_.__name__
            merge_entity(fc.type_, version, structs, order)
        array = isinstance(fc, (PrimitiveTupleField, EntityTupleField))
        fname = _field_name(f, kafka_type)
        mf = st.get(fname)
        if mf is None:
            mf = MField(fname, ftype, array, struct)
            # insert after the previous field of this version (keeps wire order)
            if prev is None:
                st.fields.insert(0, mf)
            else:
                idx = [x.name for x in st.fields].index(prev)
                st.fields.insert(idx + 1, mf)
        else:
            assert (mf.type, mf.array, mf.struct) == (ftype, array, struct), (name, fname)
        mf.versions.add(version)
        # Only strings, bytes, records, arrays and structs are nullable on the wire; kio models
        # "-1 means unset" timestamps as Optional, which Kafka encodes as a plain int64.
        optional = is_optional(f) and (array or ftype in ("string", "bytes", "records", "struct"))
        if optional:
            mf.nullable.add(version)
        if tag is not None:
            mf.tagged.add(version)
            assert mf.tag in (None, int(tag)), (name, fname)
            mf.tag = int(tag)
        if f.default is not MISSING:
            mf.has_default = True
            mf.default = _convert_default(f.default, kafka_type)
        prev = fname
    if name not in order:
        order.append(name)


def vrange(vs: set[int], all_versions: list[int]) -> str:
    """Render a version set as Kafka does: "3+", "3-7", "none"."""
    if not vs:
        return "none"
    lo, hi = min(vs), max(vs)
    assert vs == set(range(lo, hi + 1)), vs
    if hi == max(all_versions):
        return f"{lo}+"
    return f"{lo}-{hi}"


def py_default(f: MField, nullable_any: bool) -> str:
    if f.array:
        return (
            "dataclasses.field(default_factory=list)"
            if not nullable_any or not f.has_default or f.default is not None
            else "None"
        )
    if f.type == "struct":
        if nullable_any and f.has_default and f.default is None:
            return "None"
        return f"dataclasses.field(default_factory=lambda: {f.struct}())"
    if f.has_default:
        d = f.default
        if f.type == "uuid":
            return "ZERO_UUID"
        if d is None:
            return "None"
        if f.type in ("bytes",) and isinstance(d, (bytes, bytearray)):
            return repr(bytes(d))
        return repr(d)
    if nullable_any and f.type in ("string", "bytes", "records"):
        return "None"
    return {
        "string": '""',
        "bytes": 'b""',
        "records": "None",
        "uuid": "ZERO_UUID",
        "bool": "False",
        "float64": "0.0",
    }.get(f.type, "0")


def py_annotation(f: MField, nullable_any: bool) -> str:
    base = f.struct if f.type == "struct" else PY_TYPES[f.type]
    ann = f"list[{base}]" if f.array else base
    if f.type == "records" and not f.array:
        return "Buffer | None"
    if nullable_any:
        ann += " | None"
    return ann


def field_spec(f: MField, all_versions: list[int]) -> str:
    parts = [repr(f.type), repr(vrange(f.versions, all_versions))]
    if f.array:
        parts.append("array=True")
    if f.struct:
        parts.append(f"struct={f.struct!r}")
    if f.nullable:
        parts.append(f"nullable={vrange(f.nullable, all_versions)!r}")
    if f.tag is not None:
        parts.append(f"tag={f.tag}")
        if f.tagged != f.versions:
            parts.append(f"tagged={vrange(f.tagged, all_versions)!r}")
    return f"spec({', '.join(parts)})"


def emit_struct(
    st: MStruct,
    cls_name: str,
    all_versions: list[int],
    rename: dict[str, str],
    top: dict[str, str] | None,
) -> list[str]:
    lines = ["", "", "@dataclasses.dataclass(slots=True)", f"class {cls_name}:"]
    if top is not None:
        for k, v in top.items():
            lines.append(f"    {k}: ClassVar[{'int' if k != 'VERSIONS' else 'tuple[int, int]'}] = {v}")
    lines.append(
        "    SPECS: ClassVar[dict[str, FieldSpec]] = {"
        if st.fields
        else "    SPECS: ClassVar[dict[str, FieldSpec]] = {}"
    )
    for f in st.fields:
        fs = field_spec(
            dataclasses.replace(f, struct=rename.get(f.struct, f.struct) if f.struct else None),
            all_versions,
        )
        lines.append(f"        {f.name!r}: {fs},")
    if st.fields:
        lines.append("    }")
    for f in st.fields:
        nullable_any = bool(f.nullable)
        g = dataclasses.replace(f, struct=rename.get(f.struct, f.struct) if f.struct else None)
        lines.append(f"    {f.name}: {py_annotation(g, nullable_any)} = {py_default(g, nullable_any)}")
    return lines


def load_versions(api: str, kind: str) -> dict[int, type]:
    pkg = importlib.import_module(f"kio.schema.{api}")
    out: dict[int, type] = {}
    for m in pkgutil.iter_modules(pkg.__path__):
        mm = re.fullmatch(r"v(\d+)", m.name)
        if not mm:
            continue
        try:
            mod = importlib.import_module(f"kio.schema.{api}.{m.name}.{kind}")
        except ModuleNotFoundError:
            continue
        want = {
            "request": EntityType.request,
            "response": EntityType.response,
            "data": EntityType.data,
        }[kind]
        for obj in vars(mod).values():
            if (
                isinstance(obj, type)
                and getattr(obj, "__type__", None) is want
                and obj.__module__ == mod.__name__
            ):
                out[int(mm.group(1))] = obj
    return dict(sorted(out.items()))


def gen_message(api: str, kind: str) -> tuple[str, list[str], dict[str, MStruct], list[str]]:
    versions = load_versions(api, kind)
    structs: dict[str, MStruct] = {}
    order: list[str] = []
    for v, cls in versions.items():
        merge_entity(cls, v, structs, order)
    top_name = versions[max(versions)].__name__
    # emit leaves first: a struct after every struct its fields refer to
    emitted: list[str] = []

    def visit(n: str) -> None:
        if n in emitted:
            return
        for fld in structs[n].fields:
            if fld.struct:
                visit(fld.struct)
        emitted.append(n)

    visit(top_name)
    order = emitted
    vs = sorted(versions)
    flexible = [v for v, c in versions.items() if c.__flexible__]
    first_flexible = min(flexible) if flexible else 10_000
    api_key = int(getattr(versions[vs[0]], "__api_key__", -1))
    return top_name, vs, structs, [*order, str(first_flexible), str(api_key)]


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    index: list[tuple[str, str, str, int]] = []
    for api in APIS + DATA:
        kinds = ["data"] if api in DATA else ["request", "response"]
        gens = [(k, gen_message(api, k)) for k in kinds]
        # struct names that collide between request and response get the message name prefix
        names: dict[str, int] = {}
        for _, (top, _, _structs, order) in gens:
            for n in order[:-2]:
                if n != top:
                    names[n] = names.get(n, 0) + 1
        body: list[str] = []
        exported: list[str] = []
        for kind, (top, vs, structs, order) in gens:
            first_flexible, api_key = int(order[-2]), int(order[-1])
            order = order[:-2]
            rename = {n: (top + n if names.get(n, 0) > 1 else n) for n in order if n != top}
            for n in order:
                st = structs[n]
                top_attrs = None
                if n == top:
                    top_attrs = {
                        "API_KEY": str(api_key),
                        "VERSIONS": f"({vs[0]}, {vs[-1]})",
                        "FLEXIBLE": str(first_flexible),
                    }
                cname = rename.get(n, n)
                body += emit_struct(st, cname, vs, rename, top_attrs)
                exported.append(cname)
            index.append((api, kind, top, api_key))
        header = [
            f'"""Kafka {api} messages: one class per message covering every version.',
            "",
            "Generated by tools/gen_protocol.py from kio's schema classes (Apache Kafka's JSON",
            "message schemas). Do not edit by hand: regenerate.",
            '"""',
            "",
            "# ruff: noqa: E501",
            "from __future__ import annotations",
            "",
            "import dataclasses",
            "from typing import ClassVar",
            "",
            "from framework.protocol.fields import ZERO_UUID, Buffer, FieldSpec, spec",
            "",
            f"__all__ = {sorted(exported)!r}",
        ]
        src = "\n".join(header + body) + "\n"
        (OUT / f"{api}.py").write_text(src)
    init = [
        '"""Generated message classes (see tools/gen_protocol.py)."""',
        "",
    ]
    (OUT / "__init__.py").write_text("\n".join(init) + "\n")
    print(f"wrote {len(APIS) + len(DATA)} modules to {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()


def gen_errors() -> None:
    """framework/protocol/error_codes.py: Kafka's error codes with their retriable flag and text."""
    import ast
    import inspect

    from kio.schema import errors as kerr

    src = inspect.getsource(kerr)
    tree = ast.parse(src)
    docs: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "ErrorCode":
            body = node.body
            for i, stmt in enumerate(body):
                if isinstance(stmt, ast.Assign) and i + 1 < len(body):
                    nxt = body[i + 1]
                    if isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant):
                        docs[stmt.targets[0].id] = str(nxt.value.value)  # type: ignore[attr-defined]
    lines = [
        '"""Kafka protocol error codes (generated by tools/gen_protocol.py from kio).',
        "",
        "Each member carries whether a client may retry and Kafka's description.",
        '"""',
        "",
        "# ruff: noqa: E501",
        "from __future__ import annotations",
        "",
        "import enum",
        "",
        "",
        "class ErrorCode(enum.IntEnum):",
        "    retriable: bool",
        "    description: str",
        "",
        '    def __new__(cls, value: int, retriable: bool = False, description: str = "") -> ErrorCode:',
        "        obj = int.__new__(cls, value)",
        "        obj._value_ = value",
        "        obj.retriable = retriable",
        "        obj.description = description",
        "        return obj",
        "",
    ]
    for member in kerr.ErrorCode:
        doc = docs.get(member.name, "")
        lines.append(f"    {member.name.upper()} = {int(member)}, {bool(member.retriable)}, {doc!r}")
    (OUT.parent / "error_codes.py").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    gen_errors()
