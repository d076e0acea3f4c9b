"""The transactional checker of ``sftraffic chaos --workload transactions``
(chaos/txn_checker.py) fails on broken histories: each anomaly a broken store
could show (a read_committed that reads aborted data, a torn commit, a lost write, a
duplicate, a reader going backwards) is reported, a correct history passes."""

from __future__ import annotations

from chaos.txn_checker import FAIL, PASS, TxnHistory, TxnRead, judge, judge_lines

PER = 3


def recs(txn: str, idx: range = range(PER)) -> list[str]:
    return [f"{txn}:{i}" for i in idx]


OUTCOMES = {"t1:1": "committed", "t1:2": "aborted", "t1:3": "unknown", "t2:1": "committed", "t2:2": "unknown"}
CORRECT = [*recs("t1:1"), *recs("t1:3"), *recs("t2:1")]  # t1:3 (unknown) all in, t2:2 all out


def test_a_correct_history_passes() -> None:
    assert judge_lines(OUTCOMES, CORRECT, PER) == []
    # the transaction after a producer's last recorded one may have committed unrecorded
    assert judge_lines(OUTCOMES, [*CORRECT, *recs("t1:4"), *recs("t2:3")], PER) == []


def test_an_aborted_read_is_reported() -> None:
    # what read_committed behaving as read_uncommitted (or a lost abort marker) shows
    got = judge_lines(OUTCOMES, [*CORRECT, *recs("t1:2", range(1))], PER)
    assert got == ["aborted read: txn t1:2 aborted, 1 visible"]


def test_a_torn_transaction_is_reported() -> None:
    got = judge_lines(OUTCOMES, [*CORRECT, *recs("t2:2", range(2))], PER)
    assert got == ["torn: txn t2:2 unknown, 2 of 3 visible"]
    got = judge_lines(OUTCOMES, [v for v in CORRECT if v != "t2:1:2"], PER)
    assert got == ["torn: txn t2:1 committed, 2 of 3 visible"]


def test_a_lost_committed_transaction_is_reported() -> None:
    got = judge_lines(OUTCOMES, [v for v in CORRECT if not v.startswith("t1:1:")], PER)
    assert got == ["lost: txn t1:1 committed, 0 of 3 visible"]


def test_a_duplicate_is_reported() -> None:
    assert judge_lines(OUTCOMES, [*CORRECT, "t2:1:1"], PER) == ["duplicated: 't2:1:1' seen 2 times"]


def test_records_of_a_transaction_never_begun_are_reported() -> None:
    got = judge_lines(OUTCOMES, [*CORRECT, *recs("t1:9"), "junk"], PER)
    assert got == ["foreign: records of unrecorded transactions ['?junk', 't1:9']"]


def history(final: list[str], reads: list[TxnRead] | None = None) -> TxnHistory:
    h = TxnHistory(per_txn=PER, outcomes=dict(OUTCOMES), reads=reads or [])
    h.final = [(0, o, v) for o, v in enumerate(final)]
    return h


def test_the_verdict_of_a_run() -> None:
    ok = judge(history(CORRECT, [TxnRead("r1", 0, o, v) for o, v in enumerate(CORRECT)]))
    assert ok.passed and ok["aborted read (G1a)"].status == PASS
    assert ok["unknown outcomes"].figures == {"unknown": 2, "committed": 1}
    # a live read of an aborted record (the final read clean): G1a all the same
    bad = judge(history(CORRECT, [TxnRead("r1", 0, 7, "t1:2:0")]))
    assert not bad.passed and bad["aborted read (G1a)"].figures["live_reads"] == 1


def test_a_reader_going_backwards_is_reported() -> None:
    reads = [TxnRead("r1", 0, 5, "t1:1:0"), TxnRead("r2", 0, 1, "t1:1:0"), TxnRead("r1", 0, 5, "t1:1:0")]
    v = judge(history(CORRECT, reads))
    assert v["offsets"].status == FAIL
    assert v["offsets"].examples == [{"reader": "r1", "partition": 0, "offset": 5, "after": 5}]


def test_a_run_that_committed_nothing_fails() -> None:
    h = TxnHistory(per_txn=PER, outcomes={"t1:1": "aborted"})
    assert judge(h)["progress"].status == FAIL
