"""Sans-io tests of the message codec (framework/protocol/codec.py and schema.py).

Layout equality with Apache Kafka's schemas is checked against kio in
test_messages_vs_kio.py; this module checks the codec's own behaviour: tagged fields, null
handling, robustness against hostile bytes, zero-copy records and the consumer-protocol data
schemas.
"""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from framework.protocol import codec
from framework.protocol.api import API_TABLE
from framework.protocol.codec import DecodeError, EncodeError, decode, encode, encode_into
from framework.protocol.fields import NO_VERSIONS, VersionRange, spec
from framework.protocol.messages.api_versions import (
    ApiVersion,
    ApiVersionsRequest,
    ApiVersionsResponse,
    SupportedFeatureKey,
)
from framework.protocol.messages.consumer_protocol_assignment import ConsumerProtocolAssignment
from framework.protocol.messages.consumer_protocol_assignment import (
    TopicPartition as AssignedTopicPartition,
)
from framework.protocol.messages.consumer_protocol_subscription import (
    ConsumerProtocolSubscription,
    TopicPartition,
)
from framework.protocol.messages.fetch import (
    FetchableTopicResponse,
    FetchRequest,
    FetchResponse,
    LeaderIdAndEpoch,
    PartitionData,
)
from framework.protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from framework.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from framework.protocol.messages.produce import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)

FUZZ = settings(max_examples=400, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])


def uv(n: int) -> bytes:
    out = bytearray()
    codec.write_uvarint(out, n)
    return bytes(out)


def cstr(s: str) -> bytes:
    """Compact (flexible) string."""
    b = s.encode()
    return uv(len(b) + 1) + b


def i16(n: int) -> bytes:
    return struct.pack(">h", n)


def i32(n: int) -> bytes:
    return struct.pack(">i", n)


def i64(n: int) -> bytes:
    return struct.pack(">q", n)


# ---------------------------------------------------------------------------------------
# schema declarations


def test_version_range_parse() -> None:
    assert VersionRange.parse("3+") == VersionRange(3, 32767)
    assert VersionRange.parse("0-2") == VersionRange(0, 2)
    assert VersionRange.parse(" 5 ") == VersionRange(5, 5)
    none = VersionRange.parse("none")
    assert none == NO_VERSIONS
    assert 0 not in none and 1 not in none
    assert 2 in VersionRange(0, 2) and 3 not in VersionRange(0, 2)
    assert "2" not in VersionRange(0, 2)


def test_spec_tagged_defaults_to_versions_and_rejects_unknown_types() -> None:
    s = spec("int32", "3+", tag=1)
    assert s.tagged == VersionRange(3, 32767)
    assert spec("int32", "3+", tag=1, tagged="5+").tagged == VersionRange(5, 32767)
    assert spec("int32").tagged == NO_VERSIONS
    with pytest.raises(ValueError, match="unknown field type"):
        spec("int128")


# ---------------------------------------------------------------------------------------
# varints


@given(st.integers(0, 2**64 - 1))
@settings(max_examples=200, deadline=None, database=None)
def test_uvarint_roundtrip(n: int) -> None:
    out = bytearray()
    codec.write_uvarint(out, n)
    assert codec.read_uvarint(bytes(out) + b"\x99", 0) == (n, len(out))


def test_uvarint_known_bytes_and_limits() -> None:
    assert uv(0) == b"\x00"
    assert uv(127) == b"\x7f"
    assert uv(128) == b"\x80\x01"
    assert uv(300) == b"\xac\x02"
    with pytest.raises(EncodeError):
        codec.write_uvarint(bytearray(), -1)
    with pytest.raises(DecodeError, match="varint too long"):
        codec.read_uvarint(b"\xff" * 20, 0)


# ---------------------------------------------------------------------------------------
# hand-computed bytes


def test_heartbeat_request_v0_bytes() -> None:
    req = HeartbeatRequest(group_id="g1", generation_id=5, member_id="m")
    raw = b"\x00\x02g1" + b"\x00\x00\x00\x05" + b"\x00\x01m"
    assert encode(req, 0) == raw
    obj, end = decode(HeartbeatRequest, 0, raw)
    assert end == len(raw)
    # group_instance_id does not exist in v0: it decodes as its default
    assert obj == req


