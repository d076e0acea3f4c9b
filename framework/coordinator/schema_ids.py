"""Which schema ids each subject holds, from the schema registry's ``_schemas`` records.

The registry (:mod:`registry`, or Confluent's, or Karapace) keeps its state in the
compacted ``_schemas`` topic, keys and values as JSON (the format is documented in
:mod:`registry.state`). Schema validation needs only part of it: for each subject
the ids of its live versions. Records applied in log order:

==================  ======================================================================
key                 value
==================  ======================================================================
SCHEMA S, V         ``{"id": I, "deleted": D, ...}``: version V of S holds id I (soft-deleted
                    when D); null: version V permanently deleted. A record giving a held
                    version another id is ignored (the first one wins, as in the registry)
DELETE_SUBJECT S    ``{"version": V}``: versions <= V of S soft-deleted
anything else       ignored (CONFIG, MODE, NOOP, unreadable records)
==================  ======================================================================

An id is valid for a subject while some version of the subject that is not deleted (softly or
permanently) holds it, which is what the registry lists for the subject.

Invariant: :meth:`ids` returns, for a subject, one set object kept equal to its live ids
(changed in place, so a caller may hold it across records). Not thread-safe: the broker applies
records and reads sets on its event loop.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["SchemaIds"]


class SchemaIds:
    __slots__ = ("_live", "_versions")

    def __init__(self) -> None:
        # subject -> version -> (schema id, deleted)
        self._versions: dict[str, dict[int, tuple[int, bool]]] = {}
        self._live: dict[str, set[int]] = {}  # subject -> ids of its versions not deleted

    def ids(self, subject: str) -> set[int]:
        """The ids registered under ``subject`` (its live versions'); do not change the set."""
        live = self._live.get(subject)
        if live is None:
            live = self._live[subject] = set()
        return live

    def subjects(self) -> list[str]:
        """Subjects with at least one live version."""
        return sorted(s for s, ids in self._live.items() if ids)

    def apply(self, key_raw: bytes | None, value_raw: bytes | None) -> bool:
        """Apply one ``_schemas`` record; True when a subject's ids changed."""
        key = _json(key_raw)
        if not isinstance(key, dict):
            return False
        kind, subject = key.get("keytype"), key.get("subject")
        if not isinstance(subject, str):
            return False
        value = _json(value_raw)
        if kind == "SCHEMA":
            version = key.get("version")
            if not isinstance(version, int):
                return False
            return self._apply_schema(subject, version, value)
        if kind == "DELETE_SUBJECT" and isinstance(value, dict):
            upto = value.get("version")
            versions = self._versions.get(subject)
            if not isinstance(upto, int) or not versions:
                return False
            for v, (sid, deleted) in list(versions.items()):
                if v <= upto and not deleted:
                    versions[v] = (sid, True)
            return self._recount(subject)
        return False

    def _apply_schema(self, subject: str, version: int, value: Any) -> bool:
        versions = self._versions.setdefault(subject, {})
        if not isinstance(value, dict):  # tombstone: the version permanently deleted
            if versions.pop(version, None) is None:
                return False
            return self._recount(subject)
        sid = value.get("id")
        if not isinstance(sid, int) or isinstance(sid, bool):
            return False
        held = versions.get(version)
        if held is not None and held[0] != sid:
            return False  # contradicts an earlier record: the first one wins
        versions[version] = (sid, bool(value.get("deleted", False)))
        return self._recount(subject)

    def _recount(self, subject: str) -> bool:
        live = {sid for sid, deleted in self._versions.get(subject, {}).values() if not deleted}
        held = self.ids(subject)
        if held == live:
            return False
        held.clear()
        held.update(live)
        return True


def _json(raw: bytes | None) -> Any:
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
