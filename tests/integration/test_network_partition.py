"""Real network partitions: three brokers, each in its own network namespace on one bridge
(``chaos/netns.py``), the test's clients in the root namespace.

The leader of a partition is cut off from the other two brokers and from the clients (so the
controller, one of the others or itself, loses it too); a producer and a Metadata poller run
*inside* the isolated broker's namespace, on the minority side. Then, within
``broker.session.timeout.ms`` (plus the controller's election when the isolated broker was
the controller):

* the majority fences the old leader and elects a new one, and an acks=all producer writing
  through the majority keeps getting acknowledgements;
* the isolated old leader acknowledges no acks=all write (every one fails or times out);
* the minority side never shows a leader it elected: the isolated broker's own Metadata names
  no leader other than the one before the cut, with no new leader epoch.

After healing, every ISR is whole again, every acknowledged message is there exactly once at
its acknowledged offset, and nothing written on the minority side survived (the deposed
leader truncated its unacknowledged tail).

Skipped only when ``ip netns add`` is refused (not root). Namespaces, links and routes carry
a random tag and are removed at teardown, failed test or not.
"""

from __future__ import annotations

import json
import secrets
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from chaos import netns
from chaos.checker import History, judge
from chaos.workload import (
    ProducerWorker,
    Recorder,
    create_topic,
    final_read,
    partition_states,
)
from framework import config as cfg
from framework.client.wire import WireClient
from framework.protocol.messages.metadata import MetadataRequest, MetadataResponse
from testing import BrokerProcess, ManagedProcess, wait_for
from tests.conftest import ARTIFACTS

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]

SESSION_S = cfg.key("broker.session.timeout.ms").default / 1000
PARTITIONS = 6
ELECTION_SLACK_S = 4.0  # a new controller's Raft election (0.8-1.6 s), a controller tick, a busy machine
ACKS_SLACK_S = 8.0  # then the producer's metadata refresh and retry backoff

View = dict[int, tuple[int, int, list[int]]]  # partition -> (leader, leader epoch, isr)


