"""The cluster admin APIs on a 3-broker cluster, through kafka-python and Kafka's own tools:
DescribeQuorum asked of every broker (a follower forwards it to the Raft leader), CreatePartitions
through a broker that is not the controller (new replicas spread over every broker, each new
partition led and writable with acks=all), DescribeLogDirs of every broker, and
DescribeTopicPartitions seeing the same."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewPartitions, NewTopic
from kafka.errors import InvalidPartitionsError, InvalidReplicationAssignmentError

from framework.client.wire import WireClient
from framework.protocol.messages.describe_quorum import (
    DescribeQuorumRequest,
    DescribeQuorumRequestPartitionData,
    DescribeQuorumRequestTopicData,
    DescribeQuorumResponse,
)
from testing import BrokerProcess, ClusterProcesses, free_port, wait_for
from tests.support.kafka_tools import Tool
from tests.support.security import Certs, users_add

pytestmark = [
    pytest.mark.integration,
    pytest.mark.kafka,
    pytest.mark.sftraffic_only(reason="a 3-broker sftraffic cluster of its own"),
]

OVERRIDES: dict[str, object] = {"broker.session.timeout.ms": 2000, "replica.lag.time.max.ms": 3000}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcesses]:
    cl = ClusterProcesses(tmp_path_factory.mktemp("admin-cluster"), size=3, overrides=OVERRIDES)
    cl.start()
    yield cl
    cl.stop()


def quorum_of(b: BrokerProcess) -> DescribeQuorumResponse:
    req = DescribeQuorumRequest(
        topics=[DescribeQuorumRequestTopicData("__cluster_metadata", [DescribeQuorumRequestPartitionData(0)])]
    )
    with WireClient(b.bootstrap, timeout=10) as c:
        return c.send(req, DescribeQuorumResponse)


def test_describe_quorum_through_every_broker(cluster: ClusterProcesses, tool: Tool) -> None:
    views = {}
    for b in cluster.brokers:
        resp = quorum_of(b)
        (p,) = resp.topics[0].partitions
        assert (resp.error_code, p.error_code) == (0, 0)
        views[b.node_id] = p
        # the leader's answer, wherever asked: every voter's progress is known
        assert sorted(v.replica_id for v in p.current_voters) == [1, 2, 3] and p.observers == []
        assert all(v.log_end_offset >= 0 and v.last_fetch_timestamp > 0 for v in p.current_voters), p
        assert sorted(n.node_id for n in resp.nodes) == [1, 2, 3]
    assert len({(p.leader_id, p.leader_epoch) for p in views.values()}) == 1
    leader = next(iter(views.values())).leader_id
    assert leader in (1, 2, 3)

    status = tool(
        "kafka-metadata-quorum", "--bootstrap-server", cluster.bootstrap, "describe", "--status"
    ).stdout
    fields = dict(re.findall(r"^(\w+):\s+(.*)$", status, re.M))
    assert int(fields["LeaderId"]) == leader and int(fields["MaxFollowerLag"]) >= 0, status
    assert all(f'"id": {i}' in fields["CurrentVoters"] for i in (1, 2, 3)), status
    assert "CONTROLLER://127.0.0.1:" in fields["CurrentVoters"], status
    for b in cluster.brokers:  # whichever broker the tool's client picks
        rows = tool("kafka-metadata-quorum", "--bootstrap-server", b.bootstrap, "describe", "--replication")
        table = [ln.split() for ln in rows.stdout.splitlines()[1:] if ln.strip()]
        assert sorted(int(r[0]) for r in table) == [1, 2, 3], rows.stdout
        assert all(int(r[2]) >= 0 and int(r[3]) >= 0 for r in table), rows.stdout  # log end, lag
        assert [int(r[0]) for r in table if r[-1] == "Leader"] == [leader], rows.stdout


def test_create_partitions_through_a_follower_spreads_replicas(cluster: ClusterProcesses, tool: Tool) -> None:
    leader = quorum_of(cluster.brokers[0]).topics[0].partitions[0].leader_id
    follower = next(b for b in cluster.brokers if b.node_id != leader)
    t = f"grow-{time.monotonic_ns() % 10**9}"
    a = KafkaAdminClient(bootstrap_servers=follower.bootstrap)
    try:
        a.create_topics([NewTopic(t, 2, 3)])
        a.create_partitions({t: NewPartitions(5)})
        a.create_partitions({t: NewPartitions(6, [[3, 1, 2]])})  # an assignment of our own
        with pytest.raises(InvalidPartitionsError):
            a.create_partitions({t: NewPartitions(4)})
        with pytest.raises(InvalidReplicationAssignmentError):
            a.create_partitions({t: NewPartitions(7, [[1, 2, 9]])})  # no broker 9

        def described() -> list[dict[str, Any]]:
            return list(a.describe_topic_partitions([t])["topics"][0]["partitions"])

        wait_for(
            lambda: (
                len(parts := described()) == 6
                and all(p["leader_id"] >= 0 and sorted(p["isr_nodes"]) == [1, 2, 3] for p in parts)
            ),
            30,
            0.2,
            f"{t}: 6 partitions, each led with its full ISR",
        )
        parts = described()
        assert {p["replica_nodes"][0] for p in parts} == {1, 2, 3}  # preferred leaders spread
        assert parts[5]["replica_nodes"] == [3, 1, 2]
        tool(
            "kafka-topics",
            "--bootstrap-server",
            follower.bootstrap,
            "--alter",
            "--topic",
            t,
            "--partitions",
            "8",
        )
        out = tool("kafka-topics", "--bootstrap-server", cluster.bootstrap, "--describe", "--topic", t).stdout
        assert "PartitionCount: 8\tReplicationFactor: 3" in out, out

        p = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
        try:
            for i in range(8):
                p.send(t, b"v" * 1000, partition=i).get(timeout=30)
        finally:
            p.close()

        def sizes() -> dict[int, dict[int, int]]:
            out: dict[int, dict[int, int]] = {}
            for broker in a.describe_log_dirs({t: list(range(8))}):
                for d in broker["log_dirs"]:
                    for topic in d["topics"]:
                        out.setdefault(broker["broker"], {}).update(
                            {q["partition_index"]: q["partition_size"] for q in topic["partitions"]}
                        )
            return out

        # every broker holds a replica of each of the 8 partitions, each with its record
        wait_for(
            lambda: (
                sorted(s := sizes()) == [1, 2, 3]
                and all(len(v) == 8 and min(v.values()) > 1000 for v in s.values())
            ),
            30,
            0.2,
            f"{t}: every replica on every broker has its record",
        )
        report = tool(
            "kafka-log-dirs", "--bootstrap-server", cluster.bootstrap, "--describe", "--topic-list", t
        ).stdout
        brokers = json.loads(next(ln for ln in report.splitlines() if ln.startswith("{")))["brokers"]
        assert sorted(b["broker"] for b in brokers) == [1, 2, 3]
        assert all(len(d["partitions"]) == 8 for b in brokers for d in b["logDirs"]), report
    finally:
        a.close()


def test_describe_quorum_follows_a_new_controller_after_a_sigkill(cluster: ClusterProcesses) -> None:
    """The Raft leader is SIGKILLed: the survivors answer with the new leader at a later epoch,
    the dead voter's progress frozen; it catches up again once restarted."""
    before = quorum_of(cluster.brokers[0]).topics[0].partitions[0]
    dead = next(b for b in cluster.brokers if b.node_id == before.leader_id)
    alive = [b for b in cluster.brokers if b is not dead]
    dead.kill()
    try:
        found: list[Any] = []

        def new_leader() -> bool:
            try:
                p = quorum_of(alive[0]).topics[0].partitions[0]
            except Exception:
                return False
            found[:] = [p]
            return p.leader_id not in (-1, dead.node_id)

        wait_for(new_leader, 30, 0.2, "a new Raft leader among the survivors")
        (p,) = found
        assert p.leader_epoch > before.leader_epoch
        voters = {v.replica_id: v for v in p.current_voters}
        assert voters[p.leader_id].log_end_offset >= before.high_watermark
        for b in alive:  # both survivors agree (the other one forwards to the new leader)
            q = quorum_of(b).topics[0].partitions[0]
            assert (q.leader_id, q.leader_epoch) == (p.leader_id, p.leader_epoch)
    finally:
        dead.start()

    committed = found[0].high_watermark  # what the survivors had committed without it

    def caught_up() -> bool:
        p = quorum_of(dead).topics[0].partitions[0]
        ends = {v.replica_id: v.log_end_offset for v in p.current_voters}
        return min(ends.values()) >= 0 and ends[dead.node_id] >= committed

    wait_for(caught_up, 60, 0.5, f"broker {dead.node_id} back in the quorum and caught up")


