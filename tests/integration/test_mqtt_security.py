"""The MQTT side secured: real Mosquitto with a password file, per-device ACLs and a
TLS listener, the gateway logging in to it and to the store with SCRAM-SHA-256 over TLS.

One module-wide setup, made as ``sftraffic up --secure`` makes it (:mod:`deploy.local.secure`):
certificates, passwords, Mosquitto's files, the store's users and ACLs in its data dir before
its start; the store has a SASL_SSL listener only and its authorizer on.
"""

from __future__ import annotations

import json
import os
import ssl
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from deploy.local import secure
from deploy.local.mosquitto import MosquittoProcess
from framework.client.security import ENV, read_properties
from framework.errors import StoreError
from sensors import layout
from sensors.publish import MqttSink
from testing import BrokerProcess, ManagedProcess, free_port, sftraffic, wait_for
from tests.support.brokers import quiet_logger

pytestmark = pytest.mark.integration

DEVICES = ["dev-a", "dev-b"]


class Setup:
    def __init__(self, tmp: Path) -> None:
        self.root = tmp
        self.s, _ = secure.ensure(tmp, DEVICES)
        self.pw = self.s.passwords()
        data = tmp / "store"
        secure.prepare_store(data, self.s)
        port = free_port()
        self.broker = BrokerProcess(
            data, port=port, overrides=secure.broker_settings(self.s, f"127.0.0.1:{port}")
        ).start()
        self.bootstrap = self.broker.bootstrap
        self.admin = read_properties(self.s.properties(secure.ADMIN))
        os.environ[ENV] = str(self.s.properties(secure.ADMIN))  # ensure_layout as the admin
        try:
            layout.ensure_layout(self.bootstrap, partitions=2)
        finally:
            del os.environ[ENV]
        self.mosquitto = MosquittoProcess(tmp / "mosquitto", security=self.s.mqtt).start()
        self.gateway = self.gateway_proc().start(30)

    def gateway_proc(
        self, command_config: Path | None = None, mqtt_password: Path | None = None, tls: bool = True
    ) -> ManagedProcess:
        gid = f"gw-{uuid.uuid4().hex[:6]}"
        cmd = sftraffic("gateway", "-b", self.bootstrap, "--mqtt", self.mosquitto.address, "--id", gid)
        cmd += ["--queue-dir", str(self.root / "queue")]
        cmd += ["--mqtt-ca", str(self.s.ca)] if tls else []
        cmd += ["--mqtt-username", secure.MQTT_GATEWAY]
        cmd += ["--mqtt-password-file", str(mqtt_password or self.s.mqtt_gateway_password)]
        cmd += ["--command-config", str(command_config or self.s.properties(secure.GATEWAY))]
        return ManagedProcess(gid, cmd, ready="ready", log=self.root / f"{gid}.log", grace=20.0)

    def tls(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.s.ca))

    def stop(self) -> None:
        self.gateway.stop()
        self.mosquitto.stop()
        self.broker.stop()


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Any:
    s = Setup(tmp_path_factory.mktemp("mqtt-secure"))
    yield s
    s.stop()


def reading(sensor: str, seq: int, speed: float = 42.0) -> dict[str, Any]:
    return {
        "type": "traffic",
        "sensor_id": sensor,
        "seq": seq,
        "event_time": int(time.time() * 1000),
        "segment_id": "market-st-00",
        "speed_kmh": speed,
        "vehicle_class": "car",
        "lat": 37.79,
        "lon": -122.39,
    }


def stored(setup: Setup, topic: str) -> list[dict[str, Any]]:
    """Every record of ``topic``, read as the admin over SASL_SSL."""
    c = Consumer(
        {**setup.admin, "bootstrap.servers": setup.bootstrap, "group.id": "check", "logger": quiet_logger()}
    )
    try:
        md = c.list_topics(topic, timeout=10).topics[topic]
        ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in md.partitions}
        c.assign([TopicPartition(topic, p, 0) for p in md.partitions])
        out: list[dict[str, Any]] = []
        deadline = time.monotonic() + 20
        while len(out) < sum(ends.values()) and time.monotonic() < deadline:
            out.extend(json.loads(m.value()) for m in c.consume(1000, timeout=0.5) if m.error() is None)
        return out
    finally:
        c.close()


