"""``sftraffic up`` end to end: one MQTT reading traced to the dashboard, then a clean stop; on a
running secured cluster (``--external`` with ``--command-config``) too."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from deploy.local import secure
from sensors import layout
from testing import BrokerProcess, ManagedProcess, free_port, sftraffic, wait_for
from tests.support.up import (
    free_block,
    get_json,
    start_up,
    stop_and_check_nothing_left,
    trace_mqtt_reading,
    up_cmd,
)

pytestmark = pytest.mark.system


@pytest.mark.spark
def test_up_traces_an_mqtt_reading_to_the_dashboard_and_stops_cleanly(tmp_path: Path) -> None:
    ports = {k: free_port() for k in ("store", "metrics", "mqtt", "dash")}
    cmd = up_cmd(tmp_path, ports["store"], ports)
    log = tmp_path / "up.out"
    proc = start_up(cmd, log)
    dash = f"http://127.0.0.1:{ports['dash']}"
    pids: dict[str, int] = {}
    try:
        wait_for(
            lambda: "press Ctrl-C" in log.read_text(), timeout=240, interval=0.5, what="every part ready"
        )
        pids = json.loads((tmp_path / "up" / "up.json").read_text())
        assert set(pids) == {"store", "mosquitto", "gateway", "sensors", "devices", "dashboard", "spark"}
        trace_mqtt_reading(ports["mqtt"], dash)
        assert get_json(f"{dash}/api/health")[1]["store_ok"] is True
    finally:
        stop_and_check_nothing_left(proc, log, pids, tmp_path / "up")


def test_up_cluster_carries_on_when_a_broker_dies(tmp_path: Path) -> None:
    """`up --cluster 3`: a reading gets through before and after SIGKILL of one broker."""
    base = free_block(3)
    # up gives broker i the metrics port metrics + i - 1: a block below the ephemeral range too
    ports = {k: free_port() for k in ("mqtt", "dash")} | {"metrics": free_block(3, 0)}
    cmd = up_cmd(tmp_path, base, ports, "--cluster", "3", "--no-spark", "--mqtt-devices", "20")
    log = tmp_path / "up.out"
    proc = start_up(cmd, log)
    dash = f"http://127.0.0.1:{ports['dash']}"
    pids: dict[str, int] = {}
    try:
        wait_for(
            lambda: "press Ctrl-C" in log.read_text(), timeout=180, interval=0.5, what="every part ready"
        )
        pids = json.loads((tmp_path / "up" / "up.json").read_text())
        assert {"store-1", "store-2", "store-3"} <= set(pids)
        trace_mqtt_reading(ports["mqtt"], dash)
        # the health panel polls every 2 s; on a starved machine a broker can be fenced for a
        # moment (broker.session.timeout.ms) and listed again at its next heartbeat
        wait_for(
            lambda: (
                (h := get_json(f"{dash}/api/health")[1] or {}).get("store_ok") is True
                and len(h.get("brokers", [])) == 3
            ),
            timeout=30,
            interval=0.5,
            what="the dashboard listing the 3 brokers",
        )
        os.kill(pids["store-2"], signal.SIGKILL)
        wait_for(
            lambda: "store-2 exited" in log.read_text(), timeout=30, interval=0.3, what="the loss reported"
        )
        # the gateway, the store's clients and the dashboard go on through the failover
        trace_mqtt_reading(ports["mqtt"], dash, timeout=90)
        wait_for(
            lambda: (get_json(f"{dash}/api/health")[1] or {}).get("brokers", [None] * 3).__len__() == 2,
            timeout=60,
            interval=0.5,
            what="the dashboard listing the 2 live brokers",
        )
        assert proc.returncode is None, "up stopped after losing one broker"
    finally:
        stop_and_check_nothing_left(proc, log, pids, tmp_path / "up")


# -- --external: a running cluster, secured ----------------------------------------------------
@pytest.fixture(scope="module")
def secured_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, secure.Secrets]]:
    """A store of ours as ``up --secure`` makes one (SASL_SSL, SCRAM, ACLs), standing in for a
    secured cluster somebody runs; (its bootstrap, its secrets)."""
    root = tmp_path_factory.mktemp("secured-store")
    s, _ = secure.ensure(root, [])
    secure.prepare_store(root / "store", s)
    port = free_port()
    broker = BrokerProcess(
        root / "store", port=port, overrides=secure.broker_settings(s, f"127.0.0.1:{port}")
    ).start()
    yield broker.bootstrap, s
    broker.stop()


def _java_properties(path: Path, s: secure.Secrets, password: str) -> Path:
    """The admin's client settings as Kafka's own tools take them (Java names, PEM trust store)."""
    jaas = f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{secure.ADMIN}" '
    path.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\n"
        f'sasl.jaas.config={jaas}password="{password}";\n'
        f"ssl.truststore.type=PEM\nssl.truststore.location={s.ca}\n"
    )
    return path


def _run_up(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = sftraffic("up", "--data-dir", str(data), *args)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.sftraffic_only(reason="starts a secured store of its own")
def test_up_external_refuses_bad_input_in_one_line_before_starting_anything(
    tmp_path: Path, secured_store: tuple[str, secure.Secrets]
) -> None:
    bootstrap, s = secured_store
    data = tmp_path / "up"
    wrong = _java_properties(tmp_path / "wrong.properties", s, "not-the-password")
    nowhere = f"127.0.0.1:{free_port()}"
    cases = [
        (("--external", nowhere), f"--external {nowhere}: no broker reachable there"),
        (
            ("--external", bootstrap, "--command-config", str(wrong)),
            f"refused to authenticate as '{secure.ADMIN}'",
        ),
        (("--external", bootstrap, "--command-config", str(tmp_path / "none")), f"{tmp_path / 'none'}"),
        (("--command-config", str(wrong)), "give --external HOST:PORT too"),
        (("--external", bootstrap, "--store", "kafka"), "--store and --cluster start one"),
    ]
    for args, message in cases:
        out = _run_up(data, *args)
        lines = out.stderr.strip().splitlines()
        assert out.returncode == 2 and len(lines) == 1 and message in lines[0], (args, out.stderr)
    # the deprecated spelling: the same option, and one warning line first
    out = _run_up(data, "--bootstrap", nowhere)
    warning, error = out.stderr.strip().splitlines()
    assert out.returncode == 2
    assert f"--bootstrap is deprecated here, use --external {nowhere}" in warning
    assert f"--external {nowhere}: no broker reachable there" in error
    assert not data.exists(), "something was started or written"


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(kv.decode().partition("=")[::2] for kv in raw if b"=" in kv)


def _secured_end_offsets(bootstrap: str, conf: dict[str, str], name: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    from tests.support.brokers import quiet_logger

    c = Consumer({**conf, "bootstrap.servers": bootstrap, "group.id": "probe", "logger": quiet_logger()})
    try:
        parts = c.list_topics(name, timeout=10).topics[name].partitions
        return sum(c.get_watermark_offsets(TopicPartition(name, p), timeout=10)[1] for p in parts)
    finally:
        c.close()


@pytest.mark.sftraffic_only(reason="starts a secured store of its own")
def test_up_external_runs_the_demo_on_a_secured_cluster(
    tmp_path: Path, secured_store: tuple[str, secure.Secrets]
) -> None:
    """``up --external --command-config FILE`` (a file for Kafka's tools): every part reaches the
    SASL_SSL cluster with those settings, handed to it as $SFTRAFFIC_CLIENT_CONFIG, even with
    other files named by both variables in the shell up was started from."""
    from framework.client.security import ENV, read_properties

    bootstrap, s = secured_store
    conf = _java_properties(tmp_path / "admin.properties", s, s.passwords()[f"kafka:{secure.ADMIN}"])
    stale = tmp_path / "stale.properties"  # PLAINTEXT: a part reading it could not connect
    stale.write_text("security.protocol=PLAINTEXT\n")
    ports = {k: free_port() for k in ("store", "metrics", "mqtt", "dash")}
    cmd = up_cmd(tmp_path, ports["store"], ports, "--no-spark", "--mqtt-devices", "20")
    cmd += ["--external", bootstrap, "--command-config", str(conf)]
    log = tmp_path / "up.out"
    env = {ENV: str(stale), "SFTRAFFIC_KAFKA_CONFIG": str(stale)}
    proc = ManagedProcess("up", cmd, log=log, grace=60.0, env=env).launch()
    data = tmp_path / "up"
    pids: dict[str, int] = {}
    try:
        wait_for(
            lambda: "press Ctrl-C" in log.read_text(), timeout=240, interval=0.5, what="every part ready"
        )
        pids = json.loads((data / "up.json").read_text())
        assert not {"store", "store-1"} & set(pids)
        assert f"the Kafka cluster at {bootstrap} (not started here)" in log.read_text()
        settings = data / "external.properties"
        assert settings.stat().st_mode & 0o777 == 0o600
        assert read_properties(settings)["sasl.username"] == secure.ADMIN  # translated from the JAAS line
        for part in ("gateway", "sensors", "devices", "dashboard"):
            environ = _environ(pids[part])
            assert environ[ENV] == environ["SFTRAFFIC_KAFKA_CONFIG"] == str(settings), part
        trace_mqtt_reading(ports["mqtt"], f"http://127.0.0.1:{ports['dash']}", timeout=90)
        admin = read_properties(s.properties(secure.ADMIN))
        wait_for(
            lambda: _secured_end_offsets(bootstrap, admin, layout.topic("traffic")) > 100,
            timeout=60,
            interval=1,
            what="the fleet's events in the secured cluster",
        )
    finally:
        stop_and_check_nothing_left(proc, log, pids, data)
