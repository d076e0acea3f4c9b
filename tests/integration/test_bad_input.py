"""Bad input over real sockets: clear Kafka error codes, one connection closed at most,
nothing already acknowledged lost, other clients served throughout."""

from __future__ import annotations

import socket
import struct
from typing import Any

import pytest
from confluent_kafka import Producer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from framework.client.wire import WireClient
from framework.protocol import records as rb
from framework.protocol.frames import encode_request
from framework.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from framework.protocol.messages.metadata import (
    MetadataRequest,
    MetadataRequestTopic,
    MetadataResponse,
)
from framework.protocol.messages.produce import (
    PartitionProduceData,
    ProduceRequest,
    ProduceResponse,
    TopicProduceData,
)
from testing import BrokerProcess
from tests.support.brokers import create_topic, quiet_logger
from tests.support.clients import consume_all

pytestmark = pytest.mark.integration

TOPIC = "victim"


@pytest.fixture(scope="module")
def seeded(broker: BrokerProcess) -> BrokerProcess:
    """A topic holding 1000 acknowledged messages that no bad input may damage."""
    create_topic(broker.bootstrap, TOPIC, 1)
    p = Producer({"bootstrap.servers": broker.bootstrap, "logger": quiet_logger()})
    for i in range(1000):
        p.produce(TOPIC, value=b"%d:good" % i)
    assert p.flush(30) == 0
    return broker


def produce_req(records: bytes, topic: str = TOPIC, acks: int = 1) -> ProduceRequest:
    return ProduceRequest(
        acks=acks,
        timeout_ms=5000,
        topic_data=[
            TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=0, records=records)])
        ],
    )


def partition_error(resp: ProduceResponse) -> int:
    return resp.responses[0].partition_responses[0].error_code


def log_end(b: BrokerProcess) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "le", "logger": quiet_logger()})
    try:
        return int(c.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)[1])
    finally:
        c.close()


def still_serving(b: BrokerProcess) -> None:
    assert b.proc is not None and b.proc.poll() is None, "broker died"
    with WireClient(b.bootstrap, timeout=5) as c:
        md = c.send(MetadataRequest(topics=[MetadataRequestTopic(name=TOPIC)]), MetadataResponse)
        assert md.topics[0].error_code == 0


def test_bad_crc_is_rejected_and_nothing_written(seeded: BrokerProcess) -> None:
    batch = bytearray(rb.build_batch([(None, b"evil")]))
    batch[-1] ^= 0xFF
    before = log_end(seeded)
    with WireClient(seeded.bootstrap) as c:
        resp = c.send(produce_req(bytes(batch)), ProduceResponse, version=9)
    assert partition_error(resp) == 2  # CORRUPT_MESSAGE
    assert "CRC" in (resp.responses[0].partition_responses[0].error_message or "")
    assert log_end(seeded) == before


def test_oversized_batch_gets_message_too_large(seeded: BrokerProcess) -> None:
    big = rb.build_batch([(None, b"x" * 1_200_000)])
    before = log_end(seeded)
    with WireClient(seeded.bootstrap) as c:
        resp = c.send(produce_req(big), ProduceResponse, version=9)
    assert partition_error(resp) == 10  # MESSAGE_TOO_LARGE
    assert log_end(seeded) == before


def test_unknown_topic_and_partition(seeded: BrokerProcess) -> None:
    batch = rb.build_batch([(None, b"v")])
    with WireClient(seeded.bootstrap) as c:
        resp = c.send(produce_req(batch, topic="no-such-topic"), ProduceResponse, version=9)
        assert partition_error(resp) == 3  # UNKNOWN_TOPIC_OR_PARTITION
        req = produce_req(batch)
        req.topic_data[0].partition_data[0].index = 7
        assert partition_error(c.send(req, ProduceResponse, version=9)) == 3


def test_unsupported_api_versions_version_gets_v0_answer(seeded: BrokerProcess) -> None:
    with socket.create_connection(("127.0.0.1", seeded.port), timeout=5) as s:
        body = struct.pack(">hhih", 18, 99, 7, 4) + b"test" + b"\x00"
        s.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", _recv(s, 4))[0]
        data = _recv(s, size)
    corr = struct.unpack_from(">i", data, 0)[0]
    assert corr == 7
    from framework.protocol.codec import decode

    resp, _ = decode(ApiVersionsResponse, 0, data, 4)
    assert resp.error_code == 35  # UNSUPPORTED_VERSION
    assert any(k.api_key == 0 for k in resp.api_keys)


