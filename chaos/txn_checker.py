"""What ``sftraffic chaos --workload transactions`` concludes: pure functions, no I/O.

The transactional workload (``chaos/txn_workload.py``) writes transactions of ``per_txn``
records, each record's value ``"<producer>:<n>:<i>"`` (transaction ``"<producer>:<n>"``, the
``n``-th of that producer, record ``i``), spread over the topic's partitions; some are aborted
on purpose. A :class:`TxnHistory` holds what the clients saw:

* ``outcomes``: transaction -> ``committed`` (``commit_transaction`` returned), ``aborted``
  (``abort_transaction`` returned) or ``unknown`` (the producer failed mid-transaction or
  mid-commit and was replaced: the transaction may have committed or not);
* ``reads``: every record the live readers read during the run (reader, partition, offset,
  value), at ``isolation`` (``read_committed`` unless a broken setup is asked for);
* ``final``: every record of every partition read at ``isolation`` after healing, once no
  transaction was open (last stable offset = high watermark), as (partition, offset, value).

Each transaction is judged as Jepsen's Kafka checker does for its anomalies:

* **aborted read (G1a)**: a record of an aborted transaction read, live or in the final read;
* **torn**: part of a transaction visible in the final read (committed or unknown: all or none);
* **lost**: a committed transaction with none of its records in the final read;
* **duplicated**: a record read twice in the final read (at two offsets);
* **offsets**: a reader's offsets in a partition that do not strictly increase;
* **foreign**: records of a transaction the workload never began (the one after a producer's
  last recorded is allowed: the workload may stop between a commit and its recording).

:func:`classify` gives the anomalies of the final read by kind; :func:`judge_lines` the same
as one line each (what the integration tests assert on); :func:`judge` the whole
:class:`~chaos.checker.Verdict` of a run.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from chaos.checker import EXAMPLES, FAIL, INFO, PASS, Check, Verdict

COMMITTED, ABORTED, UNKNOWN = "committed", "aborted", "unknown"


@dataclass(frozen=True, slots=True)
class TxnRead:
    reader: str
    partition: int
    offset: int
    value: str


@dataclass
class TxnHistory:
    per_txn: int
    isolation: str = "read_committed"
    outcomes: dict[str, str] = field(default_factory=dict)  # "<producer>:<n>" -> outcome
    reads: list[TxnRead] = field(default_factory=list)
    final: list[tuple[int, int, str]] = field(default_factory=list)  # (partition, offset, value)
    final_complete: bool = True


def txn_of(value: str) -> str | None:
    """``"t1:17:3"`` -> ``"t1:17"``; None for a value the workload did not write."""
    txn, sep, idx = value.rpartition(":")
    producer, sep2, n = txn.rpartition(":")
    if not (sep and sep2 and producer and n.isdigit() and idx.isdigit()):
        return None
    return txn


def _next_after_last(outcomes: Mapping[str, str]) -> set[str]:
    """Each producer's transaction after its last recorded one (may be in flight at the end)."""
    last: dict[str, int] = {}
    for txn in outcomes:
        producer, _, n = txn.rpartition(":")
        last[producer] = max(last.get(producer, 0), int(n))
    return {f"{p}:{n + 1}" for p, n in last.items()}


def classify(outcomes: Mapping[str, str], values: Iterable[str], per_txn: int) -> dict[str, list[str]]:
    """The anomalies of a final read's ``values``, by kind, one line each (all empty: correct)."""
    seen = Counter(values)
    out: dict[str, list[str]] = {k: [] for k in ("aborted read", "torn", "lost", "duplicated", "foreign")}
    out["duplicated"] = [f"{v!r} seen {k} times" for v, k in sorted(seen.items()) if k > 1]
    visible: Counter[str] = Counter()  # distinct records per transaction
    for v in seen:
        txn = txn_of(v)
        visible[txn if txn is not None else f"?{v}"] += 1
    for txn, outcome in sorted(outcomes.items(), key=lambda kv: _order(kv[0])):
        got = visible.get(txn, 0)
        if outcome == COMMITTED and got == 0:
            out["lost"].append(f"txn {txn} committed, 0 of {per_txn} visible")
        elif outcome == COMMITTED and got != per_txn:
            out["torn"].append(f"txn {txn} committed, {got} of {per_txn} visible")
        elif outcome == ABORTED and got:
            out["aborted read"].append(f"txn {txn} aborted, {got} visible")
        elif outcome == UNKNOWN and got not in (0, per_txn):
            out["torn"].append(f"txn {txn} unknown, {got} of {per_txn} visible")
    unexplained = set(visible) - set(outcomes) - _next_after_last(outcomes)
    if unexplained:
        out["foreign"].append(f"records of unrecorded transactions {sorted(unexplained, key=_order)}")
    return out


def _order(txn: str) -> tuple[str, int]:
    producer, _, n = txn.rpartition(":")
    return (producer, int(n)) if n.isdigit() else (txn, -1)


