"""What ``sftraffic chaos`` concludes from the history of a run: pure functions, no I/O.

A :class:`History` is what the clients saw, nothing the brokers said about themselves:

* ``sent``: every value a producer handed to its client, ``"<producer>:<seq>"`` (unique in the
  run; a producer's sequence numbers increase in the order it sent them), with the partition
  it was sent to;
* ``acks``: every acknowledgement (value, partition, offset, arrival time);
* ``failed``: the values whose delivery report was an error (not acknowledged);
* ``reads``: every record the live reader read during the run (partition, offset, value, time);
* ``final``: every partition read from its start to its high watermark after healing;
* ``states``: each partition's leader, replicas and ISR (Metadata) after healing;
* ``start`` / ``end``: when production started and stopped (times are seconds from the run's
  start, one clock for acks, reads and the nemesis timeline).

:func:`judge` runs every check and returns a :class:`Verdict`; a check is PASS, FAIL, or INFO
(reported, never a failure: e.g. unacknowledged messages that made it, or duplicates of a
producer that does not promise exactly-once). Each check carries its figures and up to
``EXAMPLES`` examples so that a failure can be traced to partitions, offsets and times.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

PASS, FAIL, INFO = "PASS", "FAIL", "INFO"
EXAMPLES = 10


@dataclass(frozen=True, slots=True)
class Ack:
    value: str
    partition: int
    # None: acknowledged without an offset (librdkafka's "implicitly acked by subsequent batch
    # success": the batch failed, e.g. NOT_LEADER_OR_FOLLOWER from a leader moved away, but
    # the next leader, which had it from replication, accepted the following sequence numbers)
    offset: int | None
    t: float


@dataclass(frozen=True, slots=True)
class Read:
    partition: int
    offset: int
    value: str
    t: float


@dataclass(frozen=True, slots=True)
class PartitionState:
    topic: str
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]

    @property
    def whole(self) -> bool:
        return self.leader >= 0 and sorted(self.isr) == sorted(self.replicas)


@dataclass
class History:
    partitions: int
    sent: dict[str, int] = field(default_factory=dict)  # value -> partition it was sent to
    acks: list[Ack] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # value -> delivery error
    reads: list[Read] = field(default_factory=list)
    final: dict[int, list[tuple[int, str]]] = field(default_factory=dict)  # partition -> (offset, value)
    states: list[PartitionState] = field(default_factory=list)
    start: float = 0.0
    end: float = 0.0


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # PASS | FAIL | INFO
    summary: str  # the figures, one line
    figures: dict[str, Any] = field(default_factory=dict)
    examples: list[Any] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return self.status == FAIL


@dataclass(frozen=True)
class Verdict:
    checks: list[Check]

    @property
    def passed(self) -> bool:
        return not any(c.failed for c in self.checks)

    def __getitem__(self, name: str) -> Check:
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(name)

    def to_json(self) -> dict[str, Any]:
        return {"passed": self.passed, "checks": [asdict(c) for c in self.checks]}


def parse_value(value: str) -> tuple[str, int] | None:
    """``"p1:17"`` -> ``("p1", 17)``; None for a value no producer of the run wrote."""
    producer, sep, seq = value.rpartition(":")
    if not sep or not producer or not seq.isdigit():
        return None
    return producer, int(seq)


def _status(bad: int, allowed: bool = False) -> str:
    if bad == 0:
        return PASS
    return INFO if allowed else FAIL


def _where(final: dict[int, list[tuple[int, str]]]) -> dict[str, list[tuple[int, int]]]:
    """value -> every (partition, offset) holding it in the final read."""
    out: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for p, records in final.items():
        for o, v in records:
            out[v].append((p, o))
    return out


# -- the checks ------------------------------------------------------------------------------
def check_lost(h: History, where: dict[str, list[tuple[int, int]]]) -> Check:
    """Every acknowledged value is somewhere in the final read."""
    acked = _latest_acks(h.acks)
    lost = [a for a in acked.values() if a.value not in where]
    lost.sort(key=lambda a: (a.partition, -1 if a.offset is None else a.offset))
    per_partition = Counter(a.partition for a in lost)
    return Check(
        "lost",
        _status(len(lost)),
        f"{len(lost)} of {len(acked)} acknowledged messages missing from the final read",
        {
            "acknowledged": len(acked),
            "lost": len(lost),
            "lost_per_partition": dict(sorted(per_partition.items())),
        },
        [
            {"value": a.value, "partition": a.partition, "offset": a.offset, "acked_at": round(a.t, 3)}
            for a in lost[:EXAMPLES]
        ],
    )


def check_duplicated(h: History, where: dict[str, list[tuple[int, int]]], exactly_once: bool) -> Check:
    """No value is in the final read twice (allowed, INFO, for a producer without idempotence)."""
    acked = {a.value for a in h.acks}
    dups = {v: sorted(places) for v, places in where.items() if len(places) > 1}
    extra_acked = sum(len(p) - 1 for v, p in dups.items() if v in acked)
    extra_other = sum(len(p) - 1 for v, p in dups.items() if v not in acked)
    total = extra_acked + extra_other
    note = "" if exactly_once else " (allowed: producer without idempotence)"
    return Check(
        "duplicated",
        _status(total, allowed=not exactly_once),
        f"{total} extra copies ({extra_acked} of acknowledged, "
        f"{extra_other} of unacknowledged messages){note}",
        {
            "duplicated": total,
            "duplicated_acked": extra_acked,
            "duplicated_unacked": extra_other,
            "values": len(dups),
        },
        [{"value": v, "at": p} for v, p in sorted(dups.items())[:EXAMPLES]],
    )


def check_misplaced(h: History, where: dict[str, list[tuple[int, int]]]) -> Check:
    """An acknowledged value is at the partition and offset its acknowledgement named (in that
    partition when it named no offset), and no two acknowledgements named the same offset."""
    acked = _latest_acks(h.acks)
    misplaced = []
    for a in acked.values():
        places = where.get(a.value)
        if not places:
            continue  # lost, not misplaced
        if a.offset is None:
            wrong = all(p != a.partition for p, _o in places)
        else:
            wrong = (a.partition, a.offset) not in places
        if wrong:
            misplaced.append({"value": a.value, "acked_at": [a.partition, a.offset], "found_at": places})
    by_offset: dict[tuple[int, int], set[str]] = defaultdict(set)
    for a in h.acks:
        if a.offset is not None:
            by_offset[(a.partition, a.offset)].add(a.value)
    conflicts = {k: sorted(v) for k, v in by_offset.items() if len(v) > 1}
    examples = misplaced[:EXAMPLES] + [
        {"offset": list(k), "acknowledged_values": v} for k, v in sorted(conflicts.items())[:EXAMPLES]
    ]
    return Check(
        "misplaced",
        _status(len(misplaced) + len(conflicts)),
        f"{len(misplaced)} acknowledged messages at another offset than acknowledged, "
        f"{len(conflicts)} offsets acknowledged for two values",
        {"misplaced": len(misplaced), "conflicting_acks": len(conflicts)},
        examples,
    )


def check_order(h: History, exactly_once: bool) -> Check:
    """Within a partition, each producer's sequence numbers increase with the offset."""
    reordered = []
    for p, records in sorted(h.final.items()):
        last: dict[str, tuple[int, int]] = {}  # producer -> (seq, offset) seen last
        for o, v in sorted(records):
            parsed = parse_value(v)
            if parsed is None:
                continue
            producer, seq = parsed
            prev = last.get(producer)
            if prev is not None and seq < prev[0]:
                reordered.append(
                    {"partition": p, "producer": producer, "offset": o, "seq": seq, "after": list(prev)}
                )
            if prev is None or seq > prev[0]:
                last[producer] = (seq, o)
    note = "" if exactly_once else " (allowed: producer without idempotence)"
    return Check(
        "order",
        _status(len(reordered), allowed=not exactly_once),
        f"{len(reordered)} records after a later record of the same producer{note}",
        {"reordered": len(reordered)},
        reordered[:EXAMPLES],
    )


