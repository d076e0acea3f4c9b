"""A bounded, crash-safe FIFO on disk: where a gateway parks messages while the store is down.

Files in the queue directory::

    q-<000000000001>.log   records appended in order; a new file every ``file_bytes``
    cursor                 "<file number> <byte position>" of the first record not yet delivered

Record: ``u32 length | u32 crc32c(payload) | payload`` with payload
``u16 topic length | topic | u16 key length | key | i64 timestamp | value`` (big-endian).

Appends are fsynced before :meth:`append` returns, so a message acknowledged to its MQTT
device after that survives a gateway crash. The cursor moves only after the store
acknowledged the records (:meth:`commit`), so a crash while draining re-sends at most the
records delivered since the last commit. A torn record at the end (power loss during an
append, or a zero-filled tail whose size reached the disk before its data) is detected by
its length/CRC and cut off. Fully delivered files are deleted.
Not thread-safe: one gateway thread owns it.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

import crc32c

_HEAD = struct.Struct(">II")
# the smallest payload: empty topic and key, the timestamp, an empty value. A shorter length
# (a zero-filled tail reads as length 0, and crc32c(b"") == 0) is a torn record.
_MIN_PAYLOAD = 2 + 2 + 8


class QueueFull(Exception):
    """The queue holds ``max_bytes`` already; the caller must stop accepting (backpressure)."""


@dataclass(frozen=True, slots=True)
class Item:
    topic: str
    key: bytes
    value: bytes
    timestamp_ms: int
    position: tuple[int, int]  # (file, offset after this record)


def _encode(topic: str, key: bytes, value: bytes, ts: int) -> bytes:
    t = topic.encode()
    return struct.pack(">H", len(t)) + t + struct.pack(">H", len(key)) + key + struct.pack(">q", ts) + value


def _decode(payload: bytes) -> tuple[str, bytes, bytes, int]:
    (tl,) = struct.unpack_from(">H", payload, 0)
    topic = payload[2 : 2 + tl].decode()
    p = 2 + tl
    (kl,) = struct.unpack_from(">H", payload, p)
    key = payload[p + 2 : p + 2 + kl]
    p += 2 + kl
    (ts,) = struct.unpack_from(">q", payload, p)
    return topic, key, payload[p + 8 :], ts


class DiskQueue:
    def __init__(self, directory: Path | str, max_bytes: int = 1 << 30, file_bytes: int = 64 << 20) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.max_bytes = max_bytes
        self.file_bytes = file_bytes
        self.cursor = self._load_cursor()
        self._drop_delivered_files()
        self._repair_tail()
        self._read_pos = self.cursor

    # -- files -----------------------------------------------------------------------------
    def _files(self) -> list[int]:
        return sorted(int(p.name[2:14]) for p in self.dir.glob("q-*.log"))

    def _path(self, n: int) -> Path:
        return self.dir / f"q-{n:012d}.log"

    def _load_cursor(self) -> tuple[int, int]:
        try:
            a, b = (self.dir / "cursor").read_text().split()
            return int(a), int(b)
        except (FileNotFoundError, ValueError):
            files = self._files()
            return (files[0] if files else 1, 0)

    def _repair_tail(self) -> None:
        """Cut a torn record off the last file: a short header, a length below the smallest
        payload or past the end of the file, or a CRC mismatch ends the valid prefix."""
        files = self._files()
        if not files:
            return
        last = self._path(files[-1])
        data = last.read_bytes()
        pos = 0
        while pos + 8 <= len(data):
            n, crc = _HEAD.unpack_from(data, pos)
            end = pos + 8 + n
            if n < _MIN_PAYLOAD or end > len(data) or crc32c.crc32c(data[pos + 8 : end]) != crc:
                break
            pos = end
        if pos != len(data):
            with open(last, "r+b") as fh:
                fh.truncate(pos)
                fh.flush()
                os.fsync(fh.fileno())

    @property
    def size_bytes(self) -> int:
        total = 0
        for n in self._files():
            size = self._path(n).stat().st_size
            total += size - (self.cursor[1] if n == self.cursor[0] else 0) if n >= self.cursor[0] else 0
        return total

    def __len__(self) -> int:
        return sum(1 for _ in self._iter(self.cursor))

    def empty(self) -> bool:
        return self.size_bytes == 0

    # -- use -------------------------------------------------------------------------------
    def append(self, items: list[tuple[str, bytes, bytes, int]]) -> None:
        """Append records durably (fsync) or raise QueueFull without writing any."""
        blob = bytearray()
        for topic, key, value, ts in items:
            payload = _encode(topic, key, value, ts)
            blob += _HEAD.pack(len(payload), crc32c.crc32c(payload)) + payload
        if self.size_bytes + len(blob) > self.max_bytes:
            raise QueueFull(f"gateway disk queue full ({self.max_bytes} bytes)")
        files = self._files()
        n = files[-1] if files else self.cursor[0]
        path = self._path(n)
        if path.exists() and path.stat().st_size + len(blob) > self.file_bytes and path.stat().st_size > 0:
            n += 1
            path = self._path(n)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, bytes(blob))
            os.fsync(fd)
        finally:
            os.close(fd)

    def _iter(self, start: tuple[int, int], limit: int | None = None) -> list[Item]:
        """Up to ``limit`` records from ``start``, in order: one record at a time, so a file is
        read to its end (whatever its records' sizes) before the next one is opened."""
        out: list[Item] = []
        for n in self._files():
            if n < start[0]:
                continue
            pos = start[1] if n == start[0] else 0
            with open(self._path(n), "rb") as fh:
                fh.seek(pos)
                while limit is None or len(out) < limit:
                    head = fh.read(_HEAD.size)
                    if len(head) < _HEAD.size:
                        break
                    size, _crc = _HEAD.unpack(head)
                    payload = fh.read(size)
                    if len(payload) < size:
                        break  # a torn tail: cut off on the next open
                    pos += _HEAD.size + size
                    topic, key, value, ts = _decode(payload)
                    out.append(Item(topic, key, value, ts, (n, pos)))
            if limit is not None and len(out) >= limit:
                break
        return out

    def read(self, max_items: int = 10_000) -> list[Item]:
        """The next records after those already read (not yet committed)."""
        items = self._iter(self._read_pos, max_items)
        if items:
            self._read_pos = items[-1].position
        return items

    def rewind(self) -> None:
        """Read again from the last commit (after a failed delivery)."""
        self._read_pos = self.cursor

    def commit(self, position: tuple[int, int]) -> None:
        """Everything before ``position`` was delivered: move the cursor, drop finished files.

        The cursor is written durably before any file goes: first ``position`` (the commit),
        then, when that finishes the last file, the start of the next one; only then are the
        files below the cursor deleted. A crash at any step leaves a cursor naming a file that
        still exists, or a fully delivered file below the cursor, which reopening deletes.
        """
        self._write_cursor(position)
        # a fully consumed last file can go too once nothing follows it
        path = self._path(position[0])
        if path.exists() and path.stat().st_size == position[1] and self._files()[-1] == position[0]:
            self._write_cursor((position[0] + 1, 0))
            self._read_pos = max(self._read_pos, self.cursor)
        self._drop_delivered_files()

    def _write_cursor(self, position: tuple[int, int]) -> None:
        """Replace the cursor file durably (file and directory fsynced), then adopt it."""
        tmp = self.dir / "cursor.tmp"
        with open(tmp, "w") as fh:
            fh.write(f"{position[0]} {position[1]}")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.dir / "cursor")
        fd = os.open(self.dir, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        self.cursor = position

    def _drop_delivered_files(self) -> None:
        """Delete the files wholly before the cursor (also on open: a crash may leave some)."""
        for n in self._files():
            if n < self.cursor[0]:
                self._path(n).unlink(missing_ok=True)
