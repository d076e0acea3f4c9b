"""The chaos checker on synthetic histories: each kind of anomaly is found, counted and
located, and a clean history passes every check."""

from __future__ import annotations

import pytest

from chaos.checker import (
    FAIL,
    INFO,
    PASS,
    Ack,
    History,
    PartitionState,
    Read,
    judge,
    longest_gap,
    parse_value,
)


def clean(n: int = 20, partitions: int = 2) -> History:
    """Two producers, values to partition seq % partitions, every one acknowledged at 0.1 s
    intervals, read live and found where acknowledged; whole ISRs."""
    h = History(partitions=partitions, start=0.0, end=n * 0.1 + 0.1)
    nxt = dict.fromkeys(range(partitions), 0)
    t = 0.0
    for seq in range(n // 2):
        for producer in ("p1", "p2"):
            value, p = f"{producer}:{seq}", seq % partitions
            t += 0.1
            h.sent[value] = p
            h.acks.append(Ack(value, p, nxt[p], t))
            h.reads.append(Read(p, nxt[p], value, t + 0.05))
            h.final.setdefault(p, []).append((nxt[p], value))
            nxt[p] += 1
    h.states = [PartitionState("t", p, 1, (1, 2, 3), (1, 2, 3)) for p in range(partitions)]
    return h


def statuses(h: History, **kw: object) -> dict[str, str]:
    return {c.name: c.status for c in judge(h, **kw).checks}  # type: ignore[arg-type]


def test_a_clean_history_passes_every_check() -> None:
    v = judge(clean())
    assert v.passed
    assert {c.status for c in v.checks} == {PASS}
    assert v["lost"].figures == {"acknowledged": 20, "lost": 0, "lost_per_partition": {}}
    assert v["reads"].figures["reads"] == 20


def test_a_lost_acknowledged_message_is_named_with_its_partition_offset_and_ack_time() -> None:
    h = clean()
    p, records = 1, clean().final[1]
    h.final[p] = records[:-2]  # the last two acknowledged records of partition 1 are gone
    v = judge(h)
    assert not v.passed
    lost = v["lost"]
    assert lost.status == FAIL
    assert lost.figures["lost"] == 2 and lost.figures["lost_per_partition"] == {1: 2}
    assert [(e["partition"], e["offset"]) for e in lost.examples] == [(1, 8), (1, 9)]
    assert lost.examples[0]["value"] == records[-2][1]
    # what the reader saw at those offsets vanished too
    assert v["reads"].figures["vanished"] == 2


def test_a_duplicate_fails_with_idempotence_and_is_reported_without_it() -> None:
    h = clean()
    h.final[0].append((10, h.final[0][3][1]))  # an acknowledged value written a second time
    v = judge(h)
    assert v["duplicated"].status == FAIL
    assert v["duplicated"].figures["duplicated_acked"] == 1
    assert v["duplicated"].examples[0]["at"] == [(0, 3), (0, 10)]
    assert v["lost"].status == PASS and v["misplaced"].status == PASS
    at_least_once = judge(h, exactly_once=False)
    assert at_least_once["duplicated"].status == INFO
    assert at_least_once.passed


def test_a_duplicate_of_an_unacknowledged_message_is_counted_apart() -> None:
    h = clean()
    h.sent["p1:99"] = 0
    h.failed["p1:99"] = "_MSG_TIMED_OUT"
    h.final[0] += [(10, "p1:99"), (11, "p1:99")]
    v = judge(h)
    assert v["duplicated"].figures == {
        "duplicated": 1,
        "duplicated_acked": 0,
        "duplicated_unacked": 1,
        "values": 1,
    }
    assert v["unacked present"].status == INFO
    assert v["unacked present"].figures["failed_present"] == 1


def test_a_message_at_another_offset_than_acknowledged_is_misplaced() -> None:
    h = clean()
    (o1, v1), (o2, v2) = h.final[0][2], h.final[0][3]
    h.final[0][2], h.final[0][3] = (o1, v2), (o2, v1)  # swapped: both present, wrong offsets
    v = judge(h)
    assert v["misplaced"].status == FAIL
    assert v["misplaced"].figures["misplaced"] == 2
    assert v["lost"].status == PASS
    assert v["reads"].figures["changed"] == 2  # the reader had seen them the other way round


def test_two_acknowledgements_of_one_offset_are_a_conflict() -> None:
    h = clean()
    a = h.acks[0]
    h.sent["p1:50"] = a.partition
    h.acks.append(Ack("p1:50", a.partition, a.offset, 9.0))  # the offset handed out again
    v = judge(h)
    assert v["misplaced"].figures["conflicting_acks"] == 1
    assert v["misplaced"].status == FAIL
    assert v["lost"].figures["lost"] == 1  # p1:50 is nowhere


def test_an_acknowledgement_without_an_offset_only_needs_its_partition() -> None:
    """librdkafka acknowledges a failed batch without offsets once the next leader accepted the
    sequence numbers after it ("implicitly acked"): no misplacement, no conflict between them."""
    h = clean()
    implicit = [Ack(a.value, a.partition, None, a.t) for a in h.acks[:2]]
    h.acks = implicit + h.acks[2:]
    v = judge(h)
    assert v["misplaced"].status == PASS
    assert v["lost"].status == PASS
    other = 1 - implicit[0].partition
    h.acks[0] = Ack(implicit[0].value, other, None, implicit[0].t)  # acknowledged for another partition
    v = judge(h)
    assert v["misplaced"].status == FAIL and v["misplaced"].figures["misplaced"] == 1


def test_a_reordered_producer_fails_the_order_check_unless_idempotence_is_off() -> None:
    h = clean(n=12, partitions=1)
    recs = h.final[0]
    # p1's seq 2 and 3 written in the opposite order (offsets 4 and 6), acks to match
    (o_a, v_a), (o_b, v_b) = recs[4], recs[6]
    assert (v_a, v_b) == ("p1:2", "p1:3")
    recs[4], recs[6] = (o_a, v_b), (o_b, v_a)
    h.acks = [Ack(v, 0, o, a.t) for a, (o, v) in zip(h.acks, recs, strict=True)]
    h.reads = []
    v = judge(h)
    assert v["order"].status == FAIL
    assert v["order"].figures["reordered"] == 1
    assert v["order"].examples[0] == {
        "partition": 0,
        "producer": "p1",
        "offset": 6,
        "seq": 2,
        "after": [3, 4],
    }
    assert v["misplaced"].status == PASS
    assert judge(h, exactly_once=False)["order"].status == INFO


def test_a_read_that_changed_or_vanished_fails() -> None:
    h = clean()
    h.reads.append(Read(0, 3, "p2:77", 1.0))  # read a value the final log has not at 3
    h.reads.append(Read(1, 42, "p1:78", 1.5))  # read beyond the final log end
    h.reads.append(Read(1, 42, "p1:78", 1.6))  # the same read again counts once
    v = judge(h)
    r = v["reads"]
    assert r.status == FAIL
    assert (r.figures["vanished"], r.figures["changed"]) == (1, 1)
    assert {(e["partition"], e["offset"]) for e in r.examples} == {(0, 3), (1, 42)}
    changed = next(e for e in r.examples if "final" in e)
    assert changed["read"] == "p2:77" and changed["final"] == h.final[0][3][1]


def test_the_longest_gap_counts_the_edges_and_each_partition() -> None:
    assert longest_gap([2.0, 3.0], 0.0, 10.0) == (7.0, 3.0, 10.0)
    assert longest_gap([], 1.0, 4.0) == (3.0, 1.0, 4.0)
    assert longest_gap([5.0, 50.0], 0.0, 10.0) == (5.0, 0.0, 5.0)  # an ack after the end is ignored

    h = clean(n=20, partitions=2)
    # partition 1 silent from 0.4 s to the end: the run as a whole keeps acknowledging
    h.acks = [a for a in h.acks if a.partition == 0 or a.t <= 0.4]
    v = judge(h, max_gap=1.0)
    g = v["ack gap"]
    assert g.figures["longest_gap_s"] < 0.5
    assert g.figures["per_partition_s"][1] == pytest.approx(h.end - 0.4)
    assert g.status == FAIL
    assert judge(h, max_gap=5.0)["ack gap"].status == PASS


def test_no_acknowledgement_at_all_fails_the_gap_check() -> None:
    h = clean()
    h.acks = []
    assert judge(h)["ack gap"].status == FAIL


def test_isr_not_whole_or_leaderless_fails() -> None:
    h = clean()
    h.states[0] = PartitionState("t", 0, 1, (1, 2, 3), (1, 2))
    h.states[1] = PartitionState("t", 1, -1, (1, 2, 3), (1, 2, 3))
    v = judge(h)
    assert v["isr"].status == FAIL
    assert v["isr"].figures == {"partitions": 2, "not_whole": 2}
    h.states = []
    assert judge(h)["isr"].status == FAIL


def test_foreign_values_and_values_in_the_wrong_partition_fail() -> None:
    h = clean()
    h.final[0].append((10, "garbage"))
    moved = h.final[1].pop()
    h.final[0].append((11, moved[1]))
    v = judge(h)
    assert v["foreign"].figures == {"unknown": 1, "wrong_partition": 1}
    assert v["foreign"].status == FAIL
    assert v["misplaced"].figures["misplaced"] == 1


def test_unacknowledged_messages_present_are_counted_not_failed() -> None:
    h = clean()
    h.sent["p2:10"] = 0
    h.final[0].append((10, "p2:10"))  # no delivery report at all (the producer gave up)
    h.sent["p2:11"] = 0
    h.failed["p2:11"] = "_MSG_TIMED_OUT"  # failed and absent
    v = judge(h)
    u = v["unacked present"]
    assert u.status == INFO
    assert u.figures["unacked_present"] == 1
    assert u.figures["delivery_errors"] == 1 and u.figures["unreported"] == 1
    assert v.passed


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ("p1:17", ("p1", 17)),
        ("p1.2:0", ("p1.2", 0)),
        ("a:b:3", ("a:b", 3)),
        ("x", None),
        (":3", None),
        ("p:", None),
    ],
)
def test_parse_value(value: str, parsed: tuple[str, int] | None) -> None:
    assert parse_value(value) == parsed


def test_the_verdict_serialises_to_json() -> None:
    import json

    doc = judge(clean()).to_json()
    assert doc["passed"] is True
    assert [c["name"] for c in doc["checks"]][:3] == ["lost", "duplicated", "misplaced"]
    json.dumps(doc)
