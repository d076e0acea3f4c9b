"""Record-level validation of produced batches (``records.check_records``, Kafka's LogValidator).

Each test damages one field of an otherwise valid batch and recomputes the CRC, so only the
record walk can catch it: the record count, an offset delta, a length or varint, a
timestamp, a missing key on a compacted topic, a truncated or garbage compressed body (every
codec). A batch that passes the walk must decode on the cold path too.

Every test runs twice: on the mypyc-compiled walk and on the same module as Python
(``walk_impl``, conftest.py), which must agree to the message.
"""

from __future__ import annotations

import struct
from typing import Any

import cramjam
import lz4.frame
import pytest
import snappy
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from framework.protocol import records as rb
from framework.protocol.error_codes import ErrorCode
from framework.protocol.records import HEADER_SIZE, InvalidBatch, check_records, validate_batches

NOW = 1_700_000_000_000
CODECS = [rb.GZIP, rb.SNAPPY, rb.LZ4, rb.ZSTD]

pytestmark = pytest.mark.usefixtures("walk_impl")


# -- building batches field by field ---------------------------------------------------------
def _varint(value: int) -> bytes:
    out = bytearray()
    rb._write_varint(out, value)
    return bytes(out)


def record(
    i: int,
    key: bytes | None = b"k",
    value: bytes | None = b"v",
    *,
    ts_delta: int = 0,
    offset_delta: int | None = None,
    headers: list[tuple[bytes, bytes | None]] | None = None,
    key_len: int | None = None,
    value_len: int | None = None,
    header_count: int | None = None,
    length_adjust: int = 0,
    length_raw: bytes | None = None,
) -> bytes:
    """One v2 record with its length prefix; the keyword arguments override single fields."""
    body = bytearray(b"\x00")  # attributes
    body += _varint(ts_delta)
    body += _varint(i if offset_delta is None else offset_delta)
    body += _varint(key_len if key_len is not None else (-1 if key is None else len(key)))
    body += key or b""
    body += _varint(value_len if value_len is not None else (-1 if value is None else len(value)))
    body += value or b""
    hdrs = headers or []
    body += _varint(len(hdrs) if header_count is None else header_count)
    for hk, hv in hdrs:
        body += _varint(len(hk)) + hk + _varint(-1 if hv is None else len(hv)) + (hv or b"")
    prefix = length_raw if length_raw is not None else _varint(len(body) + length_adjust)
    return prefix + bytes(body)


def make_batch(
    body: bytes,
    count: int,
    *,
    codec: int = rb.NONE,
    base_ts: int = NOW,
    max_ts: int | None = None,
    compressed: bytes | None = None,
    attributes: int = 0,
    producer_id: int = -1,
    base_sequence: int = -1,
) -> bytes:
    """A batch around an (uncompressed) records ``body``, with a valid CRC."""
    payload = compressed if compressed is not None else rb.compress(codec, body)
    head = struct.pack(
        ">qiibIhiqqqhii",
        0,
        HEADER_SIZE - rb.LOG_OVERHEAD + len(payload),
        -1,
        rb.MAGIC_V2,
        0,
        codec | attributes,
        count - 1,
        base_ts,
        base_ts if max_ts is None else max_ts,
        producer_id,
        0 if producer_id >= 0 else -1,
        base_sequence,
        count,
    )
    out = bytearray(head + payload)
    struct.pack_into(">I", out, 17, rb.crc32c(memoryview(out)[21:]))
    return bytes(out)


def good_body(n: int = 5, **kw: object) -> bytes:
    return b"".join(record(i, b"k%d" % i, b"value-%d" % i, **kw) for i in range(n))  # type: ignore[arg-type]


def check(batch: bytes, pos: int = 0, **kw: object) -> None:
    """validate_batches (header, CRC) must pass; then check_records (the records)."""
    buf = memoryview(bytearray(batch))
    h = validate_batches(buf[pos:])[0] if pos == 0 else rb.read_header(buf, pos)
    check_records(buf, pos, h, **kw)  # type: ignore[arg-type]


def refused(
    batch: bytes, code: ErrorCode = ErrorCode.INVALID_RECORD, match: str | None = None, **kw: object
) -> InvalidBatch:
    with pytest.raises(InvalidBatch, match=match) as ei:
        check(batch, **kw)
    assert ei.value.code == code, ei.value
    return ei.value