@pytest.fixture
def cluster(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[netns.NetnsCluster]:
    reason = netns.unavailable_reason()
    if reason is not None:
        pytest.skip(f"network namespaces unavailable here: {reason}")
    c = netns.NetnsCluster(tmp_path, 3, {"group.initial.rebalance.delay.ms": 0}, network=netns.Network(3))
    try:
        c.start(90)
        yield c
    finally:
        rep = getattr(request.node, "rep_call", None)
        if rep is None or rep.failed:
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            (ARTIFACTS / f"{request.node.name}-cluster.log").write_text(c.logs())
        c.destroy()
    assert not Path(f"/run/netns/{c.network.nodes[0].ns}").exists(), "namespace left behind"


def view_of(b: BrokerProcess, topic: str) -> View | None:
    """The topic's partitions as this very broker answers Metadata; None if unreachable."""
    try:
        with WireClient(b.bootstrap, timeout=2) as c:
            md = c.send(MetadataRequest(topics=None, allow_auto_topic_creation=False), MetadataResponse)
    except Exception:
        return None
    for t in md.topics:
        if t.name == topic:
            return {
                p.partition_index: (p.leader_id, p.leader_epoch, sorted(p.isr_nodes)) for p in t.partitions
            }
    return None


def controller(c: netns.NetnsCluster) -> int:
    """The broker that most recently logged becoming the quorum's leader."""
    best = ("", -1)
    for b in c.brokers:
        for line in b.lines:
            if "is the controller" in line:
                best = max(best, (line[:23], b.node_id))
    assert best[1] > 0, "no broker logged being the controller"
    return best[1]


def whole_everywhere(c: netns.NetnsCluster, topic: str) -> bool:
    for b in c.brokers:
        v = view_of(b, topic)
        if (
            v is None
            or len(v) != PARTITIONS
            or any(ldr < 0 or isr != [1, 2, 3] for ldr, _e, isr in v.values())
        ):
            return False
    return True


def json_lines(p: ManagedProcess) -> list[dict[str, Any]]:
    out = []
    for line in p.lines:
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def probe(c: netns.NetnsCluster, node: int, *args: str) -> ManagedProcess:
    """A client inside broker ``node``'s namespace (``chaos.probe``)."""
    cmd = [*c.network.exec_prefix(node), sys.executable, "-m", "chaos.probe", *args]
    return ManagedProcess(f"probe-{args[0]}-{node}", cmd, keep_lines=10_000).launch()


@dataclass
class _Cut:
    """The old leader's isolation: the endpoints it was cut from, the producer inside its
    namespace, and the moments (``time.time()``) of what happened meanwhile."""

    cut_from: list[int]
    minority: ManagedProcess
    t_cut: float
    elected: int | None = None
    t_elected: float = 0.0
    t_resumed: float = 0.0
    t_heal: float = 0.0
    t_whole: float = 0.0


def _partition_led_by(cluster: netns.NetnsCluster, topic: str, who: str) -> tuple[int, int, int]:
    """(controller, partition, its leader) for a partition led by the controller (``who`` is
    ``controller``) or by another broker; skips when there is none."""
    ctrl = controller(cluster)
    before = view_of(cluster.brokers[0], topic)
    assert before is not None
    wanted = [p for p, (ldr, _e, _i) in sorted(before.items()) if (ldr == ctrl) == (who == "controller")]
    if not wanted:
        pytest.skip(f"no partition led by {'the' if who == 'controller' else 'a non-'}controller ({before})")
    part = wanted[0]
    return ctrl, part, before[part][0]


def _isolate(cluster: netns.NetnsCluster, old: int, victim: BrokerProcess, topic: str, part: int) -> _Cut:
    """The cut: the old leader alone on its side, with a client of its own."""
    t_cut = time.time()
    cut_from = cluster.network.isolate(old)
    minority = probe(
        cluster, old, "produce", "--bootstrap", victim.bootstrap, "--topic", topic, "--partition", str(part),
        "--count", "24", "--every", "0.5", "--timeout-ms", "6000", "--prefix", "minority",
    )  # fmt: skip
    return _Cut(cut_from, minority, t_cut)


def _until_the_majority_acks_again(
    cut: _Cut, majority: list[BrokerProcess], old: int, topic: str, part: int, history: History
) -> None:
    """Wait for a new leader of ``part`` on the majority side and its first acknowledgement."""

    def new_leader() -> int | None:
        for b in majority:
            v = view_of(b, topic)
            if v is not None and v[part][0] not in (-1, old):
                return v[part][0]
        return None

    wait_for(lambda: new_leader() is not None, SESSION_S + 15, 0.05, f"a new leader of partition {part}")
    t_elected = cut.t_elected = time.time()
    cut.elected = new_leader()
    wait_for(
        lambda: any(a.partition == part and a.t > t_elected for a in history.acks),
        30,
        0.05,
        f"an ack of partition {part} from the new leader",
    )
    cut.t_resumed = min(a.t for a in history.acks if a.partition == part and a.t > t_elected)


def _heal(cut: _Cut, cluster: netns.NetnsCluster, topic: str) -> None:
    """Once the minority producer is done: heal, and wait for whole ISRs everywhere."""
    wait_for(
        lambda: any(d.get("done") for d in json_lines(cut.minority)), 60, 0.2, "the minority producer's end"
    )
    cut.t_heal = time.time()
    cluster.network.heal_all()
    wait_for(lambda: whole_everywhere(cluster, topic), 90, 0.2, "whole ISRs on every broker after healing")
    cut.t_whole = time.time()


def _assert_minority_acknowledged_nothing(minority: ManagedProcess, figures: dict[str, Any]) -> None:
    reports = [d for d in json_lines(minority) if "value" in d]
    done = next(d for d in json_lines(minority) if d.get("done"))
    acked_minority = [d for d in reports if d["error"] is None]
    figures["minority_reports"] = len(reports)
    figures["minority_errors"] = sorted({d["error"] for d in reports if d["error"]})
    assert done["undelivered"] == 0 and len(reports) == 24, figures
    assert acked_minority == [], f"the isolated old leader acknowledged {acked_minority[:5]}; {figures}"


def _assert_minority_elected_no_one(watcher: ManagedProcess, cut: _Cut, figures: dict[str, Any]) -> None:
    """The minority's own Metadata keeps the pre-cut leaders and epochs."""
    t_cut, t_heal = cut.t_cut, cut.t_heal
    samples = [d for d in json_lines(watcher) if "partitions" in d]
    pre = [d for d in samples if d["t"] < t_cut]
    during = [d for d in samples if t_cut + 0.5 < d["t"] < t_heal]
    assert pre and len(during) >= 5, f"{len(pre)} samples before the cut, {len(during)} during it"
    base = {int(p): v for p, v in pre[-1]["partitions"].items()}
    elected_alone = [
        (round(d["t"] - t_cut, 2), int(p), v)
        for d in during
        for p, v in d["partitions"].items()
        if v[0] != -1 and (v[0] != base[int(p)][0] or v[1] > base[int(p)][1])
    ]
    assert elected_alone == [], f"leaders on the minority side after the cut: {elected_alone[:5]}; {figures}"
    figures["minority_metadata_samples"] = len(during)


def _assert_healed_keeping_acks_only(
    cluster: netns.NetnsCluster, topic: str, history: History, who: str, figures: dict[str, Any]
) -> None:
    """Nothing acknowledged lost, duplicated or moved; the minority's writes are gone."""
    history.final, marks, complete = final_read(cluster.bootstrap, topic, PARTITIONS)
    assert complete, marks
    history.states = partition_states(cluster.bootstrap, [topic])
    verdict = judge(history, max_gap=SESSION_S + ELECTION_SLACK_S + ACKS_SLACK_S + 5)
    figures["acknowledged"] = len(history.acks)
    figures["longest_partition_gap_s"] = verdict["ack gap"].figures["longest_partition_gap_s"]
    print(f"\nnetwork partition ({who}): {json.dumps(figures)}")
    survivors = [v for recs in history.final.values() for _o, v in recs if v.startswith("minority:")]
    assert survivors == [], f"writes of the minority side survived the heal: {survivors[:5]}"
    for name in ("lost", "duplicated", "misplaced", "order", "reads", "isr", "foreign", "ack gap"):
        assert verdict[name].status == "PASS", (name, verdict[name].summary, verdict[name].examples, figures)


@pytest.mark.parametrize("who", ["leader", "controller"])
def test_an_isolated_leader_is_replaced_by_the_majority_and_acknowledges_nothing(
    cluster: netns.NetnsCluster, who: str
) -> None:
    """``who``: the isolated broker leads partition P and is not (``leader``) or is
    (``controller``) the metadata quorum's leader."""
    topic = f"cut-{secrets.token_hex(4)}"
    create_topic(cluster.bootstrap, topic, PARTITIONS, 3, 2)
    wait_for(lambda: whole_everywhere(cluster, topic), 30, 0.2, f"{topic} whole on every broker")
    ctrl, part, old = _partition_led_by(cluster, topic, who)
    victim = cluster.brokers[old - 1]
    majority = [b for b in cluster.brokers if b is not victim]
    majority_boot = ",".join(b.bootstrap for b in majority)

    # an acks=all idempotent producer through the majority side, writing all the time
    history = History(partitions=PARTITIONS)
    rec = Recorder(history, time.time)
    writer = ProducerWorker("maj", majority_boot, topic, PARTITIONS, 100, rec)
    history.start = time.time()
    writer.start()
    wait_for(lambda: sum(a.partition == part for a in history.acks) >= 20, 30, 0.1, "acks before the cut")
    watcher = probe(
        cluster, old, "metadata", "--bootstrap", victim.bootstrap, "--topic", topic, "--duration", "120"
    )
    wait_for(
        lambda: any("partitions" in d for d in json_lines(watcher)), 20, 0.1, "the minority's first Metadata"
    )

    # the cut: the old leader alone on its side, with a client of its own
    cut = _isolate(cluster, old, victim, topic, part)
    _until_the_majority_acks_again(cut, majority, old, topic, part, history)
    _heal(cut, cluster, topic)
    time.sleep(2)  # some more acknowledged writes after the heal
    writer.stop_producing()
    history.end = time.time()
    assert writer.finish(60) == 0, "acknowledgements still missing"
    watcher.stop(5)
    cut.minority.stop(5)

    figures = {
        "who": who,
        "isolated_broker": old,
        "controller": ctrl,
        "partition": part,
        "cut_from": cut.cut_from,
        "session_timeout_s": SESSION_S,
        "new_leader": cut.elected,
        "cut_to_new_leader_s": round(cut.t_elected - cut.t_cut, 2),
        "cut_to_first_ack_from_new_leader_s": round(cut.t_resumed - cut.t_cut, 2),
        "heal_to_whole_isrs_s": round(cut.t_whole - cut.t_heal, 2),
        "isolation_s": round(cut.t_heal - cut.t_cut, 2),
    }

    # the majority: a new leader within the session timeout, acks again shortly after
    assert cut.t_elected - cut.t_cut <= SESSION_S + ELECTION_SLACK_S, figures
    assert cut.t_resumed - cut.t_cut <= SESSION_S + ELECTION_SLACK_S + ACKS_SLACK_S, figures

    # the isolated old leader acknowledged nothing written to it
    _assert_minority_acknowledged_nothing(cut.minority, figures)

    # the minority side never elected anyone: its own Metadata keeps the pre-cut leaders and epochs
    _assert_minority_elected_no_one(watcher, cut, figures)

    # healed: nothing acknowledged lost, duplicated or moved; the minority's writes are gone
    _assert_healed_keeping_acks_only(cluster, topic, history, who, figures)
