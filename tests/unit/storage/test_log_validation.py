"""Log: what a leader refuses before writing (Kafka's LogValidator on client appends), and what
reads of damaged stored batches answer (a precise StoreError, never a bare exception).

Check, then apply: every refused append leaves the files, the log end, the indexes and the
producer state exactly as they were. A follower's append keeps its lighter check (Kafka does
not re-validate the leader's records), so a damaged batch can only reach a log that way or from
an older broker; look-ups over it answer CorruptStoredBatch (CORRUPT_MESSAGE) naming it.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from framework.errors import (
    CorruptRecord,
    CorruptStoredBatch,
    InvalidRecord,
    InvalidTimestamp,
    StoreError,
)
from framework.protocol import records as rb
from framework.protocol.error_codes import ErrorCode
from framework.storage.log import Log
from tests.support.storage import NOW, append, batch, cfg, log_files, open_log, payload, read_records

CODECS = [rb.GZIP, rb.SNAPPY, rb.LZ4, rb.ZSTD]


def _state(lg: Log) -> tuple[object, ...]:
    """Everything a refused append must leave alone."""
    files = tuple((p.name, p.read_bytes()) for p in sorted(lg.dir.iterdir()) if p.is_file())
    seg = lg.active
    return (
        files,
        lg.log_end_offset,
        lg.high_watermark,
        seg.size,
        list(seg.index.offsets),
        list(seg.time_index.timestamps),
        seg.max_timestamp,
        {pid: (e.epoch, e.last_seq) for pid, e in lg.producer_state.producers.items()},
    )


def _refit(data: bytes, body: bytes, codec: int | None = None) -> bytes:
    """``data``'s header around another records section (compressed already), CRC recomputed."""
    out = bytearray(data[: rb.HEADER_SIZE]) + body
    struct.pack_into(">i", out, 8, len(out) - rb.LOG_OVERHEAD)
    if codec is not None:
        attrs = struct.unpack_from(">h", out, 21)[0]
        struct.pack_into(">h", out, 21, (attrs & ~rb.COMPRESSION_MASK) | codec)
    struct.pack_into(">I", out, 17, rb.crc32c(memoryview(out)[21:]))
    return bytes(out)


def _patch(data: bytes, fmt: str, at: int, value: int) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, at, value)
    struct.pack_into(">I", out, 17, rb.crc32c(memoryview(out)[21:]))
    return bytes(out)


def garbage_batch(codec: int, base_offset: int = 0, ts: int = NOW) -> bytes:
    """A CRC-valid batch of 3 records whose compressed body is junk (a broken producer)."""
    good = rb.build_batch([(b"k", b"v")] * 3, base_offset=base_offset, timestamp_ms=ts, compression=codec)
    return _refit(good, b"\x00garbage" * 8)


@pytest.fixture
def lg(tmp_path: Path) -> Log:
    log, _ = open_log(tmp_path / "events-0")
    append(log, batch(2))  # something already there that no refusal may touch
    yield log
    log.close()


# -- refused before anything is written --------------------------------------------------------
@pytest.mark.parametrize("codec", CODECS)
def test_garbage_compressed_body_is_refused_and_nothing_written(lg: Log, codec: int) -> None:
    before = _state(lg)
    with pytest.raises(InvalidRecord, match="cannot decompress") as ei:
        append(lg, garbage_batch(codec))
    assert ei.value.code == ErrorCode.INVALID_RECORD and not ei.value.retriable
    assert "events-0" in ei.value.message
    assert _state(lg) == before