def judge_lines(outcomes: Mapping[str, str], values: Iterable[str], per_txn: int) -> list[str]:
    """Every anomaly of a final read, one line each, prefixed with its kind (empty: correct)."""
    return [
        f"{kind}: {line}" for kind, lines in classify(outcomes, values, per_txn).items() for line in lines
    ]


def non_monotonic(reads: Iterable[TxnRead]) -> list[dict[str, Any]]:
    """Reads whose offset is not above the same reader's previous one in that partition."""
    last: dict[tuple[str, int], int] = {}
    bad = []
    for r in reads:
        key = (r.reader, r.partition)
        prev = last.get(key)
        if prev is not None and r.offset <= prev:
            bad.append({"reader": r.reader, "partition": r.partition, "offset": r.offset, "after": prev})
        last[key] = r.offset
    return bad


def live_aborted_reads(outcomes: Mapping[str, str], reads: Iterable[TxnRead]) -> list[dict[str, Any]]:
    """Live reads of records of aborted transactions (G1a while the run went on)."""
    return [
        {"reader": r.reader, "partition": r.partition, "offset": r.offset, "value": r.value}
        for r in reads
        if outcomes.get(txn_of(r.value) or "") == ABORTED
    ]


def judge(h: TxnHistory) -> Verdict:
    """Every check of a transactional run."""
    anomalies = classify(h.outcomes, (v for _p, _o, v in h.final), h.per_txn)
    counts = Counter(h.outcomes.values())
    committed = counts[COMMITTED]
    live_g1a = live_aborted_reads(h.outcomes, h.reads)
    g1a = anomalies["aborted read"]
    checks = [
        Check(
            "aborted read (G1a)",
            FAIL if g1a or live_g1a else PASS,
            f"{len(g1a)} of {counts[ABORTED]} aborted transactions visible in the final read, "
            f"{len(live_g1a)} live reads of aborted records ({h.isolation})",
            {"aborted": counts[ABORTED], "visible": len(g1a), "live_reads": len(live_g1a)},
            [*g1a[:EXAMPLES], *live_g1a[:EXAMPLES]][:EXAMPLES],
        ),
        Check(
            "torn",
            FAIL if anomalies["torn"] else PASS,
            f"{len(anomalies['torn'])} transactions partly visible "
            f"({committed} committed, {counts[UNKNOWN]} unknown, {h.per_txn} records each)",
            {"torn": len(anomalies["torn"])},
            anomalies["torn"][:EXAMPLES],
        ),
        Check(
            "lost",
            FAIL if anomalies["lost"] else PASS,
            f"{len(anomalies['lost'])} of {committed} committed transactions missing from the final read",
            {"committed": committed, "lost": len(anomalies["lost"])},
            anomalies["lost"][:EXAMPLES],
        ),
        Check(
            "duplicated",
            FAIL if anomalies["duplicated"] else PASS,
            f"{len(anomalies['duplicated'])} records at two offsets or more",
            {"duplicated": len(anomalies["duplicated"])},
            anomalies["duplicated"][:EXAMPLES],
        ),
    ]
    final_reads = [TxnRead("final", p, o, v) for p, o, v in h.final]
    bad = non_monotonic([*h.reads, *final_reads])
    readers = sorted({r.reader for r in h.reads} | ({"final"} if h.final else set()))
    checks.append(
        Check(
            "offsets",
            FAIL if bad else PASS,
            f"{len(bad)} reads not after the same reader's previous offset in the partition "
            f"({len(readers)} readers, {len(h.reads) + len(h.final)} reads)",
            {"non_monotonic": len(bad), "readers": readers},
            bad[:EXAMPLES],
        )
    )
    checks.append(
        Check(
            "foreign",
            FAIL if anomalies["foreign"] else PASS,
            anomalies["foreign"][0] if anomalies["foreign"] else "every record was written by the run",
        )
    )
    unknown_in = _unknown_visible(h)
    checks.append(
        Check(
            "unknown outcomes",
            INFO if counts[UNKNOWN] else PASS,
            f"{counts[UNKNOWN]} transactions of unknown outcome (producer replaced): "
            f"{unknown_in} committed, {counts[UNKNOWN] - unknown_in} not",
            {"unknown": counts[UNKNOWN], "committed": unknown_in},
        )
    )
    if committed == 0:
        checks.append(Check("progress", FAIL, "no transaction was committed: nothing was tested"))
    if not h.final_complete:
        checks.append(
            Check("final read", FAIL, "a transaction stayed open or not every partition was read to its end")
        )
    return Verdict(checks)


def _unknown_visible(h: TxnHistory) -> int:
    txns: defaultdict[str, int] = defaultdict(int)
    for _p, _o, v in h.final:
        txn = txn_of(v)
        if txn is not None and h.outcomes.get(txn) == UNKNOWN:
            txns[txn] += 1
    return sum(1 for n in txns.values() if n == h.per_txn)