def test_describe_quorum_is_forwarded_over_a_sasl_ssl_inter_broker_listener(tmp_path: Path) -> None:
    """Brokers whose inter-broker listener is SASL_SSL (SCRAM-SHA-512): a follower's forwarded
    DescribeQuorum authenticates as the inter-broker user, as the replica fetchers do."""
    certs = Certs(tmp_path)
    ports: set[int] = set()
    while len(ports) < 6:  # six different ports (a port just probed may come back)
        ports.add(free_port())
    kafka, internal = sorted(ports)[:3], sorted(ports)[3:]
    base = tmp_path / "cluster"
    users_add(base / "broker-1", "broker", "broker-Secret-42", "SCRAM-SHA-512")
    c = ClusterProcesses(
        base,
        3,
        overrides={
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL",
            "inter.broker.listener.name": "INTERNAL",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            "sasl.inter.broker.username": "broker",
            "sasl.inter.broker.password": "broker-Secret-42",
            "ssl.keystore.location": str(certs.server_pem),
            "ssl.truststore.location": str(certs.ca_pem),
        },
        ports=kafka,
        broker_overrides=[
            {"listeners": f"PLAINTEXT://127.0.0.1:{kafka[i]},INTERNAL://127.0.0.1:{internal[i]}"}
            for i in range(3)
        ],
    )
    c.start()
    try:
        for b in c.brokers:
            p = quorum_of(b).topics[0].partitions[0]
            assert all(v.log_end_offset >= 0 and v.last_fetch_timestamp > 0 for v in p.current_voters), (
                b.node_id,
                p,
            )
        assert "did not answer" not in c.logs()
    finally:
        c.stop()
