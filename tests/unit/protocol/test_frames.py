"""Request/response framing and headers (framework/protocol/frames.py)."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.protocol import codec, frames
from framework.protocol.codec import DecodeError
from framework.protocol.messages.api_versions import (
    ApiVersion,
    ApiVersionsRequest,
    ApiVersionsResponse,
)
from framework.protocol.messages.fetch import FetchableTopicResponse, FetchResponse, PartitionData
from framework.protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from framework.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from framework.protocol.messages.produce import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)


def _hdr(api_key: int, version: int, corr: int, client_id: bytes | None) -> bytes:
    n = -1 if client_id is None else len(client_id)
    return struct.pack(">hhih", api_key, version, corr, n) + (client_id or b"")


# ---------------------------------------------------------------------------------------
# request headers


def test_request_header_v1() -> None:
    frame = _hdr(12, 3, 99, b"rdkafka") + b"BODY"
    h, pos = frames.parse_request_header(frame, flexible=False)
    assert h == frames.RequestHeader(12, 3, 99, "rdkafka")
    assert frame[pos:] == b"BODY"
    assert frames.peek_header(frame) == (12, 3, 99)


def test_request_header_null_and_empty_client_id() -> None:
    h, pos = frames.parse_request_header(_hdr(3, 1, 1, None) + b"B", flexible=False)
    assert h.client_id is None and pos == 10
    h, pos = frames.parse_request_header(_hdr(3, 1, 1, b"") + b"\x00B", flexible=True)
    assert h.client_id == "" and pos == 11


def test_request_header_v2_skips_tagged_fields() -> None:
    tags = b"\x02" + b"\x00\x03abc" + b"\x81\x01\x00"  # tag 0 (3 bytes), tag 129 (empty)
    frame = _hdr(18, 3, 7, b"java") + tags + b"BODY"
    h, pos = frames.parse_request_header(memoryview(frame), flexible=True)
    assert h == frames.RequestHeader(18, 3, 7, "java")
    assert bytes(frame[pos:]) == b"BODY"


def test_request_header_client_id_is_not_compact_in_v2() -> None:
    # even in header v2 the client id keeps its int16 length (KIP-482)
    frame = frames.encode_request(18, 3, 5, "abc", ApiVersionsRequest("x", "1"))[4:]
    assert frame[8:13] == b"\x00\x03abc"
    assert frame[13] == 0  # empty header tagged-field section


def test_request_header_invalid_utf8_client_id_is_replaced() -> None:
    h, _ = frames.parse_request_header(_hdr(3, 1, 1, b"\xffab"), flexible=False)
    assert h.client_id == "\ufffdab"


@pytest.mark.parametrize(
    ("frame", "flexible"),
    [
        (b"", False),
        (b"\x00\x12\x00\x03\x00\x00\x00", False),
        (_hdr(3, 1, 1, b"abc")[:-1], False),  # client id past end
        (_hdr(18, 3, 1, None), True),  # missing tagged-field count
        (_hdr(18, 3, 1, b"c") + b"\x01", True),  # tag number missing
        (_hdr(18, 3, 1, b"c") + b"\x01\x00", True),  # tag size missing
        (_hdr(18, 3, 1, b"c") + b"\x01\x00\x05ab", True),  # tag data past end
        (_hdr(18, 3, 1, b"c") + b"\x01\x00\xff\xff\xff\xff\x0f", True),  # huge tag size
        (_hdr(18, 3, 1, b"c") + b"\xff" * 12, True),  # varint too long
    ],
)
def test_request_header_truncated_is_decode_error(frame: bytes, flexible: bool) -> None:
    with pytest.raises(DecodeError):
        frames.parse_request_header(frame, flexible)


def test_peek_header_short() -> None:
    with pytest.raises(DecodeError):
        frames.peek_header(b"\x00\x01\x00\x02\x00\x00\x00")


@given(st.binary(max_size=40), st.booleans())
@settings(max_examples=300, deadline=None, database=None)
def test_request_header_random_bytes(frame: bytes, flexible: bool) -> None:
    try:
        _, pos = frames.parse_request_header(frame, flexible)
    except DecodeError:
        return
    assert 10 <= pos <= len(frame)


# ---------------------------------------------------------------------------------------
# whole requests


def _split(frame: bytes) -> tuple[frames.RequestHeader, Any]:
    size = struct.unpack_from(">i", frame)[0]
    assert size == len(frame) - 4
    body = memoryview(frame)[4:]
    api_key, version, _ = frames.peek_header(body)
    h, pos = frames.parse_request_header(body, frames.request_is_flexible(api_key, version))
    from framework.protocol.api import API_TABLE

    obj, end = codec.decode(API_TABLE[api_key].request, version, body, pos)
    assert end == len(body)
    return h, obj


@pytest.mark.parametrize("version", [0, 1, 3, 4])
def test_encode_request_roundtrip(version: int) -> None:
    req = HeartbeatRequest(group_id="g", generation_id=3, member_id="m")
    frame = frames.encode_request(12, version, 1234, "cli", req)
    h, obj = _split(frame)
    assert h == frames.RequestHeader(12, version, 1234, "cli")
    assert obj == req


def test_encode_request_null_client_id_and_nullable_body() -> None:
    frame = frames.encode_request(3, 1, 1, None, MetadataRequest(topics=None))
    h, obj = _split(frame)
    assert h.client_id is None and obj.topics is None
    req = MetadataRequest(topics=[MetadataRequestTopic(name="t")])
    frame = frames.encode_request(3, 12, 2, "", req)
    h, obj = _split(frame)
    assert h.client_id == "" and obj.topics[0].name == "t"


@pytest.mark.parametrize("version", [3, 9])
def test_encode_request_with_large_records(version: int) -> None:
    batch = bytes(range(256)) * 40
    parts = [PartitionProduceData(0, batch), PartitionProduceData(1, b"x")]
    req = ProduceRequest(
        acks=-1, timeout_ms=5000, topic_data=[TopicProduceData(name="t", partition_data=parts)]
    )
    frame = frames.encode_request(0, version, 77, "p", req)
    h, obj = _split(frame)
    assert h.correlation_id == 77
    assert [bytes(p.records) for p in obj.topic_data[0].partition_data] == [batch, b"x"]


def test_request_is_flexible() -> None:
    assert not frames.request_is_flexible(12, 3)
    assert frames.request_is_flexible(12, 4)
    assert frames.request_is_flexible(18, 3)
    assert not frames.request_is_flexible(9999, 0)


# ---------------------------------------------------------------------------------------
# responses


def _join(parts: list[Any]) -> bytes:
    return b"".join(bytes(p) for p in parts)


def test_response_v0_header() -> None:
    frame = _join(frames.encode_response(12, 0, 42, HeartbeatResponse(error_code=27)))
    assert frame == struct.pack(">ii", 6, 42) + b"\x00\x1b"


def test_flexible_response_has_header_tagged_fields() -> None:
    resp = HeartbeatResponse(throttle_time_ms=1, error_code=0)
    frame = _join(frames.encode_response(12, 4, 42, resp))
    body = codec.encode(HeartbeatResponse(throttle_time_ms=1, error_code=0), 4)
    assert frame == struct.pack(">ii", 4 + 1 + len(body), 42) + b"\x00" + body


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_response_header_is_always_v0(version: int) -> None:
    resp = ApiVersionsResponse(api_keys=[ApiVersion(18, 0, 4), ApiVersion(0, 3, 10)])
    frame = _join(frames.encode_response(18, version, 9, resp))
    size, corr = struct.unpack_from(">ii", frame)
    assert size == len(frame) - 4 and corr == 9
    # the body starts right after the correlation id, even for flexible versions
    body = codec.encode(resp, version)
    assert frame[8:] == body
    obj, end = codec.decode(ApiVersionsResponse, version, frame, 8)
    assert obj == resp and end == len(frame)


@pytest.mark.parametrize("version", [4, 11, 12, 16])
def test_fetch_response_size_prefix_with_pass_through_records(version: int) -> None:
    big = bytearray(b"R" * 10_000)
    pds = [PartitionData(partition_index=0, records=big), PartitionData(1, records=b"s")]
    resp = FetchResponse(responses=[FetchableTopicResponse(topic="t", partitions=pds)])
    parts = frames.encode_response(1, version, 5, resp)
    assert any(p is big for p in parts)
    frame = _join(parts)
    size, corr = struct.unpack_from(">ii", frame)
    assert size == len(frame) - 4 and corr == 5
    pos = 8
    if version >= 12:
        assert frame[8] == 0
        pos = 9
    obj, end = codec.decode(FetchResponse, version, frame, pos)
    assert end == len(frame)
    assert bytes(obj.responses[0].partitions[0].records) == bytes(big)