# -- accepted batches ------------------------------------------------------------------------
@pytest.mark.parametrize("codec", [rb.NONE, *CODECS])
def test_batches_of_every_codec_pass_and_decode(codec: int) -> None:
    recs = [(b"k%d" % i, b'{"speed": %d}' % i * 5, [("h", b"x")]) for i in range(300)]
    batch = rb.build_batch(recs, timestamps=[NOW + i for i in range(300)], compression=codec)
    check(batch, require_key=True, min_timestamp=NOW, max_timestamp=NOW + 299)
    assert len(rb.decode_batch(batch)[1]) == 300


def test_nulls_empties_headers_and_multibyte_varints_pass() -> None:
    big = b"x" * 70_000  # three-byte length varints
    body = b"".join(
        [
            record(0, None, None),
            record(1, b"", b""),
            record(2, b"k", big, headers=[(b"a", None), (b"", b""), (b"long", b"y" * 300)]),
            record(3, big, b"v", ts_delta=-5_000_000),  # a negative delta (Java's base = first record)
        ]
        + [record(i, b"k", b"v", ts_delta=i) for i in range(4, 200)]  # two-byte offset deltas
    )
    check(make_batch(body, 200, base_ts=NOW, max_ts=NOW + 199))


@pytest.mark.parametrize("codec", [rb.GZIP, rb.SNAPPY, rb.LZ4, rb.ZSTD])
def test_bodies_compressed_by_other_libraries_pass(codec: int) -> None:
    body = good_body(50)
    other = {
        rb.GZIP: lambda d: __import__("gzip").compress(d, 9),
        rb.SNAPPY: snappy.compress,
        rb.LZ4: lambda d: lz4.frame.compress(d, content_checksum=True),
        rb.ZSTD: lambda d: zstandard.ZstdCompressor(level=3).compress(d),
    }[codec](body)
    check(make_batch(body, 50, codec=codec, compressed=other))


def test_snappy_java_xerial_framing_passes() -> None:
    body = good_body(40)
    framed = bytearray(b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1))
    for i in range(0, len(body), 100):
        chunk = bytes(cramjam.snappy.compress_raw(body[i : i + 100]))
        framed += struct.pack(">i", len(chunk)) + chunk
    check(make_batch(body, 40, codec=rb.SNAPPY, compressed=bytes(framed)))


def test_walk_is_in_place_within_a_larger_buffer() -> None:
    """An uncompressed batch is checked where it lies (the request buffer), bounded by its size."""
    a = make_batch(good_body(3), 3)
    b = make_batch(good_body(4), 4)
    buf = memoryview(bytearray(a + b))
    for pos, h in ((0, rb.read_header(buf, 0)), (len(a), rb.read_header(buf, len(a)))):
        check_records(buf, pos, h)


def test_decompression_buffer_grows_and_is_reused() -> None:
    small = make_batch(good_body(3), 3, codec=rb.LZ4)
    big_body = b"".join(record(i, b"k", b"x" * 5000) for i in range(600))  # 3 MB > the first buffer
    big = make_batch(big_body, 600, codec=rb.ZSTD)
    check(small)
    check(big)
    buf = rb._scratch.buf
    assert len(buf) >= len(big_body)
    check(big)
    check(small)
    assert rb._scratch.buf is buf  # reused, not reallocated


# -- structure: INVALID_RECORD ---------------------------------------------------------------
def test_count_above_the_records_held() -> None:
    refused(make_batch(good_body(4), 5), match="declares 5 records but holds 4")


def test_count_below_the_records_held() -> None:
    refused(make_batch(good_body(4), 3), match="bytes after the batch's 3 records")


@pytest.mark.parametrize(("at", "delta"), [(0, 1), (2, 3), (3, 2), (4, 0), (1, -1), (2, 1000)])
def test_offset_deltas_must_be_0_to_n_minus_1_in_order(at: int, delta: int) -> None:
    body = b"".join(record(i, offset_delta=delta if i == at else i) for i in range(5))
    refused(make_batch(body, 5), match=f"record {at}: offset delta {delta}, expected {at}")


def test_two_byte_offset_deltas_are_checked_too() -> None:
    body = b"".join(record(i, offset_delta=i + 1 if i == 100 else i) for i in range(150))
    refused(make_batch(body, 150), match="record 100: offset delta 101")


