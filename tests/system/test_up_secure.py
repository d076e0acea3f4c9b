"""``sftraffic up --secure --format avro``: the demo with TLS, SCRAM and ACLs everywhere, end
to end, on Avro through a registry that wants credentials.

A reading published over TLS by a provisioned MQTT device (its own user name and password)
reaches the dashboard through Mosquitto's ACLs, the gateway (SCRAM-SHA-256 over TLS to the
store; the reading converted to Avro with a schema it may register, HTTPS and Basic credentials
to the registry) and the dashboard's own consumer (its user, which may only consume, and only
read schemas); the store listens on SASL_SSL only, the registry on HTTPS with HTTP Basic users;
after the stop, no password is in clear in the store's data dir (metadata included), nor in
Mosquitto's, the registry's auth file or any log. Without Spark (its credentials are covered by
tests/integration/test_mqtt_security.py and tests/integration/pipelines/test_secure_source.py), to
stay quick.
"""

from __future__ import annotations

import json
import re
import socket
import ssl
import time
import uuid
from pathlib import Path

import pytest
import requests

from deploy.local import secure
from sensors import layout
from testing import free_port, wait_for
from tests.support.up import free_block, get_json, start_up, stop_and_check_nothing_left, up_cmd

pytestmark = pytest.mark.system


def _publish_as_device(port: int, ca: Path, device: str, password: str, dash: str) -> None:
    import paho.mqtt.client as mqtt

    speed = 23.456
    ev = {
        "type": "traffic",
        "sensor_id": device,
        "seq": 10_000_000,
        "event_time": int(time.time() * 1000),
        "segment_id": "market-st-03",
        "speed_kmh": speed,
        "vehicle_class": "truck",
        "lat": 37.78,
        "lon": -122.41,
    }
    # its own user name, another client id: the running fleet keeps its connection
    c = mqtt.Client(
        mqtt.CallbackAPIVersion.VERSION2, client_id=f"probe-{uuid.uuid4().hex[:6]}", protocol=mqtt.MQTTv5
    )
    c.username_pw_set(device, password)
    c.tls_set_context(ssl.create_default_context(cafile=str(ca)))
    c.connect("127.0.0.1", port)
    c.loop_start()
    try:
        info = c.publish(f"sf/{layout.STREAM}/traffic/{device}", json.dumps(ev), qos=1)
        info.wait_for_publish(10)
    finally:
        c.loop_stop()
        c.disconnect()

    def shown() -> bool:
        status, body = get_json(f"{dash}/api/sensor/{device}")
        return status == 200 and body.get("speed_kmh") == speed

    wait_for(shown, timeout=60, interval=0.3, what=f"{device}'s reading on the dashboard")


def test_up_secure_runs_the_demo_with_auth_everywhere(tmp_path: Path) -> None:
    ports = {k: free_port() for k in ("store", "metrics", "mqtt", "dash", "registry")}
    cmd = up_cmd(tmp_path, ports["store"], ports, "--secure", "--no-spark", "--mqtt-devices", "10")
    cmd += ["--format", "avro", "--registry-port", str(ports["registry"])]
    log = tmp_path / "up.out"
    data = tmp_path / "up"
    proc = start_up(cmd, log)
    dash = f"http://127.0.0.1:{ports['dash']}"
    pids: dict[str, int] = {}
    try:
        wait_for(lambda: "press Ctrl-C" in log.read_text(), timeout=90, interval=0.3, what="every part ready")
        pids = json.loads((data / "up.json").read_text())
        s = secure.Secrets(data / "secure")
        pw = s.passwords()
        out = log.read_text()
        assert not [p for p in pw.values() if p in out], "a password printed in clear"
        assert str(s.dir) in out
        device = next(k.split(":", 1)[1] for k in pw if k.startswith("mqtt:mqtt-"))
        _publish_as_device(ports["mqtt"], s.ca, device, pw[f"mqtt:{device}"], dash)
        # the fleet's devices get through too (each logged in as itself): the gateway's report
        gateway_log = data / "logs" / "gateway.log"

        def fleet_forwarded() -> bool:
            return any(
                int(n) > 1 for n in re.findall(r"received \d+ forwarded (\d+)", gateway_log.read_text())
            )

        wait_for(fleet_forwarded, timeout=30, interval=0.5, what="the MQTT fleet's readings forwarded")
        devices_log = (data / "logs" / "devices.log").read_text()
        assert "refused" not in devices_log and "Traceback" not in devices_log, devices_log[-2000:]
        health = get_json(f"{dash}/api/health")[1]
        assert health["store_ok"] is True, health
        # the registry: HTTPS, nobody without credentials, the dashboard may read but not register
        registry = f"https://127.0.0.1:{ports['registry']}"
        anonymous = requests.get(f"{registry}/subjects", verify=str(s.ca), timeout=10)
        assert anonymous.status_code == 401, anonymous.text
        as_dashboard = (secure.DASHBOARD, pw[f"kafka:{secure.DASHBOARD}"])
        subjects = requests.get(
            f"{registry}/subjects", auth=as_dashboard, verify=str(s.ca), timeout=10
        ).json()
        assert f"{layout.topic('traffic')}-value" in subjects, subjects
        register = requests.post(
            f"{registry}/subjects/{layout.topic('traffic')}-value/versions",
            json={"schema": '{"type": "string"}'},
            auth=as_dashboard,
            verify=str(s.ca),
            timeout=10,
        )
        assert register.json()["error_code"] == 40401, register.text
        _no_plaintext(ports["store"])  # the store speaks TLS only
    finally:
        stop_and_check_nothing_left(proc, log, pids, data)
    clear = [v.encode() for v in pw.values()]
    registry_auth = data / "secure" / "registry-auth.json"
    assert b"password_hash" in registry_auth.read_bytes()
    files = [*(data / "store-1").rglob("*"), *(data / "mosquitto").rglob("*"), *(data / "logs").rglob("*")]
    for f in [*files, registry_auth]:
        if f.is_file():
            body = f.read_bytes()
            assert not [p for p in clear if p in body], f"a password in clear in {f}"
    metadata = (data / "store-1" / "__metadata" / "metadata.json").read_bytes()
    assert b"SCRAM-SHA-256" in metadata and b'"gateway"' in metadata  # the users are there, hashed


