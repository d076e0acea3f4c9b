"""Share partitions (KIP-932): which records of one partition a share group has handed out.

A share group reads a partition as a queue. The records between the **share-partition start
offset** (SPSO) and the **end offset** (SPEO, one past the last record handed out) are *in
flight*, each in one state:

* ``AVAILABLE``: may be handed out (again) to any member;
* ``ACQUIRED``: handed to one member until its acquisition lock expires
  (``group.share.record.lock.duration.ms``) or the member acknowledges it;
* ``ACKNOWLEDGED``: processed (ACCEPT); ``ARCHIVED``: given up (REJECT, a gap, or delivered
  ``group.share.delivery.count.limit`` times without being accepted).

Each acquisition counts one delivery. RELEASE or an expired lock makes a record AVAILABLE
again, or ARCHIVED once its delivery count reached the limit (a poison record stops
circulating); a member's share session ending gives its records back with that delivery
uncounted. RENEW (KIP-1222) extends a lock. The SPSO moves past every leading record
that is ACKNOWLEDGED or ARCHIVED; at most ``group.share.partition.max.record.locks`` records
are in flight (whole batches may go past it, as in Kafka), so a stuck record holds back at most
about that many after it.

The in-flight records are kept as runs of offsets in one state (as Kafka's in-flight batches):
a log batch acquired whole is one run, split only where acknowledgements or releases treat its
records differently, so the work per request grows with the batches, not the records.

Pure logic: offsets and batch boundaries come in, acquired ranges go out; the broker reads the
log and keeps the timers (:mod:`framework.coordinator.share_groups`). Times are monotonic
seconds passed in by the caller.
"""

from __future__ import annotations

import bisect
import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from framework.protocol.error_codes import ErrorCode