def test_heartbeat_request_v3_nullable_string_bytes() -> None:
    req = HeartbeatRequest(group_id="g1", generation_id=5, member_id="m", group_instance_id=None)
    raw = b"\x00\x02g1" + b"\x00\x00\x00\x05" + b"\x00\x01m" + b"\xff\xff"
    assert encode(req, 3) == raw
    assert decode(HeartbeatRequest, 3, raw) == (req, len(raw))
    req.group_instance_id = "i"
    assert encode(req, 3) == raw[:-2] + b"\x00\x01i"


def test_heartbeat_request_v4_flexible_bytes() -> None:
    req = HeartbeatRequest(group_id="g1", generation_id=5, member_id="m", group_instance_id=None)
    # compact strings are length+1 varints; null is 0; the struct ends with 0 tagged fields
    raw = b"\x03g1" + b"\x00\x00\x00\x05" + b"\x02m" + b"\x00" + b"\x00"
    assert encode(req, 4) == raw
    assert decode(HeartbeatRequest, 4, raw) == (req, len(raw))
    req.group_instance_id = ""
    assert encode(req, 4) == b"\x03g1" + b"\x00\x00\x00\x05" + b"\x02m" + b"\x01" + b"\x00"


def test_heartbeat_response_bytes_per_version() -> None:
    resp = HeartbeatResponse(throttle_time_ms=7, error_code=27)
    assert encode(resp, 0) == b"\x00\x1b"  # v0 has no throttle time
    assert encode(resp, 1) == b"\x00\x00\x00\x07\x00\x1b"
    assert encode(resp, 4) == b"\x00\x00\x00\x07\x00\x1b\x00"
    assert decode(HeartbeatResponse, 0, b"\x00\x1b")[0] == HeartbeatResponse(0, 27)


def test_long_compact_string_uses_multibyte_varint() -> None:
    name = "x" * 200
    raw = encode(ApiVersionsRequest(client_software_name=name, client_software_version="1"), 3)
    assert raw[:2] == b"\xc9\x01"  # 201 as an unsigned varint
    assert decode(ApiVersionsRequest, 3, raw)[0].client_software_name == name


def test_non_ascii_strings_roundtrip() -> None:
    req = HeartbeatRequest(group_id="grüppe-π", member_id="✓")
    for v in (0, 4):
        assert decode(HeartbeatRequest, v, encode(req, v))[0] == req
    with pytest.raises(DecodeError):
        decode(HeartbeatRequest, 0, b"\x00\x02\xff\xfe" + i32(1) + b"\x00\x00")


# ---------------------------------------------------------------------------------------
# tagged fields


def test_unknown_tagged_fields_are_skipped_at_top_level() -> None:
    body = cstr("librdkafka") + cstr("2.6.0")
    tags = uv(2) + uv(7) + uv(3) + b"abc" + uv(300) + uv(1) + b"\x00"
    raw = body + tags + b"TRAILER"
    obj, end = decode(ApiVersionsRequest, 3, raw)
    assert obj == ApiVersionsRequest("librdkafka", "2.6.0")
    assert end == len(raw) - len(b"TRAILER")


def _api_version(key: int, lo: int, hi: int, tags: bytes = b"\x00") -> bytes:
    return i16(key) + i16(lo) + i16(hi) + tags


def test_unknown_tagged_fields_are_skipped_in_nested_structs() -> None:
    raw = (
        i16(0)
        + uv(3)  # two ApiVersion entries
        + _api_version(0, 3, 10, uv(1) + uv(42) + uv(2) + b"zz")
        + _api_version(1, 4, 16)
        + i32(0)
        + uv(1)
        + uv(99)
        + uv(0)  # unknown top-level tag with no data
    )
    obj, end = decode(ApiVersionsResponse, 3, raw)
    assert end == len(raw)
    assert obj.api_keys == [ApiVersion(0, 3, 10), ApiVersion(1, 4, 16)]
    assert obj.finalized_features_epoch == -1  # absent tagged field: its default


def test_known_tagged_fields_decode_and_mix_with_unknown_ones() -> None:
    feature = cstr("metadata.version") + i16(1) + i16(20) + b"\x00"
    tagged = (
        uv(4)
        + uv(0)
        + uv(len(uv(2) + feature))
        + uv(2)
        + feature  # supported_features
        + uv(1)
        + uv(8)
        + i64(12345)  # finalized_features_epoch
        + uv(3)
        + uv(1)
        + b"\x01"  # zk_migration_ready
        + uv(17)
        + uv(4)
        + b"\xde\xad\xbe\xef"  # unknown
    )
    raw = i16(0) + uv(1) + i32(0) + tagged
    obj, end = decode(ApiVersionsResponse, 3, memoryview(raw))
    assert end == len(raw)
    assert obj.supported_features == [SupportedFeatureKey("metadata.version", 1, 20)]
    assert obj.finalized_features_epoch == 12345
    assert obj.zk_migration_ready is True
    assert obj.finalized_features == []


