"""The produce walk over a batch's records (Kafka's LogValidator), compiled by mypyc when built.

``setup.py`` builds this module as a C extension with mypyc (``mypycify``) at install time; the
extension (``record_walk.cpython-*.so`` next to this file) is imported in its place. Without
it (no C compiler, no mypy at build time, or ``SFTRAFFIC_PURE_PYTHON=1``) this very file runs
as plain Python, with the same checks and the same messages, ~25x slower (0.7 µs per record
instead of 0.03; ``load/bench_validation.py``). :data:`COMPILED` tells which one runs; the
broker logs it once at start.

Kept compilable: plain typed functions over ``bytes`` (mypyc indexes ``bytes`` without a call;
a ``memoryview`` or ``bytearray`` would go through the generic item protocol), ints and a list;
no imports of the store, no module state a test could patch. :func:`records.check_records` hands
over the records section as ``bytes`` (copied once from the request or the decompression
buffer) and turns :class:`MalformedRecords` into ``InvalidBatch(INVALID_RECORD)``.

Record layout: see :mod:`framework.protocol.records`. Varints are zigzag-encoded. Functions
without state: safe from any thread.
"""

from __future__ import annotations

from typing import Final

# True when this module runs as the mypyc-built extension (``__file__`` is the .so)
COMPILED: Final = not __file__.endswith(".py")

LONG_MIN: Final = -(2**63)
# a flag in walk()'s list of (index, timestamp): the record has no key (never a timestamp)
NO_KEY: Final = LONG_MIN - 1
# the inline decoding reads at most two varint bytes: its codes stay below this
_INLINE_CODE_LIMIT: Final = 1 << 15
# flags in walk()'s list for a key (value) refused by schema validation: the flag is
# KEY_SCHEMA (VALUE_SCHEMA) + 1 + the schema id it carries, or the base alone when it carries
# none (not in Confluent's wire format: magic byte 0, 4-byte big-endian id). Both lie below
# any timestamp a record can hold (base timestamp + delta >= -2**64).
KEY_SCHEMA: Final = -(2**67)
VALUE_SCHEMA: Final = -(2**68)
SCHEMA_ID_SPAN: Final = 2**33  # flags of one kind lie in [base, base + SCHEMA_ID_SPAN)


class MalformedRecords(ValueError):
    """The records section is malformed (the caller answers INVALID_RECORD with the message)."""