@pytest.mark.parametrize("codec", CODECS)
def test_truncated_compressed_body_is_refused(lg: Log, codec: int) -> None:
    good = rb.build_batch([(b"k%d" % i, b"v" * 50) for i in range(100)], timestamp_ms=NOW, compression=codec)
    body = good[rb.HEADER_SIZE :]
    before = _state(lg)
    with pytest.raises(InvalidRecord):
        append(lg, _refit(good, body[: len(body) // 2]))
    assert _state(lg) == before


@pytest.mark.parametrize(
    ("field", "fmt", "at", "value", "match"),
    [
        ("records_count and last_offset_delta", ">i", 57, 3, "declares"),
        # each record: length, attributes, timestamp delta, offset delta, key (2), value (9),
        # headers: 16 bytes with its length
        ("offset delta of record 1", ">b", rb.HEADER_SIZE + 16 + 3, 0, "offset delta 0, expected 1"),
        ("length of record 0", ">b", rb.HEADER_SIZE, 2 * 16, "record 0"),
    ],
)
def test_each_malformed_field_is_refused(
    lg: Log, field: str, fmt: str, at: int, value: int, match: str
) -> None:
    data = rb.build_batch([(b"k", b"v" * 8), (b"k", b"w" * 8)], timestamp_ms=NOW)
    if field.startswith("records_count"):
        data = _patch(_patch(data, ">i", 57, value), ">i", 23, value - 1)
    else:
        data = _patch(data, fmt, at, value)
    before = _state(lg)
    with pytest.raises(InvalidRecord, match=match):
        append(lg, data)
    assert _state(lg) == before


def test_second_bad_batch_refuses_the_whole_request(lg: Log) -> None:
    before = _state(lg)
    with pytest.raises(InvalidRecord, match=r"batch 1 of 2") as ei:
        append(lg, batch(1), garbage_batch(rb.LZ4))
    assert ei.value.record_errors == []
    assert _state(lg) == before


def test_crc_damage_is_still_corrupt_message(lg: Log) -> None:
    data = bytearray(batch(1))
    data[-1] ^= 1
    with pytest.raises(CorruptRecord, match="CRC") as ei:
        append(lg, bytes(data))
    assert ei.value.code == ErrorCode.CORRUPT_MESSAGE


def test_keyless_records_on_a_compacted_topic_get_record_errors(tmp_path: Path) -> None:
    log, _ = open_log(tmp_path, cfg(compact=True, delete=False))
    mixed = rb.build_batch([(b"a", b"1"), (None, b"2"), (b"c", None), (None, b"4")], timestamp_ms=NOW)
    before = _state(log)
    with pytest.raises(InvalidRecord) as ei:
        append(log, mixed)
    assert ei.value.code == ErrorCode.INVALID_RECORD
    assert [i for i, _ in ei.value.record_errors] == [1, 3]
    assert "without a key" in ei.value.record_errors[0][1]
    assert _state(log) == before
    append(log, rb.build_batch([(b"a", b"1"), (b"c", None)], timestamp_ms=NOW))  # a tombstone has a key
    assert log.log_end_offset == 2


def test_record_timestamps_are_checked_one_by_one(tmp_path: Path) -> None:
    """The batch's max timestamp is in the window, an earlier record is not (Kafka checks each)."""
    log, _ = open_log(tmp_path, cfg(timestamp_before_max_ms=60_000, timestamp_after_max_ms=60_000))
    data = rb.build_batch([(b"k", b"old"), (b"k", b"now")], timestamps=[NOW - 61_000, NOW])
    before = _state(log)
    with pytest.raises(InvalidTimestamp) as ei:
        append(log, data)
    assert ei.value.code == ErrorCode.INVALID_TIMESTAMP
    assert [i for i, _ in ei.value.record_errors] == [0]
    assert str(NOW - 60_000) in ei.value.record_errors[0][1]
    assert _state(log) == before


def test_a_record_past_the_batch_max_timestamp_is_refused(lg: Log) -> None:
    data = rb.build_batch([(b"k", b"a"), (b"k", b"b")], timestamps=[NOW, NOW + 50])
    with pytest.raises(InvalidRecord, match="above the batch's max timestamp"):
        append(lg, _patch(data, ">q", 35, NOW + 49))


def test_producers_may_not_set_log_append_time(lg: Log) -> None:
    data = rb.build_batch([(b"k", b"v")], timestamp_ms=NOW, log_append_time=NOW)
    with pytest.raises(InvalidTimestamp, match="LogAppendTime"):
        append(lg, data)


def test_a_producer_id_needs_a_sequence(lg: Log) -> None:
    data = rb.build_batch([(b"k", b"v")], timestamp_ms=NOW, producer_id=7, producer_epoch=0)
    with pytest.raises(InvalidRecord, match="invalid sequence number -1"):
        append(lg, data)


def test_a_refused_batch_leaves_the_producer_sequence_alone(lg: Log) -> None:
    append(lg, batch(1, pid=9, epoch=0, seq=0))
    bad = _refit(batch(2, pid=9, epoch=0, seq=1), rb.compress(rb.LZ4, b"junk"), rb.LZ4)
    with pytest.raises(InvalidRecord):
        append(lg, bad)
    info = append(lg, batch(2, pid=9, epoch=0, seq=1))  # the same sequence, valid this time
    assert not info.duplicate and info.first_offset == 3


def test_follower_keeps_the_lighter_check(tmp_path: Path) -> None:
    """Kafka does not re-validate the leader's records on a replica: only framing and CRC."""
    log, _ = open_log(tmp_path)
    info = log.append_as_follower(memoryview(bytearray(garbage_batch(rb.ZSTD))), NOW)
    assert info.records == 3 and log.log_end_offset == 3


# -- reads of damaged stored data ----------------------------------------------------------------
def planted(tmp_path: Path, codec: int, after_ts: int = NOW + 20) -> Log:
    """A log with good batches around a CRC-valid batch with a junk body (offsets 2..4,
    timestamp NOW + 10), written as a replica would (no record walk)."""
    log, _ = open_log(tmp_path, cfg(index_interval_bytes=1))
    append(log, batch(2, ts=NOW))
    log.append_as_follower(memoryview(bytearray(garbage_batch(codec, base_offset=2, ts=NOW + 10))), NOW)
    log.append_as_follower(
        memoryview(bytearray(rb.build_batch([(b"k", b"after")], base_offset=5, timestamp_ms=after_ts))), NOW
    )
    log.high_watermark = log.log_end_offset
    return log


@pytest.mark.parametrize("codec", CODECS)
def test_timestamp_lookups_over_a_damaged_batch_name_it(tmp_path: Path, codec: int) -> None:
    log = planted(tmp_path, codec)
    assert log.offset_for_timestamp(NOW) == (0, NOW)  # before it: fine
    with pytest.raises(
        CorruptStoredBatch, match=r"batch at offset 2 \(position \d+\) cannot be decoded"
    ) as ei:
        log.offset_for_timestamp(NOW + 5)
    assert ei.value.code == ErrorCode.CORRUPT_MESSAGE
    assert log.active.path.name in ei.value.message
    assert log.max_timestamp_offset() == (5, NOW + 20)  # reads only the batch holding the max
    # fetch serves stored bytes as they are (as Kafka does): the consumer sees the damage
    data = log.read(2, 10_000, log.log_end_offset)
    h = rb.read_header(data)
    assert h.base_offset == 2 and h.records_count == 3


def test_max_timestamp_lookup_over_a_damaged_batch_names_it(tmp_path: Path) -> None:
    log = planted(tmp_path, rb.ZSTD, after_ts=NOW)  # the damaged batch holds the max timestamp
    with pytest.raises(CorruptStoredBatch, match="batch at offset 2") as ei:
        log.max_timestamp_offset()
    assert ei.value.code == ErrorCode.CORRUPT_MESSAGE


def test_a_bit_flip_in_a_stored_batch_is_named_by_its_crc(tmp_path: Path) -> None:
    log, _ = open_log(tmp_path, cfg(index_interval_bytes=1))
    append(log, batch(2, ts=NOW))
    append(log, batch(2, ts=NOW + 10))
    pos = log.active.position_of(2)
    path = log_files(tmp_path)[0]
    raw = bytearray(path.read_bytes())
    raw[pos + rb.HEADER_SIZE + 2] ^= 0x55
    path.write_bytes(bytes(raw))
    with pytest.raises(CorruptStoredBatch, match="CRC mismatch"):
        log.offset_for_timestamp(NOW + 5)


def test_a_batch_header_past_the_segment_end_is_named(tmp_path: Path) -> None:
    log, _ = open_log(tmp_path, cfg(index_interval_bytes=1))
    append(log, batch(2, ts=NOW))
    seg = log.active
    seg.size += 5  # the segment thinks it holds more than its last batch (damage, a bug)
    seg.max_timestamp = NOW + 100
    raw = bytearray(seg.path.read_bytes()) + struct.pack(">qi", 2, 10_000) + b"\x00" * 49
    seg.path.write_bytes(bytes(raw))
    with pytest.raises(StoreError) as ei:
        log.offset_for_timestamp(NOW + 50)
    assert ei.value.code in (ErrorCode.CORRUPT_MESSAGE, ErrorCode.KAFKA_STORAGE_ERROR)


def test_valid_logs_read_back_after_validation(tmp_path: Path) -> None:
    log, _ = open_log(tmp_path, cfg(segment_bytes=4096))
    for codec in [rb.NONE, *CODECS]:
        recs = [(b"k%d" % i, b"v%d" % i * 20) for i in range(40)]
        log.append_as_leader(payload(rb.build_batch(recs, timestamp_ms=NOW, compression=codec)), NOW)
        log.high_watermark = log.log_end_offset
    assert len(read_records(log)) == 200
    assert log.offset_for_timestamp(NOW) == (0, NOW)
