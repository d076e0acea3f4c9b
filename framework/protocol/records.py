"""Kafka record batches (magic v2): a header view for the hot path, records for cold paths.

Batch layout (61-byte header, then records; CRC-32C covers byte 21 to the end)::

    0  base_offset            int64     assigned by the broker (patched in place)
    8  batch_length           int32     bytes after this field
    12 partition_leader_epoch int32     outside the CRC, patched by the leader
    16 magic                  int8      2
    17 crc                    uint32    CRC-32C of bytes 21..end
    21 attributes             int16     0-2 compression, 3 timestamp type, 4 transactional,
                                        5 control, 6 delete horizon
    23 last_offset_delta      int32
    27 base_timestamp         int64
    35 max_timestamp          int64
    43 producer_id            int64
    51 producer_epoch         int16
    53 base_sequence          int32
    57 records_count          int32
    61 records...

Record layout (inside the records section, compressed as a whole when the batch is)::

    length          varint    bytes of the record after this field
    attributes      int8      unused in v2
    timestamp_delta varlong   record timestamp - base_timestamp
    offset_delta    varint    record offset - base_offset (0..n-1 in a produced batch)
    key_length      varint    -1 for a null key
    key             bytes
    value_length    varint    -1 for a null value (a tombstone)
    value           bytes
    header_count    varint
    headers         (key_length varint >= 0, key, value_length varint >= -1, value) each

(varints are zigzag-encoded: at most 5 bytes for an int32 field, 10 for the int64 delta.)

Produce path: :func:`validate_batches` checks framing, magic, CRC, the record count against
the offset range and the codec of every batch; :func:`check_records` then walks each batch's
records with offsets only, building no record object, as Kafka's LogValidator does: the
records section (decompressed into a reused per-thread buffer when compressed) is copied once
into ``bytes`` and walked by :mod:`framework.protocol.record_walk`, a C extension built by mypyc
at install time (the same module as plain Python where it could not be built). The broker
then patches the base offset (and the max timestamp for LogAppendTime topics) and stores the
bytes; fetch serves them unchanged. Record-level decoding (:func:`decode_batch`) serves the
cold paths: timestamp look-ups, compaction, the group coordinator's internal topic and tests.
Both decompress with the same code, so a batch produce accepted always decodes.

:class:`InvalidBatch` carries the Kafka error code that answers the failure: CORRUPT_MESSAGE
for framing and CRC damage, INVALID_RECORD for a CRC-valid batch whose records are malformed or
refused (Kafka's InvalidRecordException), INVALID_TIMESTAMP, UNSUPPORTED_FOR_MESSAGE_FORMAT.
"""

from __future__ import annotations

import gzip
import struct
import threading
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import cramjam
import crc32c as _crc32c

from framework.protocol import record_walk
from framework.protocol.error_codes import ErrorCode
from framework.protocol.fields import Buffer

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # base_offset + batch_length
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD  # 49
MAGIC_V2 = 2

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
CODECS_BY_NAME = {v: k for k, v in CODEC_NAMES.items()}

_HEADER = struct.Struct(">qiibIhiqqqhii")
_PREFIX = struct.Struct(">qi")  # base offset, batch length
_Q = struct.Struct(">q")
_I = struct.Struct(">I")
_H = struct.Struct(">h")

crc32c = _crc32c.crc32c


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Bytes of the whole batch, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_MASK)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence < 0:
            return -1
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


def read_header(buf: Buffer, pos: int = 0) -> BatchHeader:
    """Parse the 61-byte header at ``pos`` (raises struct.error when short)."""
    return BatchHeader._make(_HEADER.unpack_from(buf, pos))


def read_prefix(buf: Buffer, pos: int = 0) -> tuple[int, int]:
    """(base_offset, batch_length) at ``pos``: the 12 bytes every log entry starts with."""
    base, length = _PREFIX.unpack_from(buf, pos)
    return int(base), int(length)


