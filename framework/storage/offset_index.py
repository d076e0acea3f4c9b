"""Sparse offset index of one segment: offset → byte position of the batch holding it.

On disk (``<base offset, 20 digits>.index``) a flat array of 8-byte entries::

    relative_offset int32   (offset - segment base offset)
    position        int32   (byte position of a batch in the segment's .log file)

Invariants: entries are strictly increasing in both offset and position, and no entry points
past the end of the log file. An entry is written at most every ``index.interval.bytes`` of
log data, so a look-up returns a position at most that many bytes before the wanted batch.

The whole index lives in memory (two ``array('i')``); new entries are appended to the file in
batches (``flush``) and the file is rewritten after truncation. A file that breaks an
invariant is detected by :meth:`sanity_check` and rebuilt from the log by the segment.
Not thread-safe: owned by one partition, used from the event loop.
"""

from __future__ import annotations

import os
import sys
from array import array
from bisect import bisect_right
from pathlib import Path

ENTRY_SIZE = 8


class CorruptIndex(Exception):
    pass


class OffsetIndex:
    __slots__ = ("_dirty_from", "base_offset", "offsets", "path", "positions")

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.offsets = array("i")
        self.positions = array("i")
        self._dirty_from = 0  # entries [_dirty_from:] are not yet in the file; -1: rewrite it all

    # -- loading ---------------------------------------------------------------------------
    def load(self) -> None:
        """Read the file; raises :class:`CorruptIndex` when it is not a whole number of entries."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            raise CorruptIndex(f"{self.path.name} is missing") from None
        if len(data) % ENTRY_SIZE:
            raise CorruptIndex(f"{self.path.name} has {len(data)} bytes, not a multiple of 8")
        raw = array("i")
        raw.frombytes(data)
        if sys.byteorder == "little":
            raw.byteswap()
        self.offsets = raw[0::2]
        self.positions = raw[1::2]
        self._dirty_from = len(self.offsets)

    def sanity_check(self, log_size: int) -> None:
        offs, poss = self.offsets, self.positions
        for i in range(1, len(offs)):
            if offs[i] <= offs[i - 1] or poss[i] <= poss[i - 1]:
                raise CorruptIndex(f"{self.path.name}: entries not increasing at {i}")
        if offs and (offs[0] < 0 or poss[0] < 0):
            raise CorruptIndex(f"{self.path.name}: negative entry")
        if poss and poss[-1] >= log_size:
            raise CorruptIndex(f"{self.path.name}: entry points past the log end")

    # -- use -------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.offsets)

    def append(self, offset: int, position: int) -> None:
        rel = offset - self.base_offset
        if self.offsets and (rel <= self.offsets[-1] or position <= self.positions[-1]):
            return  # never break monotonicity
        self.offsets.append(rel)
        self.positions.append(position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the last entry at or before ``offset``; (base, 0) if none."""
        i = bisect_right(self.offsets, offset - self.base_offset)
        if i == 0:
            return self.base_offset, 0
        return self.base_offset + self.offsets[i - 1], self.positions[i - 1]

    def last_entry(self) -> tuple[int, int]:
        if not self.offsets:
            return self.base_offset, 0
        return self.base_offset + self.offsets[-1], self.positions[-1]

    def truncate_to(self, offset: int) -> None:
        """Drop entries for offsets >= ``offset``."""
        i = bisect_right(self.offsets, offset - self.base_offset - 1)
        if i < len(self.offsets):
            del self.offsets[i:]
            del self.positions[i:]
            self._dirty_from = -1  # rewrite

    def reset(self) -> None:
        self.offsets = array("i")
        self.positions = array("i")
        self._dirty_from = -1  # rewrite, even if no entry follows

    def flush(self, fsync: bool = False) -> None:
        """Write pending entries (or the whole index after a truncation)."""
        n = len(self.offsets)
        exists = self.path.exists()
        if self._dirty_from == n and exists:
            if fsync:
                _fsync_path(self.path)
            return
        start = max(self._dirty_from, 0) if exists else 0
        out = array("i", [0]) * (2 * (n - start))
        out[0::2] = self.offsets[start:]
        out[1::2] = self.positions[start:]
        if sys.byteorder == "little":
            out.byteswap()
        flags = os.O_WRONLY | os.O_CREAT
        fd = os.open(self.path, flags, 0o644)
        try:
            os.ftruncate(fd, start * ENTRY_SIZE)
            os.pwrite(fd, out.tobytes(), start * ENTRY_SIZE)
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        self._dirty_from = n


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