def check_reads(h: History) -> Check:
    """A value read at an offset during the run is the value at that offset in the final read."""
    final = {(p, o): v for p, records in h.final.items() for o, v in records}
    vanished, changed = [], []
    seen: set[tuple[int, int, str]] = set()
    for r in h.reads:
        key = (r.partition, r.offset, r.value)
        if key in seen:
            continue
        seen.add(key)
        now = final.get((r.partition, r.offset))
        item = {"partition": r.partition, "offset": r.offset, "read": r.value, "read_at": round(r.t, 3)}
        if now is None:
            vanished.append(item)
        elif now != r.value:
            changed.append({**item, "final": now})
    bad = len(vanished) + len(changed)
    return Check(
        "reads",
        _status(bad),
        f"{len(seen)} distinct reads: {len(vanished)} vanished, {len(changed)} changed",
        {"reads": len(seen), "vanished": len(vanished), "changed": len(changed)},
        (vanished[:EXAMPLES] + changed[:EXAMPLES])[:EXAMPLES],
    )


def longest_gap(times: Iterable[float], start: float, end: float) -> tuple[float, float, float]:
    """The longest silence between ``start``, the sorted ``times`` inside [start, end], and
    ``end``: (length, from, to)."""
    points = [start, *sorted(t for t in times if start <= t <= end), end]
    best = (0.0, start, start)
    for a, b in itertools.pairwise(points):
        if b - a > best[0]:
            best = (b - a, a, b)
    return best


