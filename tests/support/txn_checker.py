"""The transactional checker of the chaos tests (issue 19), as a pure function over a history.

A history is what a workload recorded (the outcome of each transaction, by number) and what a
read_committed reader saw afterwards (the record values ``b"<txn>-<i>"``). Each transaction
is judged as Jepsen's Kafka checker does for its anomalies:

* committed (``commit_transaction`` returned): all its records, each once; fewer is a lost
  write or a torn transaction;
* aborted (``abort_transaction`` returned): none of its records (an aborted read, G1a);
* unknown (the producer failed mid-commit and was replaced): all or none (else torn);
* any record seen twice: a duplicate;
* records of a transaction the workload never began: unexplained writes (the one after the
  last recorded is allowed: the workload may stop between its commit and the recording).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping


def judge(outcomes: Mapping[int, str], values: Iterable[bytes], per_txn: int) -> list[str]:
    """Every anomaly in the history, one line each (empty: the history is correct)."""
    seen = Counter(values)
    problems = [f"duplicate: {v!r} seen {k} times" for v, k in seen.items() if k > 1]
    visible = Counter(int(v.split(b"-")[0]) for v in seen)  # distinct records per transaction
    for n, outcome in sorted(outcomes.items()):
        got = visible.get(n, 0)
        if outcome == "committed" and got != per_txn:
            problems.append(f"txn {n} committed, {got} of {per_txn} visible (lost write or torn)")
        elif outcome == "aborted" and got:
            problems.append(f"txn {n} aborted, {got} visible (aborted read)")
        elif outcome == "unknown" and got not in (0, per_txn):
            problems.append(f"txn {n} torn: {got} of {per_txn} visible")
    unexplained = set(visible) - set(outcomes) - {max(outcomes, default=0) + 1}
    if unexplained:
        problems.append(f"records of unrecorded transactions {sorted(unexplained)}")
    return problems
