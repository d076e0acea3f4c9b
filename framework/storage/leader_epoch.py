"""Leader epoch cache of one partition: the offset at which each leader epoch's data starts.

Kafka's ``LeaderEpochFileCache`` (KIP-101, KIP-279). Every record batch carries the epoch of
the leader that appended it (``partition_leader_epoch`` in the v2 header); this cache keeps,
per epoch that has (or may soon have) data in the log, the first offset written in it. A
follower asks its new leader where its last epoch ends (OffsetForLeaderEpoch) and truncates its
log there, so logs that diverged under an old leader converge; consumers ask the same question
to detect that the log was truncated under their position (KIP-320).

File ``leader-epoch-checkpoint`` in the partition directory, Kafka's text format::

    0                   version
    2                   number of entries
    0 0                 <epoch> <start offset>, one line per entry,
    3 1500              oldest first

It is rewritten whole on every change: written to ``leader-epoch-checkpoint.tmp``, fsynced,
renamed over the old file, then the directory is fsynced, so a crash leaves the old file or the
new one. :meth:`LeaderEpochCache.load` reports a missing or damaged file (bad version, a count
that does not match the lines, non-integers, entries out of order) by returning False, and the
log then rebuilds the cache from its batch headers; a damaged file never stops the broker.

Invariant: epochs and start offsets both strictly increase from one entry to the next (Kafka's
``assign`` removes conflicting entries before adding one). The log keeps every start offset
within ``[log start offset, log end offset]``: it assigns before appending the data, truncates
the cache from the end when its log is truncated and from the start when segments are deleted.

Not thread-safe: owned by one :class:`~framework.storage.log.Log`, used from the event loop.
"""

from __future__ import annotations

import logging
from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from framework.storage.files import write_durably

log = logging.getLogger("sftraffic.storage")

CHECKPOINT_FILE = "leader-epoch-checkpoint"
CHECKPOINT_VERSION = 0
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class DamagedCheckpoint(ValueError):
    """The checkpoint file cannot be trusted; the message says why."""