def test_tagged_fields_encode_only_when_not_default_in_tag_order() -> None:
    resp = ApiVersionsResponse(api_keys=[ApiVersion(18, 0, 4)])
    base = encode(resp, 3)
    assert base.endswith(b"\x00")  # no tagged fields
    resp.zk_migration_ready = True
    resp.finalized_features_epoch = 7
    raw = encode(resp, 3)
    tail = uv(2) + uv(1) + uv(8) + i64(7) + uv(3) + uv(1) + b"\x01"
    assert raw == base[:-1] + tail
    assert decode(ApiVersionsResponse, 3, raw)[0] == resp
    # below the flexible version tagged fields do not exist at all
    assert encode(resp, 2) == i16(0) + i32(1) + i16(18) + i16(0) + i16(4) + i32(0)


def test_tagged_struct_in_nested_struct_roundtrip() -> None:
    part = PartitionData(partition_index=3, records=b"", current_leader=LeaderIdAndEpoch(2, 9))
    resp = FetchResponse(responses=[FetchableTopicResponse(topic="t", partitions=[part])])
    raw = encode(resp, 12)
    back = decode(FetchResponse, 12, raw)[0]
    assert back.responses[0].partitions[0].current_leader == LeaderIdAndEpoch(2, 9)
    assert back == resp


def test_tagged_field_past_end_of_frame() -> None:
    raw = cstr("a") + cstr("b") + uv(1) + uv(5) + uv(100) + b"short"
    with pytest.raises(DecodeError, match="tagged field past end"):
        decode(ApiVersionsRequest, 3, raw)


def test_tagged_nullable_string_in_fetch_request() -> None:
    req = FetchRequest(cluster_id="c-1", max_wait_ms=500, rack_id="r")
    back = decode(FetchRequest, 12, encode(req, 12))[0]
    assert back.cluster_id == "c-1"
    # not flexible: the field does not exist and keeps its default
    assert decode(FetchRequest, 11, encode(req, 11))[0].cluster_id is None


# ---------------------------------------------------------------------------------------
# null handling


def test_nullable_string_null_per_version() -> None:
    req = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=30000)
    assert encode(req, 3) == b"\xff\xff" + i16(-1) + i32(30000) + i32(0)
    assert encode(req, 9) == b"\x00" + i16(-1) + i32(30000) + uv(1) + b"\x00"
    for v in (3, 9):
        assert decode(ProduceRequest, v, encode(req, v))[0].transactional_id is None
    req.transactional_id = ""
    for v in (3, 9):
        assert decode(ProduceRequest, v, encode(req, v))[0].transactional_id == ""


def test_non_nullable_string_null_rejected_both_ways() -> None:
    with pytest.raises(EncodeError):
        encode(HeartbeatRequest(group_id=None), 0)  # type: ignore[arg-type]
    with pytest.raises(EncodeError):
        encode(HeartbeatRequest(group_id=None), 4)  # type: ignore[arg-type]
    with pytest.raises(DecodeError, match="null"):
        decode(HeartbeatRequest, 0, b"\xff\xff" + i32(1) + b"\x00\x00")
    with pytest.raises(DecodeError, match="null"):
        decode(HeartbeatRequest, 4, b"\x00" + i32(1) + b"\x01\x00\x00")


def test_negative_non_nullable_lengths_rejected() -> None:
    with pytest.raises(DecodeError):
        decode(HeartbeatRequest, 0, b"\xff\xfe" + i32(1) + b"\x00\x00")  # string length -2
    # non-nullable array with length -1 (ApiVersionsResponse.api_keys)
    with pytest.raises(DecodeError, match="null array"):
        decode(ApiVersionsResponse, 1, i16(0) + i32(-1) + i32(0))
    with pytest.raises(DecodeError, match="null array"):
        decode(ApiVersionsResponse, 3, i16(0) + uv(0) + i32(0) + b"\x00")


