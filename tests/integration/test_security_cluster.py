"""A 3-broker cluster whose brokers replicate over an authenticated, encrypted listener.

Each broker has a PLAINTEXT listener for clients and an INTERNAL one (SASL_SSL, SCRAM-SHA-512)
that is ``inter.broker.listener.name``; the metadata quorum runs with
``controller.quorum.password`` (pysyncobj's encrypted, authenticated links). The inter-broker
user and a client user are added with ``sftraffic users add --data-dir`` to different brokers'
data dirs before the first start and reach every broker through the quorum; a user added later
with AdminClient does too. Nothing on disk holds a password.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from framework.protocol.messages.metadata import MetadataRequest, MetadataResponse
from testing import ClusterProcesses, free_port, wait_for
from tests.support.brokers import quiet_logger
from tests.support.security import Certs, Raw, users_add

pytestmark = [
    pytest.mark.integration,
    pytest.mark.sftraffic_only(reason="a 3-broker sftraffic cluster with its own listeners and users"),
]

BROKER_PW = "broker-Secret-42"
ALICE_PW = "alice-Secret-42"
CAROL_PW = "carol-Secret-42"
QUORUM_PW = "quorum-Secret-42"


@pytest.fixture
def cluster(tmp_path: Path) -> Any:
    certs = Certs(tmp_path)
    kafka = [free_port() for _ in range(3)]
    internal = [free_port() for _ in range(3)]
    base = tmp_path / "cluster"
    users_add(base / "broker-1", "broker", BROKER_PW, "SCRAM-SHA-512")
    users_add(base / "broker-2", "alice", ALICE_PW, "SCRAM-SHA-256")
    c = ClusterProcesses(
        base,
        3,
        overrides={
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL",
            "inter.broker.listener.name": "INTERNAL",
            "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            "sasl.inter.broker.username": "broker",
            "sasl.inter.broker.password": BROKER_PW,
            "ssl.keystore.location": str(certs.server_pem),
            "ssl.truststore.location": str(certs.ca_pem),
            "controller.quorum.password": QUORUM_PW,
            "replica.fetch.backoff.ms": 200,
        },
        ports=kafka,
        broker_overrides=[
            {"listeners": f"PLAINTEXT://127.0.0.1:{kafka[i]},INTERNAL://127.0.0.1:{internal[i]}"}
            for i in range(3)
        ],
    )
    c.start()
    c.internal = internal
    c.certs = certs
    yield c
    c.stop()


def sasl_ssl(c: Any, i: int, user: str, password: str, mech: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": f"127.0.0.1:{c.internal[i]}",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": mech,
        "sasl.username": user,
        "sasl.password": password,
        "ssl.ca.location": str(c.certs.ca_pem),
        "logger": quiet_logger(),
    }


def can_authenticate(c: Any, i: int, user: str, password: str, mech: str) -> bool:
    a = AdminClient(sasl_ssl(c, i, user, password, mech))
    try:
        md = a.list_topics(timeout=5)
    except Exception:
        return False
    return len(md.brokers) == 3


def test_replication_over_sasl_ssl_and_users_through_the_quorum(cluster: Any) -> None:
    c = cluster
    admin = AdminClient({"bootstrap.servers": c.bootstrap, "logger": quiet_logger()})
    admin.create_topics(
        [NewTopic("secured", num_partitions=3, replication_factor=3, config={"min.insync.replicas": "3"})]
    )["secured"].result(30)
    # acks=all with min.insync.replicas=3: every follower must fetch, over SASL_SSL
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "logger": quiet_logger()})
    done: list[Any] = []
    for i in range(60):
        p.produce("secured", b"%d" % i, partition=i % 3, on_delivery=lambda e, m: done.append(e))
    assert p.flush(60) == 0
    assert len(done) == 60 and all(e is None for e in done), [e for e in done if e is not None][:3]
    logs = c.logs()
    assert "refused inter-broker authentication" not in logs

    # each listener advertises its own addresses
    raw = Raw(c.brokers[0].bootstrap)
    md = raw.call(MetadataRequest(topics=[]), 12, MetadataResponse)
    assert sorted(b.port for b in md.brokers) == sorted(b.port for b in c.brokers)
    raw.close()
    a = AdminClient(sasl_ssl(c, 0, "broker", BROKER_PW, "SCRAM-SHA-512"))
    assert sorted(b.port for b in a.list_topics(timeout=10).brokers.values()) == sorted(c.internal)

    # users added to one data dir before the first start are on every broker
    for i in range(3):
        wait_for(
            lambda i=i: can_authenticate(c, i, "alice", ALICE_PW, "SCRAM-SHA-256"), 20, 0.5, f"alice@{i}"
        )
    # and one added through broker 1 while running
    fut = AdminClient({"bootstrap.servers": c.brokers[0].bootstrap, "logger": quiet_logger()})
    res = fut.alter_user_scram_credentials(
        [
            UserScramCredentialUpsertion(
                "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), CAROL_PW.encode()
            )
        ]
    )
    res["carol"].result(30)
    for i in range(3):
        wait_for(
            lambda i=i: can_authenticate(c, i, "carol", CAROL_PW, "SCRAM-SHA-256"), 20, 0.5, f"carol@{i}"
        )
    assert not can_authenticate(c, 2, "carol", "wrong", "SCRAM-SHA-256")

    # no password in any file of any broker (the Raft journal holds salted keys only)
    secrets = [s.encode() for s in (BROKER_PW, ALICE_PW, CAROL_PW, QUORUM_PW)]
    for b in c.brokers:
        for f in b.data_dir.rglob("*"):
            if f.is_file():
                data = f.read_bytes()
                assert not [s for s in secrets if s in data], f
    # the bootstrap credentials left metadata.json once proposed
    assert b"scram" not in (c.brokers[0].data_dir / "__metadata" / "metadata.json").read_bytes()
    assert "proposed to the quorum" in logs


def test_a_broker_with_a_wrong_inter_broker_password_cannot_replicate(tmp_path: Path) -> None:
    """The leader refuses its fetcher (SASL_AUTHENTICATION_FAILED): acks=all with every replica
    required cannot complete, and its log says why."""
    kafka = [free_port() for _ in range(2)]
    internal = [free_port() for _ in range(2)]
    base = tmp_path / "cluster"
    users_add(base / "broker-1", "broker", BROKER_PW, "SCRAM-SHA-256")
    c = ClusterProcesses(
        base,
        2,
        overrides={
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT",
            "inter.broker.listener.name": "INTERNAL",
            "sasl.inter.broker.username": "broker",
            "replica.fetch.backoff.ms": 200,
        },
        ports=kafka,
        broker_overrides=[
            {
                "listeners": f"PLAINTEXT://127.0.0.1:{kafka[i]},INTERNAL://127.0.0.1:{internal[i]}",
                "sasl.inter.broker.password": BROKER_PW if i == 0 else "wrong",
            }
            for i in range(2)
        ],
    )
    c.start()
    try:
        admin = AdminClient({"bootstrap.servers": c.bootstrap, "logger": quiet_logger()})
        admin.create_topics(
            [NewTopic("t", num_partitions=1, replication_factor=2, config={"min.insync.replicas": "2"})]
        )["t"].result(30)
        md = admin.list_topics("t", timeout=10)
        leader = md.topics["t"].partitions[0].leader
        # the follower is the broker with the wrong password only if broker 1 leads
        if leader != 1:
            pytest.skip("broker 2 leads the partition; its follower has the right password")
        wait_for(lambda: "refused inter-broker authentication" in c.brokers[1].logs(), 30, 0.5, "refusal")
    finally:
        c.stop()


def test_users_add_refuses_a_running_brokers_data_dir(tmp_path: Path, broker_factory: Any) -> None:
    from testing import sftraffic

    b = broker_factory()
    out = subprocess.run(
        sftraffic("users", "add", "x", "--password", "pw-12345", "--data-dir", str(b.data_dir)),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 2 and "use --bootstrap" in out.stderr