def device_client(
    setup: Setup, user: str, password: str, tls: bool = True
) -> tuple[Any, list[Any], threading.Event]:
    """A paho MQTT 5 client (not connected): its CONNACK reason codes and a 'closed' event."""
    import paho.mqtt.client as mqtt

    c = mqtt.Client(
        mqtt.CallbackAPIVersion.VERSION2, client_id=f"{user}-{uuid.uuid4().hex[:4]}", protocol=mqtt.MQTTv5
    )
    c.username_pw_set(user, password)
    if tls:
        c.tls_set_context(setup.tls())
    answers: list[Any] = []
    closed = threading.Event()
    c.on_connect = lambda _c, _u, _f, reason, _p=None: answers.append(reason)
    c.on_disconnect = lambda *_a: closed.set()
    return c, answers, closed


def test_a_device_with_its_password_publishes_to_its_topic_through_the_gateway(setup: Setup) -> None:
    sink = MqttSink(
        "127.0.0.1", setup.mosquitto.port, credentials={"dev-a": setup.pw["mqtt:dev-a"]}, tls=setup.tls()
    )
    try:
        sink.send(layout.topic("traffic"), "dev-a", reading("dev-a", 0, 11.5), 0)
        assert sink.flush(15) == 0 and sink.refused == 0
    finally:
        sink.close()
    wait_for(
        lambda: any(
            e["sensor_id"] == "dev-a" and e["speed_kmh"] == 11.5
            for e in stored(setup, layout.topic("traffic"))
        ),
        timeout=30,
        interval=0.3,
        what="dev-a's reading in the store",
    )


def test_a_wrong_password_is_refused(setup: Setup) -> None:
    sink = MqttSink(
        "127.0.0.1", setup.mosquitto.port, credentials={"dev-a": "not-its-password"}, tls=setup.tls()
    )
    with pytest.raises(StoreError, match="refused it: Not authorized"):
        sink.send(layout.topic("traffic"), "dev-a", reading("dev-a", 1), 0)
    # and a device that is not in the password file at all
    sink = MqttSink("127.0.0.1", setup.mosquitto.port, credentials={"intruder": "x"}, tls=setup.tls())
    with pytest.raises(StoreError, match="refused it: Not authorized"):
        sink.send(layout.topic("traffic"), "intruder", reading("intruder", 0), 0)


def test_a_device_cannot_publish_to_another_devices_topic(setup: Setup) -> None:
    """dev-a poses as dev-b: Mosquitto's ACL drops it (MQTT 5: PUBACK 'Not authorized'), while
    dev-a's own reading, sent after it on the same connection, gets through."""
    c, _answers, _closed = device_client(setup, "dev-a", setup.pw["mqtt:dev-a"])
    acks: dict[int, Any] = {}
    c.on_publish = lambda _c, _u, mid, reason, _p=None: acks.__setitem__(mid, reason)
    c.connect("127.0.0.1", setup.mosquitto.port)
    c.loop_start()
    try:
        forged = c.publish(f"sf/{layout.STREAM}/traffic/dev-b", json.dumps(reading("dev-b", 0, 66.6)), qos=1)
        own = c.publish(f"sf/{layout.STREAM}/traffic/dev-a", json.dumps(reading("dev-a", 5, 77.7)), qos=1)
        wait_for(
            lambda: forged.mid in acks and own.mid in acks, timeout=10, interval=0.05, what="both PUBACKs"
        )
        assert acks[forged.mid].is_failure and "authorized" in str(acks[forged.mid]), acks
        assert not acks[own.mid].is_failure
    finally:
        c.loop_stop()
        c.disconnect()
    wait_for(
        lambda: any(e["speed_kmh"] == 77.7 for e in stored(setup, layout.topic("traffic"))),
        timeout=30,
        interval=0.3,
        what="dev-a's own reading in the store",
    )
    assert not [e for e in stored(setup, layout.topic("traffic")) if e["sensor_id"] == "dev-b"]


def test_a_plaintext_client_cannot_connect_to_the_tls_listener(setup: Setup) -> None:
    c, answers, closed = device_client(setup, "dev-a", setup.pw["mqtt:dev-a"], tls=False)
    c.connect("127.0.0.1", setup.mosquitto.port)
    c.loop_start()
    try:
        assert closed.wait(10), "Mosquitto kept a plaintext connection on its TLS listener"
        assert not answers, f"a plaintext client got a CONNACK: {answers}"
    finally:
        c.loop_stop()
    # the fleet, given credentials but no CA, says so in one line at once
    sink = MqttSink("127.0.0.1", setup.mosquitto.port, credentials={"dev-a": setup.pw["mqtt:dev-a"]})
    with pytest.raises(StoreError, match="closed before a CONNACK"):
        sink.connect_devices(["dev-a"])


