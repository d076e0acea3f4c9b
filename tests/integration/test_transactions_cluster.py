"""Transactions in a 3-broker cluster: the coordinator on one broker, the partitions
led by all three, so most markers go to other brokers as WriteTxnMarkers; then the coordinator
is SIGKILLed mid-transaction and every transaction still ends all committed or all aborted:
one whose commit was answered is completed by the next coordinator (it loads PrepareCommit
from the replicated ``__transaction_state`` and writes the markers), an open one is aborted
when the producer's successor initialises the same transactional id. A partition leader
killed just before a commit: its markers are retried at the new leaders.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from framework.client.wire import WireClient
from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from testing import BrokerProcess, ClusterProcesses, wait_for
from tests.support.brokers import ARTIFACTS, quiet_logger
from tests.support.clients import consume
from tests.support.cluster import OVERRIDES, create_topic, led_view

pytestmark = pytest.mark.integration

PARTS = 6
N = 30  # records per partition per transaction


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


def coordinator_of(brokers: list[BrokerProcess], tid: str) -> int:
    found: list[int] = []

    def ask() -> bool:
        for b in brokers:
            try:
                with WireClient(b.bootstrap, timeout=5) as w:
                    r = w.send(FindCoordinatorRequest(key=tid, key_type=1), FindCoordinatorResponse, 3)
            except Exception:
                continue
            if r.error_code == ErrorCode.NONE:
                found.append(r.node_id)
                return True
        return False

    wait_for(ask, 60, 0.2, f"a transaction coordinator for {tid}")
    return found[0]


def producer(bootstrap: str, tid: str) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "logger": quiet_logger()})
    p.init_transactions(60)
    return p


def write(p: Producer, topic: str, tag: str) -> None:
    for part in range(PARTS):
        for i in range(N):
            p.produce(topic, value=f"{tag}-{part}-{i}".encode(), partition=part)
    assert p.flush(30) == 0


def tags(values: list[bytes]) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        tag = v.decode().split("-")[0]
        out[tag] = out.get(tag, 0) + 1
    return out


def test_coordinator_killed_mid_transaction_ends_every_transaction_whole(cluster: ClusterProcesses) -> None:
    topic = "txc"
    tid = "txc-app"
    create_topic(cluster.bootstrap, topic, PARTS, 3)
    view = led_view(cluster.brokers[0], topic)
    assert len({leader for leader, _r, _i in view.values()}) > 1, view
    coord = coordinator_of(cluster.brokers, tid)
    p = producer(cluster.bootstrap, tid)
    # one committed and one aborted transaction, markers to all three brokers
    p.begin_transaction()
    write(p, topic, "c1")
    p.commit_transaction(60)
    p.begin_transaction()
    write(p, topic, "a1")
    p.abort_transaction(60)
    # committed (answered), then the coordinator dies: the next one completes it
    p.begin_transaction()
    write(p, topic, "c2")
    p.commit_transaction(60)
    # open, then the coordinator dies
    p.begin_transaction()
    write(p, topic, "o3")
    victim = next(b for b in cluster.brokers if b.node_id == coord)
    victim.kill()
    rest = [b for b in cluster.brokers if b is not victim]
    bootstrap = ",".join(b.bootstrap for b in rest)
    successor = producer(bootstrap, tid)  # waits for the new coordinator; aborts o3
    assert coordinator_of(rest, tid) != coord
    successor.begin_transaction()
    write(successor, topic, "c4")
    successor.commit_transaction(60)
    got = tags(consume(bootstrap, topic, "read_committed", PARTS, expect=3 * PARTS * N, idle_polls=6))
    assert got == {"c1": PARTS * N, "c2": PARTS * N, "c4": PARTS * N}, got


def test_partition_leader_killed_mid_marker_the_transaction_still_ends_whole(
    cluster: ClusterProcesses,
) -> None:
    """A leader of some of the transaction's partitions (not the coordinator) is SIGKILLed just
    before the commit: its markers fail, the coordinator retries them at the partitions' new
    leaders, and every record of the transaction becomes visible."""
    topic = "txl"
    tid = "txl-app"
    create_topic(cluster.bootstrap, topic, PARTS, 3)
    coord = coordinator_of(cluster.brokers, tid)
    view = led_view(cluster.brokers[0], topic)
    victim_id = next(leader for leader, _r, _i in view.values() if leader != coord)
    victim = next(b for b in cluster.brokers if b.node_id == victim_id)
    rest = [b for b in cluster.brokers if b is not victim]
    p = producer(cluster.bootstrap, tid)
    p.begin_transaction()
    write(p, topic, "c1")  # acknowledged by every in-sync replica
    victim.kill()
    p.commit_transaction(60)  # PrepareCommit written; the victim's markers fail until re-election
    bootstrap = ",".join(b.bootstrap for b in rest)
    got = tags(consume(bootstrap, topic, "read_committed", PARTS, expect=PARTS * N, idle_polls=20))
    assert got == {"c1": PARTS * N}, got
