"""The registry's state, rebuilt from the ``_schemas`` topic, and the writes each request plans.

``_schemas`` is a compacted topic of one partition holding Confluent's records, keys and values
as JSON (so Confluent's or Karapace's registry could read it, and ours can read theirs):

=================  =====================================================================
keytype            key, then value (``null``: a tombstone)
=================  =====================================================================
SCHEMA             ``{"keytype":"SCHEMA","subject":S,"version":V,"magic":1}``;
                   ``{"subject","version","id","schema","deleted"}`` (+ ``schemaType``
                   unless AVRO, ``references``); null: the version permanently deleted
CONFIG             ``{"keytype":"CONFIG","subject":S|null,"magic":0}``;
                   ``{"compatibilityLevel": L}`` (+ ``normalize``); null: unset
MODE               ``{"keytype":"MODE","subject":S|null,"magic":0}``; ``{"mode": M}``
DELETE_SUBJECT     ``{"keytype":"DELETE_SUBJECT","subject":S,"magic":0}``;
                   ``{"subject": S, "version": V}``: versions <= V soft-deleted
NOOP               ``{"keytype":"NOOP","magic":0}``; null (a marker to read up to)
=================  =====================================================================

:class:`RegistryState` applies records in log order (:meth:`apply`) and answers queries; the
``plan_*`` methods check a request against the state and return the records that carry it out,
changing nothing (check, then apply: the records change the state only once read back from the
topic, on every instance alike). Not thread-safe: the owner serializes calls.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from registry.compatibility import DEFAULT_LEVEL, Level, check, parse_level
from registry.errors import RegistryError
from registry.schemas import ParsedSchema, parse_schema

__all__ = ["MODES", "Record", "RegistryState", "SchemaEntry", "decode_key", "encode_key", "parse_version"]

MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
MAX_VERSION = 2**31 - 1

Record = tuple[bytes, bytes | None]


def encode_key(keytype: str, subject: str | None = None, version: int | None = None) -> bytes:
    """A record key exactly as Confluent writes it (field order matters to compaction)."""
    if keytype == "SCHEMA":
        key: dict[str, Any] = {"keytype": keytype, "subject": subject, "version": version, "magic": 1}
    elif keytype == "NOOP":
        key = {"keytype": keytype, "magic": 0}
    else:
        key = {"keytype": keytype, "subject": subject, "magic": 0}
    return json.dumps(key, separators=(",", ":")).encode()


def decode_key(raw: bytes) -> dict[str, Any] | None:
    try:
        key = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    return key if isinstance(key, dict) else None


def _value(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


@dataclass(slots=True)
class SchemaEntry:
    """One schema id: its text (canonical), type and references; parsed on first use."""

    schema_id: int
    schema: str
    schema_type: str = "AVRO"
    references: list[dict[str, Any]] = field(default_factory=list)
    parsed: ParsedSchema | None = None
    _answer: bytes | None = None

    def answer_bytes(self) -> bytes:
        """:meth:`answer` as JSON, made once (the hot path of deserializers meeting a new id)."""
        if self._answer is None:
            self._answer = json.dumps(self.answer(), separators=(",", ":")).encode()
        return self._answer

    def answer(self) -> dict[str, Any]:
        out: dict[str, Any] = {"schema": self.schema}
        if self.schema_type != "AVRO":
            out["schemaType"] = self.schema_type
        if self.references:
            out["references"] = self.references
        return out


@dataclass(slots=True)
class Version:
    schema_id: int
    deleted: bool = False


class RegistryState:
    def __init__(self) -> None:
        self.schemas: dict[int, SchemaEntry] = {}
        self._by_text: dict[tuple[str, str, str], int] = {}
        self.subjects: dict[str, dict[int, Version]] = {}
        self.configs: dict[str | None, dict[str, Any]] = {}
        self.modes: dict[str | None, str] = {}
        self.max_id = 0
        # schema id -> subject -> its versions naming it (deleted ones included)
        self._uses: dict[int, dict[str, int]] = {}

    # -- applying records (in log order) --------------------------------------------------------
    def apply(self, key_raw: bytes | None, value_raw: bytes | None) -> bool:
        """Apply one record of ``_schemas``; records this registry cannot read are skipped.

        False: a SCHEMA record that contradicts an earlier one (an id already naming another
        schema, or a subject version already holding another id) is refused. Two instances that
        both believed they led (a rebalance in between) may write such records; every instance
        reads them in the same order, so the first one wins everywhere, and the writer of the
        second sees it refused and plans again (:meth:`KafkaStore.write`).
        """
        key = decode_key(key_raw or b"")
        if key is None:
            return True
        try:
            value = json.loads(value_raw) if value_raw is not None else None
        except (ValueError, UnicodeDecodeError):
            return True
        kind = key.get("keytype")
        subject = key.get("subject")
        if kind == "SCHEMA" and isinstance(subject, str) and isinstance(key.get("version"), int):
            return self._apply_schema(subject, key["version"], value)
        elif kind == "CONFIG":
            if isinstance(value, dict):
                self.configs[subject] = value
            else:
                self.configs.pop(subject, None)
        elif kind == "MODE":
            if isinstance(value, dict) and isinstance(value.get("mode"), str):
                self.modes[subject] = value["mode"]
            else:
                self.modes.pop(subject, None)
        elif kind == "DELETE_SUBJECT" and isinstance(subject, str) and isinstance(value, dict):
            upto = value.get("version")
            for v, ver in self.subjects.get(subject, {}).items():
                if isinstance(upto, int) and v <= upto:
                    ver.deleted = True
        return True

    def _apply_schema(self, subject: str, version: int, value: Any) -> bool:
        if not isinstance(value, dict):  # tombstone: permanently deleted
            versions = self.subjects.get(subject, {})
            gone = versions.pop(version, None)
            if gone is not None:
                self._unuse(gone.schema_id, subject)
            if not versions:
                self.subjects.pop(subject, None)
            return True
        sid, text = value.get("id"), value.get("schema")
        if not isinstance(sid, int) or not isinstance(text, str):
            return True
        stype = str(value.get("schemaType") or "AVRO")
        refs = value.get("references") or []
        known = self.schemas.get(sid)
        held = self.subjects.get(subject, {}).get(version)
        if (known is not None and (known.schema, known.schema_type) != (text, stype)) or (
            held is not None and held.schema_id != sid
        ):
            return False  # contradicts an earlier record: the first one wins
        if sid not in self.schemas:
            self.schemas[sid] = SchemaEntry(sid, text, stype, list(refs))
            self._by_text.setdefault((stype, text, _refs_key(refs)), sid)
        self.max_id = max(self.max_id, sid)
        versions = self.subjects.setdefault(subject, {})
        before = versions.get(version)
        if before is not None:
            self._unuse(before.schema_id, subject)
        versions[version] = Version(sid, bool(value.get("deleted", False)))
        by_subject = self._uses.setdefault(sid, {})
        by_subject[subject] = by_subject.get(subject, 0) + 1
        return True

    def _unuse(self, sid: int, subject: str) -> None:
        by_subject = self._uses[sid]
        by_subject[subject] -= 1
        if not by_subject[subject]:
            del by_subject[subject]

    # -- queries ----------------------------------------------------------------------------------
    def subject_names(self, deleted: bool = False) -> list[str]:
        return sorted(
            s for s, vs in self.subjects.items() if deleted or any(not v.deleted for v in vs.values())
        )

    def versions(self, subject: str, deleted: bool = False) -> dict[int, Version]:
        """The subject's versions (live ones unless ``deleted``); 40401 when it has none."""
        found = {n: v for n, v in sorted(self.subjects.get(subject, {}).items()) if deleted or not v.deleted}
        if not found:
            raise RegistryError.subject_not_found(subject)
        return found

    def version(self, subject: str, version: str | int, deleted: bool = False) -> tuple[int, Version]:
        versions = self.versions(subject, deleted)
        n = parse_version(version)
        if n == -1:
            n = max(versions)
        if n not in versions:
            raise RegistryError.version_not_found(n)
        return n, versions[n]

    def version_answer(self, subject: str, n: int, v: Version) -> dict[str, Any]:
        entry = self.schemas[v.schema_id]
        out: dict[str, Any] = {"subject": subject, "version": n, "id": v.schema_id}
        if entry.schema_type != "AVRO":
            out["schemaType"] = entry.schema_type
        if entry.references:
            out["references"] = entry.references
        out["schema"] = entry.schema
        return out

    def schema_by_id(self, schema_id: int) -> SchemaEntry:
        entry = self.schemas.get(schema_id)
        if entry is None or not self._uses.get(schema_id):
            raise RegistryError.schema_id_not_found(schema_id)
        return entry

    def subjects_using(self, schema_id: int) -> list[str]:
        """The subjects with a version (soft-deleted ones included) naming ``schema_id``."""
        return list(self._uses.get(schema_id, ()))

    def uses_of(self, schema_id: int, deleted: bool = False) -> list[dict[str, Any]]:
        return [
            {"subject": s, "version": n}
            for s, vs in sorted(self.subjects.items())
            for n, v in sorted(vs.items())
            if v.schema_id == schema_id and (deleted or not v.deleted)
        ]

    def level(self, subject: str | None) -> Level:
        for scope in (subject, None):
            conf = self.configs.get(scope)
            if conf and "compatibilityLevel" in conf:
                try:
                    return parse_level(conf["compatibilityLevel"])
                except ValueError:
                    pass
        return DEFAULT_LEVEL

    def normalize_default(self, subject: str | None) -> bool:
        for scope in (subject, None):
            conf = self.configs.get(scope)
            if conf and "normalize" in conf:
                return bool(conf["normalize"])
        return False

    def mode(self, subject: str | None) -> str:
        return self.modes.get(subject) or self.modes.get(None) or "READWRITE"

    def parse(self, text: str, schema_type: str, references: Any, normalize: bool) -> ParsedSchema:
        """Parse a request's schema with its references resolved; 42201 when it is invalid."""
        try:
            ref_texts = self._reference_texts(references)
            return parse_schema(text, schema_type, ref_texts, normalize)
        except ValueError as exc:
            raise RegistryError.invalid_schema(str(exc)) from exc

    def _reference_texts(self, references: Any) -> list[str]:
        if not references:
            return []
        if not isinstance(references, list):
            raise ValueError("references must be a list")
        texts = []
        for ref in references:
            if not isinstance(ref, dict) or not isinstance(ref.get("subject"), str):
                raise ValueError(f"invalid reference {ref!r}")
            try:
                _, v = self.version(ref["subject"], ref.get("version", "latest"))
            except RegistryError as exc:
                raise ValueError(f"reference {ref!r} not found: {exc.message}") from exc
            texts.append(self.schemas[v.schema_id].schema)
        return texts

    def parsed(self, schema_id: int) -> ParsedSchema:
        entry = self.schemas[schema_id]
        if entry.parsed is None:
            entry.parsed = self.parse(entry.schema, entry.schema_type, entry.references, False)
        return entry.parsed

    def lookup(
        self, subject: str, parsed: ParsedSchema, references: Any, deleted: bool = False
    ) -> dict[str, Any]:
        """POST /subjects/{s}: the version of ``subject`` holding this schema."""
        versions = self.versions(subject, deleted)
        sid = self._by_text.get((parsed.schema_type, parsed.canonical, _refs_key(references or [])))
        for n, v in sorted(versions.items(), reverse=True):
            if v.schema_id == sid:
                return self.version_answer(subject, n, v)
        raise RegistryError.schema_not_found()

    def incompatibilities(self, subject: str, parsed: ParsedSchema, version: str | None = None) -> list[str]:
        """Why ``parsed`` may not join ``subject`` under its level (against one version if given)."""
        try:
            live = self.versions(subject)
        except RegistryError:
            if version is None or parse_version(version) == -1:
                return []
            raise
        if version is not None:
            n, _ = self.version(subject, version)
            return check(
                parsed.avro, [(n, self.parsed(live[n].schema_id).avro)], _single(self.level(subject))
            )
        earlier = [(n, self.parsed(v.schema_id).avro) for n, v in live.items()]
        return check(parsed.avro, earlier, self.level(subject))

    # -- planning writes (no side effect) -------------------------------------------------------
    def plan_register(self, subject: str, parsed: ParsedSchema, references: Any) -> tuple[int, list[Record]]:
        """The id ``parsed`` gets in ``subject`` and the records to write (none if it is there)."""
        refs = list(references or [])
        sid = self._by_text.get((parsed.schema_type, parsed.canonical, _refs_key(refs)))
        existing = self.subjects.get(subject, {})
        for v in existing.values():
            if not v.deleted and v.schema_id == sid and sid is not None:
                return sid, []
        if self.mode(subject) in ("READONLY", "READONLY_OVERRIDE"):
            raise RegistryError.operation_not_permitted(f"Subject {subject} is in read-only mode")
        problems = self.incompatibilities(subject, parsed)
        if problems:
            raise RegistryError.incompatible(subject, problems)
        if sid is None:
            sid = self.max_id + 1
        version = max(existing, default=0) + 1
        value: dict[str, Any] = {"subject": subject, "version": version, "id": sid}
        if parsed.schema_type != "AVRO":
            value["schemaType"] = parsed.schema_type
        if refs:
            value["references"] = refs
        value.update({"schema": parsed.canonical, "deleted": False})
        return sid, [(encode_key("SCHEMA", subject, version), _value(value))]

    def plan_delete_version(self, subject: str, version: str, permanent: bool) -> tuple[int, list[Record]]:
        self._writable(subject)
        n, v = self.version(subject, version, deleted=True)
        if parse_version(version) == -1 and not permanent:
            n, v = self.version(subject, version)
        key = encode_key("SCHEMA", subject, n)
        if permanent:
            if not v.deleted:
                raise RegistryError.version_not_soft_deleted(subject, n)
            return n, [(key, None)]
        if v.deleted:
            raise RegistryError.version_soft_deleted(subject, n)
        self._refuse_if_referenced(subject, n)
        entry = self.schemas[v.schema_id]
        value: dict[str, Any] = {"subject": subject, "version": n, "id": v.schema_id}
        if entry.schema_type != "AVRO":
            value["schemaType"] = entry.schema_type
        if entry.references:
            value["references"] = entry.references
        value.update({"schema": entry.schema, "deleted": True})
        return n, [(key, _value(value))]

    def plan_delete_subject(self, subject: str, permanent: bool) -> tuple[list[int], list[Record]]:
        self._writable(subject)
        every = self.versions(subject, deleted=True)
        live = [n for n, v in every.items() if not v.deleted]
        if permanent:
            if live:
                raise RegistryError.subject_not_soft_deleted(subject)
            records: list[Record] = [(encode_key("SCHEMA", subject, n), None) for n in every]
            records += [(encode_key("CONFIG", subject), None)] if subject in self.configs else []
            records += [(encode_key("MODE", subject), None)] if subject in self.modes else []
            return sorted(every), records
        if not live:
            raise RegistryError.subject_soft_deleted(subject)
        for n in live:
            self._refuse_if_referenced(subject, n)
        value = _value({"subject": subject, "version": max(live)})
        return live, [(encode_key("DELETE_SUBJECT", subject), value)]

    def plan_config(self, subject: str | None, body: Any) -> tuple[dict[str, Any], list[Record]]:
        if not isinstance(body, dict):
            raise RegistryError.unprocessable("the body must be a JSON object")
        level = body.get("compatibility", body.get("compatibilityLevel"))
        value: dict[str, Any] = dict(self.configs.get(subject) or {})
        answer: dict[str, Any] = {}
        if level is not None:
            try:
                value["compatibilityLevel"] = parse_level(level).value
            except ValueError:
                raise RegistryError.invalid_compatibility_level() from None
            answer["compatibility"] = value["compatibilityLevel"]
        if "normalize" in body:
            if not isinstance(body["normalize"], bool):
                raise RegistryError.unprocessable("normalize must be true or false")
            value["normalize"] = answer["normalize"] = body["normalize"]
        if not answer:
            raise RegistryError.invalid_compatibility_level()
        return answer, [(encode_key("CONFIG", subject), _value(value))]

    def plan_delete_config(self, subject: str | None) -> tuple[dict[str, Any], list[Record]]:
        if subject is not None and subject not in self.configs:
            if subject not in self.subjects:
                raise RegistryError.subject_not_found(subject)
            raise RegistryError.subject_compatibility_not_configured(subject)
        answer = {"compatibilityLevel": self.level(subject).value}
        return answer, [(encode_key("CONFIG", subject), None)]

    def plan_mode(self, subject: str | None, body: Any) -> tuple[dict[str, Any], list[Record]]:
        mode = body.get("mode") if isinstance(body, dict) else None
        if not isinstance(mode, str) or mode.upper() not in MODES:
            raise RegistryError.invalid_mode()
        return {"mode": mode.upper()}, [(encode_key("MODE", subject), _value({"mode": mode.upper()}))]

    def plan_delete_mode(self, subject: str) -> tuple[dict[str, Any], list[Record]]:
        if subject not in self.modes:
            raise RegistryError.subject_mode_not_configured(subject)
        return {"mode": self.mode(subject)}, [(encode_key("MODE", subject), None)]

    def _writable(self, subject: str) -> None:
        if self.mode(subject) in ("READONLY", "READONLY_OVERRIDE"):
            raise RegistryError.operation_not_permitted(f"Subject {subject} is in read-only mode")

    def _refuse_if_referenced(self, subject: str, version: int) -> None:
        users = [
            sid
            for sid, e in self.schemas.items()
            for r in e.references
            if r.get("subject") == subject and r.get("version") == version and self.uses_of(sid)
        ]
        if users:
            raise RegistryError.reference_exists(
                f"One or more references exist to the schema {{subject={subject}, version={version}}}."
            )


def _single(level: Level) -> Level:
    """The non-transitive level checking the same direction (for one given version)."""
    singles = {
        Level.BACKWARD_TRANSITIVE: Level.BACKWARD,
        Level.FORWARD_TRANSITIVE: Level.FORWARD,
        Level.FULL_TRANSITIVE: Level.FULL,
    }
    return singles.get(level, level)


def _refs_key(references: Iterable[Any]) -> str:
    return json.dumps(list(references), sort_keys=True, separators=(",", ":"))


def parse_version(version: str | int) -> int:
    """A version id from a path: 1..2^31-1, or -1 for ``latest`` (and ``-1``); 42202 otherwise."""
    if isinstance(version, int):
        n = version
    elif version == "latest":
        return -1
    else:
        try:
            n = int(version)
        except ValueError:
            raise RegistryError.invalid_version(version) from None
    if n == -1:
        return -1
    if not 1 <= n <= MAX_VERSION:
        raise RegistryError.invalid_version(str(version))
    return n