def test_nullable_array_per_version() -> None:
    # MetadataRequest.topics: null means "all topics", nullable from v1 only
    with pytest.raises(EncodeError):
        encode(MetadataRequest(topics=None), 0)
    assert encode(MetadataRequest(topics=None), 1) == i32(-1)
    assert decode(MetadataRequest, 1, i32(-1))[0].topics is None
    assert decode(MetadataRequest, 1, i32(0))[0].topics == []
    with pytest.raises(DecodeError):
        decode(MetadataRequest, 0, i32(-1))
    flex = encode(MetadataRequest(topics=None), 9)
    assert flex[0] == 0
    assert decode(MetadataRequest, 9, flex)[0].topics is None
    empty = encode(MetadataRequest(topics=[]), 9)
    assert empty[0] == 1
    assert decode(MetadataRequest, 9, empty)[0].topics == []
    some = MetadataRequest(topics=[MetadataRequestTopic(name="a")])
    assert decode(MetadataRequest, 9, encode(some, 9))[0] == some


def test_nullable_records_and_bytes() -> None:
    tp = TopicProduceData(name="t", partition_data=[PartitionProduceData(0, None)])
    req = ProduceRequest(topic_data=[tp])
    for v in (3, 9):
        assert decode(ProduceRequest, v, encode(req, v))[0] == req
    assert encode(req, 3).endswith(i32(0) + i32(-1))
    sub = ConsumerProtocolSubscription(topics=["a"], user_data=None)
    data = codec.encode_data(sub, 0)
    assert codec.decode_data(ConsumerProtocolSubscription, data).user_data is None
    sub.user_data = b""
    data = codec.encode_data(sub, 0)
    assert codec.decode_data(ConsumerProtocolSubscription, data).user_data == b""


def test_encode_errors_are_encode_error() -> None:
    with pytest.raises(EncodeError):
        encode(HeartbeatRequest(generation_id="x"), 0)  # type: ignore[arg-type]
    with pytest.raises(EncodeError):
        encode(HeartbeatRequest(generation_id=2**40), 0)
    with pytest.raises(EncodeError):
        encode(HeartbeatRequest(group_id=5), 0)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------
# truncated and hostile input


def test_array_longer_than_frame_fails_fast() -> None:
    raw = i16(0) + i32(0x7FFFFFFF) + b"\x00" * 10
    with pytest.raises(DecodeError, match="array length"):
        decode(ApiVersionsResponse, 0, raw)
    # an int32 array (fixed-width fast path) and a compact array
    with pytest.raises(DecodeError):
        owned = i32(1) + i16(1) + b"t" + i32(0x7FFFFFFF)
        decode(ConsumerProtocolSubscription, 1, i32(1) + i16(1) + b"a" + i32(-1) + owned)
    with pytest.raises(DecodeError):
        decode(ApiVersionsResponse, 3, i16(0) + uv(2**62) + b"\x00" * 8)


def test_string_past_end_of_frame() -> None:
    with pytest.raises(DecodeError, match="past end"):
        decode(HeartbeatRequest, 0, b"\x00\x50abc")
    with pytest.raises(DecodeError, match="past end"):
        decode(HeartbeatRequest, 4, uv(2**40) + b"abc")
    with pytest.raises(DecodeError):
        decode(HeartbeatRequest, 4, b"")


# sample instances of every request and response we serve, filled from SPECS


def _fill(cls: type, version: int, depth: int = 0) -> Any:
    obj = cls()
    structs = codec._struct_map(cls)
    for name, s in cls.SPECS.items():
        if version not in s.versions:
            continue
        nullable = version in s.nullable

        def one(i: int, s: Any = s, name: str = name) -> Any:
            t = s.type
            if t == "struct":
                return _fill(structs[s.struct], version, depth + 1)
            if t == "string":
                return f"{name[:3]}{i}é" if i else ""
            if t in ("bytes", "records"):
                return bytes(range(i * 3))
            if t == "uuid":
                return bytes([i + 1]) * 16
            if t == "bool":
                return True
            if t == "float64":
                return 0.25
            if t.startswith("uint"):
                return 7 + i
            return -3 + i if t in ("int8", "int16") else 123456 + i

        if s.array:
            value: Any = [one(i) for i in range(2 if depth < 3 else 1)]
        elif nullable and s.type in ("string", "bytes", "records") and depth % 2:
            value = None
        else:
            value = one(1)
        setattr(obj, name, value)
    return obj