def walk(  # noqa: PLR0915 (the produce hot loop, inline on purpose: a call costs more than a field)
    b: bytes,
    pos: int,
    end: int,
    count: int,
    base_ts: int,
    lo: int,
    hi: int,
    require_key: bool,
    key_ids: set[int] | None = None,
    value_ids: set[int] | None = None,
) -> list[tuple[int, int]] | None:
    """Walk ``count`` records in ``b[pos:end]``; raise :class:`MalformedRecords` on malformed
    structure.

    Returns the (index, timestamp) of records whose timestamp is outside [lo, hi], the
    (index, :data:`NO_KEY`) of keyless ones when ``require_key``, and with ``key_ids``
    (``value_ids``) the (index, :data:`KEY_SCHEMA` (:data:`VALUE_SCHEMA`) + ...) of records
    whose non-null key (value) does not start with a schema id of that set; or None:
    classified by the caller. The schema check reads five bytes where the walk already is (no
    decoding) and looks the id up in the set.

    The loop takes records of the common shape inline (one- or two-byte varints, no headers, a
    key unless one is required, a timestamp in range) and hands any other record to
    :func:`parse_record`, which parses it in full, with the precise error when it is malformed.
    A two-byte varint whose second byte continues decodes to >= 0x4000 here, which sends its
    record to :func:`parse_record` too; a key or value length of three bytes or more is mis-read
    inline, so its record fails the exact-fit check (or reads past the buffer) and goes to
    :func:`parse_record` as well.
    """
    flagged: list[tuple[int, int]] = []
    # the largest zigzag-encoded timestamp delta whose timestamp is surely within [lo, hi]
    # (even codes are deltas 0, 1, 2 ..., odd ones -1, -2 ...): larger ones go to parse_record.
    # Capped above what two inline bytes can hold, so that it stays a small int (compiled: an
    # unboxed compare) whatever lo and hi are.
    ts_code_max = min(2 * (hi - base_ts), 2 * (base_ts - lo) - 1, _INLINE_CODE_LIMIT)
    i = 0
    start = pos
    first = 0
    # the bytes of the last schema id found in the set, key's and value's (-1: none yet)
    ks1 = ks2 = ks3 = ks4 = vs1 = vs2 = vs3 = vs4 = -1
    while True:
        try:
            for i in range(first, count):
                start = pos
                x = b[pos]  # record length
                if x < 0x80:
                    pos += 1
                else:
                    x = (x & 0x7F) | (b[pos + 1] << 7)
                    pos += 2
                rend = pos + (x >> 1)
                if x & 1 or x >= 0x4000 or rend > end:
                    pos = parse_record(
                        b, start, end, i, count, base_ts, lo, hi, require_key, flagged, key_ids, value_ids
                    )
                    continue
                x = b[pos + 1]  # after the attributes byte: the timestamp delta
                if x < 0x80:
                    pos += 2
                else:
                    x = (x & 0x7F) | (b[pos + 2] << 7)
                    pos += 3
                if x > ts_code_max:
                    pos = parse_record(
                        b, start, end, i, count, base_ts, lo, hi, require_key, flagged, key_ids, value_ids
                    )
                    continue
                x = b[pos]  # offset delta
                if x < 0x80:
                    pos += 1
                else:
                    x = (x & 0x7F) | (b[pos + 1] << 7)
                    pos += 2
                if x != i << 1:
                    pos = parse_record(
                        b, start, end, i, count, base_ts, lo, hi, require_key, flagged, key_ids, value_ids
                    )
                    continue
                x = b[pos]  # key length (1: null)
                if x < 0x80:
                    pos += 1
                else:
                    x = (x & 0x7F) | (b[pos + 1] << 7)
                    pos += 2
                kpos = pos
                pos += x >> 1
                if x & 1 and (x != 1 or require_key):
                    pos = parse_record(
                        b, start, end, i, count, base_ts, lo, hi, require_key, flagged, key_ids, value_ids
                    )
                    continue
                klen = x
                x = b[pos]  # value length (1: null)
                if x < 0x80:
                    pos += 1
                else:
                    x = (x & 0x7F) | (b[pos + 1] << 7)
                    pos += 2
                vpos = pos
                pos += x >> 1
                if (x & 1 and x != 1) or b[pos] != 0 or pos + 1 != rend:
                    pos = parse_record(
                        b, start, end, i, count, base_ts, lo, hi, require_key, flagged, key_ids, value_ids
                    )
                    continue
                if key_ids is not None and klen != 1:
                    # five bytes or more, magic byte 0, then the id: compared byte by byte with
                    # the last one found in the set (a batch's records mostly share one id), and
                    # looked up only when it differs
                    if klen < 10 or b[kpos] != 0:
                        flagged.append((i, KEY_SCHEMA))
                    elif b[kpos + 4] != ks4 or b[kpos + 3] != ks3 or b[kpos + 2] != ks2 or b[kpos + 1] != ks1:
                        sid = (b[kpos + 1] << 24) | (b[kpos + 2] << 16) | (b[kpos + 3] << 8) | b[kpos + 4]
                        if sid in key_ids:
                            ks1, ks2, ks3, ks4 = b[kpos + 1], b[kpos + 2], b[kpos + 3], b[kpos + 4]
                        else:
                            flagged.append((i, KEY_SCHEMA + 1 + sid))
                if value_ids is not None and x != 1:
                    if x < 10 or b[vpos] != 0:
                        flagged.append((i, VALUE_SCHEMA))
                    elif b[vpos + 4] != vs4 or b[vpos + 3] != vs3 or b[vpos + 2] != vs2 or b[vpos + 1] != vs1:
                        sid = (b[vpos + 1] << 24) | (b[vpos + 2] << 16) | (b[vpos + 3] << 8) | b[vpos + 4]
                        if sid in value_ids:
                            vs1, vs2, vs3, vs4 = b[vpos + 1], b[vpos + 2], b[vpos + 3], b[vpos + 4]
                        else:
                            flagged.append((i, VALUE_SCHEMA + 1 + sid))
                pos = rend
            break
        except IndexError:  # free until raised (CPython 3.11+; compiled: a branch)
            # a read past the buffer: malformed, or a valid record whose three-byte varint the
            # inline decoding took for two bytes; parse_record decides and the walk goes on after it
            pos = parse_record(
                b, start, end, i, count, base_ts, lo, hi, require_key, flagged, key_ids, value_ids
            )
            first = i + 1
    if pos != end:
        raise MalformedRecords(f"{end - pos} bytes after the batch's {count} records")
    return flagged or None