def _no_plaintext(port: int) -> None:
    """A plaintext Kafka request to ``port`` gets no answer but a closed socket."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"\x00\x00\x00\x0a\x00\x12\x00\x00\x00\x00\x00\x01\x00\x00")
        sock.settimeout(5)
        try:
            answer = sock.recv(100)
        except (ConnectionResetError, TimeoutError):
            answer = b""
        assert not answer.startswith(b"\x00\x00\x00"), answer


def test_up_secure_cluster_replicates_over_the_authenticated_listener(tmp_path: Path) -> None:
    """``up --secure --cluster 3``: the users reach the quorum from the first broker's data dir,
    the ACLs through the admin API; the brokers replicate over their SASL_SSL listener as
    ``sftraffic-broker`` (every partition of the demo's topics has its 3 replicas in sync) and
    their Raft links are encrypted; a device's reading reaches the dashboard; no password is in
    clear in any broker's data dir (the metadata journal included) or log."""
    from confluent_kafka.admin import AdminClient

    from framework.client.security import read_properties

    base = free_block(3)
    # up gives broker i the metrics port metrics + i - 1: a block below the ephemeral range too
    ports = {k: free_port() for k in ("mqtt", "dash")} | {"metrics": free_block(3, 0)}
    cmd = up_cmd(tmp_path, base, ports, "--secure", "--cluster", "3", "--no-spark", "--mqtt-devices", "5")
    log = tmp_path / "up.out"
    data = tmp_path / "up"
    proc = start_up(cmd, log)
    pids: dict[str, int] = {}
    try:
        wait_for(
            lambda: "press Ctrl-C" in log.read_text(), timeout=180, interval=0.5, what="every part ready"
        )
        pids = json.loads((data / "up.json").read_text())
        assert {"store-1", "store-2", "store-3"} <= set(pids)
        s = secure.Secrets(data / "secure")
        pw = s.passwords()
        assert not [p for p in pw.values() if p in log.read_text()], "a password printed in clear"
        device = next(k.split(":", 1)[1] for k in pw if k.startswith("mqtt:mqtt-"))
        _publish_as_device(
            ports["mqtt"], s.ca, device, pw[f"mqtt:{device}"], f"http://127.0.0.1:{ports['dash']}"
        )
        conf = {k: v for k, v in read_properties(s.properties(secure.ADMIN)).items()}
        admin = AdminClient({**conf, "bootstrap.servers": f"127.0.0.1:{base}"})
        topic = layout.topic("traffic")

        def in_sync() -> bool:
            md = admin.list_topics(topic, timeout=10).topics[topic]
            return bool(md.partitions) and all(len(p.isrs) == 3 for p in md.partitions.values())

        wait_for(in_sync, timeout=60, interval=0.5, what="every replica of the traffic topic in sync")
        assert len(admin.list_topics(timeout=10).brokers) == 3
        for i in range(3):
            _no_plaintext(base + i)
        # until the quorum has the users (proposed by broker 1 once it runs) the fetchers are
        # refused as an unknown user and retry; never with the user known and the password wrong
        logs = "".join(f.read_text() for f in (data / "logs").glob("store-*.log"))
        refused = [line for line in logs.splitlines() if "authentication failed" in line]
        assert all("unknown user" in line for line in refused), refused[:3]
    finally:
        stop_and_check_nothing_left(proc, log, pids, data)
    clear = [v.encode() for v in pw.values()]
    for f in [*data.glob("store-*/**/*"), *(data / "logs").rglob("*")]:
        if f.is_file():
            body = f.read_bytes()
            assert not [p for p in clear if p in body], f"a password in clear in {f}"