def _samples() -> list[tuple[type, int, bytes]]:
    out = []
    for entry in API_TABLE.values():
        for cls in (entry.request, entry.response):
            versions = {entry.min_version, entry.max_version}
            if entry.max_version >= cls.FLEXIBLE:
                versions.add(max(cls.FLEXIBLE, entry.min_version))
                versions.add(max(cls.FLEXIBLE - 1, entry.min_version))
            for v in sorted(versions):
                out.append((cls, v, encode(_fill(cls, v), v)))
    for v in range(0, 4):
        sub = _fill(ConsumerProtocolSubscription, v)
        out.append((ConsumerProtocolSubscription, v, encode(sub, v)))
    return out


SAMPLES = _samples()


@pytest.mark.parametrize(
    ("cls", "version", "raw"), SAMPLES, ids=[f"{c.__name__}-v{v}" for c, v, _ in SAMPLES]
)
def test_samples_roundtrip_and_every_truncation_is_decode_error(cls: type, version: int, raw: bytes) -> None:
    obj, end = decode(cls, version, memoryview(raw))
    assert end == len(raw)
    assert encode(obj, version) == raw
    for cut in range(len(raw)):
        with pytest.raises(DecodeError):
            decode(cls, version, memoryview(raw)[:cut])


_BIG = [
    b"\x7f\xff\xff\xff",
    b"\xff\xff\xff\xff",
    b"\xff\xff\xff\xff\x0f",
    b"\x80" * 9 + b"\x01",
    b"\xff\xfe",
    b"\x00",
    b"\x01",
]


