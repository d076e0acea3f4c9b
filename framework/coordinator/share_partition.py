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
are in flight, so a stuck record holds back at most that many after it.

Pure logic: offsets and batch boundaries come in, acquired ranges go out; the broker reads the
log and keeps the timers (:mod:`framework.coordinator.share_groups`). Times are monotonic
seconds passed in by the caller.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

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
class InFlight:
    state: RecordState
    delivery_count: int
    member_id: str = ""
    deadline: float = 0.0


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


class SharePartition:
    def __init__(self, start_offset: int, config: SharePartitionConfig) -> None:
        self.config = config
        self.start_offset = start_offset
        self.end_offset = start_offset
        self.records: dict[int, InFlight] = {}

    # -- what to read next ------------------------------------------------------------------
    def next_fetch_offset(self) -> int:
        """The lowest offset that may be handed out: an AVAILABLE in-flight record, else the SPSO
        end."""
        available = [o for o, r in self.records.items() if r.state is RecordState.AVAILABLE]
        return min(available) if available else self.end_offset

    def can_acquire(self) -> bool:
        return self.end_offset - self.start_offset < self.config.max_record_locks or any(
            r.state is RecordState.AVAILABLE for r in self.records.values()
        )

    @property
    def in_flight(self) -> int:
        return sum(1 for r in self.records.values() if r.state is RecordState.ACQUIRED)

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
        offsets, in order), up to ``max_records`` (whole batches unless ``strict``, KIP-1206's
        record_limit mode). Offsets past the SPEO that no batch covers (compacted away) are
        archived on the way."""
        deadline = now + self.config.lock_duration_ms / 1000
        taken: list[tuple[int, int]] = []  # (offset, delivery count)
        budget = max_records if max_records > 0 else 500
        for first, last in batches:
            if budget <= 0:
                break
            for offset in range(max(first, self.start_offset), last + 1):
                if strict and budget <= 0:
                    break
                if offset >= self.end_offset:
                    if self.end_offset - self.start_offset >= self.config.max_record_locks:
                        budget = 0
                        break
                    for hole in range(self.end_offset, offset):
                        self.records[hole] = InFlight(RecordState.ARCHIVED, 0)
                    rec = self.records[offset] = InFlight(RecordState.ACQUIRED, 1, member_id, deadline)
                    self.end_offset = offset + 1
                else:
                    found = self.records.get(offset)
                    if found is None or found.state is not RecordState.AVAILABLE:
                        continue
                    rec = found
                    rec.state, rec.member_id, rec.deadline = RecordState.ACQUIRED, member_id, deadline
                    rec.delivery_count += 1
                taken.append((offset, rec.delivery_count))
                budget -= 1
        self._advance()
        return _ranges(taken)

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
        live = range(max(first, self.start_offset), last + 1)
        for offset in live:
            rec = self.records.get(offset)
            if rec is None or rec.state is not RecordState.ACQUIRED or rec.member_id != member_id:
                return ErrorCode.INVALID_RECORD_STATE
        for offset in live:
            kind = AckType(types[0] if len(types) == 1 else types[offset - first])
            rec = self.records[offset]
            if kind is AckType.ACCEPT:
                self._settle(rec, RecordState.ACKNOWLEDGED)
            elif kind is AckType.RELEASE:
                self._make_available(rec)
            elif kind in (AckType.REJECT, AckType.GAP):
                self._settle(rec, RecordState.ARCHIVED)
            else:  # RENEW
                rec.deadline = now + self.config.lock_duration_ms / 1000
        self._advance()
        return ErrorCode.NONE

    # -- locks and members --------------------------------------------------------------------
    def expire_locks(self, now: float) -> bool:
        """Release every record whose lock has run out; True when one became AVAILABLE."""
        freed = False
        for rec in self.records.values():
            if rec.state is RecordState.ACQUIRED and rec.deadline <= now:
                freed = self._make_available(rec) or freed
        self._advance()
        return freed

    def next_deadline(self) -> float | None:
        deadlines = [r.deadline for r in self.records.values() if r.state is RecordState.ACQUIRED]
        return min(deadlines) if deadlines else None

    def release_member(self, member_id: str) -> bool:
        """A member's share session ended: what it holds goes back, that delivery uncounted
        (it was never processed)."""
        freed = False
        for rec in self.records.values():
            if rec.state is RecordState.ACQUIRED and rec.member_id == member_id:
                rec.delivery_count = max(rec.delivery_count - 1, 0)
                rec.state, rec.member_id, rec.deadline = RecordState.AVAILABLE, "", 0.0
                freed = True
        self._advance()
        return freed

    def truncate_to(self, log_start_offset: int) -> None:
        """Records below the log start were deleted (retention): they cannot be delivered."""
        if log_start_offset <= self.start_offset:
            return
        for offset in [o for o in self.records if o < log_start_offset]:
            del self.records[offset]
        self.start_offset = log_start_offset
        self.end_offset = max(self.end_offset, log_start_offset)

    def reset_to(self, offset: int) -> None:
        """AlterShareGroupOffsets: start over at ``offset`` (the group has no members)."""
        self.records.clear()
        self.start_offset = self.end_offset = offset

    # -- internals ----------------------------------------------------------------------------
    def _make_available(self, rec: InFlight) -> bool:
        """AVAILABLE again (True), or ARCHIVED at the delivery count limit."""
        if rec.delivery_count >= self.config.delivery_count_limit:
            self._settle(rec, RecordState.ARCHIVED)
            return False
        rec.state, rec.member_id, rec.deadline = RecordState.AVAILABLE, "", 0.0
        return True

    @staticmethod
    def _settle(rec: InFlight, state: RecordState) -> None:
        rec.state, rec.member_id, rec.deadline = state, "", 0.0

    def _advance(self) -> None:
        while self.start_offset < self.end_offset:
            rec = self.records.get(self.start_offset)
            if rec is None or rec.state not in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED):
                break
            del self.records[self.start_offset]
            self.start_offset += 1

    def state_batches(self) -> list[tuple[int, int, int, int]]:
        """(first offset, last offset, state, delivery count) runs of the in-flight records, as
        ``__share_group_state`` keeps them (acquired records are stored AVAILABLE: a lock does
        not outlive its leader)."""
        runs: list[tuple[int, int, int, int]] = []
        for offset in sorted(self.records):
            rec = self.records[offset]
            state = RecordState.AVAILABLE if rec.state is RecordState.ACQUIRED else rec.state
            if runs and runs[-1][1] == offset - 1 and runs[-1][2:] == (state, rec.delivery_count):
                runs[-1] = (runs[-1][0], offset, state, rec.delivery_count)
            else:
                runs.append((offset, offset, int(state), rec.delivery_count))
        return runs


def _ranges(taken: list[tuple[int, int]]) -> list[Acquired]:
    out: list[Acquired] = []
    for offset, count in taken:
        if out and out[-1].last_offset == offset - 1 and out[-1].delivery_count == count:
            out[-1] = Acquired(out[-1].first_offset, offset, count)
        else:
            out.append(Acquired(offset, offset, count))
    return out
