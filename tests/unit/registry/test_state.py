"""registry/state.py: plans change nothing; the records they return, applied in order
(as every instance reads them back from _schemas), give Confluent's answers."""

from __future__ import annotations

import json
from typing import Any

import pytest

from registry.errors import RegistryError
from registry.state import RegistryState, encode_key, parse_version

V1 = json.dumps({"type": "record", "name": "T", "fields": [{"name": "a", "type": "int"}]})
V2 = json.dumps(
    {
        "type": "record",
        "name": "T",
        "fields": [{"name": "a", "type": "int"}, {"name": "b", "type": "int", "default": 0}],
    }
)
BAD = json.dumps(
    {"type": "record", "name": "T", "fields": [{"name": "a", "type": "int"}, {"name": "c", "type": "string"}]}
)


class Log:
    """A stand-in for the _schemas topic: records applied in order, kept for a replay."""

    def __init__(self) -> None:
        self.state = RegistryState()
        self.records: list[tuple[bytes, bytes | None]] = []

    def do(self, planned: tuple[Any, list[tuple[bytes, bytes | None]]]) -> Any:
        answer, records = planned
        for k, v in records:
            self.records.append((k, v))
            self.state.apply(k, v)
        return answer

    def register(self, subject: str, text: str) -> int:
        parsed = self.state.parse(text, "AVRO", [], False)
        return int(self.do(self.state.plan_register(subject, parsed, [])))

    def replay(self) -> RegistryState:
        s = RegistryState()
        for k, v in self.records:
            s.apply(k, v)
        return s


def code(exc: pytest.ExceptionInfo[RegistryError]) -> int:
    return exc.value.error_code


def test_register_ids_versions_and_dedup() -> None:
    log = Log()
    assert log.register("s", V1) == 1
    assert log.register("s", V1) == 1 and len(log.records) == 1  # already there: nothing written
    assert log.register("s", V2) == 2
    assert log.register("other", V1) == 1  # the same schema keeps its id in another subject
    assert list(log.state.versions("s")) == [1, 2]
    assert log.state.version("s", "latest")[0] == 2
    assert log.state.uses_of(1) == [{"subject": "other", "version": 1}, {"subject": "s", "version": 1}]


def test_plan_changes_nothing_and_incompatible_names_the_field() -> None:
    log = Log()
    log.register("s", V1)
    with pytest.raises(RegistryError) as exc:
        log.register("s", BAD)
    assert code(exc) == 409 and exc.value.http_status == 409 and "'c'" in exc.value.message
    assert len(log.records) == 1 and list(log.state.versions("s")) == [1]


def test_invalid_schema_is_42201() -> None:
    with pytest.raises(RegistryError) as exc:
        RegistryState().parse("{nope", "AVRO", [], False)
    assert code(exc) == 42201 and exc.value.http_status == 422


@pytest.mark.parametrize("bad", ["0", "-2", "x", str(2**31), "1.5"])
def test_invalid_versions(bad: str) -> None:
    with pytest.raises(RegistryError) as exc:
        parse_version(bad)
    assert code(exc) == 42202


def test_soft_then_permanent_delete_of_a_version() -> None:
    log = Log()
    log.register("s", V1)
    log.register("s", V2)
    with pytest.raises(RegistryError) as exc:
        log.do(log.state.plan_delete_version("s", "1", permanent=True))
    assert code(exc) == 40407
    assert log.do(log.state.plan_delete_version("s", "1", permanent=False)) == 1
    with pytest.raises(RegistryError) as exc:
        log.do(log.state.plan_delete_version("s", "1", permanent=False))
    assert code(exc) == 40406
    assert list(log.state.versions("s")) == [2]
    assert list(log.state.versions("s", deleted=True)) == [1, 2]
    assert log.state.schema_by_id(1).schema == V1.replace(" ", "")  # soft-deleted: id still served
    assert log.do(log.state.plan_delete_version("s", "1", permanent=True)) == 1
    with pytest.raises(RegistryError) as exc:
        log.state.schema_by_id(1)
    assert code(exc) == 40403
    assert log.register("s", V1) == 1  # back as version 3, same id
    assert list(log.state.versions("s")) == [2, 3]