@st.composite
def mutated(draw: st.DrawFn) -> tuple[type, int, bytes]:
    cls, version, raw = draw(st.sampled_from(SAMPLES))
    buf = bytearray(raw)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "set", "big", "insert", "delete", "truncate"]))
        pos = draw(st.integers(0, max(len(buf), 1) - 1))
        if op == "flip" and buf:
            buf[pos] ^= 1 << draw(st.integers(0, 7))
        elif op == "set" and buf:
            buf[pos] = draw(st.integers(0, 255))
        elif op == "big":
            b = draw(st.sampled_from(_BIG))
            buf[pos : pos + len(b)] = b
        elif op == "insert":
            buf[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        elif op == "delete":
            del buf[pos : pos + draw(st.integers(1, 8))]
        else:
            del buf[pos:]
    return cls, version, bytes(buf)


@FUZZ
@given(mutated())
def test_mutated_encodings_decode_or_raise_decode_error(case: tuple[type, int, bytes]) -> None:
    cls, version, raw = case
    try:
        obj, end = decode(cls, version, memoryview(raw))
    except DecodeError:
        return
    assert 0 <= end <= len(raw)
    assert isinstance(obj, cls)


@FUZZ
@given(st.sampled_from(SAMPLES), st.binary(max_size=64))
def test_random_bytes_decode_or_raise_decode_error(case: tuple[type, int, bytes], junk: bytes) -> None:
    cls, version, _ = case
    try:
        decode(cls, version, junk)
    except DecodeError:
        pass


# ---------------------------------------------------------------------------------------
# records: zero-copy in, pass-through out


def _fetch_response(*payloads: bytes | bytearray | memoryview | None) -> FetchResponse:
    parts = [PartitionData(partition_index=i, high_watermark=10, records=p) for i, p in enumerate(payloads)]
    return FetchResponse(responses=[FetchableTopicResponse(topic="t", partitions=parts)])


@pytest.mark.parametrize("version", [4, 11, 12, 16])
def test_records_decode_as_zero_copy_slices(version: int) -> None:
    payload = bytes(range(256)) * 40
    frame = bytearray(encode(_fetch_response(payload, b"tiny"), version))
    view = memoryview(frame)
    resp, _ = decode(FetchResponse, version, view)
    rec = resp.responses[0].partitions[0].records
    assert isinstance(rec, memoryview)
    assert rec.obj is frame  # a window onto the frame, not a copy
    assert bytes(rec) == payload
    start = frame.find(payload)
    frame[start] ^= 0xFF  # a change to the frame shows through the decoded slice
    assert rec[0] == payload[0] ^ 0xFF
    assert bytes(resp.responses[0].partitions[1].records) == b"tiny"


@pytest.mark.parametrize("version", [4, 12])
def test_large_records_are_passed_through_without_copy(version: int) -> None:
    big1 = bytearray(b"a" * codec.PASS_THROUGH)
    big2 = memoryview(b"b" * 100_000)
    small = b"c" * (codec.PASS_THROUGH - 1)
    resp = _fetch_response(big1, small, big2, None)
    out = bytearray()
    parts: list[Any] = []
    encode_into(resp, version, out, parts)
    assert any(p is big1 for p in parts)
    assert any(p is big2 for p in parts)
    assert not any(p is small for p in parts)
    # buffers in order, then the tail left in `out`, form the message
    whole = b"".join(bytes(p) for p in parts) + bytes(out)
    assert whole == encode(resp, version)
    back = decode(FetchResponse, version, whole)[0]
    got = [p.records for p in back.responses[0].partitions]
    assert [None if g is None else bytes(g) for g in got] == [bytes(big1), small, bytes(big2), None]


def test_small_records_are_copied_inline() -> None:
    resp = _fetch_response(b"x" * 100)
    out = bytearray()
    parts: list[Any] = []
    encode_into(resp, 12, out, parts)
    assert parts == []
    assert bytes(out) == encode(resp, 12)


def test_produce_request_records_from_memoryview() -> None:
    batch = b"B" * 5000
    req = ProduceRequest(
        acks=1,
        timeout_ms=1000,
        topic_data=[TopicProduceData(name="t", partition_data=[PartitionProduceData(0, batch)])],
    )
    raw = bytearray(encode(req, 9))
    back = decode(ProduceRequest, 9, memoryview(raw))[0]
    rec = back.topic_data[0].partition_data[0].records
    assert isinstance(rec, memoryview) and rec.obj is raw and bytes(rec) == batch


# ---------------------------------------------------------------------------------------
# consumer protocol data schemas (int16 version prefix)


def test_subscription_v0_bytes() -> None:
    sub = ConsumerProtocolSubscription(topics=["a", "bc"], user_data=b"\x01")
    raw = codec.encode_data(sub, 0)
    assert raw == i16(0) + i32(2) + i16(1) + b"a" + i16(2) + b"bc" + i32(1) + b"\x01"
    assert codec.decode_data(ConsumerProtocolSubscription, raw) == sub


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_subscription_roundtrip_each_version(version: int) -> None:
    sub = ConsumerProtocolSubscription(
        topics=["traffic.speed"],
        user_data=None,
        owned_partitions=[TopicPartition("traffic.speed", [0, 2])] if version >= 1 else [],
        generation_id=4 if version >= 2 else -1,
        rack_id="r1" if version >= 3 else None,
    )
    assert codec.decode_data(ConsumerProtocolSubscription, codec.encode_data(sub, version)) == sub


def test_subscription_from_a_newer_version_decodes_forward_compatibly() -> None:
    sub = ConsumerProtocolSubscription(
        topics=["t"],
        user_data=b"u",
        owned_partitions=[TopicPartition("t", [1])],
        generation_id=9,
        rack_id="rack",
    )
    # a v7 client writes our v3 fields followed by fields we do not know
    raw = i16(7) + encode(sub, 3) + b"\x00\x00\x00\x2a new fields"
    assert codec.decode_data(ConsumerProtocolSubscription, raw) == sub


def test_assignment_roundtrip_and_newer_version() -> None:
    asg = ConsumerProtocolAssignment(
        assigned_partitions=[AssignedTopicPartition("t", [0, 1])], user_data=None
    )
    raw = codec.encode_data(asg, 3)
    assert codec.decode_data(ConsumerProtocolAssignment, raw) == asg
    assert codec.decode_data(ConsumerProtocolAssignment, i16(9) + raw[2:] + b"more") == asg


def test_data_schema_errors() -> None:
    with pytest.raises(DecodeError):
        codec.decode_data(ConsumerProtocolSubscription, b"\x00")
    with pytest.raises(DecodeError):
        codec.decode_data(ConsumerProtocolSubscription, i16(0) + i32(5))
    # Kafka rejects versions below the lowest supported one instead of guessing
    with pytest.raises(DecodeError, match="version"):
        codec.decode_data(ConsumerProtocolSubscription, i16(-1) + i32(0) + i32(-1))


def test_decoders_are_cached() -> None:
    a = codec._compiler.decoder(HeartbeatRequest, 4, True)
    b = codec._compiler.decoder(HeartbeatRequest, 4, True)
    assert a is b
    assert "def decode" in (a.__doc__ or "")
