"""Broker metrics (framework/server/metrics.py): errors counted from responses at any depth,
cluster events counted from the quorum's applied changes, gauges computed at scrape time, the
/metrics endpoint, and no declared metric left without a writer."""

from __future__ import annotations

import ast
import asyncio
import urllib.error
import urllib.request
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from framework.coordinator.groups import CommittedOffset, Group, GroupState
from framework.metadata.quorum import PartitionState
from framework.protocol.api import API_TABLE
from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.fetch import FetchableTopicResponse, FetchResponse, PartitionData
from framework.protocol.messages.offset_fetch import (
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopics,
)
from framework.protocol.messages.produce import (
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)
from framework.replication.quota import ReplicationQuota
from framework.server import metrics
from framework.server.lifecycle import BrokerState

ROOT = Path(__file__).resolve().parents[3]
E = ErrorCode


def errors(api: str, error: str) -> float:
    v = metrics.REGISTRY.get_sample_value("sftraffic_request_errors_total", {"api": api, "error": error})
    return v or 0.0


def counter(name: str) -> float:
    return metrics.REGISTRY.get_sample_value(f"{name}_total") or 0.0


# -- errors answered ---------------------------------------------------------------------------
def test_every_response_the_broker_sends_has_a_compiled_error_walk() -> None:
    for entry in API_TABLE.values():
        assert metrics.error_walk(entry.response) is not None, entry.name


def test_partition_errors_count_once_each_and_successes_not_at_all() -> None:
    before = errors("Produce", "UNKNOWN_TOPIC_OR_PARTITION"), errors("Produce", "NOT_LEADER_OR_FOLLOWER")
    resp = ProduceResponse(
        responses=[
            TopicProduceResponse(
                name="a",
                partition_responses=[
                    PartitionProduceResponse(index=0),
                    PartitionProduceResponse(index=1, error_code=E.UNKNOWN_TOPIC_OR_PARTITION),
                    PartitionProduceResponse(index=2, error_code=E.UNKNOWN_TOPIC_OR_PARTITION),
                ],
            ),
            TopicProduceResponse(
                name="b",
                partition_responses=[PartitionProduceResponse(index=0, error_code=E.NOT_LEADER_OR_FOLLOWER)],
            ),
        ]
    )
    metrics.count_errors(API_TABLE[0], resp)
    after = errors("Produce", "UNKNOWN_TOPIC_OR_PARTITION"), errors("Produce", "NOT_LEADER_OR_FOLLOWER")
    assert (after[0] - before[0], after[1] - before[1]) == (2, 1)
    assert errors("Produce", "NONE") == 0


def test_request_level_and_nested_errors_are_both_counted() -> None:
    b_top, b_part = errors("Fetch", "FETCH_SESSION_ID_NOT_FOUND"), errors("Fetch", "OFFSET_OUT_OF_RANGE")
    resp = FetchResponse(
        error_code=E.FETCH_SESSION_ID_NOT_FOUND,
        responses=[
            FetchableTopicResponse(
                topic="t",
                partitions=[PartitionData(partition_index=0, error_code=E.OFFSET_OUT_OF_RANGE)],
            )
        ],
    )
    metrics.count_errors(API_TABLE[1], resp)
    assert errors("Fetch", "FETCH_SESSION_ID_NOT_FOUND") == b_top + 1
    assert errors("Fetch", "OFFSET_OUT_OF_RANGE") == b_part + 1


def test_errors_three_levels_down_are_counted() -> None:
    before = errors("OffsetFetch", "UNSTABLE_OFFSET_COMMIT"), errors("OffsetFetch", "NOT_COORDINATOR")
    resp = OffsetFetchResponse(
        groups=[
            OffsetFetchResponseGroup(group_id="g", error_code=E.NOT_COORDINATOR),
            OffsetFetchResponseGroup(
                group_id="h",
                topics=[
                    OffsetFetchResponseTopics(
                        name="t",
                        partitions=[
                            OffsetFetchResponsePartitions(
                                partition_index=0, error_code=E.UNSTABLE_OFFSET_COMMIT
                            )
                        ],
                    )
                ],
            ),
        ]
    )
    metrics.count_errors(API_TABLE[9], resp)
    after = errors("OffsetFetch", "UNSTABLE_OFFSET_COMMIT"), errors("OffsetFetch", "NOT_COORDINATOR")
    assert (after[0] - before[0], after[1] - before[1]) == (1, 1)


