"""``__transaction_state`` records (coordinator/transaction_log.py): Kafka's TransactionLog
key and value (version 0), byte for byte, and back."""

from __future__ import annotations

import struct

from framework.coordinator.transaction_log import parse, txn_key, txn_value
from framework.coordinator.transactions import TxnRecord, TxnState


def test_key_is_version_0_and_the_id() -> None:
    assert txn_key("tx") == b"\x00\x00" + b"\x00\x02tx"


def test_value_layout_is_kafkas_version_0() -> None:
    r = TxnRecord("tx", 7, 2, 60_000, TxnState.ONGOING, frozenset({("b", 1), ("a", 3), ("a", 0)}), 11, 10)
    want = (
        struct.pack(">hqhib", 0, 7, 2, 60_000, 1)
        + struct.pack(">i", 2)
        + b"\x00\x01a"
        + struct.pack(">iii", 2, 0, 3)
        + b"\x00\x01b"
        + struct.pack(">ii", 1, 1)
        + struct.pack(">qq", 11, 10)
    )
    assert txn_value(r) == want
    assert parse(txn_key("tx"), want) == r


def test_every_state_round_trips_and_dead_is_a_tombstone() -> None:
    for st in TxnState:
        r = TxnRecord("t", 1, 0, 1000, st, frozenset(), 5, -1)
        v = txn_value(r)
        if st is TxnState.DEAD:
            assert v is None
            assert parse(txn_key("t"), v) == "t"
        else:
            assert parse(txn_key("t"), v) == r


def test_unknown_key_versions_are_skipped() -> None:
    assert parse(b"\x00\x05\x00\x01t", b"") is None
