"""Sparse time index of one segment: timestamp → first offset that may hold it.

On disk (``<base offset, 20 digits>.timeindex``) a flat array of 12-byte entries::

    timestamp        int64   (largest batch max-timestamp seen so far, ms)
    relative_offset  int32   (offset of the batch that carried it, minus the base offset)

Invariants: timestamps and offsets strictly increase; an entry is added only when a batch's
max timestamp exceeds every earlier one, at most once per ``index.interval.bytes`` (plus one
final entry when the segment is rolled or closed, as Kafka does), so the last entry holds the
segment's largest timestamp, which retention compares with ``retention.ms``.

A look-up for time T returns the offset of the last entry whose timestamp is < T: every
record with timestamp >= T lies at or after it (records before it have timestamps below the
entry's). The log then scans batches forward from there.
"""

from __future__ import annotations

import os
import struct
from bisect import bisect_left
from pathlib import Path

from framework.storage.offset_index import CorruptIndex, _fsync_path

ENTRY_SIZE = 12
_ENTRY = struct.Struct(">qi")


class TimeIndex:
    __slots__ = ("_dirty_from", "base_offset", "offsets", "path", "timestamps")

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.timestamps: list[int] = []
        self.offsets: list[int] = []
        self._dirty_from = 0

    def load(self) -> None:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            raise CorruptIndex(f"{self.path.name} is missing") from None
        if len(data) % ENTRY_SIZE:
            raise CorruptIndex(f"{self.path.name} has {len(data)} bytes, not a multiple of 12")
        ts: list[int] = []
        offs: list[int] = []
        for t, o in _ENTRY.iter_unpack(data):
            ts.append(t)
            offs.append(o + self.base_offset)
        self.timestamps, self.offsets = ts, offs
        self._dirty_from = len(ts)

    def sanity_check(self, next_offset: int) -> None:
        ts, offs = self.timestamps, self.offsets
        for i in range(1, len(ts)):
            if ts[i] <= ts[i - 1] or offs[i] < offs[i - 1]:
                raise CorruptIndex(f"{self.path.name}: entries not increasing at {i}")
        if offs and (offs[0] < self.base_offset or offs[-1] >= max(next_offset, self.base_offset + 1)):
            raise CorruptIndex(f"{self.path.name}: entry outside the segment's offsets")

    def __len__(self) -> int:
        return len(self.timestamps)

    @property
    def max_timestamp(self) -> int:
        return self.timestamps[-1] if self.timestamps else -1

    def maybe_append(self, timestamp: int, offset: int) -> bool:
        if timestamp < 0:
            return False
        if self.timestamps and (timestamp <= self.timestamps[-1] or offset < self.offsets[-1]):
            return False
        if self.offsets and offset == self.offsets[-1]:
            self.timestamps[-1] = timestamp  # same batch, larger timestamp: replace
            self._dirty_from = min(self._dirty_from, len(self.offsets) - 1)
            return True
        self.timestamps.append(timestamp)
        self.offsets.append(offset)
        return True

    def lookup(self, timestamp: int) -> int:
        """Offset from which to scan for the first record with timestamp >= ``timestamp``."""
        i = bisect_left(self.timestamps, timestamp)
        if i == 0:
            return self.base_offset
        return self.offsets[i - 1]

    def truncate_to(self, offset: int) -> None:
        keep = len(self.offsets)
        while keep and self.offsets[keep - 1] >= offset:
            keep -= 1
        if keep < len(self.offsets):
            del self.offsets[keep:]
            del self.timestamps[keep:]
            self._dirty_from = -1

    def reset(self) -> None:
        self.timestamps, self.offsets = [], []
        self._dirty_from = -1  # rewrite, even if no entry follows

    def flush(self, fsync: bool = False) -> None:
        n = len(self.timestamps)
        exists = self.path.exists()
        if self._dirty_from == n and exists:
            if fsync:
                _fsync_path(self.path)
            return
        start = max(self._dirty_from, 0) if exists else 0  # -1: rewrite it all
        data = b"".join(
            _ENTRY.pack(t, o - self.base_offset)
            for t, o in zip(self.timestamps[start:], self.offsets[start:], strict=True)
        )
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.ftruncate(fd, start * ENTRY_SIZE)
            os.pwrite(fd, data, start * ENTRY_SIZE)
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        self._dirty_from = n
