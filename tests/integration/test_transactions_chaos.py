"""Transactions under faults (issue 19): a transactional producer commits transactions of 12
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
partition. The judging is :func:`tests.support.txn_checker.judge`, whose unit test shows it
reporting each anomaly in crafted histories; here it is also shown to fail on a broken setup:
a reader at read_uncommitted (one that ignores transactions) sees the aborted transactions.
"""

from __future__ import annotations

import random
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from deploy.local.process import ClusterProcesses, wait_for
from tests.conftest import ARTIFACTS, quiet_logger
from tests.integration.test_cluster import OVERRIDES, create_topic, healthy
from tests.support.txn_checker import judge

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


class Workload:
    """Transactions one after another until stopped; the outcome of each, by number."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.outcomes: dict[int, str] = {}
        self.stop = threading.Event()
        self.errors: list[str] = []

    def _producer(self) -> Producer:
        p = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "transactional.id": TID,
                "transaction.timeout.ms": 10_000,
                "message.timeout.ms": 10_000,
                "linger.ms": 2,
                "logger": quiet_logger(),
            }
        )
        p.init_transactions(60)
        return p

    def run(self) -> None:
        p = self._producer()
        n = 0
        while not self.stop.is_set():
            n += 1
            try:
                p.begin_transaction()
                for i in range(PER_TXN):
                    p.produce(TOPIC, value=f"{n}-{i}".encode(), partition=i % PARTS)
                if n % ABORT_EVERY == 0:  # aborted on purpose, once its records are in the logs
                    p.flush(30)
                    p.abort_transaction(30)
                    self.outcomes[n] = "aborted"
                    continue
                p.commit_transaction(30)
                self.outcomes[n] = "committed"
            except KafkaException as exc:
                err: Any = exc.args[0]
                self.errors.append(str(err))
                if err.txn_requires_abort():
                    try:
                        p.abort_transaction(30)
                        self.outcomes[n] = "aborted"
                        continue
                    except KafkaException as again:
                        self.errors.append(str(again.args[0]))
                self.outcomes[n] = "unknown"  # fatal, or the abort itself failed: a new instance
                p = self._producer()


def test_transactions_stay_whole_while_brokers_are_killed_paused_and_stopped(
    cluster: ClusterProcesses,
) -> None:
    create_topic(cluster.bootstrap, TOPIC, PARTS, 3)
    w = Workload(cluster.bootstrap)
    t = threading.Thread(target=w.run, daemon=True)
    t.start()
    rnd = random.Random(190)
    try:
        wait_for(lambda: len(w.outcomes) >= 5 or not t.is_alive(), 60, 0.1, "the first transactions")
        assert t.is_alive(), "the workload failed to start"
        for fault in rnd.sample(FAULTS, len(FAULTS)):
            victim = rnd.choice(cluster.brokers)
            seen = len(w.outcomes)
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
            wait_for(lambda s=seen: len(w.outcomes) > s + 2, 60, 0.1, "transactions after the fault")
    finally:
        w.stop.set()
        t.join(120)
    assert not t.is_alive(), "the workload did not stop"
    outcomes = dict(w.outcomes)
    records = read_all(cluster.bootstrap, "read_committed")
    for part in range(PARTS):  # offsets only grow, per partition, for a consumer
        offsets = [o for p, o, _v in records if p == part]
        assert offsets == sorted(set(offsets)), f"partition {part}: offsets not strictly increasing"
    problems = judge(outcomes, [v for _p, _o, v in records], PER_TXN)
    assert not problems, "; ".join(problems[:10])
    counts = Counter(outcomes.values())
    assert counts["committed"] >= 20 and counts["aborted"] >= 4, (counts, w.errors[:5])
    # the checker on a broken setup: a reader ignoring transactions sees the aborted records
    broken = judge(outcomes, [v for _p, _o, v in read_all(cluster.bootstrap, "read_uncommitted")], PER_TXN)
    assert any("aborted read" in line for line in broken), broken[:5]


def read_all(bootstrap: str, isolation: str) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of every record of TOPIC a consumer at ``isolation`` gets."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"judge-{isolation}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "logger": quiet_logger(),
        }
    )
    out: list[tuple[int, int, bytes]] = []
    try:
        c.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTS)])
        idle = 0
        while idle < 8:
            msgs = c.consume(500, timeout=0.5)
            idle = 0 if msgs else idle + 1
            out += [(m.partition(), m.offset(), bytes(m.value() or b"")) for m in msgs if m.error() is None]
    finally:
        c.close()
    return out