def parse_record(
    b: bytes,
    pos: int,
    end: int,
    i: int,
    count: int,
    base_ts: int,
    lo: int,
    hi: int,
    require_key: bool,
    flagged: list[tuple[int, int]],
    key_ids: set[int] | None = None,
    value_ids: set[int] | None = None,
) -> int:
    """Parse record ``i`` at ``pos`` in full (any varint size, headers); the position after it.

    Raises the precise :class:`MalformedRecords` for malformed structure; appends to
    ``flagged`` a keyless record when ``require_key``, a key or value without a schema id of
    ``key_ids`` / ``value_ids``, and a timestamp outside [lo, hi] (see :func:`walk`).
    """
    if pos >= end:
        raise MalformedRecords(f"batch declares {count} records but holds {i}")
    try:
        length, pos = _varint(b, pos, 5)
        if length < 0:
            raise MalformedRecords(f"record {i}: negative length {length}")
        rend = pos + length
        if rend > end:
            raise MalformedRecords(f"record {i}: length {length} runs past the end of the batch")
        delta, pos = _varint(b, pos + 1, 10)  # after the attributes byte
        ts = base_ts + delta
        delta, pos = _varint(b, pos, 5)
        if delta != i:
            raise MalformedRecords(f"record {i}: offset delta {delta}, expected {i}")
        n, pos = _varint(b, pos, 5)
        if n < -1:
            raise MalformedRecords(f"record {i}: negative key length {n}")
        if n == -1 and require_key:
            flagged.append((i, NO_KEY))
        kpos, klen = pos, n
        pos += max(n, 0)
        n, pos = _varint(b, pos, 5)
        if n < -1:
            raise MalformedRecords(f"record {i}: negative value length {n}")
        vpos = pos
        pos += max(n, 0)
        pos = _skip_headers(b, pos, rend, i)
    except IndexError:
        raise MalformedRecords(f"record {i}: runs past the end of the batch") from None
    if pos != rend:
        took = length + pos - rend
        raise MalformedRecords(f"record {i}: fields take {took} bytes, its length says {length}")
    if key_ids is not None and klen >= 0:
        check_schema(b, kpos, klen, key_ids, i, KEY_SCHEMA, flagged)
    if value_ids is not None and n >= 0:
        check_schema(b, vpos, n, value_ids, i, VALUE_SCHEMA, flagged)
    if ts < lo or ts > hi:
        flagged.append((i, ts))
    return pos


def check_schema(
    b: bytes, pos: int, length: int, ids: set[int], i: int, base: int, flagged: list[tuple[int, int]]
) -> None:
    """Flag record ``i`` unless the ``length`` bytes at ``pos`` (within ``b``) begin with
    Confluent's framing (magic byte 0, then a 4-byte big-endian schema id) of an id in ``ids``."""
    if length < 5 or b[pos] != 0:
        flagged.append((i, base))
        return
    sid = (b[pos + 1] << 24) | (b[pos + 2] << 16) | (b[pos + 3] << 8) | b[pos + 4]
    if sid not in ids:
        flagged.append((i, base + 1 + sid))


def _uvarint(b: bytes, pos: int, max_bytes: int) -> tuple[int, int]:
    """The raw (still zigzag-encoded) varint of at most ``max_bytes`` bytes at ``pos``."""
    result = 0
    shift = 0
    stop = pos + max_bytes
    while pos < stop:
        x = b[pos]
        pos += 1
        result |= (x & 0x7F) << shift
        if x < 0x80:
            return result, pos
        shift += 7
    raise MalformedRecords(f"varint longer than {max_bytes} bytes")


def _varint(b: bytes, pos: int, max_bytes: int) -> tuple[int, int]:
    """A zigzag varint of at most ``max_bytes`` bytes at ``pos``: (value, position after)."""
    x, pos = _uvarint(b, pos, max_bytes)
    return (x >> 1) ^ -(x & 1), pos


def _skip_headers(b: bytes, pos: int, rend: int, i: int) -> int:
    n, pos = _varint(b, pos, 5)
    if n < 0 or (n and n > (rend - pos) >> 1):  # each header takes two bytes at least
        raise MalformedRecords(f"record {i}: header count {n} does not fit the record")
    for _ in range(n):
        klen, pos = _varint(b, pos, 5)
        if klen < 0:
            raise MalformedRecords(f"record {i}: negative header key length {klen}")
        pos += klen
        vlen, pos = _varint(b, pos, 5)
        if vlen < -1:
            raise MalformedRecords(f"record {i}: negative header value length {vlen}")
        if vlen > 0:
            pos += vlen
        if pos > rend:
            raise MalformedRecords(f"record {i}: header runs past the end of the record")
    return pos