class InvalidBatch(ValueError):
    """A batch failed validation; ``code`` is the Kafka error that answers it.

    ``corrupt=False`` (without a code) means UNSUPPORTED_FOR_MESSAGE_FORMAT; the default is
    CORRUPT_MESSAGE. ``record_errors`` lists (index of the record in its batch, why) for the
    records refused one by one (KIP-467: a key missing on a compacted topic, a timestamp out
    of range); the whole batch is refused with them.
    """

    def __init__(
        self,
        message: str,
        corrupt: bool = True,
        *,
        code: ErrorCode | None = None,
        record_errors: list[tuple[int, str]] | None = None,
    ) -> None:
        super().__init__(message)
        if code is None:
            code = ErrorCode.CORRUPT_MESSAGE if corrupt else ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT
        self.code = code
        self.record_errors = record_errors or []

    @property
    def corrupt(self) -> bool:
        return self.code == ErrorCode.CORRUPT_MESSAGE


def _invalid(message: str) -> InvalidBatch:
    """A CRC-valid batch whose records are malformed (Kafka's InvalidRecordException)."""
    return InvalidBatch(message, code=ErrorCode.INVALID_RECORD)


def compute_crc(batch: Buffer) -> int:
    mv = memoryview(batch)
    return int(crc32c(mv[21:]))


def validate_batches(buf: Buffer) -> list[BatchHeader]:
    """Check framing, magic, CRC, record count and codec of every batch in ``buf``; no side
    effects (the records themselves: :func:`check_records`).

    Raises :class:`InvalidBatch` on the first problem. Used by produce (whole request
    payload); log recovery has its own scan (``scan_valid_prefix``).
    """
    mv = memoryview(buf)
    n = len(mv)
    pos = 0
    out: list[BatchHeader] = []
    if n == 0:
        raise InvalidBatch("empty record set")
    while pos < n:
        if n - pos < HEADER_SIZE:
            raise InvalidBatch(f"truncated batch header at byte {pos}")
        h = BatchHeader._make(_HEADER.unpack_from(mv, pos))
        if h.magic != MAGIC_V2:
            raise InvalidBatch(f"unsupported record batch magic {h.magic} (only v2)", corrupt=False)
        end = pos + LOG_OVERHEAD + h.batch_length
        if h.batch_length < MIN_BATCH_LENGTH or end > n:
            raise InvalidBatch(f"batch length {h.batch_length} out of bounds at byte {pos}")
        if crc32c(mv[pos + 21 : end]) != h.crc:
            raise InvalidBatch(f"CRC mismatch in batch at byte {pos}")
        if h.records_count <= 0 or h.last_offset_delta != h.records_count - 1:
            raise _invalid(
                f"batch at byte {pos} declares {h.records_count} records but last offset delta "
                f"{h.last_offset_delta}"
            )
        if h.compression > ZSTD:
            raise InvalidBatch(f"unknown compression codec {h.compression}")
        out.append(h)
        pos = end
    return out


def scan_valid_prefix(
    buf: Buffer, expected_base: int | None = None
) -> tuple[int, list[tuple[int, BatchHeader]]]:
    """Length of the longest prefix of whole, CRC-valid batches with increasing offsets.

    Returns (valid_bytes, [(position, header), ...]). Recovery truncates the file there.
    """
    mv = memoryview(buf)
    n = len(mv)
    pos = 0
    out: list[tuple[int, BatchHeader]] = []
    nxt = expected_base
    while n - pos >= HEADER_SIZE:
        h = BatchHeader._make(_HEADER.unpack_from(mv, pos))
        end = pos + LOG_OVERHEAD + h.batch_length
        if (
            h.magic != MAGIC_V2
            or h.batch_length < MIN_BATCH_LENGTH
            or end > n
            or (nxt is not None and h.base_offset < nxt)
            or h.last_offset_delta < 0
            or crc32c(mv[pos + 21 : end]) != h.crc
        ):
            break
        out.append((pos, h))
        nxt = h.next_offset
        pos = end
    return pos, out


def set_base_offset(batch: bytearray | memoryview, pos: int, base_offset: int) -> None:
    _Q.pack_into(batch, pos, base_offset)


def set_leader_epoch(batch: bytearray | memoryview, pos: int, epoch: int) -> None:
    struct.pack_into(">i", batch, pos + 12, epoch)


