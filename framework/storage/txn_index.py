"""Aborted-transactions index of one segment (Kafka's ``.txnindex``).

On disk (``<base offset, 20 digits>.txnindex``) a flat array of 34-byte entries, one per
transaction aborted by an ABORT marker stored in this segment, in marker order::

    version            int16   (0)
    producer_id        int64
    first_offset       int64   (the transaction's first offset; may lie in an earlier segment)
    last_offset        int64   (the offset of the ABORT marker)
    last_stable_offset int64   (the log's last stable offset once this abort completed:
                                the first offset of the oldest transaction still open, else
                                last_offset + 1)

Invariants: entries are in increasing ``last_offset`` order, each ``last_offset`` lies in the
segment ``[base offset, next offset)`` and ``first_offset <= last_offset``. An entry is written
(not fsynced) when its marker is appended, so a crash may leave a torn last entry (cut off
on load: the index is rebuilt) or lose entries: the log then re-adds them while replaying the producer state
(appends are idempotent: an entry not past the last one is ignored) and a segment whose data
was recovered, or whose index is missing or damaged, gets its index rebuilt from the markers.

A read_committed Fetch asks :meth:`collect` for the aborted transactions overlapping
``[fetch offset, upper bound)``. Not thread-safe: owned by one partition's log.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

from framework.storage.offset_index import CorruptIndex, _fsync_path

VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex:
    __slots__ = ("base_offset", "entries", "path")

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.entries: list[AbortedTxn] = []

    # -- loading ---------------------------------------------------------------------------
    def load(self, next_offset: int) -> None:
        """Read the file.

        Raises :class:`CorruptIndex` when the file is missing, ends in a torn entry (a crash
        while appending: the entry may be lost) or an entry breaks an invariant (unknown
        version, offsets out of order or outside ``[base, next_offset)``): the log rebuilds the
        index from the segment's markers then.
        """
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            raise CorruptIndex(f"{self.path.name} is missing") from None
        if len(data) % ENTRY_SIZE:
            raise CorruptIndex(f"{self.path.name} has {len(data)} bytes: a torn entry")
        whole = len(data)
        entries: list[AbortedTxn] = []
        last = -1
        for pos in range(0, whole, ENTRY_SIZE):
            version, pid, first, last_off, lso = _ENTRY.unpack_from(data, pos)
            if version != VERSION:
                raise CorruptIndex(f"{self.path.name}: unknown entry version {version}")
            if not (self.base_offset <= last_off < next_offset) or first > last_off or last_off <= last:
                raise CorruptIndex(f"{self.path.name}: entry {pos // ENTRY_SIZE} out of order or range")
            last = last_off
            entries.append(AbortedTxn(pid, first, last_off, lso))
        self.entries = entries

    # -- writes ----------------------------------------------------------------------------
    def append(self, txn: AbortedTxn) -> bool:
        """Record an aborted transaction (written to the file at once); False if already there."""
        if self.entries and txn.last_offset <= self.entries[-1].last_offset:
            return False
        self.entries.append(txn)
        with open(self.path, "ab") as fh:
            fh.write(_pack(txn))
        return True

    def rewrite(self) -> None:
        """Write the whole file from memory (after a rebuild or truncation)."""
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_bytes(b"".join(_pack(t) for t in self.entries))
        os.replace(tmp, self.path)

    def reset(self) -> None:
        self.entries = []
        self.rewrite()

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose marker is at or above ``offset``."""
        kept = [t for t in self.entries if t.last_offset < offset]
        if len(kept) != len(self.entries):
            self.entries = kept
            self.rewrite()

    def flush(self) -> None:
        if self.path.exists():
            _fsync_path(self.path)

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)

    # -- reads -----------------------------------------------------------------------------
    def collect(self, fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
        """Entries overlapping ``[fetch_offset, upper_bound)``, and whether the search is done.

        Done (Kafka's ``TxnIndexSearchResult.isComplete``) when an entry's last stable offset
        reaches ``upper_bound``: no later abort can overlap the range, because every
        transaction open below the bound had completed by then.
        """
        out: list[AbortedTxn] = []
        for t in self.entries:
            if t.last_offset >= fetch_offset and t.first_offset < upper_bound:
                out.append(t)
            if t.last_stable_offset >= upper_bound:
                return out, True
        return out, False


def _pack(t: AbortedTxn) -> bytes:
    return _ENTRY.pack(VERSION, t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset)
