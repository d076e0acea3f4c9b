"""MQTT devices → real Mosquitto → gateway process → the store."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, ClassVar

import pytest
from confluent_kafka import Consumer, TopicPartition

from deploy.local.mosquitto import MosquittoProcess
from framework.client.producer import partition_for
from sensors import layout
from sensors.publish import MqttSink
from testing import BrokerProcess, wait_for
from tests.support.brokers import BrokerFactory, quiet_logger
from tests.support.gateway import GatewayProc, event

pytestmark = pytest.mark.integration

PARTS = 6
DEVICES = f"sf/{layout.STREAM}/traffic"  # MQTT topics sf/<stream>/<topic>/<sensor-id>


@pytest.fixture
def mosquitto(tmp_path: Path) -> Any:
    m = MosquittoProcess(tmp_path / "mosquitto").start()
    yield m
    m.stop()


TOPIC_OF = {"traffic": "traffic", "weather": "weather_conditions", "infrastructure": "infrastructure"}


def publish(
    mqtt: MosquittoProcess, n: int, start: int = 0, sensors: int = 200, prefix: str = "dev"
) -> list[tuple[str, str, int]]:
    """Publish n events (mix of kinds) from ``sensors`` devices; returns (topic, sensor, seq)."""
    sink = MqttSink("127.0.0.1", mqtt.port, connections=1, window=1000, client_prefix=f"{prefix}-{start}")
    sent = []
    t0 = int(time.time() * 1000)
    for i in range(start, start + n):
        s = i % sensors
        kind = "traffic" if s % 10 < 8 else ("weather" if s % 10 == 8 else "infrastructure")
        sensor = f"{kind[:2]}-{s}"
        seq = i // sensors
        sink.send(layout.topic(TOPIC_OF[kind]), sensor, event(kind, sensor, seq, t0 + i), 0)
        sent.append((TOPIC_OF[kind], sensor, seq))
    assert sink.flush(60) == 0
    sink.close()
    return sent


def read_topic(bootstrap: str, topic: str) -> list[Any]:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "gw-check",
            "enable.auto.commit": False,
            "logger": quiet_logger(),
        }
    )
    try:
        md = c.list_topics(topic, timeout=10).topics.get(topic)
        if md is None or md.error is not None:
            return []
        ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in md.partitions}
        c.assign([TopicPartition(topic, p, 0) for p in md.partitions])
        out: list[Any] = []
        want = sum(ends.values())
        deadline = time.monotonic() + 30
        while len(out) < want and time.monotonic() < deadline:
            out.extend(m for m in c.consume(5000, timeout=0.5) if m.error() is None)
        return out
    finally:
        c.close()


def seen(bootstrap: str) -> Counter[tuple[str, str, int]]:
    c: Counter[tuple[str, str, int]] = Counter()
    for name in TOPIC_OF.values():
        for m in read_topic(bootstrap, layout.topic(name)):
            ev = json.loads(m.value())
            c[(name, ev["sensor_id"], ev["seq"])] += 1
    return c


@pytest.fixture
def store(broker_factory: BrokerFactory) -> BrokerProcess:
    from sensors.layout import ensure_layout

    b = broker_factory()
    ensure_layout(b.bootstrap, partitions=PARTS)
    return b


class TestGateway:
    procs: ClassVar[list[GatewayProc]] = []

    def test_mqtt_events_reach_their_topics_partitions_and_order(
        self, store: BrokerProcess, mosquitto: MosquittoProcess, tmp_path: Path
    ) -> None:
        gw = GatewayProc(store.bootstrap, mosquitto.address, tmp_path).start()
        try:
            sent = publish(mosquitto, 10_000)
            wait_for(
                lambda: sum(seen(store.bootstrap).values()) >= 10_000,
                timeout=60,
                interval=0.5,
                what="10k events in the store",
            )
            for name in TOPIC_OF.values():
                last: dict[str, int] = {}
                for m in read_topic(store.bootstrap, layout.topic(name)):
                    ev = json.loads(m.value())
                    assert m.key().decode() == ev["sensor_id"]
                    assert m.partition() == partition_for(m.key(), PARTS), "key not murmur2-partitioned"
                    assert m.timestamp()[1] == ev["event_time"], "record time must be the event time"
                    assert ev["seq"] > last.get(ev["sensor_id"], -1), "a sensor's events out of order"
                    last[ev["sensor_id"]] = ev["seq"]
            counts = seen(store.bootstrap)
            assert set(counts) == set(sent)
            assert max(counts.values()) == 1
        finally:
            gw.stop()

    @pytest.mark.parametrize("version", ["3.1.1", "5"])
    def test_killed_gateway_restarts_and_nothing_is_lost(
        self, store: BrokerProcess, mosquitto: MosquittoProcess, tmp_path: Path, version: str
    ) -> None:
        """Both MQTT versions keep the gateway's session (3.1.1: clean session off; 5: clean
        start off with a session expiry), so Mosquitto redelivers what was never acknowledged."""
        gw = GatewayProc(store.bootstrap, mosquitto.address, tmp_path, version=version).start()
        sent: list[tuple[str, str, int]] = []
        pub = threading.Thread(target=lambda: sent.extend(publish(mosquitto, 10_000)))
        pub.start()
        try:
            wait_for(
                lambda: sum(seen(store.bootstrap).values()) >= 2_000,
                timeout=60,
                interval=0.3,
                what="first events",
            )
            gw.kill()  # SIGKILL mid-stream: in-flight messages were never acknowledged to MQTT
            pub.join()
            gw = GatewayProc(
                store.bootstrap, mosquitto.address, tmp_path, version=version
            ).start()  # same session
            wait_for(
                lambda: set(seen(store.bootstrap)) >= set(sent), timeout=90, interval=0.5, what="every event"
            )
            counts = seen(store.bootstrap)
            dups = sum(v - 1 for v in counts.values())
            assert set(counts) == set(sent), "lost or invented events"
            assert dups <= 2_000, f"{dups} duplicates: more than the in-flight window"
        finally:
            gw.stop()

    def test_store_down_gateway_parks_on_disk_and_drains(
        self, store: BrokerProcess, mosquitto: MosquittoProcess, tmp_path: Path
    ) -> None:
        gw = GatewayProc(store.bootstrap, mosquitto.address, tmp_path).start()
        try:
            before = publish(mosquitto, 1_000, prefix="before")
            wait_for(
                lambda: sum(seen(store.bootstrap).values()) >= 1_000,
                timeout=60,
                interval=0.3,
                what="first events",
            )
            store.stop()
            down_at = time.monotonic()
            during = publish(mosquitto, 3_000, start=1_000, prefix="during")
            queue_dir = tmp_path / "queue" / "gw-test"
            wait_for(
                lambda: "parking messages on disk" in gw.text(), timeout=60, what="gateway to park messages"
            )
            wait_for(
                lambda: sum(p.stat().st_size for p in queue_dir.glob("q-*.log")) > 3_000 * 150,
                timeout=60,
                what="everything parked on disk",
            )
            # the scenario is a 20 s outage: keep the store down that long (an input, not a wait)
            time.sleep(max(0.0, 20 - (time.monotonic() - down_at)))
            store.start()
            wait_for(
                lambda: set(seen(store.bootstrap)) >= set(before + during),
                timeout=90,
                interval=0.5,
                what="parked events drained into the store",
            )
            wait_for(
                lambda: "disk queue drained" in gw.text(), timeout=30, what="gateway back to live forwarding"
            )
            after = publish(mosquitto, 500, start=4_000, prefix="after")
            wait_for(
                lambda: set(seen(store.bootstrap)) >= set(before + during + after),
                timeout=60,
                interval=0.5,
                what="live forwarding after the outage",
            )
        finally:
            gw.stop()

    def test_invalid_payloads_go_to_the_dead_letter_topic(
        self, store: BrokerProcess, mosquitto: MosquittoProcess, tmp_path: Path
    ) -> None:
        import paho.mqtt.client as mqtt

        gw = GatewayProc(store.bootstrap, mosquitto.address, tmp_path).start()
        try:
            c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="bad-device", protocol=mqtt.MQTTv5)
            c.connect("127.0.0.1", mosquitto.port)
            c.loop_start()
            bad = {
                f"{DEVICES}/s-1": b"{not json",
                f"{DEVICES}/s-2": json.dumps({"type": "traffic", "sensor_id": "s-2"}).encode(),
                f"{DEVICES}/s-3": json.dumps(event("traffic", "other", 0, 1)).encode(),
                DEVICES: json.dumps(event("traffic", "s-4", 0, 1)).encode(),
            }
            t_sent = int(time.time() * 1000)
            infos = [c.publish(t, p, qos=1) for t, p in bad.items()]
            infos.append(
                c.publish(
                    f"{DEVICES}/ok-1",
                    json.dumps(event("traffic", "ok-1", 0, int(time.time() * 1000))).encode(),
                    qos=1,
                )
            )
            for info in infos:
                info.wait_for_publish(10)
            c.loop_stop()
            c.disconnect()
            wait_for(
                lambda: len(read_topic(store.bootstrap, layout.topic("dead_letter"))) >= 4,
                timeout=30,
                what="dead letters",
            )
            dlq = read_topic(store.bootstrap, layout.topic("dead_letter"))
            reasons = {m.key().decode(): dict(m.headers())["reason"].decode() for m in dlq}
            for m in dlq:
                h = dict(m.headers())
                assert h["mqtt_topic"] == m.key(), "the device topic, in a header and as the key"
                assert h["gateway"] == b"gw-test"
                assert t_sent <= int(h["received_ms"]) <= time.time() * 1000
            assert set(reasons) == set(bad)
            assert "not JSON" in reasons[f"{DEVICES}/s-1"]
            assert "missing" in reasons[f"{DEVICES}/s-2"]
            assert "sensor_id" in reasons[f"{DEVICES}/s-3"]
            assert "not sf/" in reasons[DEVICES]
            assert {m.value() for m in dlq} == set(bad.values()), "the original payload is kept"
            wait_for(
                lambda: any(
                    json.loads(m.value())["sensor_id"] == "ok-1"
                    for m in read_topic(store.bootstrap, layout.topic("traffic"))
                ),
                timeout=30,
                what="the valid event",
            )
        finally:
            gw.stop()

    def test_sigterm_stops_cleanly_and_a_restart_gets_the_rest(
        self, store: BrokerProcess, mosquitto: MosquittoProcess, tmp_path: Path
    ) -> None:
        """SIGTERM mid-stream: the gateway stops taking messages, delivers and acknowledges what it
        has, disconnects and exits 0; the same id started again gets everything else, including
        what was published while no gateway ran (the session keeps its subscription)."""
        gw = GatewayProc(store.bootstrap, mosquitto.address, tmp_path).start()
        sent: list[tuple[str, str, int]] = []
        pub = threading.Thread(target=lambda: sent.extend(publish(mosquitto, 10_000)))
        pub.start()
        try:
            wait_for(
                lambda: sum(seen(store.bootstrap).values()) >= 2_000,
                timeout=60,
                interval=0.3,
                what="first events",
            )
            assert gw.proc is not None
            gw.proc.terminate()
            assert gw.proc.wait(30) == 0
            first_run = gw.text()
            assert "Traceback" not in first_run
            pub.join()
            gw = GatewayProc(store.bootstrap, mosquitto.address, tmp_path).start()
            wait_for(
                lambda: set(seen(store.bootstrap)) >= set(sent), timeout=90, interval=0.5, what="every event"
            )
            counts = seen(store.bootstrap)
            assert set(counts) == set(sent), "lost or invented events"
            dups = sum(v - 1 for v in counts.values())
            # On a starved machine a delivery can outlive the gateway's 10 s message timeout although
            # the store wrote it; the gateway then parks it and sends it again (its degraded path is
            # at-least-once by design: docs/application/overview.md, "Gateways"). Only a run that
            # never parked owes zero.
            parked = "store unreachable" in first_run + gw.text()
            if not parked:
                twice = sorted(k for k, v in counts.items() if v > 1)
                assert dups == 0, (
                    f"a clean stop acknowledges everything it delivered: {dups} duplicates, "
                    f"e.g. {twice[:5]}; "
                    f"gateway logs:\n{first_run[-2000:]}\n---\n{gw.text()[-2000:]}"
                )
            else:
                # what was parked and sent again (same sensor_id/seq, so consumers drop them)
                assert dups <= 1_000, f"{dups} duplicates after a clean stop"
        finally:
            gw.stop()

    def test_full_disk_queue_holds_acks_and_loses_nothing(
        self, store: BrokerProcess, mosquitto: MosquittoProcess, tmp_path: Path
    ) -> None:
        """A disk queue smaller than the outage's traffic: the gateway stops reading from
        Mosquitto (no acknowledgement, nothing dropped) until the store is back."""
        gw = GatewayProc(
            store.bootstrap, mosquitto.address, tmp_path, extra=("--queue-max-bytes", str(100 * 1024))
        ).start()
        try:
            before = publish(mosquitto, 200, prefix="before")
            wait_for(
                lambda: set(seen(store.bootstrap)) >= set(before),
                timeout=60,
                interval=0.3,
                what="first events",
            )
            store.stop()
            during = publish(mosquitto, 2_000, start=200, prefix="during")
            wait_for(lambda: "disk queue full" in gw.text(), timeout=60, what="the disk queue to fill up")
            time.sleep(5)  # the outage goes on a while (an input, not a wait): the queue stays bounded
            queue_dir = tmp_path / "queue" / "gw-test"
            assert sum(p.stat().st_size for p in queue_dir.glob("q-*.log")) <= 100 * 1024
            store.start()
            wait_for(
                lambda: set(seen(store.bootstrap)) >= set(before + during),
                timeout=120,
                interval=0.5,
                what="every event after the outage",
            )
            wait_for(lambda: "disk queue drained" in gw.text(), timeout=30, what="live forwarding again")
        finally:
            gw.stop()

    def test_gateway_reconnects_after_a_mosquitto_restart(
        self, store: BrokerProcess, mosquitto: MosquittoProcess, tmp_path: Path
    ) -> None:
        gw = GatewayProc(store.bootstrap, mosquitto.address, tmp_path).start()
        try:
            before = publish(mosquitto, 500, prefix="before")
            wait_for(lambda: set(seen(store.bootstrap)) >= set(before), timeout=60, what="first events")
            mosquitto.stop()
            mosquitto.start()  # same port, no persistence: the gateway must subscribe again
            wait_for(lambda: "MQTT connection lost" in gw.text(), timeout=30, what="gateway to notice")
            probes: list[tuple[str, str, int]] = []

            def probe_arrived() -> bool:  # published before the gateway subscribed again: dropped
                probes.extend(publish(mosquitto, 1, start=500 + len(probes), prefix="probe"))
                return bool(set(probes) & set(seen(store.bootstrap)))

            wait_for(probe_arrived, timeout=60, interval=0.5, what="the gateway to subscribe again")
            after = publish(mosquitto, 1_000, start=1_000, prefix="after")
            wait_for(
                lambda: set(seen(store.bootstrap)) >= set(before + after),
                timeout=60,
                interval=0.5,
                what="forwarding after the restart",
            )
        finally:
            gw.stop()