def set_log_append_time(batch: bytearray | memoryview, pos: int, size: int, now_ms: int) -> None:
    """Mark the batch LogAppendTime, set its max timestamp and recompute the CRC."""
    mv = memoryview(batch)
    attrs = _H.unpack_from(mv, pos + 21)[0]
    _H.pack_into(mv, pos + 21, attrs | TIMESTAMP_TYPE_MASK)
    _Q.pack_into(mv, pos + 35, now_ms)
    _I.pack_into(mv, pos + 17, crc32c(mv[pos + 21 : pos + size]))


# ---------------------------------------------------------------------------------------
# records (cold paths)


@dataclass(slots=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


def _read_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
        if shift > 63:
            raise InvalidBatch("varint too long")
    return (result >> 1) ^ -(result & 1), pos


def _write_varint(out: bytearray, value: int) -> None:
    v = (value << 1) ^ (value >> 63)
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


_XERIAL = b"\x82SNAPPY\x00"
_DECOMPRESS_ERRORS = (
    OSError,
    EOFError,
    ValueError,
    struct.error,
    zlib.error,
    cramjam.DecompressionError,
)

# Produced batches are decompressed into a per-thread buffer reused from batch to batch (the
# broker's event loop is one thread); it grows to the largest records section seen, up to
# SCRATCH_KEEP_MAX (larger ones are decompressed into a buffer of their own).
SCRATCH_START = 1 << 20
SCRATCH_KEEP_MAX = 64 << 20
_scratch = threading.local()


def decompress(codec: int, data: Buffer) -> bytes:
    """Records section of a batch, decompressed; InvalidBatch if it cannot be."""
    try:
        return _decompress(codec, data)
    except InvalidBatch:
        raise
    except _DECOMPRESS_ERRORS as exc:
        raise _undecompressable(codec, exc) from None


def _undecompressable(codec: int, exc: BaseException) -> InvalidBatch:
    name = CODEC_NAMES.get(codec, codec)
    return _invalid(f"cannot decompress {name} records: {exc}")


def _decompress(codec: int, data: Buffer) -> bytes:
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        return gzip.decompress(data)
    if codec == SNAPPY:
        raw = bytes(data)
        if raw.startswith(_XERIAL):  # snappy-java framing used by the Java client
            out = bytearray()
            pos = 16
            while pos < len(raw):
                (n,) = struct.unpack_from(">i", raw, pos)
                pos += 4
                if n < 0 or pos + n > len(raw):
                    raise _invalid(f"snappy-java chunk length {n} out of bounds")
                out += bytes(cramjam.snappy.decompress_raw(raw[pos : pos + n]))
                pos += n
            return bytes(out)
        return bytes(cramjam.snappy.decompress_raw(raw))
    if codec == LZ4:
        return bytes(cramjam.lz4.decompress(data))
    if codec == ZSTD:
        return bytes(cramjam.zstd.decompress(data))
    raise InvalidBatch(f"unknown compression codec {codec}")


def _scratch_buffer(size: int) -> bytearray:
    """This thread's decompression buffer, at least ``size`` bytes (grown, never shrunk)."""
    buf: bytearray | None = getattr(_scratch, "buf", None)
    if buf is None or len(buf) < size:
        buf = bytearray(max(size, SCRATCH_START))
        _scratch.buf = buf
    return buf


def _inflate(codec: int, data: memoryview) -> tuple[Buffer, int]:
    """(buffer, n): the decompressed records section is ``buffer[:n]``.

    lz4, zstd and raw snappy go into this thread's reused buffer; the same library functions
    as :func:`decompress`, so what validates here decodes there. When the buffer is too small
    (or the data is damaged) the allocating :func:`decompress` decides, and the buffer grows
    for the next batch.
    """
    try:
        if codec in (LZ4, ZSTD):
            buf = _scratch_buffer(0)
            mod = cramjam.lz4 if codec == LZ4 else cramjam.zstd
            try:
                return buf, int(mod.decompress_into(data, buf))
            except cramjam.DecompressionError:
                pass  # too small for it, or damaged: decompress() below tells which
        elif codec == SNAPPY and data[:8] != _XERIAL:
            n = int(cramjam.snappy.decompress_raw_len(data))
            if n <= SCRATCH_KEEP_MAX:
                buf = _scratch_buffer(n)
                return buf, int(cramjam.snappy.decompress_raw_into(data, buf))
    except _DECOMPRESS_ERRORS as exc:
        raise _undecompressable(codec, exc) from None
    out = decompress(codec, data)
    if codec != GZIP and len(out) <= SCRATCH_KEEP_MAX:
        _scratch_buffer(len(out) + (len(out) >> 2))
    return out, len(out)


# ---------------------------------------------------------------------------------------
# record check (produce validation): offsets only, no record objects (the walk: record_walk)

LONG_MIN = -(2**63)
LONG_MAX = 2**63 - 1
NO_TIMESTAMP = -1


@dataclass(frozen=True, slots=True)
class SchemaCheck:
    """Schema validation of a batch (Confluent's ``confluent.key/value.schema.validation``).

    A non-null key (value) must start with Confluent's framing, magic byte 0 and a 4-byte
    big-endian schema id, of an id in ``key_ids`` (``value_ids``): the ids registered under
    ``key_subject`` (``value_subject``). None: that side is not checked. The sets are read,
    never changed, by the check (their owner replaces or grows them on the event loop).
    ``note`` ends each refusal's message (e.g. why the ids may be missing).
    """

    key_subject: str = ""
    key_ids: set[int] | None = None
    value_subject: str = ""
    value_ids: set[int] | None = None
    note: str = ""


def check_records(
    buf: Buffer,
    pos: int,
    h: BatchHeader,
    *,
    require_key: bool = False,
    create_time: bool = True,
    min_timestamp: int = LONG_MIN,
    max_timestamp: int = LONG_MAX,
    schemas: SchemaCheck | None = None,
) -> None:
    """Check the records of the batch at ``pos`` in ``buf`` (header already validated).

    Structure, as Kafka's ``DefaultRecord.readFrom`` and ``LogValidator``: exactly
    ``records_count`` records filling the records section to its last byte, offset deltas
    0..n-1 in order, every length and varint within its record and of legal size. With
    ``create_time`` each record's timestamp (base + delta) must not exceed the header's max
    timestamp (INVALID_RECORD otherwise) and must lie in [``min_timestamp``,
    ``max_timestamp``] unless it is -1 (INVALID_TIMESTAMP, per record). ``require_key``
    (compacted topics) refuses records without a key (INVALID_RECORD, per record); so does
    ``schemas`` records whose key or value lacks a schema id it lists (see :class:`SchemaCheck`).

    Raises :class:`InvalidBatch` with the Kafka code; records refused one by one are listed
    in ``record_errors`` (every one of the batch, as Kafka does). A compressed batch is
    decompressed into a reused buffer; the records section is then copied into ``bytes`` (a
    memcpy, ~0.01 µs per record), which the compiled walk indexes without a call.
    """
    count = h.records_count
    start = pos + HEADER_SIZE
    end = pos + h.size
    data: bytes
    if h.compression == NONE:
        data = bytes(memoryview(buf)[start:end])
    else:
        out, n = _inflate(h.compression, memoryview(buf)[start:end])
        data = out if isinstance(out, bytes) and len(out) == n else bytes(memoryview(out)[:n])
    hi = h.max_timestamp if create_time else LONG_MAX
    lo = LONG_MIN
    if create_time:
        hi = min(hi, max_timestamp)
        lo = min_timestamp
    key_ids = value_ids = None
    if schemas is not None:
        key_ids, value_ids = schemas.key_ids, schemas.value_ids
    try:  # record_walk looked up per call: the tests run every case on both of its builds
        flagged = record_walk.walk(
            data, 0, len(data), count, h.base_timestamp, lo, hi, require_key, key_ids, value_ids
        )
    except record_walk.MalformedRecords as exc:
        raise _invalid(str(exc)) from None
    if flagged:
        _refuse(flagged, h, min_timestamp, max_timestamp, schemas)


def _schema_error(flag: int, schemas: SchemaCheck | None) -> str | None:
    """The message of a schema validation flag of the walk; None: the flag is no such flag."""
    if record_walk.KEY_SCHEMA <= flag < record_walk.KEY_SCHEMA + record_walk.SCHEMA_ID_SPAN:
        what, subject, sid = "key", schemas.key_subject if schemas else "", flag - record_walk.KEY_SCHEMA - 1
    elif record_walk.VALUE_SCHEMA <= flag < record_walk.VALUE_SCHEMA + record_walk.SCHEMA_ID_SPAN:
        what, subject = "value", schemas.value_subject if schemas else ""
        sid = flag - record_walk.VALUE_SCHEMA - 1
    else:
        return None
    note = f" ({schemas.note})" if schemas is not None and schemas.note else ""
    if sid < 0:
        return (
            f"{what} has no schema id (schema validation is on: it must start with magic byte 0 "
            f"and the 4-byte id of a schema registered under subject {subject}){note}"
        )
    return f"{what} schema id {sid} is not registered under subject {subject}{note}"


def _refuse(
    flagged: list[tuple[int, int]], h: BatchHeader, lo: int, hi: int, schemas: SchemaCheck | None = None
) -> None:
    """Raise for the records the walk flagged (Kafka's validateKey / validateTimestamp, and
    Confluent's schema validation)."""
    errors: list[tuple[int, str]] = []
    bad_ts = False
    for i, ts in flagged:
        if ts == record_walk.NO_KEY:
            errors.append((i, "compacted topic cannot accept a record without a key"))
        elif errors and errors[-1][0] == i:
            continue  # one error per record, the key's first (clients match them by index)
        elif ts < LONG_MIN and (schema_error := _schema_error(ts, schemas)) is not None:
            errors.append((i, schema_error))
        elif ts > h.max_timestamp:
            raise _invalid(f"record {i}: timestamp {ts} is above the batch's max timestamp {h.max_timestamp}")
        elif ts != NO_TIMESTAMP and (ts < lo or ts > hi):
            bad_ts = True
            errors.append((i, f"timestamp {ts} is out of range: it should be within [{lo}, {hi}]"))
    if not errors:
        return
    first = "; ".join(f"record {i}: {m}" for i, m in errors[:3])
    summary = f"{len(errors)} record(s) refused (the first ones: {first})"
    code = ErrorCode.INVALID_TIMESTAMP if bad_ts else ErrorCode.INVALID_RECORD
    raise InvalidBatch(summary, code=code, record_errors=errors)


def compress(codec: int, data: bytes) -> bytes:
    if codec == NONE:
        return data
    if codec == GZIP:
        return gzip.compress(data, compresslevel=1)
    if codec == SNAPPY:
        return bytes(cramjam.snappy.compress_raw(data))
    if codec == LZ4:
        return bytes(cramjam.lz4.compress(data))
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise ValueError(f"unknown compression codec {codec}")


def decode_batch(batch: Buffer) -> tuple[BatchHeader, list[Record]]:
    """Decode every record of one batch (decompressing if needed)."""
    try:
        h = read_header(batch)
    except struct.error:
        raise InvalidBatch("truncated batch header") from None
    mv = memoryview(batch)[: h.size]
    body = decompress(h.compression, mv[HEADER_SIZE:])
    try:
        return h, _decode_records(h, body)
    except IndexError:
        raise InvalidBatch("record runs past the end of the batch") from None


def _decode_records(h: BatchHeader, body: bytes) -> list[Record]:
    recs: list[Record] = []
    pos = 0
    log_append = h.is_log_append_time
    for _ in range(h.records_count):
        length, pos = _read_varint(body, pos)
        end = pos + length
        pos += 1  # attributes
        ts_delta, pos = _read_varint(body, pos)
        off_delta, pos = _read_varint(body, pos)
        klen, pos = _read_varint(body, pos)
        key = None
        if klen >= 0:
            key = body[pos : pos + klen]
            pos += klen
        vlen, pos = _read_varint(body, pos)
        value = None
        if vlen >= 0:
            value = body[pos : pos + vlen]
            pos += vlen
        nh, pos = _read_varint(body, pos)
        headers: list[tuple[str, bytes | None]] = []
        for _ in range(nh):
            hk, pos = _read_varint(body, pos)
            if hk < 0:  # a negative length would move pos backwards (endless loop)
                raise InvalidBatch("record header key length is negative")
            hkey = body[pos : pos + hk].decode("utf-8", "replace")
            pos += hk
            hv, pos = _read_varint(body, pos)
            hval = None
            if hv >= 0:
                hval = body[pos : pos + hv]
                pos += hv
            headers.append((hkey, hval))
        if pos != end:
            raise InvalidBatch("record length does not match its fields")
        ts = h.max_timestamp if log_append else h.base_timestamp + ts_delta
        recs.append(Record(h.base_offset + off_delta, ts, key, value, headers))
    return recs


def iter_batches(buf: Buffer) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of each whole batch in ``buf``; stops at a partial tail."""
    mv = memoryview(buf)
    n = len(mv)
    pos = 0
    while n - pos >= HEADER_SIZE:
        h = BatchHeader._make(_HEADER.unpack_from(mv, pos))
        if h.batch_length < MIN_BATCH_LENGTH or pos + h.size > n:
            return
        yield pos, h
        pos += h.size


Header = tuple[str, bytes | None]
RecordTuple = tuple[bytes | None, bytes | None] | tuple[bytes | None, bytes | None, list[Header]]


def _write_bytes(out: bytearray, data: bytes | None) -> None:
    """A varint length (-1 for null) and the bytes."""
    if data is None:
        _write_varint(out, -1)
    else:
        _write_varint(out, len(data))
        out += data


def _encode_record(rec: RecordTuple, timestamp_delta: int, offset_delta: int) -> bytearray:
    """One v2 record without its length prefix."""
    hdrs: list[Header] = rec[2] if len(rec) == 3 else []
    r = bytearray(b"\x00")  # attributes
    _write_varint(r, timestamp_delta)
    _write_varint(r, offset_delta)
    _write_bytes(r, rec[0])
    _write_bytes(r, rec[1])
    _write_varint(r, len(hdrs))
    for hk, hv in hdrs:
        _write_bytes(r, hk.encode())
        _write_bytes(r, hv)
    return r


def build_batch(
    records: Sequence[RecordTuple],
    *,
    base_offset: int = 0,
    timestamp_ms: int = 0,
    timestamps: list[int] | None = None,
    compression: int = NONE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    leader_epoch: int = -1,
    control: bool = False,
    transactional: bool = False,
    offset_deltas: Sequence[int] | None = None,
    last_offset_delta: int | None = None,
    log_append_time: int | None = None,
) -> bytes:
    """Encode one v2 batch (used by the coordinator, the cleaner, tools and tests).

    ``offset_deltas`` gives records offsets relative to ``base_offset`` with gaps (a
    compacted batch keeps its records' original offsets); by default they are 0..n-1.
    ``last_offset_delta`` overrides the header's last offset delta (default: the last
    record's), so a compacted batch keeps its original offset range and with it the
    producer's last sequence (Kafka's ``MemoryRecordsBuilder.overrideLastOffset``).
    ``log_append_time`` marks the batch LogAppendTime with that max timestamp (default:
    CreateTime, max timestamp = the records' largest).
    """
    body = bytearray()
    ts_list = timestamps or [timestamp_ms] * len(records)
    base_ts = min(ts_list) if ts_list else timestamp_ms
    deltas = list(offset_deltas) if offset_deltas is not None else list(range(len(records)))
    last_delta = deltas[-1] if deltas else -1
    if last_offset_delta is not None:
        if last_offset_delta < last_delta:
            raise ValueError(f"last offset delta {last_offset_delta} is below the last record's {last_delta}")
        last_delta = last_offset_delta
    for i, rec in enumerate(records):
        r = _encode_record(rec, ts_list[i] - base_ts, deltas[i])
        _write_varint(body, len(r))
        body += r
    payload = compress(compression, bytes(body))
    attrs = compression
    if transactional:
        attrs |= TRANSACTIONAL_MASK
    if control:
        attrs |= CONTROL_MASK
    max_ts = max(ts_list) if ts_list else timestamp_ms
    if log_append_time is not None:
        attrs |= TIMESTAMP_TYPE_MASK
        max_ts = log_append_time
    batch_length = HEADER_SIZE - LOG_OVERHEAD + len(payload)
    out = bytearray(
        _HEADER.pack(
            base_offset,
            batch_length,
            leader_epoch,
            MAGIC_V2,
            0,
            attrs,
            last_delta,
            base_ts,
            max_ts,
            producer_id,
            producer_epoch,
            base_sequence,
            len(records),
        )
    )
    out += payload
    _I.pack_into(out, 17, crc32c(memoryview(out)[21:]))
    return bytes(out)