def test_a_code_without_a_name_is_counted_by_number() -> None:
    before = errors("Heartbeat", "31999")
    metrics.count_errors(API_TABLE[12], API_TABLE[12].response(error_code=31999))
    assert errors("Heartbeat", "31999") == before + 1


def test_error_codes_are_counted_by_the_listener_not_by_the_error_mapping() -> None:
    # kafka_error names errors; counting there as well would count each one twice
    from framework.errors import NotLeader
    from framework.server.errors import kafka_error

    before = errors("Produce", "NOT_LEADER_OR_FOLLOWER")
    assert kafka_error(NotLeader("x")) == (E.NOT_LEADER_OR_FOLLOWER, "x")
    assert errors("Produce", "NOT_LEADER_OR_FOLLOWER") == before
    listener = (ROOT / "framework/server/listener.py").read_text()
    assert "metrics.count_errors(route.entry, resp)" in listener


# -- cluster events ------------------------------------------------------------------------------
class FakeQuorum:
    def __init__(self) -> None:
        self.replayed = True
        self.is_controller = False
        self.brokers: dict[int, dict[str, Any]] = {i: {"fenced": False} for i in (1, 2, 3)}
        self.pstates: dict[str, list[PartitionState]] = {
            "t": [PartitionState(1, 0, [1, 2, 3]), PartitionState(2, 0, [2, 3, 1])]
        }


EVENTS = (
    "sftraffic_isr_shrinks",
    "sftraffic_isr_expands",
    "sftraffic_leader_elections",
    "sftraffic_unclean_leader_elections",
    "sftraffic_broker_fencings",
)


def events() -> dict[str, float]:
    return {n.removeprefix("sftraffic_"): counter(n) for n in EVENTS}


def moved(before: dict[str, float]) -> dict[str, float]:
    return {k: v - before[k] for k, v in events().items() if v != before[k]}


def test_the_replayed_journal_is_history_and_the_first_apply_after_it_the_baseline() -> None:
    q, watch = FakeQuorum(), metrics.QuorumWatch(1)
    before = events()
    q.replayed = False
    q.pstates["t"][0].isr = [1]
    watch.applied(q)  # replaying
    q.replayed = True
    watch.applied(q)  # baseline
    q.pstates["t"][0].isr = [1, 2]
    watch.applied(q)
    assert moved(before) == {"isr_expands": 1}


def test_isr_changes_count_on_the_partitions_leader_only() -> None:
    q = FakeQuorum()
    leader, follower = metrics.QuorumWatch(1), metrics.QuorumWatch(3)
    for w in (leader, follower):
        w.applied(q)
    before = events()
    q.pstates["t"][0].isr = [1, 2]  # 3 falls behind
    for w in (leader, follower):
        w.applied(q)
    assert moved(before) == {"isr_shrinks": 1}
    q.pstates["t"][0].isr = [1, 2, 3]
    for w in (leader, follower):
        w.applied(q)
    assert moved(before) == {"isr_shrinks": 1, "isr_expands": 1}
    q.pstates["t"][0].isr = [1, 3]  # one out, one in: both, in one change
    leader.applied(q)
    assert moved(before) == {"isr_shrinks": 2, "isr_expands": 1}


def test_fencing_and_the_elections_it_causes_count_on_the_controller_only() -> None:
    q = FakeQuorum()
    controller, other = metrics.QuorumWatch(3), metrics.QuorumWatch(2)
    for w in (controller, other):
        w.applied(q)
    before = events()
    # broker 1 fenced: it leaves the ISRs, partition 0 gets leader 2 at epoch 1
    q.brokers[1]["fenced"] = True
    q.pstates["t"][0] = PartitionState(2, 1, [2, 3], 1)
    q.pstates["t"][1] = PartitionState(2, 0, [2, 3], 1)
    q.is_controller = False
    other.applied(q)
    q.is_controller = True
    controller.applied(q)
    # broker 2 leads both now and counts both shrinks; the controller counts one fencing and
    # one election (partition 1 kept its leader)
    assert moved(before) == {"isr_shrinks": 2, "broker_fencings": 1, "leader_elections": 1}


