"""Record batches (magic v2): build/decode, compression codecs, validation, in-place patches."""

from __future__ import annotations

import gzip
import struct

import cramjam
import lz4.frame
import pytest
import snappy
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.protocol import records as rb
from framework.protocol.records import (
    HEADER_SIZE,
    BatchHeader,
    InvalidBatch,
    Record,
    build_batch,
    decode_batch,
    scan_valid_prefix,
    validate_batches,
)

RECS = [
    (b"sensor-1", b'{"speed": 42}', [("source", b"mqtt"), ("trace", None)]),
    (None, b"no key"),
    (b"sensor-2", None),  # tombstone
    (b"", b""),
]


def _recompute_crc(buf: bytearray, pos: int = 0) -> None:
    h = rb.read_header(buf, pos)
    struct.pack_into(">I", buf, pos + 17, rb.crc32c(memoryview(buf)[pos + 21 : pos + h.size]))


def _with_payload(batch: bytes, codec: int, payload: bytes) -> bytes:
    """The batch's header with another (e.g. externally compressed) records payload."""
    out = bytearray(batch[:HEADER_SIZE]) + payload
    struct.pack_into(">i", out, 8, len(out) - rb.LOG_OVERHEAD)
    attrs = struct.unpack_from(">h", out, 21)[0]
    struct.pack_into(">h", out, 21, (attrs & ~rb.COMPRESSION_MASK) | codec)
    _recompute_crc(out)
    return bytes(out)


def _body(batch: bytes) -> bytes:
    """Uncompressed records section of an uncompressed batch."""
    return batch[HEADER_SIZE:]


# ---------------------------------------------------------------------------------------
# build / decode


def test_roundtrip_keys_nulls_headers_timestamps() -> None:
    ts = [1_700_000_000_500, 1_700_000_000_100, 1_700_000_000_900, 1_700_000_000_100]
    batch = build_batch(
        RECS,
        base_offset=100,
        timestamps=ts,
        producer_id=7,
        producer_epoch=1,
        base_sequence=10,
        leader_epoch=3,
    )
    h, recs = decode_batch(batch)
    assert h.base_offset == 100 and h.records_count == 4 and h.last_offset_delta == 3
    assert h.base_timestamp == min(ts) and h.max_timestamp == max(ts)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (7, 1, 10)
    assert h.partition_leader_epoch == 3
    assert h.magic == 2 and h.size == len(batch) and h.last_offset == 103 and h.next_offset == 104
    assert not h.is_log_append_time and not h.is_transactional and not h.is_control
    assert h.last_sequence == 13
    assert recs == [
        Record(100, ts[0], b"sensor-1", b'{"speed": 42}', [("source", b"mqtt"), ("trace", None)]),
        Record(101, ts[1], None, b"no key", []),
        Record(102, ts[2], b"sensor-2", None, []),
        Record(103, ts[3], b"", b"", []),
    ]
    assert validate_batches(batch) == [h]


def test_single_timestamp_and_flags() -> None:
    batch = build_batch([(b"k", b"v")], timestamp_ms=5, transactional=True, control=True)
    h, recs = decode_batch(batch)
    assert h.is_transactional and h.is_control
    assert recs[0].timestamp == 5 and h.max_timestamp == 5
    assert h.producer_id == -1 and h.base_sequence == -1 and h.last_sequence == -1


def test_large_and_negative_varints_roundtrip() -> None:
    big = b"x" * 70_000  # multi-byte varint lengths
    ts = [10_000_000, 0]  # negative timestamp delta for the second record relative to max
    _, recs = decode_batch(build_batch([(big, big), (b"k", b"v")], timestamps=ts))
    assert recs[0].key == big and recs[0].timestamp == 10_000_000 and recs[1].timestamp == 0


@given(st.integers(-(2**63), 2**63 - 1))
@settings(max_examples=300, deadline=None, database=None)
def test_zigzag_varint_roundtrip(n: int) -> None:
    out = bytearray()
    rb._write_varint(out, n)
    assert rb._read_varint(bytes(out), 0) == (n, len(out))


def test_zigzag_known_bytes() -> None:
    for n, enc in [(0, b"\x00"), (-1, b"\x01"), (1, b"\x02"), (-64, b"\x7f"), (64, b"\x80\x01")]:
        out = bytearray()
        rb._write_varint(out, n)
        assert bytes(out) == enc


# ---------------------------------------------------------------------------------------
# compression


