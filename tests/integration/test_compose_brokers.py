"""The compose file's cluster, run without Docker: its three broker commands and
``broker.toml`` verbatim, each broker on a loopback address of its own under its compose host
name (a mount namespace per process, made with ``unshare``, binds a hosts file mapping
``broker-N`` to ``127.77.0.N`` over ``/etc/hosts``); only what binds inside a container
changes, through the environment variables the file documents (``SFTRAFFIC_LISTENERS``,
``SFTRAFFIC_METRICS_LISTEN``, ``SFTRAFFIC_LOG_DIRS``), and the controller ports: the quorum's
endpoint binds every interface on its voter entry's port (pysyncobj binds 0.0.0.0), so three
brokers sharing one network namespace need three ports (``SFTRAFFIC_CONTROLLER_QUORUM_VOTERS``,
the same host names, free ports). Then the compose file's layout commands
create the stream and topics through the host names, and a client produces with acks=all and
consumes everything back: the quorum forms over host names, the brokers replicate to each
other at their advertised names, every topic has three in-sync replicas.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from deploy.local.process import ManagedProcess, free_port
from tests.deploy import deployfiles as df

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


def _in_namespace(hosts: Path, argv: list[str]) -> list[str]:
    """``argv`` run with ``hosts`` as its /etc/hosts (a private mount namespace)."""
    return ["unshare", "--mount", "sh", "-c", f'mount --bind {hosts} /etc/hosts && exec "$@"', "sh", *argv]


def _sftraffic(argv: list[str]) -> list[str]:
    return [sys.executable, "-m", "framework.cli.main", *argv]


def test_the_compose_cluster_forms_over_host_names_and_replicates(tmp_path: Path) -> None:
    reason = _why_not()
    if reason is not None:
        pytest.skip(reason)
    hosts = tmp_path / "hosts"
    hosts.write_text(
        "127.0.0.1 localhost\n" + "".join(f"{ADDRESS.format(n)} broker-{n}\n" for n in (1, 2, 3))
    )
    compose = {inv.where.split()[-1]: inv for inv in df.compose_invocations()}
    ports = {n: free_port("0.0.0.0") for n in (1, 2, 3)}
    voters = ",".join(f"{n}@broker-{n}:{ports[n]}" for n in (1, 2, 3))
    toml = compose["broker-1"].files["/etc/sftraffic/broker.toml"]
    assert ",".join(f"{n}@broker-{n}:19092" for n in (1, 2, 3)) in toml
    brokers = []
    try:
        for n in (1, 2, 3):
            inv = compose[f"broker-{n}"]
            config = tmp_path / "broker.toml"
            config.write_text(inv.files["/etc/sftraffic/broker.toml"])
            argv = [str(config) if a == "/etc/sftraffic/broker.toml" else a for a in inv.argv]
            address = ADDRESS.format(n)
            env = dict(os.environ) | inv.env
            env |= {
                "SFTRAFFIC_LISTENERS": f"PLAINTEXT://{address}:9092,EXTERNAL://{address}:9093",
                "SFTRAFFIC_METRICS_LISTEN": f"{address}:9644",
                "SFTRAFFIC_LOG_DIRS": str(tmp_path / f"data-{n}"),
                "SFTRAFFIC_CONTROLLER_QUORUM_VOTERS": voters,
            }
            brokers.append(
                ManagedProcess(
                    f"broker-{n}",
                    _in_namespace(hosts, _sftraffic(argv)),
                    ready=" listening on ",
                    env=env,
                    grace=15.0,
                ).launch()
            )
        for b in brokers:
            b.wait_ready(60)
        for name in ("layout-stream", "layout-topics", "layout-ground-truth"):
            inv = compose[name]
            run = subprocess.run(
                _in_namespace(hosts, _sftraffic(inv.argv)),
                env=dict(os.environ) | inv.env,
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            assert run.returncode == 0, f"{inv}: {run.stdout}{run.stderr}"
        bootstrap = compose["fleet"].env["SFTRAFFIC_BOOTSTRAP"]
        run = subprocess.run(
            _in_namespace(hosts, [sys.executable, "-c", CLIENT, bootstrap, "traffic_monitoring.traffic"]),
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )
        assert run.returncode == 0, run.stderr
        out = json.loads(run.stdout.strip().splitlines()[-1])
        assert out["unflushed"] == 0 and out["consumed"] == 300
        assert out["brokers"] == [1, 2, 3]
        assert out["advertised"] == ["broker-1:9092", "broker-2:9092", "broker-3:9092"]
        assert len(out["topics"]) == 9  # the layout's eight and ground truth
        for topic, partitions in out["topics"].items():
            for replicas, _isr in partitions:
                assert replicas == [1, 2, 3], topic
        assert all(isr == [1, 2, 3] for _, isr in out["topics"]["traffic_monitoring.traffic"])
    finally:
        for b in brokers:
            b.stop()