def test_delete_subject() -> None:
    log = Log()
    log.register("s", V1)
    log.register("s", V2)
    with pytest.raises(RegistryError) as exc:
        log.do(log.state.plan_delete_subject("s", permanent=True))
    assert code(exc) == 40405
    assert log.do(log.state.plan_delete_subject("s", permanent=False)) == [1, 2]
    assert log.state.subject_names() == [] and log.state.subject_names(deleted=True) == ["s"]
    with pytest.raises(RegistryError) as exc:
        log.state.versions("s")
    assert code(exc) == 40401
    with pytest.raises(RegistryError) as exc:
        log.do(log.state.plan_delete_subject("s", permanent=False))
    assert code(exc) == 40404
    assert log.do(log.state.plan_delete_subject("s", permanent=True)) == [1, 2]
    assert log.state.subject_names(deleted=True) == []


def test_config_and_mode() -> None:
    log = Log()
    assert log.state.level("s").value == "BACKWARD"
    assert log.do(log.state.plan_config(None, {"compatibility": "full"})) == {"compatibility": "FULL"}
    assert log.do(log.state.plan_config("s", {"compatibility": "NONE"})) == {"compatibility": "NONE"}
    assert log.state.level("s").value == "NONE" and log.state.level("t").value == "FULL"
    with pytest.raises(RegistryError) as exc:
        log.state.plan_config("s", {"compatibility": "sideways"})
    assert code(exc) == 42203
    assert log.do(log.state.plan_delete_config("s")) == {"compatibilityLevel": "NONE"}
    assert log.state.level("s").value == "FULL"
    with pytest.raises(RegistryError) as exc:
        log.state.plan_mode(None, {"mode": "SIDEWAYS"})
    assert code(exc) == 42204
    log.do(log.state.plan_mode(None, {"mode": "READONLY"}))
    with pytest.raises(RegistryError) as exc:
        log.register("s", V1)
    assert code(exc) == 42205


def test_replay_gives_the_same_state() -> None:
    log = Log()
    log.register("s", V1)
    log.register("s", V2)
    log.register("t", V1)
    log.do(log.state.plan_delete_version("s", "1", permanent=False))
    log.do(log.state.plan_config("t", {"compatibility": "FORWARD"}))
    again = log.replay()
    assert again.subjects.keys() == log.state.subjects.keys()
    assert {s: list(again.versions(s, True)) for s in again.subjects} == {"s": [1, 2], "t": [1]}
    assert again.max_id == 2 and again.level("t").value == "FORWARD"
    assert list(again.versions("s")) == [2]


def test_keys_are_confluents() -> None:
    assert encode_key("SCHEMA", "s", 1) == b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}'
    assert encode_key("CONFIG") == b'{"keytype":"CONFIG","subject":null,"magic":0}'
    assert encode_key("NOOP") == b'{"keytype":"NOOP","magic":0}'


def test_unreadable_records_are_skipped() -> None:
    s = RegistryState()
    for key, value in [(b"garbage", b"{}"), (b"[1]", None), (encode_key("SCHEMA", "s", 1), b"{not json")]:
        s.apply(key, value)
    s.apply(encode_key("SCHEMA", "s", 1), b'{"id": "x"}')
    assert s.subject_names(deleted=True) == []


def test_two_writers_first_record_wins_everywhere() -> None:
    """Two instances that both believed they led planned against the same state: both records
    reach the log, every instance applies the first and refuses the second."""
    a, b = Log(), Log()
    pa = a.state.plan_register("s", a.state.parse(V1, "AVRO", [], False), [])
    pb = b.state.plan_register("t", b.state.parse(V2, "AVRO", [], False), [])
    assert pa[0] == pb[0] == 1  # the same id for two schemas
    state = RegistryState()
    results = [state.apply(k, v) for k, v in pa[1] + pb[1]]
    assert results == [True, False]
    assert state.subject_names() == ["s"] and state.schema_by_id(1).schema == json.dumps(
        json.loads(V1), separators=(",", ":")
    )
    # the same subject version with another id is refused too; a soft delete (same id) is not
    other = RegistryState()
    other.apply(*pa[1][0])
    clash = b.state.plan_register("s", b.state.parse(V2, "AVRO", [], False), [])[1][0]
    assert clash[0] == pa[1][0][0] and other.apply(*clash) is False
    _, recs = other.plan_delete_version("s", "1", permanent=False)
    assert other.apply(*recs[0]) is True and list(other.versions("s", deleted=True)) == [1]