def test_a_leader_from_outside_the_isr_is_an_unclean_election_and_no_leader_is_none() -> None:
    q = FakeQuorum()
    q.is_controller = True
    watch = metrics.QuorumWatch(9)
    q.pstates["t"][0] = PartitionState(1, 3, [1], 5)
    watch.applied(q)
    before = events()
    q.pstates["t"][0] = PartitionState(-1, 4, [1], 6)  # offline: no election
    watch.applied(q)
    assert moved(before) == {}
    q.pstates["t"][0] = PartitionState(2, 5, [2], 7)  # 2 was not in the ISR
    watch.applied(q)
    assert moved(before) == {"leader_elections": 1, "unclean_leader_elections": 1}


def test_new_partitions_and_topics_are_not_elections() -> None:
    q = FakeQuorum()
    q.is_controller = True
    watch = metrics.QuorumWatch(1)
    watch.applied(q)
    before = events()
    q.pstates["u"] = [PartitionState(1, 0, [1, 2])]
    q.pstates["t"].append(PartitionState(3, 0, [3]))
    watch.applied(q)
    assert moved(before) == {}


# -- gauges ----------------------------------------------------------------------------------------
def partition(
    topic: str, index: int, *, hw: int, leader: bool = True, isr: int = 1, replicas: int = 1
) -> Any:
    return SimpleNamespace(
        topic=topic,
        index=index,
        log_end_offset=hw + 1,
        log_start_offset=0,
        high_watermark=hw,
        log=SimpleNamespace(size_bytes=100),
        is_leader=leader,
        isr=list(range(isr)),
        replicas=list(range(replicas)),
    )


def fake_broker(quorum: Any = None) -> Any:
    parts = {
        "a": [partition("a", 0, hw=10), partition("a", 1, hw=7, isr=2, replicas=3)],
        "b": [None, partition("b", 1, hw=5, leader=False, replicas=3)],
    }
    g = Group("g", state=GroupState.STABLE)
    g.offsets = {
        ("a", 0): CommittedOffset(4, -1, "", 0),
        ("a", 1): CommittedOffset(9, -1, "", 0),  # ahead of a follower's high watermark: 0
        ("b", 0): CommittedOffset(1, -1, "", 0),  # no replica here: left out
        ("b", 1): CommittedOffset(5, -1, "", 0),
    }
    dead = Group("dead", state=GroupState.DEAD)
    dead.offsets = {("a", 0): CommittedOffset(0, -1, "", 0)}
    return SimpleNamespace(
        node_id=1,
        replicas=SimpleNamespace(
            partitions=parts,
            all_partitions=lambda: [p for ps in parts.values() for p in ps if p is not None],
            leader_quota=ReplicationQuota("leader"),
            follower_quota=ReplicationQuota("follower"),
            removed_replicas=0,
        ),
        groups=SimpleNamespace(coordinator=SimpleNamespace(groups={"g": g, "dead": dead})),
        cache=SimpleNamespace(quorum=quorum),
        listener=SimpleNamespace(connections={object(), object()}),
        lifecycle=SimpleNamespace(state=BrokerState.RUNNING, stopping=asyncio.Event()),
    )


def scrape(broker: Any) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for m in metrics.BrokerCollector(broker).collect():
        for s in m.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


def test_gauges_of_a_single_node() -> None:
    got = scrape(fake_broker())
    assert got["sftraffic_under_replicated_partitions"] == {(): 1}  # a-1: led here, ISR 2 of 3
    assert got["sftraffic_leader_partitions"] == {(): 2}
    assert got["sftraffic_active_controller"] == {(): 1}  # a single node is its own controller
    assert got["sftraffic_offline_partitions"] == {(): 0}
    assert got["sftraffic_connections"] == {(): 2}
    assert got["sftraffic_broker_state"] == {(): 3}  # Kafka's code of RUNNING
    assert got["sftraffic_high_watermark"][(("partition", "1"), ("topic", "b"))] == 5
    assert got["sftraffic_replication_throttle_rate"][(("side", "leader"),)] == 2**63 - 1  # none
    assert got["sftraffic_replicas_removed"] == {(): 0}
    lag = {
        dict(k)["topic"] + "-" + dict(k)["partition"]: v
        for k, v in got["sftraffic_consumer_group_lag"].items()
    }
    assert lag == {"a-0": 6, "a-1": 0, "b-1": 0}
    committed = got["sftraffic_consumer_group_committed_offset"]
    assert committed[(("group", "g"), ("partition", "0"), ("topic", "a"))] == 4
    assert all(dict(k)["group"] == "g" for k in committed)