def check_gaps(h: History, max_gap: float) -> Check:
    """The longest time without an acknowledgement, the whole run and per partition
    (production start and stop count as edges; acks after production stopped do not)."""
    overall = longest_gap((a.t for a in h.acks), h.start, h.end)
    per: dict[int, tuple[float, float, float]] = {}
    for p in range(h.partitions):
        per[p] = longest_gap((a.t for a in h.acks if a.partition == p), h.start, h.end)
    worst_p = max(per, key=lambda p: per[p][0]) if per else None
    worst = per[worst_p][0] if worst_p is not None else overall[0]
    return Check(
        "ack gap",
        FAIL if worst > max_gap or not h.acks else PASS,
        f"longest without any ack {overall[0]:.1f} s (at {overall[1]:.1f}-{overall[2]:.1f} s); "
        f"per partition {worst:.1f} s (partition {worst_p}); limit {max_gap:.0f} s",
        {
            "longest_gap_s": round(overall[0], 3),
            "longest_gap_at_s": [round(overall[1], 3), round(overall[2], 3)],
            "longest_partition_gap_s": round(worst, 3),
            "per_partition_s": {p: round(g[0], 3) for p, g in per.items()},
            "per_partition_at_s": {p: [round(g[1], 3), round(g[2], 3)] for p, g in per.items()},
            "limit_s": max_gap,
        },
    )


def check_isr(h: History) -> Check:
    """After healing, every partition has a leader and all its replicas in its ISR."""
    broken = [s for s in h.states if not s.whole]
    topics = ", ".join(sorted({s.topic for s in h.states}))
    return Check(
        "isr",
        FAIL if broken or not h.states else PASS,
        f"{len(h.states) - len(broken)} of {len(h.states)} partitions ({topics}) with every replica in sync",
        {"partitions": len(h.states), "not_whole": len(broken)},
        [asdict(s) for s in broken[:EXAMPLES]],
    )


def check_unacked(h: History, where: dict[str, list[tuple[int, int]]]) -> Check:
    """Unacknowledged values that were nevertheless written: allowed (the ack was lost, or the
    producer gave up on a write that made it), counted."""
    acked = {a.value for a in h.acks}
    present = [v for v in h.sent if v not in acked and v in where]
    failed_present = sum(1 for v in present if v in h.failed)
    unreported = sum(1 for v in h.sent if v not in acked and v not in h.failed)
    return Check(
        "unacked present",
        INFO if present else PASS,
        f"{len(present)} unacknowledged messages present ({failed_present} reported failed); "
        f"{len(h.failed)} delivery errors, {unreported} without a report",
        {
            "sent": len(h.sent),
            "unacked_present": len(present),
            "failed_present": failed_present,
            "delivery_errors": len(h.failed),
            "unreported": unreported,
        },
        sorted(present)[:EXAMPLES],
    )


def check_foreign(h: History, where: dict[str, list[tuple[int, int]]]) -> Check:
    """Every value in the final read was sent by a producer of the run, to that partition."""
    unknown = sorted((places, v) for v, places in where.items() if v not in h.sent)
    wrong = sorted(
        (places, v) for v, places in where.items() if v in h.sent and any(p != h.sent[v] for p, _o in places)
    )
    return Check(
        "foreign",
        _status(len(unknown) + len(wrong)),
        f"{len(unknown)} values nobody sent, {len(wrong)} in another partition than sent to",
        {"unknown": len(unknown), "wrong_partition": len(wrong)},
        [{"value": v, "at": places} for places, v in (unknown + wrong)[:EXAMPLES]],
    )


def _latest_acks(acks: list[Ack]) -> dict[str, Ack]:
    """One acknowledgement per value (a value is acknowledged once; keep the last if not)."""
    return {a.value: a for a in acks}


def judge(h: History, *, exactly_once: bool = True, max_gap: float = 30.0) -> Verdict:
    """Every check of the module docstring, in the order the verdict table shows them."""
    where = _where(h.final)
    return Verdict(
        [
            check_lost(h, where),
            check_duplicated(h, where, exactly_once),
            check_misplaced(h, where),
            check_order(h, exactly_once),
            check_reads(h),
            check_gaps(h, max_gap),
            check_isr(h),
            check_foreign(h, where),
            check_unacked(h, where),
        ]
    )