class LeaderEpochCache:
    """Epoch → start offset entries of one partition, kept in ``leader-epoch-checkpoint``.

    ``latest`` is the latest epoch (-1 when empty), a plain attribute so the leader's append
    path checks it with one integer compare.
    """

    __slots__ = ("_epochs", "_starts", "latest", "name", "path")

    def __init__(self, directory: Path, name: str = "") -> None:
        self.path = directory / CHECKPOINT_FILE
        self.name = name
        self._epochs: list[int] = []
        self._starts: list[int] = []
        self.latest = UNDEFINED_EPOCH

    # -- loading ---------------------------------------------------------------------------
    def load(self) -> bool:
        """Read the checkpoint file; False when it is missing or damaged (cache left empty).

        A damaged file is logged with its path and the reason; the caller rebuilds.
        """
        self.path.with_name(CHECKPOINT_FILE + ".tmp").unlink(missing_ok=True)
        try:
            text = self.path.read_text(encoding="ascii")
        except FileNotFoundError:
            self._set([])
            return False
        except (OSError, UnicodeDecodeError) as exc:
            log.warning("%s: cannot read %s (%s); rebuilding it from the log", self.name, self.path, exc)
            self._set([])
            return False
        try:
            entries = parse_checkpoint(text)
        except DamagedCheckpoint as exc:
            log.warning("%s: damaged %s (%s); rebuilding it from the log", self.name, self.path, exc)
            self._set([])
            return False
        self._set(entries)
        return True

    def _set(self, entries: list[EpochEntry]) -> None:
        self._epochs = [e.epoch for e in entries]
        self._starts = [e.start_offset for e in entries]
        self.latest = self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    # -- queries ---------------------------------------------------------------------------
    def entries(self) -> list[EpochEntry]:
        return [EpochEntry(e, s) for e, s in zip(self._epochs, self._starts, strict=True)]

    def __len__(self) -> int:
        return len(self._epochs)

    def latest_epoch(self) -> int:
        """The latest epoch, -1 when the cache is empty."""
        return self.latest

    def latest_entry(self) -> EpochEntry | None:
        if not self._epochs:
            return None
        return EpochEntry(self._epochs[-1], self._starts[-1])

    def earliest_entry(self) -> EpochEntry | None:
        if not self._epochs:
            return None
        return EpochEntry(self._epochs[0], self._starts[0])

    def epoch_for_offset(self, offset: int) -> int:
        """Epoch of the data at ``offset`` (-1 when before the first entry or empty)."""
        i = bisect_right(self._starts, offset) - 1
        return self._epochs[i] if i >= 0 else UNDEFINED_EPOCH

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) answering OffsetForLeaderEpoch for ``requested_epoch``.

        Kafka's ``endOffsetFor``: the largest epoch <= ``requested_epoch`` and the start offset
        of the first epoch after it; for the latest epoch, ``log_end_offset``. (-1, -1) when the
        requested epoch is -1 or above every known one (and for an empty cache). Below the first
        epoch Kafka answers ``(requested_epoch, first start offset)``: that data is gone, and a
        follower truncating there replicates from the leader's start.
        """
        if requested_epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        epochs = self._epochs
        if epochs and epochs[-1] == requested_epoch:
            return requested_epoch, log_end_offset
        higher = bisect_right(epochs, requested_epoch)
        if higher == len(epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return requested_epoch, self._starts[0]
        return epochs[higher - 1], self._starts[higher]

    # -- changes ---------------------------------------------------------------------------
    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset``; persist when that changes anything.

        A no-op for a negative epoch (batches never stamped by a leader) and for the latest
        epoch at or after its recorded start. Otherwise entries that would break the ordering
        (epoch >= ``epoch`` or start >= ``start_offset``) are removed first, as in Kafka.
        """
        if self._assign(epoch, start_offset):
            self.flush()

    def assign_all(self, entries: Iterable[tuple[int, int]]) -> bool:
        """:meth:`assign` each (epoch, start offset); one checkpoint write at the end."""
        changed = False
        for epoch, start in entries:
            changed = self._assign(epoch, start) or changed
        if changed:
            self.flush()
        return changed

    def _assign(self, epoch: int, start_offset: int) -> bool:
        if epoch < 0:
            return False
        if start_offset < 0:
            raise ValueError(f"{self.name}: negative start offset {start_offset} for epoch {epoch}")
        epochs, starts = self._epochs, self._starts
        if epochs and epochs[-1] == epoch and start_offset >= starts[-1]:
            return False
        removed: list[EpochEntry] = []
        while epochs and (epochs[-1] >= epoch or starts[-1] >= start_offset):
            removed.append(EpochEntry(epochs.pop(), starts.pop()))
        if len(removed) > 1 or (removed and removed[0].start_offset != start_offset):
            log.warning(
                "%s: new epoch entry %s truncated conflicting entries %s",
                self.name,
                EpochEntry(epoch, start_offset),
                removed[::-1],
            )
        epochs.append(epoch)
        starts.append(start_offset)
        self.latest = epoch
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        """Remove the entries starting at or after ``end_offset`` (the log was truncated)."""
        if end_offset < 0 or not self._starts or self._starts[-1] < end_offset:
            return
        keep = bisect_left(self._starts, end_offset)
        del self._epochs[keep:]
        del self._starts[keep:]
        self.latest = self._epochs[-1] if self._epochs else UNDEFINED_EPOCH
        self.flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Forget epochs wholly below ``start_offset``; the one holding it now starts there.

        Kafka's ``truncateFromStart``: entries starting at or below ``start_offset`` are
        removed and the last of them is put back with ``start_offset`` as its start.
        """
        starts = self._starts
        if not starts or starts[0] > start_offset:
            return
        last = bisect_right(starts, start_offset) - 1
        if last == 0 and starts[0] == start_offset:
            return  # already starts there
        epoch = self._epochs[last]
        del self._epochs[:last]
        del starts[:last]
        starts[0] = start_offset
        self._epochs[0] = epoch
        self.flush()

    def clear(self) -> None:
        """Remove every entry (the log was emptied) and persist the empty cache."""
        self._set([])
        self.flush()

    # -- persistence -----------------------------------------------------------------------
    def flush(self) -> None:
        """Write the checkpoint file atomically: temp file, fsync, rename, fsync directory."""
        text = format_checkpoint(self.entries())
        write_durably(self.path, text.encode("ascii"))

    def __repr__(self) -> str:
        return f"LeaderEpochCache({self.name}, {self.entries()})"


def format_checkpoint(entries: Iterable[EpochEntry]) -> str:
    body = [f"{e} {s}" for e, s in entries]
    return "\n".join([str(CHECKPOINT_VERSION), str(len(body)), *body]) + "\n"


def parse_checkpoint(text: str) -> list[EpochEntry]:
    """Entries of a checkpoint file's text; raises :class:`DamagedCheckpoint`."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the final newline
    if len(lines) < 2:
        raise DamagedCheckpoint("fewer than two lines")
    try:
        version = int(lines[0])
        count = int(lines[1])
    except ValueError:
        raise DamagedCheckpoint("version or count is not an integer") from None
    if version != CHECKPOINT_VERSION:
        raise DamagedCheckpoint(f"unknown version {version}")
    if count != len(lines) - 2:
        raise DamagedCheckpoint(f"count {count} but {len(lines) - 2} entry line(s)")
    out: list[EpochEntry] = []
    for n, line in enumerate(lines[2:], start=3):
        parts = line.split(" ")
        try:
            if len(parts) != 2:
                raise ValueError
            epoch, start = int(parts[0]), int(parts[1])
        except ValueError:
            raise DamagedCheckpoint(f"line {n} is not '<epoch> <start offset>': {line[:40]!r}") from None
        if epoch < 0 or start < 0:
            raise DamagedCheckpoint(f"line {n}: negative epoch or offset")
        if out and (epoch <= out[-1].epoch or start <= out[-1].start_offset):
            raise DamagedCheckpoint(f"line {n}: entries do not increase ({out[-1]} then {epoch} {start})")
        out.append(EpochEntry(epoch, start))
    return out
