"""The deployment files' clusters, run without Docker or Kubernetes: compose's three broker
commands and ``broker.toml``, and the StatefulSet's one command line (``--node-id-from-hostname``),
ConfigMap and environment (``$(POD_NAME)`` expanded per pod), verbatim. Each broker runs on a
loopback address of its own under its host names: a mount namespace per process (``unshare``)
binds a hosts file mapping ``broker-N``, ``sftraffic-broker-N.sftraffic-broker`` and the like
to ``127.77.0.N`` over ``/etc/hosts``, and each pod also gets a UTS namespace with its host name.
Only what binds inside a container changes, through the documented environment variables
(``SFTRAFFIC_LISTENERS``, ``SFTRAFFIC_METRICS_LISTEN``, ``SFTRAFFIC_LOG_DIRS``), and the
controller ports: the quorum's endpoint binds every interface on its voter entry's port
(pysyncobj binds 0.0.0.0), so three brokers sharing one network namespace need three ports
(``SFTRAFFIC_CONTROLLER_QUORUM_VOTERS``, the same host names, free ports). Then the files'
layout commands (compose's layout services, the Job's containers in order) create the stream
and topics through the host names, and a client produces with acks=all and consumes
everything back: the quorum forms over host names, the brokers replicate to each other at
their advertised names, every topic has three in-sync replicas.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from testing import ManagedProcess, free_port
from tests.support import deployfiles as df
from tests.support.deployfiles import Invocation

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

ADDRESS = "127.77.0.{}"
PORTS = (9092, 9093, 9644)  # Kafka, EXTERNAL, metrics: compose's, on each broker's address

CLIENT = r"""
import json, sys, time
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

bootstrap, topic = sys.argv[1], sys.argv[2]
admin = AdminClient({"bootstrap.servers": bootstrap})
deadline = time.monotonic() + 30
while True:
    md = admin.list_topics(timeout=10)
    parts = md.topics[topic].partitions
    if all(len(p.isrs) == 3 for p in parts.values()) or time.monotonic() > deadline:
        break
    time.sleep(0.2)
p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
for i in range(300):
    p.produce(topic, key=str(i % 17).encode(), value=str(i).encode())
left = p.flush(30)
c = Consumer({"bootstrap.servers": bootstrap, "group.id": "compose-smoke", "auto.offset.reset": "earliest"})
c.assign([TopicPartition(topic, n, 0) for n in parts])
got = set()
deadline = time.monotonic() + 30
while len(got) < 300 and time.monotonic() < deadline:
    for m in c.consume(500, timeout=0.5):
        if m.error() is None:
            got.add(int(m.value()))
