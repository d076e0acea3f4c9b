"""Helpers shared by the storage unit tests: build batches, append them, read the log back."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from framework.protocol import records as rb
from framework.storage.log import AppendInfo, LoadReport, Log
from framework.storage.log_config import LogConfig

TOPIC = "events"
PARTITION = 0
NOW = 1_700_000_000_000  # a fixed "now"; every test passes time explicitly

# small segments and a dense index so a handful of batches exercise rolls and look-ups
SMALL = LogConfig(segment_bytes=1024, index_interval_bytes=100)


def batch(
    n: int = 1,
    *,
    ts: int = NOW,
    timestamps: list[int] | None = None,
    value: bytes = b"value",
    key: bytes | None = b"key",
    tag: int | None = None,
    pid: int = -1,
    epoch: int = -1,
    seq: int = -1,
) -> bytes:
    """One v2 batch of ``n`` records; ``tag`` makes the values unique (v<tag>-<i>)."""
    recs = []
    for i in range(n):
        v = value if tag is None else f"v{tag}-{i}".encode() + value
        recs.append((key, v))
    return rb.build_batch(
        recs,
        timestamp_ms=ts,
        timestamps=timestamps,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
    )


def payload(*batches: bytes) -> memoryview:
    """A writable view, as the server hands a request frame to the log."""
    return memoryview(bytearray(b"".join(batches)))


def append(lg: Log, *batches: bytes, now: int = NOW) -> AppendInfo:
    info = lg.append_as_leader(payload(*batches), now)
    lg.high_watermark = lg.log_end_offset  # one replica: the partition does this
    return info


def open_log(
    d: Path,
    config: LogConfig = SMALL,
    *,
    clean: bool = False,
    recovery_point: int = 0,
    log_start_offset: int = 0,
) -> tuple[Log, LoadReport]:
    return Log.open(
        d,
        TOPIC,
        PARTITION,
        config,
        recovery_point=recovery_point,
        log_start_offset=log_start_offset,
        clean_shutdown=clean,
    )


def cfg(**kw: object) -> LogConfig:
    return replace(SMALL, **kw)  # type: ignore[arg-type]


def read_records(
    lg: Log, start: int | None = None, upper: int | None = None, max_bytes: int = 300
) -> list[rb.Record]:
    """Every record from ``start`` (default: log start) below ``upper`` (default: log end).

    Reads in small slices, as a consumer would, decoding whole batches and dropping a partial
    trailing one; also checks every served batch still passes CRC validation.
    """
    off = lg.log_start_offset if start is None else start
    upper = lg.log_end_offset if upper is None else upper
    out: list[rb.Record] = []
    while off < upper:
        data = lg.read(off, max_bytes, upper)
        if not data:
            break
        progressed = False
        for pos, h in rb.iter_batches(data):
            rb.validate_batches(memoryview(data)[pos : pos + h.size])
            _, recs = rb.decode_batch(memoryview(data)[pos : pos + h.size])
            out.extend(r for r in recs if r.offset >= off)
            off = h.next_offset
            progressed = True
        assert progressed, "a read with min_one must return at least one whole batch"
    return out


def offsets(records: list[rb.Record]) -> list[int]:
    return [r.offset for r in records]


def values(records: list[rb.Record]) -> list[bytes | None]:
    return [r.value for r in records]


def headers_of(seg_path: Path) -> list[rb.BatchHeader]:
    """Batch headers of a .log file read straight from disk."""
    data = seg_path.read_bytes()
    return [h for _, h in rb.iter_batches(data)]


def log_files(d: Path, suffix: str = ".log") -> list[Path]:
    return sorted(d.glob(f"*{suffix}"))


def truncate_file(path: Path, size: int) -> None:
    os.truncate(path, size)


def flip_byte(path: Path, position: int) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= 0xFF
    path.write_bytes(bytes(data))