def test_offline_partitions_are_reported_by_the_controller_only() -> None:
    q = SimpleNamespace(
        is_controller=False,
        pstates={"a": [PartitionState(-1, 1, [2]), PartitionState(2, 0, [2]), PartitionState(3, 0, [3])]},
        unfenced=lambda n: n != 3,  # 3 is fenced: its partition has no live leader
    )
    assert scrape(fake_broker(q))["sftraffic_offline_partitions"] == {(): 0}
    assert scrape(fake_broker(q))["sftraffic_active_controller"] == {(): 0}
    q.is_controller = True
    got = scrape(fake_broker(q))
    assert got["sftraffic_offline_partitions"] == {(): 2}
    assert got["sftraffic_active_controller"] == {(): 1}


# -- the endpoint ------------------------------------------------------------------------------------
def get(url: str, method: str = "GET") -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=5) as r:
            return r.status, r.headers["Content-Type"], r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read().decode()


def test_the_endpoint_serves_every_metric_on_the_event_loop_and_closes_when_the_broker_stops() -> None:
    async def run() -> None:
        broker = fake_broker()
        server = await metrics.serve(broker, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{server.port}"
        status, ctype, body = await asyncio.to_thread(get, url + "/metrics")
        assert status == 200 and ctype.startswith("text/plain; version=0.0.4")
        names = {m.name for m in text_string_to_metric_families(body)}
        assert {
            "sftraffic_request_latency_seconds",
            "sftraffic_request_errors",
            "sftraffic_consumer_group_lag",
            "sftraffic_active_controller",
            "sftraffic_isr_shrinks",
        } <= names
        assert (await asyncio.to_thread(get, url + "/nothing"))[0] == 404
        assert (await asyncio.to_thread(get, url + "/metrics", "POST"))[0] == 405
        broker.lifecycle.stopping.set()
        await asyncio.sleep(0.05)
        with pytest.raises(OSError):
            await asyncio.to_thread(get, url + "/metrics")

    asyncio.run(run())


def test_a_port_in_use_is_a_clear_error() -> None:
    async def run() -> None:
        first = await metrics.serve(fake_broker(), "127.0.0.1", 0)
        with pytest.raises(Exception, match=r"cannot serve metrics on 127\.0\.0\.1:\d+"):
            await metrics.MetricsServer(fake_broker()).start("127.0.0.1", first.port)
        first.close()

    asyncio.run(run())


# -- nothing declared and left alone ---------------------------------------------------------------
def declared_metrics() -> dict[str, str]:
    """Module-level Counter/Histogram of metrics.py: variable name -> metric name."""
    tree = ast.parse((ROOT / "framework/server/metrics.py").read_text())
    out = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name)
            and node.value.func.id in ("Counter", "Histogram")
        ):
            name = node.value.args[0]
            assert isinstance(name, ast.Constant)
            out[node.targets[0].id] = name.value  # type: ignore[attr-defined]
    return out


def uses() -> dict[str, list[str]]:
    """Every name loaded and attribute read in framework/: name -> places."""
    found: dict[str, list[str]] = {}
    for path in sorted((ROOT / "framework").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute):
                name = node.attr
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                name = node.id
            else:
                continue
            found.setdefault(name, []).append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_every_declared_metric_is_written_somewhere() -> None:
    declared = declared_metrics()
    assert len(declared) >= 12
    used = uses()  # any use but the definition: incremented, observed or handed out
    unused = {name for var, name in declared.items() if var not in used}
    assert not unused, f"declared but never incremented or observed: {sorted(unused)}"
