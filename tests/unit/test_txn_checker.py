"""The chaos tests' transactional checker (tests/support/txn_checker.py) fails on broken
histories: each anomaly a broken store could show (a read_committed that reads aborted data,
a torn commit, a lost write, a duplicate) is reported, a correct history passes."""

from __future__ import annotations

from tests.support.txn_checker import judge

PER = 3


def recs(n: int, idx: range = range(PER)) -> list[bytes]:
    return [f"{n}-{i}".encode() for i in idx]


OUTCOMES = {1: "committed", 2: "aborted", 3: "unknown", 4: "committed", 5: "unknown"}
CORRECT = [*recs(1), *recs(3), *recs(4)]  # txn 3 (unknown) all in, txn 5 (unknown) all out


def test_a_correct_history_passes() -> None:
    assert judge(OUTCOMES, CORRECT, PER) == []
    # the transaction after the last recorded one may have committed without being recorded
    assert judge(OUTCOMES, [*CORRECT, *recs(6)], PER) == []


def test_an_aborted_read_is_reported() -> None:
    # what read_committed behaving as read_uncommitted (or a lost abort marker) shows
    assert judge(OUTCOMES, [*CORRECT, *recs(2, range(1))], PER) == ["txn 2 aborted, 1 visible (aborted read)"]


def test_a_torn_transaction_is_reported() -> None:
    got = judge(OUTCOMES, [*CORRECT, *recs(5, range(2))], PER)
    assert got == ["txn 5 torn: 2 of 3 visible"]
    got = judge(OUTCOMES, [v for v in CORRECT if v != b"4-2"], PER)
    assert got == ["txn 4 committed, 2 of 3 visible (lost write or torn)"]


def test_a_lost_committed_transaction_is_reported() -> None:
    got = judge(OUTCOMES, [v for v in CORRECT if not v.startswith(b"1-")], PER)
    assert got == ["txn 1 committed, 0 of 3 visible (lost write or torn)"]


def test_a_duplicate_is_reported() -> None:
    assert judge(OUTCOMES, [*CORRECT, b"4-1"], PER) == ["duplicate: b'4-1' seen 2 times"]


def test_records_of_a_transaction_never_begun_are_reported() -> None:
    assert judge(OUTCOMES, [*CORRECT, *recs(9)], PER) == ["records of unrecorded transactions [9]"]
