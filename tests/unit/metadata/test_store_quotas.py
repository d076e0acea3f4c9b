"""Client quotas in the metadata store (plan, apply as the quorum would, persist, snapshot)."""

from __future__ import annotations

import json
from pathlib import Path

from framework import config as cfg
from framework.metadata.store import MetadataStore
from framework.security import quotas as q


def _store(d: Path) -> MetadataStore:
    s = MetadataStore(d, cfg.BrokerConfig.load(environ={}))
    s.load()
    return s


ALICE = q.entity([("user", "alice")])
ALICE_DEFAULT_CLIENT = q.entity([("user", "alice"), ("client-id", None)])
DEFAULT_CLIENT = q.entity([("client-id", None)])


def test_quotas_persist_and_keys_are_removed(tmp_path: Path) -> None:
    s = _store(tmp_path)
    events: list[str] = []
    s.listeners.append(lambda e, n: events.append(e))
    s.client_quotas(
        [
            (ALICE, {"producer_byte_rate": 1024.0, "request_percentage": 5.0}),
            (DEFAULT_CLIENT, {"consumer_byte_rate": 10.0}),
        ]
    )
    assert events == ["quotas_changed"]
    again = _store(tmp_path)
    assert again.quotas == {
        ALICE: {"producer_byte_rate": 1024.0, "request_percentage": 5.0},
        DEFAULT_CLIENT: {"consumer_byte_rate": 10.0},
    }
    again.client_quotas(
        [(ALICE, {"producer_byte_rate": None}), (DEFAULT_CLIENT, {"consumer_byte_rate": None})]
    )
    assert _store(tmp_path).quotas == {ALICE: {"request_percentage": 5.0}}
    # removing what is not there changes nothing: no change to propose
    assert again.plan_client_quotas([(ALICE_DEFAULT_CLIENT, {"producer_byte_rate": None})]).op is None


def test_change_survives_the_quorums_json_and_snapshots(tmp_path: Path) -> None:
    a = _store(tmp_path / "a")
    change = a.plan_client_quotas([(ALICE_DEFAULT_CLIENT, {"consumer_byte_rate": 2048.0})])
    assert change.op is not None
    assert a.apply(change.op, json.loads(json.dumps(change.arg))) is None
    assert a.quotas == {ALICE_DEFAULT_CLIENT: {"consumer_byte_rate": 2048.0}}
    b = _store(tmp_path / "b")
    b.restore(json.loads(json.dumps(a.snapshot())))
    assert b.quotas == a.quotas
