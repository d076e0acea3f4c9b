"""The id tracking of schema validation (``framework/coordinator/schema_ids.py``): subject ->
ids of its live versions, from ``_schemas`` records as the registry writes them (its own
``encode_key``), soft and permanent deletes, contradictions and unreadable records."""

from __future__ import annotations

from framework.coordinator.schema_ids import SchemaIds
from registry.state import encode_key
from tests.support.schemas_topic import delete_subject, schema


def test_versions_register_their_ids_under_their_subject_only() -> None:
    s = SchemaIds()
    assert s.apply(*schema("t-value", 1, 1))
    assert s.apply(*schema("t-value", 2, 5))
    assert s.apply(*schema("u-value", 1, 5))  # one id, two subjects
    assert s.ids("t-value") == {1, 5} and s.ids("u-value") == {5}
    assert s.ids("t-key") == set() and s.ids("elsewhere") == set()
    assert not s.apply(*schema("t-value", 2, 5))  # the same record again: nothing new


def test_the_set_handed_out_stays_current() -> None:
    s = SchemaIds()
    held = s.ids("t-value")  # asked before anything is registered (a check in flight)
    s.apply(*schema("t-value", 1, 3))
    assert held == {3} and s.ids("t-value") is held
    s.apply(*delete_subject("t-value", 1))
    assert held == set()


def test_soft_deleted_versions_do_not_count() -> None:
    s = SchemaIds()
    for v, sid in ((1, 1), (2, 2), (3, 3)):
        s.apply(*schema("t-value", v, sid))
    assert s.apply(*delete_subject("t-value", 2))  # versions <= 2
    assert s.ids("t-value") == {3}
    assert s.apply(*schema("t-value", 3, 3, deleted=True))  # one version soft-deleted
    assert s.ids("t-value") == set() and s.subjects() == []
    s.apply(*schema("t-value", 4, 1))  # registered again: a new version, its old id
    assert s.ids("t-value") == {1}


def test_permanently_deleted_versions_do_not_count() -> None:
    s = SchemaIds()
    s.apply(*schema("t-value", 1, 1))
    s.apply(*schema("t-value", 2, 1))
    assert not s.apply(encode_key("SCHEMA", "t-value", 1), None)  # id 1 still held by version 2
    assert s.ids("t-value") == {1}
    assert s.apply(encode_key("SCHEMA", "t-value", 2), None)
    assert s.ids("t-value") == set()
    assert not s.apply(encode_key("SCHEMA", "t-value", 9), None)  # unknown version: nothing


def test_a_version_given_another_id_later_is_ignored_the_first_wins() -> None:
    s = SchemaIds()
    s.apply(*schema("t-value", 1, 1))
    assert not s.apply(*schema("t-value", 1, 2))
    assert s.ids("t-value") == {1}


def test_other_and_unreadable_records_are_ignored() -> None:
    s = SchemaIds()
    for key, value in [
        (encode_key("CONFIG", "t-value"), b'{"compatibilityLevel":"NONE"}'),
        (encode_key("MODE", None), b'{"mode":"READWRITE"}'),
        (encode_key("NOOP"), None),
        (b"not json", b"{}"),
        (b"[1, 2]", b"{}"),
        (None, None),
        (encode_key("SCHEMA", "t-value", 1), b"not json"),
        (encode_key("SCHEMA", "t-value", 1), b'{"id": "seven"}'),
        (encode_key("SCHEMA", "t-value", 1), b'{"id": true}'),
        (b'{"keytype":"SCHEMA","subject":"t-value","version":"1","magic":1}', b'{"id": 1}'),
        (encode_key("DELETE_SUBJECT", "nobody"), b'{"version": 3}'),
    ]:
        assert not s.apply(key, value)
    assert s.subjects() == []