class RecordState(enum.IntEnum):
    """Kafka's ids (they are what ``__share_group_state`` stores)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AckType(enum.IntEnum):
    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


@dataclass(slots=True)
class Run:
    """Offsets ``first``..``last`` in one state, with one delivery count (and, while acquired,
    one member and lock deadline)."""

    first: int
    last: int
    state: RecordState
    delivery_count: int
    member_id: str = ""
    deadline: float = 0.0

    @property
    def size(self) -> int:
        return self.last - self.first + 1


@dataclass(frozen=True, slots=True)
class Acquired:
    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class SharePartitionConfig:
    lock_duration_ms: int = 30_000
    delivery_count_limit: int = 5
    max_record_locks: int = 2000


TERMINAL = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


class SharePartition:
    def __init__(self, start_offset: int, config: SharePartitionConfig) -> None:
        self.config = config
        self.start_offset = start_offset
        self.end_offset = start_offset
        self.runs: list[Run] = []  # in offset order, covering start_offset..end_offset - 1
        self._firsts: list[int] = []  # each run's first offset (bisect)

    # -- looking ------------------------------------------------------------------------------
    def state_of(self, offset: int) -> tuple[RecordState, int] | None:
        """(state, delivery count) of an in-flight offset, None outside them."""
        i = bisect.bisect_right(self._firsts, offset) - 1
        if i < 0 or offset > self.runs[i].last:
            return None
        return self.runs[i].state, self.runs[i].delivery_count

    def next_fetch_offset(self) -> int:
        """The lowest offset that may be handed out: an AVAILABLE in-flight record, else the end."""
        for r in self.runs:
            if r.state is RecordState.AVAILABLE:
                return r.first
        return self.end_offset

    def can_acquire(self) -> bool:
        return self.end_offset - self.start_offset < self.config.max_record_locks or any(
            r.state is RecordState.AVAILABLE for r in self.runs
        )

    @property
    def in_flight(self) -> int:
        """Records acquired now."""
        return sum(r.size for r in self.runs if r.state is RecordState.ACQUIRED)

    def settled(self) -> int:
        """In-flight records already acknowledged or archived (above the start offset)."""
        return sum(r.size for r in self.runs if r.state in TERMINAL)

    def next_deadline(self) -> float | None:
        deadlines = [r.deadline for r in self.runs if r.state is RecordState.ACQUIRED]
        return min(deadlines) if deadlines else None

    # -- acquisition --------------------------------------------------------------------------
    def acquire(
        self,
        member_id: str,
        batches: Iterable[tuple[int, int]],
        max_records: int,
        now: float,
        strict: bool = False,
    ) -> list[Acquired]:
        """Acquire for ``member_id`` what is AVAILABLE in the given log batches ((first, last)
        offsets, in order), up to ``max_records`` and the in-flight cap: whole batches, so
        either may be exceeded to the end of a batch (Kafka's batch_optimized mode), unless
        ``strict`` (KIP-1206's record_limit mode: exactly). Offsets past the end that no batch
        covers (compacted away) are archived on the way."""
        deadline = now + self.config.lock_duration_ms / 1000
        out: list[Acquired] = []
        budget = max_records if max_records > 0 else 500
        locks = self.config.max_record_locks
        for first, last in batches:
            if budget <= 0:
                break
            lo = max(first, self.start_offset)
            rest_of_batch = lo < self.end_offset
            if rest_of_batch:  # released records inside what was handed out before
                budget = self._reacquire(
                    member_id, lo, min(last, self.end_offset - 1), budget, deadline, strict, out
                )
                lo = self.end_offset
                if lo > last or (strict and budget <= 0):
                    continue
            room = locks - (self.end_offset - self.start_offset)
            if room <= 0 and (strict or not rest_of_batch):
                break  # the in-flight cap, checked before each new batch (as Kafka)
            hi = min(last, lo + min(budget, room) - 1) if strict else last
            if lo > self.end_offset:
                self._append(Run(self.end_offset, lo - 1, RecordState.ARCHIVED, 0))
            self._append(Run(lo, hi, RecordState.ACQUIRED, 1, member_id, deadline))
            self.end_offset = hi + 1
            _add(out, lo, hi, 1)
            budget -= hi - lo + 1
        self._advance()
        return out

    def _reacquire(
        self,
        member_id: str,
        lo: int,
        hi: int,
        budget: int,
        deadline: float,
        strict: bool,
        out: list[Acquired],
    ) -> int:
        """Acquire the AVAILABLE runs within lo..hi, part of one log batch (each delivery
        counted): all of them, or (``strict``) up to the budget; the budget left."""
        i = max(bisect.bisect_right(self._firsts, lo) - 1, 0)
        while i < len(self.runs) and self.runs[i].first <= hi and (budget > 0 or not strict):
            r = self.runs[i]
            if r.state is not RecordState.AVAILABLE or r.last < lo:
                i += 1
                continue
            a, b = max(r.first, lo), min(r.last, hi)
            if strict:
                b = min(b, a + budget - 1)
            i = self._isolate(i, a, b)
            r = self.runs[i]
            r.state, r.member_id, r.deadline = RecordState.ACQUIRED, member_id, deadline
            r.delivery_count += 1
            _add(out, a, b, r.delivery_count)
            budget -= b - a + 1
            i += 1
        return budget

    # -- acknowledgement ----------------------------------------------------------------------
    def acknowledge(
        self, member_id: str, first: int, last: int, types: Sequence[int], now: float
    ) -> ErrorCode:
        """One acknowledgement batch: one type for the whole range, or one per offset. The batch
        is applied whole or not at all: INVALID_REQUEST when malformed or past the records
        handed out, INVALID_RECORD_STATE when a record is not acquired by this member (its lock
        expired, say). Offsets below the start offset are settled already and skipped."""
        n = last - first + 1
        if n <= 0 or not types or (len(types) != 1 and len(types) != n):
            return ErrorCode.INVALID_REQUEST
        if any(t not in AckType._value2member_map_ for t in types):
            return ErrorCode.INVALID_REQUEST
        if last >= self.end_offset:
            return ErrorCode.INVALID_REQUEST
        lo = max(first, self.start_offset)
        if lo > last:
            return ErrorCode.NONE
        i = bisect.bisect_right(self._firsts, lo) - 1
        j = i
        while j < len(self.runs) and self.runs[j].first <= last:
            r = self.runs[j]
            if r.state is not RecordState.ACQUIRED or r.member_id != member_id:
                return ErrorCode.INVALID_RECORD_STATE
            j += 1
        for a, b, kind in _segments(lo, last, first, types):
            while a <= b:  # one run at a time: a segment may span runs acquired apart
                k = bisect.bisect_right(self._firsts, a) - 1
                end = min(b, self.runs[k].last)
                k = self._isolate(k, a, end)
                self._apply(self.runs[k], kind, now)
                a = end + 1
        self._advance()
        return ErrorCode.NONE

    def _apply(self, r: Run, kind: AckType, now: float) -> None:
        if kind is AckType.ACCEPT:
            r.state, r.member_id, r.deadline = RecordState.ACKNOWLEDGED, "", 0.0
        elif kind is AckType.RELEASE:
            self._make_available(r)
        elif kind is AckType.RENEW:
            r.deadline = now + self.config.lock_duration_ms / 1000
        else:  # REJECT, GAP
            r.state, r.member_id, r.deadline = RecordState.ARCHIVED, "", 0.0

    # -- locks and members --------------------------------------------------------------------
    def expire_locks(self, now: float) -> bool:
        """Release every record whose lock has run out; True when one became AVAILABLE."""
        freed = False
        for r in self.runs:
            if r.state is RecordState.ACQUIRED and r.deadline <= now:
                freed = self._make_available(r) or freed
        self._advance()
        return freed

    def release_member(self, member_id: str) -> bool:
        """A member's share session ended: what it holds goes back, that delivery uncounted
        (it was never processed)."""
        freed = False
        for r in self.runs:
            if r.state is RecordState.ACQUIRED and r.member_id == member_id:
                r.delivery_count = max(r.delivery_count - 1, 0)
                r.state, r.member_id, r.deadline = RecordState.AVAILABLE, "", 0.0
                freed = True
        self._advance()
        return freed

    def truncate_to(self, log_start_offset: int) -> None:
        """Records below the log start were deleted (retention): they cannot be delivered."""
        if log_start_offset <= self.start_offset:
            return
        keep = [r for r in self.runs if r.last >= log_start_offset]
        if keep and keep[0].first < log_start_offset:
            keep[0] = replace(keep[0], first=log_start_offset)
        self.runs = keep
        self._firsts = [r.first for r in keep]
        self.start_offset = log_start_offset
        self.end_offset = max(self.end_offset, log_start_offset)

    def reset_to(self, offset: int) -> None:
        """AlterShareGroupOffsets: start over at ``offset`` (the group has no members)."""
        self.runs, self._firsts = [], []
        self.start_offset = self.end_offset = offset

    # -- internals ----------------------------------------------------------------------------
    def _append(self, r: Run) -> None:
        self.runs.append(r)
        self._firsts.append(r.first)

    def _isolate(self, i: int, a: int, b: int) -> int:
        """Split run ``i`` so that a..b (inside it) is a run of its own; its index."""
        r = self.runs[i]
        parts = []
        if r.first < a:
            parts.append(replace(r, last=a - 1))
        mid = replace(r, first=a, last=b)
        parts.append(mid)
        if b < r.last:
            parts.append(replace(r, first=b + 1))
        self.runs[i : i + 1] = parts
        self._firsts[i : i + 1] = [p.first for p in parts]
        return i + (1 if r.first < a else 0)

    def _make_available(self, r: Run) -> bool:
        """AVAILABLE again (True), or ARCHIVED at the delivery count limit."""
        if r.delivery_count >= self.config.delivery_count_limit:
            r.state, r.member_id, r.deadline = RecordState.ARCHIVED, "", 0.0
            return False
        r.state, r.member_id, r.deadline = RecordState.AVAILABLE, "", 0.0
        return True

    def _advance(self) -> None:
        n = 0
        while n < len(self.runs) and self.runs[n].state in TERMINAL:
            n += 1
        if n:
            self.start_offset = self.runs[n - 1].last + 1
            del self.runs[:n]
            del self._firsts[:n]

    def state_batches(self) -> list[tuple[int, int, int, int]]:
        """(first offset, last offset, state, delivery count) runs of the in-flight records, as
        ``__share_group_state`` keeps them (acquired records are stored AVAILABLE: a lock does
        not outlive its leader)."""
        out: list[tuple[int, int, int, int]] = []
        for r in self.runs:
            state = int(RecordState.AVAILABLE if r.state is RecordState.ACQUIRED else r.state)
            if out and out[-1][1] == r.first - 1 and out[-1][2:] == (state, r.delivery_count):
                out[-1] = (out[-1][0], r.last, state, r.delivery_count)
            else:
                out.append((r.first, r.last, state, r.delivery_count))
        return out


def _segments(lo: int, last: int, first: int, types: Sequence[int]) -> list[tuple[int, int, AckType]]:
    """lo..last cut where the acknowledgement type changes (one type: one segment)."""
    if len(types) == 1:
        return [(lo, last, AckType(types[0]))]
    out: list[tuple[int, int, AckType]] = []
    for offset in range(lo, last + 1):
        kind = AckType(types[offset - first])
        if out and out[-1][2] is kind:
            out[-1] = (out[-1][0], offset, kind)
        else:
            out.append((offset, offset, kind))
    return out


def _add(out: list[Acquired], first: int, last: int, count: int) -> None:
    """Append a range, merged into the previous one when adjacent with the same count."""
    if out and out[-1].last_offset == first - 1 and out[-1].delivery_count == count:
        out[-1] = Acquired(out[-1].first_offset, last, count)
    else:
        out.append(Acquired(first, last, count))
