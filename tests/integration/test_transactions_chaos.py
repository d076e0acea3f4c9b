"""Transactions under faults: a transactional producer commits transactions of 12
records spread over 6 partitions of a 3-broker cluster while the chaos nemesis's three faults
hit brokers one after another (coordinator or partition leader, whichever it hits): SIGKILL
then restart, SIGSTOP for 1-3 s (past broker.session.timeout.ms: fenced, then back) then
SIGCONT, SIGTERM (controlled shutdown) then restart. Then every transaction is judged from
what a read_committed reader sees:

* committed (commit_transaction returned): all its records, each once (no lost write, no
  torn transaction, no duplicate);
* aborted (abort_transaction returned after an abortable error): none of its records (no
  aborted read, G1a);
* unknown (the producer failed fatally mid-commit and was replaced): all or none.

Every fifth transaction is aborted by the workload itself once its records are in the logs, so
aborted reads have something to show. A read_committed consumer's offsets must only grow per
partition. The workload and the judging are those of ``sftraffic chaos --workload
transactions`` (:mod:`chaos.txn_workload`, :func:`chaos.txn_checker.
judge_lines`), whose unit test shows the checker reporting each anomaly in crafted histories;
here it is also shown to fail on a broken setup: a reader at read_uncommitted (one that ignores
transactions) sees the aborted transactions.
"""

from __future__ import annotations

import random
import signal
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from chaos.txn_checker import TxnHistory, judge_lines
from chaos.txn_workload import TxnProducerWorker, TxnRecorder, final_txn_read
from testing import ClusterProcesses, wait_for
from tests.support.brokers import ARTIFACTS
from tests.support.cluster import OVERRIDES, create_topic, healthy

pytestmark = pytest.mark.integration

PARTS = 6
PER_TXN = 12
FAULTS = ("kill", "pause", "term") * 2
ABORT_EVERY = 5  # every 5th transaction is aborted by the workload itself
TID = "chaos-app"
TOPIC = "txchaos"


@pytest.fixture
def cluster(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[ClusterProcesses]:
    c = ClusterProcesses(
        tmp_path / "cluster", 3, {**OVERRIDES, "transaction.state.log.num.partitions": 3}
    ).start()
    yield c
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        (ARTIFACTS / f"{request.node.name}-cluster.log").write_text(c.logs())
    c.stop()


def test_transactions_stay_whole_while_brokers_are_killed_paused_and_stopped(
    cluster: ClusterProcesses,
) -> None:
    create_topic(cluster.bootstrap, TOPIC, PARTS, 3)
    rec = TxnRecorder(TxnHistory(per_txn=PER_TXN))
    w = TxnProducerWorker(
        "w",
        cluster.bootstrap,
        TOPIC,
        PARTS,
        1e9,
        rec,
        per_txn=PER_TXN,
        abort_every=ABORT_EVERY,
        transactional_id=TID,
    )
    w.start()
    outcomes = rec.history.outcomes
    rnd = random.Random(190)
    try:
        wait_for(lambda: len(outcomes) >= 5 or not w.is_alive(), 60, 0.1, "the first transactions")
        assert w.is_alive(), "the workload failed to start"
        for fault in rnd.sample(FAULTS, len(FAULTS)):
            victim = rnd.choice(cluster.brokers)
            seen = len(outcomes)
            if fault == "kill":
                victim.kill()
            elif fault == "pause":
                victim.signal(signal.SIGSTOP)
            else:
                assert victim.stop(grace=30) == 0, victim.tail()
            time.sleep(rnd.uniform(1.0, 3.0))  # a random stretch of work without it
            if fault == "pause":
                victim.signal(signal.SIGCONT)
            else:
                victim.start()
            wait_for(lambda: healthy(cluster), 60, 0.2, "a healthy cluster again")
            wait_for(lambda s=seen: len(outcomes) > s + 2, 60, 0.1, "transactions after the fault")
    finally:
        w.stop(120)
    assert not w.is_alive(), "the workload did not stop"
    records, complete = final_txn_read(cluster.bootstrap, TOPIC, PARTS, "read_committed")
    assert complete, "a transaction stayed open"
    for part in range(PARTS):  # offsets only grow, per partition, for a consumer
        offsets = [o for p, o, _v in records if p == part]
        assert offsets == sorted(set(offsets)), f"partition {part}: offsets not strictly increasing"
    problems = judge_lines(outcomes, [v for _p, _o, v in records], PER_TXN)
    assert not problems, "; ".join(problems[:10])
    counts = Counter(outcomes.values())
    assert counts["committed"] >= 20 and counts["aborted"] >= 4, (counts, rec.errors[:5])
    # the checker on a broken setup: a reader ignoring transactions sees the aborted records
    dirty, _ = final_txn_read(cluster.bootstrap, TOPIC, PARTS, "read_uncommitted")
    broken = judge_lines(outcomes, [v for _p, _o, v in dirty], PER_TXN)
    assert any(line.startswith("aborted read") for line in broken), broken[:5]