@pytest.mark.parametrize(
    ("field", "match"),
    [
        ({"length_adjust": 1}, "record 2: fields take"),
        ({"length_adjust": -1}, "record 2: fields take"),
        ({"length_adjust": 10_000}, "record 2: length 10"),
        ({"length_raw": _varint(-4)}, "record 2: negative length"),
        ({"length_raw": _varint(-400)}, "record 2: negative length"),
        ({"key_len": 5}, "record 2"),
        ({"key_len": -2}, "record 2: negative key length"),
        ({"key_len": -300}, "record 2: negative key length"),
        ({"value_len": 40}, "record 2"),
        ({"value_len": -3}, "record 2: negative value length"),
        ({"value_len": -3000}, "record 2: negative value length"),
        ({"header_count": -1}, "record 2: header count -1"),
        ({"header_count": 2**30}, "record 2: header count"),
        ({"header_count": 1}, "record 2"),
    ],
)
def test_lengths_and_varints_must_fit_the_record_exactly(field: dict[str, object], match: str) -> None:
    body = b"".join(record(i, b"key", b"value", **(field if i == 2 else {})) for i in range(4))  # type: ignore[arg-type]
    refused(make_batch(body, 4), match=match)


def test_header_lengths_are_checked() -> None:
    bad_key = record(0, headers=[(b"h", b"v")])
    # header key length -2: patch the byte after the header count (the last 4 bytes: klen, k, vlen, v)
    raw = bytearray(bad_key)
    raw[-4] = _varint(-2)[0]
    refused(make_batch(bytes(raw), 1), match="negative header key length")
    raw = bytearray(bad_key)
    raw[-2] = _varint(-2)[0]
    refused(make_batch(bytes(raw), 1), match="negative header value length")
    raw = bytearray(bad_key)
    raw[-2] = _varint(50)[0]  # a header value past the record's end
    refused(make_batch(bytes(raw), 1), match="record 0")


def test_overlong_varints_are_refused() -> None:
    body = b"\xff" * 11 + b"\x00"
    refused(make_batch(body, 1), match="varint longer than 5 bytes")
    ts = bytearray(record(0))
    ts[2:3] = b"\xff" * 10 + b"\x01"  # an 11-byte timestamp delta (attributes at 1)
    ts[0] = len(ts) - 1 << 1
    refused(make_batch(bytes(ts), 1), match="varint longer than 10 bytes")


def test_a_truncated_last_record() -> None:
    body = good_body(3)
    refused(make_batch(body[:-2], 3), match="record 2")


def test_zero_length_record() -> None:
    refused(make_batch(record(0) + b"\x00", 2), match="record 1")


