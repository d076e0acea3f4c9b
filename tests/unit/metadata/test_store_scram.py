"""SCRAM credentials in the metadata store (plan, apply, persist, snapshot), never in clear."""

from __future__ import annotations

from pathlib import Path

import pytest

from framework import config as cfg
from framework.errors import (
    DuplicateResource,
    ResourceNotFound,
    UnacceptableCredential,
    UnsupportedSaslMechanism,
)
from framework.metadata.store import MetadataStore
from framework.security import scram


def _store(d: Path) -> MetadataStore:
    s = MetadataStore(d, cfg.BrokerConfig.load(environ={}))
    s.load()
    return s


def test_credentials_persist_salted_and_hashed(tmp_path: Path) -> None:
    s = _store(tmp_path)
    events: list[tuple[str, str]] = []
    s.listeners.append(lambda e, n: events.append((e, n)))
    c256 = scram.from_password("SCRAM-SHA-256", "hunter2-secret")
    c512 = scram.from_password("SCRAM-SHA-512", "hunter2-secret")
    s.scram_credentials("alice", [c256, c512], [])
    assert events == [("scram_changed", "alice")]
    again = _store(tmp_path)
    assert again.credential("alice", "SCRAM-SHA-256") == c256
    assert again.credential("alice", "SCRAM-SHA-512") == c512
    assert again.credential("bob", "SCRAM-SHA-256") is None
    raw = (tmp_path / "__metadata" / "metadata.json").read_bytes()
    assert b"hunter2-secret" not in raw
    # delete one mechanism, then the other: the user is gone
    again.scram_credentials("alice", [], ["SCRAM-SHA-256"])
    assert again.credential("alice", "SCRAM-SHA-256") is None and "alice" in again.scram
    again.scram_credentials("alice", [], ["SCRAM-SHA-512"])
    assert "alice" not in _store(tmp_path).scram


def test_snapshot_and_restore_carry_credentials(tmp_path: Path) -> None:
    a = _store(tmp_path / "a")
    a.scram_credentials("alice", [scram.from_password("SCRAM-SHA-256", "pw")], [])
    b = _store(tmp_path / "b")
    b.restore(a.snapshot())
    assert b.credential("alice", "SCRAM-SHA-256") == a.credential("alice", "SCRAM-SHA-256")


def test_kafka_checks(tmp_path: Path) -> None:
    s = _store(tmp_path)
    c = scram.from_password("SCRAM-SHA-256", "pw")
    with pytest.raises(UnacceptableCredential):
        s.plan_scram_credentials("", [c], [])
    with pytest.raises(DuplicateResource):
        s.plan_scram_credentials("alice", [c], ["SCRAM-SHA-256"])
    with pytest.raises(ResourceNotFound):
        s.plan_scram_credentials("alice", [], ["SCRAM-SHA-256"])
    with pytest.raises(UnsupportedSaslMechanism):
        s.plan_scram_credentials("alice", [], ["SCRAM-SHA-1"])
    # a plan is only a plan
    s.plan_scram_credentials("alice", [c], [])
    assert s.scram == {}