def _fails_in_one_line(proc: ManagedProcess) -> str:
    assert proc.proc is not None
    rc = proc.proc.wait(60)
    proc.stop()
    assert proc.log is not None
    text = proc.log.read_text()
    assert rc == 2, text
    assert "Traceback" not in text, text
    lines = [ln for ln in text.splitlines() if ln.startswith("sftraffic gateway:")]
    assert len(lines) == 1, text
    return lines[0]


def test_the_gateway_with_a_wrong_scram_password_stops_with_one_line(setup: Setup) -> None:
    bad = dict(read_properties(setup.s.properties(secure.GATEWAY)), **{"sasl.password": "wrong"})
    conf = setup.root / "bad-gateway.properties"
    conf.write_text("".join(f"{k}={v}\n" for k, v in bad.items()))
    line = _fails_in_one_line(setup.gateway_proc(command_config=conf).launch())
    assert "refused to authenticate as 'gateway'" in line and "Authentication failed" in line, line


def test_the_gateway_with_a_wrong_mqtt_password_stops_with_one_line(setup: Setup) -> None:
    pw = setup.root / "bad-mqtt.password"
    pw.write_text("wrong\n")
    line = _fails_in_one_line(setup.gateway_proc(mqtt_password=pw).launch())
    assert "refused the gateway" in line, line


def test_the_gateway_without_tls_towards_the_tls_listener_stops_with_one_line(setup: Setup) -> None:
    line = _fails_in_one_line(setup.gateway_proc(tls=False).launch())
    assert "closed the connection before a CONNACK" in line, line


def test_no_clear_password_in_the_stores_data_dir_or_mosquittos_files(setup: Setup) -> None:
    secrets = [v.encode() for v in setup.pw.values()]
    places = [*(setup.root / "store").rglob("*"), setup.s.mqtt.password_file, setup.s.mqtt.acl_file]
    places += list((setup.root / "mosquitto").rglob("*"))
    for f in places:
        if f.is_file():
            data = f.read_bytes()
            assert not [p for p in secrets if p in data], f"a password in clear in {f}"


def test_secrets_are_made_once_and_reused(setup: Setup) -> None:
    ca = setup.s.ca.read_bytes()
    s, made = secure.ensure(setup.root, DEVICES)
    assert made == [] and s.passwords() == setup.pw and s.ca.read_bytes() == ca
    private = [p for p in s.dir.iterdir() if p.name not in ("ca.pem", "server.crt")]
    assert {oct(p.stat().st_mode & 0o777) for p in private} == {"0o600"}, private
    assert oct(s.dir.stat().st_mode & 0o777) == "0o700"


def _spark_options(setup: Setup, principal: str, topic: str) -> dict[str, str]:
    conf = read_properties(setup.s.properties(principal))
    return {
        "kafka.bootstrap.servers": setup.bootstrap,
        "subscribe": topic,
        "topic": topic,
        "startingOffsets": "earliest",
        **{f"kafka.{k}": v for k, v in conf.items()},
    }


def test_the_spark_data_source_reads_and_writes_with_its_credentials(setup: Setup) -> None:
    """pipelines/source.py's reader and writer (driver and executor code, without a JVM) as the
    spark user over SASL_SSL; the dashboard's user, which may only consume, cannot write."""
    from pipelines.source import Options, SourceError, _Reader, _write_rows

    topic = layout.topic("dead_letter")
    rows = [{"topic": topic, "key": f"k{i}", "value": f"v{i}"} for i in range(3)]
    with pytest.raises(SourceError, match="authorization failed"):
        _write_rows(_spark_options(setup, secure.DASHBOARD, topic), iter(rows[:1]))
    assert _write_rows(_spark_options(setup, secure.SPARK, topic), iter(rows)).count == 3
    reader = _Reader(Options.parse(_spark_options(setup, secure.SPARK, topic)))
    values = [v.as_py() for r in reader.partitions() for b in reader.read(r) for v in b.column("value")]
    assert {b"v0", b"v1", b"v2"} <= set(values)