@pytest.mark.parametrize("codec", sorted(rb.CODEC_NAMES))
def test_every_codec_roundtrips(codec: int) -> None:
    recs = [(b"k%d" % i, b"value %d " % i * 20) for i in range(50)]
    batch = build_batch(recs, compression=codec, timestamp_ms=1000)
    h, out = decode_batch(batch)
    assert h.compression == codec
    assert [(r.key, r.value) for r in out] == recs
    validate_batches(batch)
    if codec != rb.NONE:
        assert len(batch) < len(build_batch(recs, timestamp_ms=1000))


def _external(codec: int, data: bytes) -> bytes:
    """Compress like other Kafka clients do, with libraries independent of ours."""
    if codec == rb.GZIP:
        return gzip.compress(data, compresslevel=9)
    if codec == rb.SNAPPY:
        return snappy.compress(data)
    if codec == rb.LZ4:
        return lz4.frame.compress(data, content_checksum=True)
    if codec == rb.ZSTD:
        return zstandard.ZstdCompressor(level=3).compress(data)
    raise AssertionError(codec)


@pytest.mark.parametrize("codec", [rb.GZIP, rb.SNAPPY, rb.LZ4, rb.ZSTD])
def test_decode_payload_compressed_by_other_libraries(codec: int) -> None:
    plain = build_batch(RECS, base_offset=5, timestamp_ms=77)
    batch = _with_payload(plain, codec, _external(codec, _body(plain)))
    validate_batches(batch)
    assert decode_batch(batch)[1] == decode_batch(plain)[1]


def _xerial(data: bytes, chunk: int) -> bytes:
    out = bytearray(b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1))
    for i in range(0, len(data), chunk):
        c = bytes(cramjam.snappy.compress_raw(data[i : i + chunk]))
        out += struct.pack(">i", len(c)) + c
    return bytes(out)


@pytest.mark.parametrize("chunk", [7, 64, 1 << 20])
def test_snappy_java_xerial_framing(chunk: int) -> None:
    recs = [(b"k%d" % i, b"v" * i) for i in range(30)]
    plain = build_batch(recs)
    batch = _with_payload(plain, rb.SNAPPY, _xerial(_body(plain), chunk))
    validate_batches(batch)
    assert [(r.key, r.value) for r in decode_batch(batch)[1]] == recs