def test_oversized_frame_closes_only_that_connection(seeded: BrokerProcess) -> None:
    with socket.create_connection(("127.0.0.1", seeded.port), timeout=5) as s:
        s.sendall(struct.pack(">i", 200 * 1024 * 1024) + b"\x00" * 100)
        assert _closed(s)
    still_serving(seeded)


def test_unknown_api_key_closes_connection(seeded: BrokerProcess) -> None:
    with socket.create_connection(("127.0.0.1", seeded.port), timeout=5) as s:
        body = struct.pack(">hhih", 9999, 0, 1, -1)
        s.sendall(struct.pack(">i", len(body)) + body)
        assert _closed(s)
    still_serving(seeded)


def test_unknown_tagged_fields_are_skipped(seeded: BrokerProcess) -> None:
    """A flexible request carrying tags we do not know is served, not rejected."""
    frame = bytearray(
        encode_request(
            18,
            3,
            5,
            "tagger",
            ApiVersionsRequest(client_software_name="x", client_software_version="1"),
        )
    )
    # replace the final empty tagged section (0) with one unknown tag: count=1, tag=77, size=3
    assert frame[-1] == 0
    frame[-1:] = b"\x01\x4d\x03abc"
    struct.pack_into(">i", frame, 0, len(frame) - 4)
    with WireClient(seeded.bootstrap) as c:
        data = c.send_raw(bytes(frame))
    from framework.protocol.codec import decode

    resp, _ = decode(ApiVersionsResponse, 3, data, 4)
    assert resp.error_code == 0


def _valid_frames() -> list[bytes]:
    batch = rb.build_batch([(b"k", b"fuzz")])
    return [
        encode_request(
            18,
            3,
            1,
            "fz",
            ApiVersionsRequest(client_software_name="a", client_software_version="b"),
        ),
        encode_request(3, 12, 2, "fz", MetadataRequest(topics=[MetadataRequestTopic(name=TOPIC)])),
        encode_request(3, 5, 3, None, MetadataRequest(topics=[MetadataRequestTopic(name=TOPIC)])),
        encode_request(0, 9, 4, "fz", produce_req(batch, topic="fuzz-target")),
        encode_request(0, 7, 5, "fz", produce_req(batch, topic="fuzz-target")),
    ]


@st.composite
def bad_frames(draw: Any) -> bytes:
    kind = draw(st.sampled_from(["random", "truncate", "mutate", "resize"]))
    if kind == "random":
        body = draw(st.binary(min_size=0, max_size=300))
        return struct.pack(">i", len(body)) + body
    frame = bytearray(draw(st.sampled_from(_valid_frames())))
    if kind == "truncate":
        cut = draw(st.integers(min_value=5, max_value=len(frame) - 1))
        frame = frame[:cut]
        struct.pack_into(">i", frame, 0, len(frame) - 4)
    elif kind == "mutate":
        for _ in range(draw(st.integers(1, 8))):
            pos = draw(st.integers(4, len(frame) - 1))
            frame[pos] = draw(st.integers(0, 255))
    else:
        struct.pack_into(">i", frame, 0, draw(st.integers(-5, len(frame) + 50)))
    return bytes(frame)


def test_fuzzed_frames_never_hurt_the_broker(seeded: BrokerProcess) -> None:
    create_topic(seeded.bootstrap, "fuzz-target", 1)
    expected_end = log_end(seeded)

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
    @given(bad_frames())
    def one(frame: bytes) -> None:
        with socket.create_connection(("127.0.0.1", seeded.port), timeout=5) as s:
            s.sendall(frame)
            s.shutdown(socket.SHUT_WR)
            s.settimeout(5)
            try:
                while s.recv(65536):
                    pass
            except (ConnectionResetError, TimeoutError):
                pass
        assert seeded.proc is not None and seeded.proc.poll() is None

    one()
    still_serving(seeded)
    # the victim topic is intact: the same 1000 acknowledged messages, nothing more
    assert log_end(seeded) == expected_end
    msgs = consume_all(seeded.bootstrap, TOPIC, 1, expected_end)
    assert [m.value() for m in msgs[:1000]] == [b"%d:good" % i for i in range(1000)]
    assert "Traceback" not in seeded.logs()


def _recv(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return buf


def _closed(s: socket.socket) -> bool:
    s.settimeout(5)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True