c.close()
print(json.dumps({
    "unflushed": left,
    "consumed": len(got),
    "brokers": sorted(b.id for b in md.brokers.values()),
    "advertised": sorted(f"{b.host}:{b.port}" for b in md.brokers.values()),
    "topics": {t: [[sorted(p.replicas), sorted(p.isrs)] for p in m.partitions.values()]
               for t, m in md.topics.items() if t.startswith("traffic_monitoring.")},
}))
"""


def _why_not() -> str | None:
    if shutil.which("unshare") is None:
        return "unshare (util-linux) is not installed"
    probe = subprocess.run(
        ["unshare", "--mount", "true"], check=False, capture_output=True, text=True, timeout=10
    )
    if probe.returncode != 0:
        return f"no mount namespace here: {probe.stderr.strip()}"
    for address in [(ADDRESS.format(n), port) for n in (1, 2, 3) for port in PORTS]:
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the broker binds
            try:
                s.bind(address)
            except OSError as exc:
                return f"{address[0]}:{address[1]} is taken here ({exc.strerror})"
    return None


def _in_namespace(hosts: Path, argv: list[str], hostname: str | None = None) -> list[str]:
    """``argv`` run with ``hosts`` as its /etc/hosts (a private mount namespace) and, given a
    ``hostname``, that host name (a UTS namespace of its own)."""
    if hostname is None:
        return [
            "unshare",
            "--mount",
            "sh",
            "-c",
            f'mount --bind {hosts} /etc/hosts && exec "$@"',
            "sh",
            *argv,
        ]
    script = f'mount --bind {hosts} /etc/hosts && hostname {hostname} && exec "$@"'
    return ["unshare", "--mount", "--uts", "sh", "-c", script, "sh", *argv]


def _sftraffic(argv: list[str]) -> list[str]:
    return [sys.executable, "-m", "framework.cli.main", *argv]


@dataclass
class Flavour:
    brokers: list[Invocation]  # node 1, 2, 3
    layout: list[Invocation]  # in the order they run
    names: dict[int, list[str]]  # node -> the host names it answers to
    voter_host: dict[int, str]  # node -> the host of its controller.quorum.voters entry
    extra_hosts: dict[str, int]  # other names (a Service) -> the node they reach
    bootstrap: str
    advertised: list[str]
    set_hostname: bool


def _compose() -> Flavour:
    invs = {inv.where.split()[-1]: inv for inv in df.compose_invocations()}
    return Flavour(
        brokers=[invs[f"broker-{n}"] for n in (1, 2, 3)],
        layout=[invs[n] for n in ("layout-stream", "layout-topics", "layout-ground-truth")],
        names={n: [f"broker-{n}"] for n in (1, 2, 3)},
        voter_host={n: f"broker-{n}" for n in (1, 2, 3)},
        extra_hosts={},
        bootstrap=invs["fleet"].env["SFTRAFFIC_BOOTSTRAP"],
        advertised=[f"broker-{n}:9092" for n in (1, 2, 3)],
        set_hostname=False,
    )


def _k8s() -> Flavour:
    invs = list(df.k8s_invocations())
    brokers = [i for i in invs if i.argv[0] == "broker"]
    assert [b.hostname for b in brokers] == [f"sftraffic-broker-{n}" for n in (1, 2, 3)]
    svc = f"sftraffic-broker.{df.NAMESPACE}.svc"
    return Flavour(
        brokers=brokers,
        layout=[i for i in invs if "Job/sftraffic-layout" in i.where],
        names={
            n: [f"sftraffic-broker-{n}.sftraffic-broker", f"sftraffic-broker-{n}.{svc}"] for n in (1, 2, 3)
        },
        voter_host={n: f"sftraffic-broker-{n}.sftraffic-broker" for n in (1, 2, 3)},
        extra_hosts={"sftraffic-bootstrap": 1},
        bootstrap=next(i for i in invs if "Deployment/sftraffic-fleet" in i.where).env["SFTRAFFIC_BOOTSTRAP"],
        advertised=[f"sftraffic-broker-{n}.{svc}:9092" for n in (1, 2, 3)],
        set_hostname=True,
    )


@pytest.mark.parametrize("flavour", [_compose, _k8s], ids=["compose", "k8s"])
def test_the_cluster_forms_over_host_names_and_replicates(
    flavour: Callable[[], Flavour], tmp_path: Path
) -> None:
    reason = _why_not()
    if reason is not None:
        pytest.skip(reason)
    f = flavour()
    hosts = tmp_path / "hosts"
    lines = ["127.0.0.1 localhost"]
    lines += [f"{ADDRESS.format(n)} {' '.join(names)}" for n, names in f.names.items()]
    lines += [f"{ADDRESS.format(n)} {name}" for name, n in f.extra_hosts.items()]
    hosts.write_text("\n".join(lines) + "\n")
    toml = f.brokers[0].files["/etc/sftraffic/broker.toml"]
    assert ",".join(f"{n}@{f.voter_host[n]}:19092" for n in (1, 2, 3)) in toml
    ports = {n: free_port("0.0.0.0") for n in (1, 2, 3)}
    voters = ",".join(f"{n}@{f.voter_host[n]}:{ports[n]}" for n in (1, 2, 3))
    config = tmp_path / "broker.toml"
    config.write_text(toml)
    brokers = []
    try:
        for n, inv in zip((1, 2, 3), f.brokers, strict=True):
            argv = [str(config) if a == "/etc/sftraffic/broker.toml" else a for a in inv.argv]
            address = ADDRESS.format(n)
            env = dict(os.environ) | inv.env
            env |= {
                "SFTRAFFIC_LISTENERS": ",".join(
                    f"{name}://{address}:{port}"
                    for name, port in (("PLAINTEXT", 9092), ("EXTERNAL", 9093))
                    if name == "PLAINTEXT" or "EXTERNAL" in toml
                ),
                "SFTRAFFIC_METRICS_LISTEN": f"{address}:9644",
                "SFTRAFFIC_LOG_DIRS": str(tmp_path / f"data-{n}"),
                "SFTRAFFIC_CONTROLLER_QUORUM_VOTERS": voters,
            }
            cmd = _in_namespace(hosts, _sftraffic(argv), inv.hostname if f.set_hostname else None)
            brokers.append(
                ManagedProcess(f"broker-{n}", cmd, ready=" listening on ", env=env, grace=15.0).launch()
            )
        for n, b in zip((1, 2, 3), brokers, strict=True):
            b.wait_ready(60)
            assert f"broker {n} listening on" in b.logs()  # the id its command line gives it
        for inv in f.layout:
            run = subprocess.run(
                _in_namespace(hosts, _sftraffic(inv.argv)),
                env=dict(os.environ) | inv.env,
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            assert run.returncode == 0, f"{inv}: {run.stdout}{run.stderr}"
        run = subprocess.run(
            _in_namespace(hosts, [sys.executable, "-c", CLIENT, f.bootstrap, "traffic_monitoring.traffic"]),
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )
        assert run.returncode == 0, run.stderr
        out = json.loads(run.stdout.strip().splitlines()[-1])
        assert out["unflushed"] == 0 and out["consumed"] == 300
        assert out["brokers"] == [1, 2, 3]
        assert out["advertised"] == f.advertised
        # the layout's topics (with the pipelines' batch ledger) and ground truth: the same set the
        # drift test (tests/unit/deploy/test_cli_contract.py) checks against the applications' own list
        assert len(out["topics"]) == 10
        for topic, partitions in out["topics"].items():
            for replicas, _isr in partitions:
                assert replicas == [1, 2, 3], topic
        assert all(isr == [1, 2, 3] for _, isr in out["topics"]["traffic_monitoring.traffic"])
    finally:
        for b in brokers:
            b.stop()
