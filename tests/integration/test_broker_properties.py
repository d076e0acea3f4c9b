"""``sftraffic broker --config server.properties``: the file Apache Kafka 4.3 ships (KRaft combined
mode, one node; paths and ports made the test's) starts our broker, Kafka clients produce and
consume through it, and each setting that changes nothing here is one warning line at start; a
key neither Kafka nor sftraffic knows stops the broker at once, naming the nearest known key."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from testing import ManagedProcess, free_port, sftraffic
from tests.support.brokers import quiet_logger

pytestmark = [
    pytest.mark.integration,
    pytest.mark.sftraffic_only(reason="starts sftraffic broker with a Kafka server.properties"),
]

# config/server.properties of Apache Kafka 4.3, its comments cut; the listeners on loopback
SERVER_PROPERTIES = """\
############################# Server Basics #############################
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:{controller_port}

############################# Socket Server Settings #############################
listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600

############################# Log Basics #############################
log.dirs={log_dirs}
num.partitions=1
num.recovery.threads.per.data.dir=1

############################# Internal Topic Settings  #############################
offsets.topic.replication.factor=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1

############################# Log Flush Policy #############################
#log.flush.interval.messages=10000
#log.flush.interval.ms=1000

############################# Log Retention Policy #############################
log.retention.hours=168
#log.retention.bytes=1073741824
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
"""

# the settings of that file that change nothing here: one warning line each
NO_EFFECT = {
    "num.network.threads",
    "num.io.threads",
    "socket.send.buffer.bytes",
    "socket.receive.buffer.bytes",
    "num.recovery.threads.per.data.dir",
    "share.coordinator.state.topic.replication.factor",
    "share.coordinator.state.topic.min.isr",
    "controller.quorum.bootstrap.servers",
    "controller.listener.names",
}
WARNING = " WARNING sftraffic.config: "


class KafkaFileBroker:
    def __init__(self, proc: ManagedProcess, bootstrap: str, controller_port: int) -> None:
        self.proc = proc
        self.bootstrap = bootstrap
        self.controller_port = controller_port


def _write(directory: Path, text: str) -> tuple[Path, int, int]:
    port, controller_port = free_port(), free_port()
    path = directory / "server.properties"
    path.write_text(
        text.format(port=port, controller_port=controller_port, log_dirs=directory / "kraft-combined-logs")
    )
    return path, port, controller_port


@pytest.fixture(scope="module")
def kafka_file_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaFileBroker]:
    path, port, controller_port = _write(tmp_path_factory.mktemp("kafka-file"), SERVER_PROPERTIES)
    proc = ManagedProcess(
        "broker-kafka-file", sftraffic("broker", "--config", str(path)), ready=" listening on "
    )
    proc.start(60)
    try:
        yield KafkaFileBroker(proc, f"127.0.0.1:{port}", controller_port)
    finally:
        proc.stop()


def test_kafkas_server_properties_starts_a_broker_clients_use(kafka_file_broker: KafkaFileBroker) -> None:
    bootstrap = kafka_file_broker.bootstrap
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "logger": quiet_logger()})
    p.produce("from-kafka-file", key=b"k", value=b"one record")
    assert p.flush(30) == 0
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "kafka-file",
            "enable.auto.commit": False,
            "logger": quiet_logger(),
        }
    )
    try:
        c.assign([TopicPartition("from-kafka-file", 0, 0)])
        got = []
        for _ in range(60):  # at most ~30 s: consume() returns as soon as the record is there
            got = [m for m in c.consume(1, timeout=0.5) if m.error() is None]
            if got:
                break
    finally:
        c.close()
    assert [(m.key(), m.value(), m.offset()) for m in got] == [(b"k", b"one record", 0)]


def test_each_setting_without_effect_is_one_warning_at_start(kafka_file_broker: KafkaFileBroker) -> None:
    lines = [line.split(WARNING, 1)[1] for line in kafka_file_broker.proc.lines if WARNING in line]
    about = {line.split(" ")[0].split("=")[0].rstrip(":") for line in lines}
    # SFTRAFFIC_* variables of the test's environment that nobody reads would be warned of too
    assert {a for a in about if not a.startswith("SFTRAFFIC_")} == NO_EFFECT, "\n".join(lines)
    assert len([a for a in lines if not a.startswith("SFTRAFFIC_")]) == len(NO_EFFECT)
    text = "\n".join(lines)
    assert "num.io.threads has no effect: the broker runs one event loop" in text
    controller = f"CONTROLLER://127.0.0.1:{kafka_file_broker.controller_port} is not opened"
    assert controller in text
    # ... and it is not: the metadata of a single node needs no quorum listener
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", kafka_file_broker.controller_port)) != 0


def test_a_key_kafka_does_not_know_either_stops_the_broker_naming_the_nearest(tmp_path: Path) -> None:
    path, _, _ = _write(
        tmp_path, SERVER_PROPERTIES.replace("log.retention.hours=168", "log.retenton.hours=168")
    )
    done = subprocess.run(
        sftraffic("broker", "--config", str(path)),
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2, done
    assert done.stdout == ""
    assert done.stderr == (
        f"sftraffic broker: unknown broker config 'log.retenton.hours' in {path}; did you mean "
        "log.retention.hours? (see `sftraffic config reference`)\n"
    )
