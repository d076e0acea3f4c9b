"""OffsetForLeaderEpoch (23) over TCP against a real broker process: advertised in
ApiVersions, answered at every served version, and used by librdkafka to validate a position
that carries a leader epoch (KIP-320)."""

from __future__ import annotations

import logging
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from framework.client.wire import WireClient
from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from testing import BrokerProcess
from tests.support.brokers import create_topic, quiet_logger

pytestmark = pytest.mark.integration

TOPIC = "epochs"
N = 10


@pytest.fixture(scope="module")
def seeded(broker: BrokerProcess) -> BrokerProcess:
    create_topic(broker.bootstrap, TOPIC, 2)
    p = Producer({"bootstrap.servers": broker.bootstrap, "logger": quiet_logger()})
    for i in range(N):
        p.produce(TOPIC, value=b"%d" % i, partition=0)
    assert p.flush(30) == 0
    return broker


def request(*parts: tuple[int, int, int], topic: str = TOPIC) -> OffsetForLeaderEpochRequest:
    return OffsetForLeaderEpochRequest(
        replica_id=-1,
        topics=[OffsetForLeaderTopic(topic, [OffsetForLeaderPartition(*p) for p in parts])],
    )


def test_advertised_in_api_versions(seeded: BrokerProcess) -> None:
    with WireClient(seeded.bootstrap) as c:
        assert c.versions[23] == (2, 4)


@pytest.mark.parametrize("version", [2, 3, 4])
def test_epoch_zero_ends_at_the_log_end(seeded: BrokerProcess, version: int) -> None:
    with WireClient(seeded.bootstrap) as c:
        resp = c.send(
            request((0, 0, 0), (1, 0, 0), (0, -1, 1), (0, 1, 0), (7, 0, 0)),
            OffsetForLeaderEpochResponse,
            version=version,
        )
    got = [(p.partition, p.error_code, p.leader_epoch, p.end_offset) for p in resp.topics[0].partitions]
    assert got == [
        (0, 0, 0, N),  # the only epoch so far ends at the log end
        (1, 0, 0, 0),  # an empty partition: its current epoch starts (and ends) at 0
        (0, 0, -1, -1),  # an epoch this partition never had
        (0, ErrorCode.UNKNOWN_LEADER_EPOCH, -1, -1),  # the client knows a newer leader than we do
        (7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1),
    ]


def test_unknown_topic(seeded: BrokerProcess) -> None:
    with WireClient(seeded.bootstrap) as c:
        resp = c.send(request((0, 0, 0), topic="no-such-topic"), OffsetForLeaderEpochResponse)
    assert resp.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_librdkafka_validates_a_position_with_a_leader_epoch(seeded: BrokerProcess) -> None:
    """Assigning an offset with its leader epoch makes librdkafka ask OffsetForLeaderEpoch
    before fetching; a correct answer lets it consume from there without a reset."""
    lines: list[str] = []

    class Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    lg = logging.getLogger("tests.librdkafka.epoch")
    lg.addHandler(Capture())
    lg.setLevel(logging.DEBUG)
    lg.propagate = False
    c = Consumer(
        {
            "bootstrap.servers": seeded.bootstrap,
            "group.id": "epoch-check",
            "enable.auto.commit": False,
            "auto.offset.reset": "error",
            "debug": "topic,fetch,protocol",
            "logger": lg,
        }
    )
    try:
        c.assign([TopicPartition(TOPIC, 0, 4, leader_epoch=0)])
        got: list[int] = []
        errors: list[str] = []
        deadline = time.monotonic() + 30
        while len(got) < N - 4 and time.monotonic() < deadline:
            for m in c.consume(100, timeout=0.5):
                if m.error() is None:
                    got.append(m.offset())
                else:
                    errors.append(str(m.error()))
    finally:
        c.close()
    assert errors == []
    assert got == list(range(4, N))
    assert any("Received OffsetForLeaderEpochResponse" in s for s in lines), "no validation asked"
    assert any(f"validation succeeded: broker end offset {N}" in s for s in lines), lines[-20:]
    assert not any("truncat" in s.lower() for s in lines)