@pytest.mark.parametrize("codec", CODECS)
def test_truncated_compressed_body(codec: int) -> None:
    body = good_body(200)
    packed = rb.compress(codec, body)
    for cut in (1, len(packed) // 2):
        e = refused(make_batch(body, 200, codec=codec, compressed=packed[:-cut]))
        assert "decompress" in str(e) or "record" in str(e), e


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("garbage", [b"\x00garbage" * 8, b"\xff" * 64, b""])
def test_garbage_compressed_body_with_a_valid_crc(codec: int, garbage: bytes) -> None:
    batch = make_batch(good_body(3), 3, codec=codec, compressed=garbage)
    validate_batches(batch)  # framing and CRC are fine: the producer compressed junk
    e = refused(batch)
    assert "cannot decompress" in str(e) or "record" in str(e), e
    with pytest.raises(InvalidBatch):
        rb.decode_batch(batch)  # the cold path agrees


@pytest.mark.parametrize("codec", CODECS)
def test_compressed_body_holding_malformed_records(codec: int) -> None:
    body = b"".join(record(i, offset_delta=0) for i in range(3))
    refused(make_batch(body, 3, codec=codec), match="record 1: offset delta 0")


def test_record_errors_of_structure_name_no_records() -> None:
    e = refused(make_batch(good_body(4), 5))
    assert e.record_errors == []


# -- timestamps ------------------------------------------------------------------------------
def test_a_record_above_the_batch_max_timestamp() -> None:
    body = b"".join(record(i, ts_delta=i * 10) for i in range(4))
    refused(
        make_batch(body, 4, max_ts=NOW + 29), match="record 3: timestamp .* above the batch's max timestamp"
    )
    check(make_batch(body, 4, max_ts=NOW + 30))


def test_the_max_timestamp_is_not_checked_for_log_append_time_topics() -> None:
    body = b"".join(record(i, ts_delta=i * 10) for i in range(4))
    check(make_batch(body, 4, max_ts=NOW), create_time=False, min_timestamp=NOW + 10**9)


def test_timestamps_outside_the_window_are_refused_per_record() -> None:
    body = b"".join(record(i, ts_delta=d) for i, d in enumerate([0, -5000, 10, 7000, 20]))
    batch = make_batch(body, 5, max_ts=NOW + 7000)
    e = refused(batch, ErrorCode.INVALID_TIMESTAMP, min_timestamp=NOW - 1000, max_timestamp=NOW + 1000)
    assert [i for i, _ in e.record_errors] == [1, 3]
    assert "out of range" in e.record_errors[0][1] and str(NOW - 1000) in e.record_errors[0][1]
    check(batch, min_timestamp=NOW - 5000, max_timestamp=NOW + 7000)


def test_no_timestamp_records_are_not_window_checked() -> None:
    """Kafka skips records without a timestamp (-1) in the window check."""
    batch = make_batch(good_body(2), 2, base_ts=-1, max_ts=-1)
    check(batch, min_timestamp=NOW - 1000, max_timestamp=NOW + 1000)


# -- keys on compacted topics (KIP-467 record errors) -----------------------------------------
def test_keyless_records_are_listed_one_by_one() -> None:
    body = b"".join(record(i, None if i in (1, 3) else b"k") for i in range(5))
    batch = make_batch(body, 5)
    check(batch)  # fine without compaction
    e = refused(batch, require_key=True, match="2 record")
    assert [i for i, _ in e.record_errors] == [1, 3]
    assert all("without a key" in m for _, m in e.record_errors)


def test_one_error_per_record_the_key_first() -> None:
    """Clients match record errors to records by index: never two for one record."""
    body = record(0, None) + record(1, b"k", ts_delta=5000) + record(2, None, ts_delta=9000)
    batch = make_batch(body, 3, max_ts=NOW + 9000)
    e = refused(
        batch, ErrorCode.INVALID_TIMESTAMP, require_key=True, min_timestamp=NOW, max_timestamp=NOW + 1
    )
    assert [i for i, _ in e.record_errors] == [0, 1, 2]  # one each, in order
    assert ["key" in m for _, m in e.record_errors] == [True, False, True]


def test_tombstones_have_keys() -> None:
    check(make_batch(record(0, b"k", None), 1), require_key=True)


# -- the cold path accepts what validation accepts ---------------------------------------------
@given(st.binary(min_size=0, max_size=120), st.integers(1, 4), st.sampled_from([rb.NONE, rb.LZ4, rb.ZSTD]))
@settings(max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
def test_whatever_validates_decodes(junk: bytes, count: int, codec: int) -> None:
    batch = make_batch(junk, count, codec=codec)
    try:
        check(batch)
    except InvalidBatch:
        return
    _, recs = rb.decode_batch(batch)
    assert [r.offset for r in recs] == list(range(count))


@given(st.integers(0, 200), st.integers(0, 255))
@settings(max_examples=300, deadline=None, database=None)
def test_any_single_byte_change_is_refused_or_still_decodes(where: int, value: int) -> None:
    body = bytearray(good_body(4))
    body[where % len(body)] = value
    batch = make_batch(bytes(body), 4)
    try:
        check(batch, require_key=True)
    except InvalidBatch as exc:
        assert exc.code == ErrorCode.INVALID_RECORD
        return
    assert len(rb.decode_batch(batch)[1]) == 4


# -- the inline fast path agrees with the full parse of every record --------------------------------
def _walk_slowly(b: bytes, count: int, lo: int, hi: int, require_key: bool) -> object:
    """What :func:`record_walk.walk` must answer, from :func:`record_walk.parse_record` alone."""
    walk = rb.record_walk
    flagged: list[tuple[int, int]] = []
    pos = 0
    try:
        for i in range(count):
            pos = walk.parse_record(b, pos, len(b), i, count, NOW, lo, hi, require_key, flagged)
        if pos != len(b):
            raise walk.MalformedRecords(f"{len(b) - pos} bytes after the batch's {count} records")
    except walk.MalformedRecords as exc:
        return str(exc)
    return flagged or None


def _walk_fast(b: bytes, count: int, lo: int, hi: int, require_key: bool) -> object:
    try:
        return rb.record_walk.walk(b, 0, len(b), count, NOW, lo, hi, require_key)
    except rb.record_walk.MalformedRecords as exc:
        return str(exc)


_keys = st.one_of(
    st.none(),
    st.binary(max_size=3),
    st.binary(min_size=60, max_size=70),
    st.sampled_from([b"k" * 9000, b"\xff\x7f" * 20_000, b"v" * 70_000]),  # three-byte lengths
)
_records = st.lists(
    st.tuples(
        _keys,
        _keys,
        st.sampled_from([0, 1, -1, 63, 64, -65, 8191, 8192, 10**6, -(10**9)]),
        st.lists(st.tuples(st.binary(max_size=3), st.one_of(st.none(), st.binary(max_size=3))), max_size=2),
    ),
    min_size=1,
    max_size=8,
)


@given(
    _records,
    st.integers(-1, 1),
    st.one_of(st.none(), st.tuples(st.integers(0, 10**6), st.integers(0, 255))),
    st.booleans(),
)
@settings(max_examples=400, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
def test_fast_path_agrees_with_the_full_parse(
    recs: list[Any], count_off: int, change: tuple[int, int] | None, require_key: bool
) -> None:
    body = bytearray(b"".join(record(i, k, v, ts_delta=d, headers=h) for i, (k, v, d, h) in enumerate(recs)))
    if change is not None:
        body[change[0] % len(body)] = change[1]
    count = max(1, len(recs) + count_off)
    lo, hi = NOW - 100, NOW + 8191
    assert _walk_fast(bytes(body), count, lo, hi, require_key) == _walk_slowly(
        bytes(body), count, lo, hi, require_key
    )


def test_offset_deltas_of_three_bytes() -> None:
    """Deltas >= 8192 take three bytes; 8192..16383 end in 0x01, which the inline two-byte
    decoding must not take for a complete varint."""
    body = b"".join(record(i, b"", b"") for i in range(10_000))
    check(make_batch(body, 10_000))
    bad = b"".join(record(i, b"", b"", offset_delta=i + 1 if i == 9000 else i) for i in range(10_000))
    refused(make_batch(bad, 10_000), match="record 9000: offset delta 9001, expected 9000")


@pytest.mark.parametrize("size", [8191, 8192, 16_384, 40_000, 70_000, 300_000])
@pytest.mark.parametrize("filler", [b"v", b"\xff", b"\xff\x7f", b"\x80"])
def test_large_keys_and_values_pass_whatever_they_hold(size: int, filler: bytes) -> None:
    """Three-byte lengths are mis-read by the inline path, whose reads may then run off the
    buffer: the record is parsed again in full, and the walk goes on after it."""
    blob = (filler * size)[:size]
    for body, n in (
        (record(0, b"k", blob), 1),
        (record(0, blob, b"v") + record(1, b"k", b"v"), 2),
        (record(0, b"k", b"v") + record(1, b"k", blob) + record(2, None, blob), 3),
    ):
        check(make_batch(body, n))
        check(make_batch(body, n, codec=rb.LZ4))


# -- schema validation (confluent.key/value.schema.validation) ---------------------------------
def framed(sid: int, body: bytes = b"avro") -> bytes:
    """Confluent's wire format: magic byte 0, the 4-byte big-endian schema id, the payload."""
    return b"\x00" + sid.to_bytes(4, "big") + body


def values_only(ids: set[int], subject: str = "t-value") -> rb.SchemaCheck:
    return rb.SchemaCheck(value_subject=subject, value_ids=ids)


@pytest.mark.parametrize("codec", [rb.NONE, *CODECS])
def test_values_with_registered_ids_pass_on_every_path(codec: int) -> None:
    """Inline (one- and two-byte lengths) and parse_record (headers, three-byte lengths)."""
    body = (
        record(0, b"k", framed(1))
        + record(1, None, framed(2, b"x" * 200))
        + record(2, b"k", framed(1), headers=[(b"h", b"v")])
        + record(3, b"k", framed(2, b"\xff" * 9000))
        + record(4, b"k", None)  # a tombstone carries no schema
    )
    check(make_batch(body, 5, codec=codec), schemas=values_only({1, 2}))


@pytest.mark.parametrize("codec", [rb.NONE, rb.ZSTD])
def test_values_without_a_registered_id_are_listed_one_by_one(codec: int) -> None:
    values = [
        framed(7),  # fine
        b'{"speed": 42}',  # plain JSON
        framed(8),  # an id not registered under the subject
        b"\x00\x00\x00",  # too short for an id
        b"\x01" + framed(7)[1:],  # another magic byte
        b"",  # empty
        framed(8, b"y" * 300),  # unknown, two-byte length
    ]
    body = b"".join(record(i, b"k", v) for i, v in enumerate(values))
    e = refused(make_batch(body, len(values), codec=codec), match="6 record", schemas=values_only({7}))
    got = dict(e.record_errors)
    assert sorted(got) == [1, 2, 3, 4, 5, 6]
    assert got[2] == "value schema id 8 is not registered under subject t-value"
    assert got[6] == got[2]
    for i in (1, 3, 4, 5):
        assert got[i].startswith("value has no schema id") and "subject t-value" in got[i]


def test_keys_are_checked_against_their_own_subject() -> None:
    check_ = rb.SchemaCheck(key_subject="t-key", key_ids={3}, value_subject="t-value", value_ids=None)
    body = record(0, framed(3), b"any") + record(1, None, b"any") + record(2, framed(4), b"any")
    e = refused(make_batch(body, 3), schemas=check_)
    assert e.record_errors == [(2, "key schema id 4 is not registered under subject t-key")]


def test_one_schema_error_per_record_the_key_first_and_a_note() -> None:
    both = rb.SchemaCheck("t-key", {1}, "t-value", {1}, note="why")
    e = refused(make_batch(record(0, b"plain", b"plain"), 1), schemas=both)
    assert len(e.record_errors) == 1 and e.record_errors[0][1].startswith("key has no schema id")
    assert e.record_errors[0][1].endswith("(why)")


def test_no_check_without_a_schema_check() -> None:
    check(make_batch(record(0, b"k", b"plain"), 1), schemas=None)
    check(make_batch(record(0, b"k", b"plain"), 1), schemas=rb.SchemaCheck())  # neither side


_schema_value = st.one_of(
    st.none(),
    st.binary(max_size=6),
    st.builds(framed, st.integers(0, 2**32 - 1), st.binary(max_size=3)),
    st.builds(framed, st.sampled_from([1, 2, 3]), st.sampled_from([b"", b"z" * 150, b"w" * 17000])),
)


@given(st.lists(st.tuples(_schema_value, st.booleans()), min_size=1, max_size=6))
@settings(max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
def test_the_walk_flags_exactly_the_values_without_a_registered_id(
    cases: list[tuple[bytes | None, bool]],
) -> None:
    ids = {1, 2}
    body = b"".join(
        record(i, b"k", v, headers=[(b"h", None)] if h else None) for i, (v, h) in enumerate(cases)
    )
    expected = [
        i
        for i, (v, _) in enumerate(cases)
        if v is not None and not (len(v) >= 5 and v[0] == 0 and int.from_bytes(v[1:5], "big") in ids)
    ]
    batch = make_batch(body, len(cases))
    if not expected:
        check(batch, schemas=values_only(ids))
        return
    e = refused(batch, schemas=values_only(ids))
    assert [i for i, _ in e.record_errors] == expected


def test_ids_sharing_bytes_with_the_last_one_found_are_looked_up() -> None:
    """The walk looks an id up only when it differs from the last one found: every byte counts."""
    sids = [1, 1, 1 + 2**8, 1, 1 + 2**16, 1 + 2**24, 1]
    body = b"".join(record(i, b"k", framed(sid)) for i, sid in enumerate(sids))
    e = refused(make_batch(body, len(sids)), schemas=values_only({1}))
    assert [i for i, _ in e.record_errors] == [2, 4, 5]
    keys = b"".join(record(i, framed(sid), b"v") for i, sid in enumerate(sids))
    e = refused(make_batch(keys, len(sids)), schemas=rb.SchemaCheck("t-key", {1}))
    assert [i for i, _ in e.record_errors] == [2, 4, 5]
