"""Records of the schema registry's ``_schemas`` topic as the registry writes them: a schema
version (:func:`schema`) and a subject's deletion (:func:`delete_subject`)."""

from __future__ import annotations

import json

from registry.state import encode_key


def schema(subject: str, version: int, sid: int, deleted: bool = False) -> tuple[bytes, bytes]:
    value = {"subject": subject, "version": version, "id": sid, "schema": '"string"', "deleted": deleted}
    return encode_key("SCHEMA", subject, version), json.dumps(value).encode()


def delete_subject(subject: str, upto: int) -> tuple[bytes, bytes]:
    return encode_key("DELETE_SUBJECT", subject), json.dumps({"subject": subject, "version": upto}).encode()