@pytest.mark.parametrize("codec", [rb.GZIP, rb.SNAPPY, rb.LZ4, rb.ZSTD])
def test_damaged_compressed_payload_is_invalid_batch(codec: int) -> None:
    plain = build_batch(RECS)
    good = _external(codec, _body(plain))
    for bad in (b"\x00garbage" * 4, good[: len(good) // 2]):
        batch = _with_payload(plain, codec, bad)
        validate_batches(batch)  # framing and CRC are fine: the producer compressed junk
        with pytest.raises(InvalidBatch):
            decode_batch(batch)


def test_damaged_xerial_frame_is_invalid_batch() -> None:
    plain = build_batch(RECS)
    framed = _xerial(_body(plain), 16)
    for bad in (framed[:18], framed[:16] + struct.pack(">i", -5) + b"abc", framed[:-3]):
        with pytest.raises(InvalidBatch):
            decode_batch(_with_payload(plain, rb.SNAPPY, bad))


def test_records_past_end_of_body_is_invalid_batch() -> None:
    plain = bytearray(build_batch(RECS))
    struct.pack_into(">i", plain, 57, 10)  # claims 10 records, holds 4
    struct.pack_into(">i", plain, 23, 9)
    _recompute_crc(plain)
    with pytest.raises(InvalidBatch):
        decode_batch(plain)
    with pytest.raises(InvalidBatch):
        decode_batch(_with_payload(bytes(plain), rb.NONE, _body(bytes(plain))[:-5]))


def test_unknown_codec_in_decompress() -> None:
    with pytest.raises(InvalidBatch, match="codec"):
        rb.decompress(6, b"")
    with pytest.raises(ValueError):
        rb.compress(6, b"")


# ---------------------------------------------------------------------------------------
# validation


def _patched(batch: bytes, fmt: str, offset: int, value: int, fix_crc: bool = True) -> bytearray:
    b = bytearray(batch)
    struct.pack_into(fmt, b, offset, value)
    if fix_crc:
        _recompute_crc(b)
    return b


def test_validate_many_batches() -> None:
    a = build_batch(RECS, base_offset=0)
    b = build_batch([(b"x", b"y")], base_offset=4, compression=rb.ZSTD)
    hs = validate_batches(a + b)
    assert [h.base_offset for h in hs] == [0, 4]
    assert [h.size for h in hs] == [len(a), len(b)]


def test_validate_rejects_bad_crc() -> None:
    batch = bytearray(build_batch(RECS))
    batch[-1] ^= 0x01
    with pytest.raises(InvalidBatch, match="CRC") as ei:
        validate_batches(batch)
    assert ei.value.corrupt
    # the attributes are covered by the CRC too
    with pytest.raises(InvalidBatch, match="CRC"):
        validate_batches(_patched(build_batch(RECS), ">h", 21, rb.GZIP, fix_crc=False))


def test_validate_rejects_bad_magic_as_unsupported() -> None:
    for magic in (0, 1, 3):
        with pytest.raises(InvalidBatch, match="magic") as ei:
            validate_batches(_patched(build_batch(RECS), ">b", 16, magic, fix_crc=False))
        assert not ei.value.corrupt


def test_validate_rejects_truncation_and_bad_lengths() -> None:
    batch = build_batch(RECS)
    with pytest.raises(InvalidBatch, match="empty"):
        validate_batches(b"")
    with pytest.raises(InvalidBatch, match="truncated"):
        validate_batches(batch[:60])
    with pytest.raises(InvalidBatch, match="truncated"):
        validate_batches(batch + batch[:30])
    with pytest.raises(InvalidBatch, match="out of bounds"):
        validate_batches(batch[:-1])
    with pytest.raises(InvalidBatch, match="out of bounds"):
        validate_batches(_patched(batch, ">i", 8, 2**31 - 1, fix_crc=False))
    for small in (0, -1, rb.MIN_BATCH_LENGTH - 1):
        with pytest.raises(InvalidBatch, match="out of bounds"):
            validate_batches(_patched(batch, ">i", 8, small, fix_crc=False))


def test_validate_rejects_count_mismatch() -> None:
    batch = build_batch(RECS)
    with pytest.raises(InvalidBatch, match="records"):
        validate_batches(_patched(batch, ">i", 57, 3))  # records_count
    with pytest.raises(InvalidBatch, match="records"):
        validate_batches(_patched(batch, ">i", 23, 7))  # last_offset_delta
    zero = _patched(_patched(batch, ">i", 57, 0), ">i", 23, -1)
    with pytest.raises(InvalidBatch):
        validate_batches(zero)


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_validate_rejects_unknown_codec(codec: int) -> None:
    with pytest.raises(InvalidBatch, match="compression codec"):
        validate_batches(_patched(build_batch(RECS), ">h", 21, codec))


# ---------------------------------------------------------------------------------------
# in-place patches by the broker


def test_base_offset_and_leader_epoch_are_outside_the_crc() -> None:
    first = build_batch([(b"a", b"1")])
    buf = bytearray(first + build_batch(RECS))
    pos = len(first)
    rb.set_base_offset(buf, pos, 1_000_000)
    rb.set_leader_epoch(buf, pos, 42)
    hs = validate_batches(buf)  # CRC still good without recomputing it
    assert hs[1].base_offset == 1_000_000 and hs[1].partition_leader_epoch == 42
    assert hs[0].base_offset == 0
    _, recs = decode_batch(memoryview(buf)[pos:])
    assert [r.offset for r in recs] == [1_000_000 + i for i in range(len(RECS))]


def test_log_append_time_recomputes_crc() -> None:
    first = build_batch([(b"a", b"1")])
    second = build_batch(RECS, timestamps=[10, 20, 30, 40])
    buf = bytearray(first + second)
    pos = len(first)
    rb.set_log_append_time(buf, pos, len(second), 9_999)
    hs = validate_batches(buf)
    assert hs[1].is_log_append_time and hs[1].max_timestamp == 9_999
    _, recs = decode_batch(memoryview(buf)[pos:])
    assert {r.timestamp for r in recs} == {9_999}  # every record reports the append time
    # the same edit without the CRC update is detected
    raw = bytearray(second)
    struct.pack_into(">q", raw, 35, 1)
    with pytest.raises(InvalidBatch, match="CRC"):
        validate_batches(raw)


# ---------------------------------------------------------------------------------------
# recovery scan


def _log(n: int) -> tuple[bytes, list[int]]:
    out = bytearray()
    positions = []
    for i in range(n):
        positions.append(len(out))
        out += build_batch([(b"k", b"v" * i), (b"k2", None)], base_offset=2 * i)
    return bytes(out), positions


def test_scan_valid_prefix_whole_log() -> None:
    log, positions = _log(4)
    valid, batches = scan_valid_prefix(log, 0)
    assert valid == len(log)
    assert [p for p, _ in batches] == positions
    assert [h.base_offset for _, h in batches] == [0, 2, 4, 6]


def test_scan_valid_prefix_stops_at_first_damaged_batch() -> None:
    log, positions = _log(4)
    damaged = bytearray(log)
    damaged[positions[2] + HEADER_SIZE + 3] ^= 0x40
    valid, batches = scan_valid_prefix(damaged)
    assert valid == positions[2] and len(batches) == 2


def test_scan_valid_prefix_partial_tail_and_garbage() -> None:
    log, positions = _log(3)
    assert scan_valid_prefix(log[:-1])[0] == positions[2]
    assert scan_valid_prefix(log[: positions[1] + 20])[0] == positions[1]
    assert scan_valid_prefix(log + b"\x00" * 100)[0] == len(log)
    assert scan_valid_prefix(b"\xff" * 500) == (0, [])
    assert scan_valid_prefix(b"") == (0, [])


def test_scan_valid_prefix_requires_increasing_offsets() -> None:
    a = build_batch([(b"k", b"v")], base_offset=10)
    b = build_batch([(b"k", b"v")], base_offset=5)
    assert scan_valid_prefix(a + b)[0] == len(a)
    assert scan_valid_prefix(a, expected_base=11) == (0, [])
    assert scan_valid_prefix(a, expected_base=10)[0] == len(a)


def test_iter_batches_stops_at_partial_tail() -> None:
    log, positions = _log(3)
    assert [p for p, _ in rb.iter_batches(log)] == positions
    assert [p for p, _ in rb.iter_batches(log[:-2])] == positions[:2]


# ---------------------------------------------------------------------------------------
# header helpers


def _kafka_increment_sequence(seq: int, inc: int) -> int:
    """DefaultRecordBatch.incrementSequence from Apache Kafka."""
    if seq > 2**31 - 1 - inc:
        return inc - (2**31 - 1 - seq) - 1
    return seq + inc


def _header(base_sequence: int, delta: int) -> BatchHeader:
    return BatchHeader(0, 49, 0, 2, 0, 0, delta, 0, 0, 1, 0, base_sequence, delta + 1)


def test_last_sequence_wraps_like_kafka() -> None:
    assert _header(2**31 - 1, 1).last_sequence == 0
    assert _header(2**31 - 2, 5).last_sequence == 3
    assert _header(2**31 - 1, 0).last_sequence == 2**31 - 1
    assert _header(-1, 5).last_sequence == -1


@given(st.integers(0, 2**31 - 1), st.integers(0, 2**31 - 1))
@settings(max_examples=200, deadline=None, database=None)
def test_last_sequence_matches_kafka(seq: int, delta: int) -> None:
    assert _header(seq, delta).last_sequence == _kafka_increment_sequence(seq, delta)


def test_read_prefix_and_header() -> None:
    batch = build_batch(RECS, base_offset=77)
    assert rb.read_prefix(batch) == (77, len(batch) - 12)
    assert rb.read_header(batch).crc == rb.compute_crc(batch)
    with pytest.raises(struct.error):
        rb.read_header(batch[:30])


def test_negative_header_key_length_is_invalid_not_endless() -> None:
    # one record: attrs, ts delta, offset delta, key -1, value -1, 2**62 headers whose key
    # length is -2 (would step back over itself forever)
    rec = bytearray(b"\x00\x00\x00\x01\x01")
    rb._write_varint(rec, 2**62)  # zigzag varint ends in 0x01 = null header value
    rec += b"\x03\x01"
    body = bytearray()
    rb._write_varint(body, len(rec))
    body += rec
    with pytest.raises(InvalidBatch):
        decode_batch(_with_payload(build_batch([(b"k", b"v")]), rb.NONE, bytes(body)))


@given(st.data())
@settings(max_examples=300, deadline=None, database=None)
def test_mutated_records_decode_or_raise_invalid_batch(data: st.DataObject) -> None:
    codec = data.draw(st.sampled_from([rb.NONE, rb.NONE, rb.GZIP, rb.SNAPPY, rb.LZ4, rb.ZSTD]))
    plain = build_batch(RECS, timestamps=[1, 5, 3, 2])
    body = bytearray(_body(plain))
    for _ in range(data.draw(st.integers(1, 3))):
        pos = data.draw(st.integers(0, len(body) - 1))
        op = data.draw(st.sampled_from(["set", "insert", "delete"]))
        if op == "set":
            body[pos] = data.draw(st.integers(0, 255))
        elif op == "insert":
            body[pos:pos] = data.draw(st.binary(min_size=1, max_size=4))
        else:
            del body[pos : pos + data.draw(st.integers(1, 4))]
    payload = rb.compress(codec, bytes(body)) if data.draw(st.booleans()) else bytes(body)
    batch = _with_payload(plain, codec, payload)
    try:
        h, recs = decode_batch(batch)
    except InvalidBatch:
        return
    assert len(recs) == h.records_count
