"""Offset syncs and the translation of consumer-group offsets, source → target.

An offset sync ``(u, d)`` for a partition says: *every source record at offset ``u`` or later
has a copy at offset ``d`` or later of the remote partition.* The mirror writes one

* when it starts copying a partition: ``u`` = the first source offset it will copy, ``d`` = the
  remote partition's end offset then (whatever it copies lands there or later);
* after each commit: ``u`` = the next source offset to copy, ``d`` = one past the target
  offset of the last copy acknowledged (copies are produced in order by an idempotent
  producer, so later records land later; after a crash, records copied again land later still).

A group that committed offset ``U`` at the source (it has read everything before ``U``) resumes
on the target at :meth:`OffsetSyncStore.translate` = the largest ``d`` among syncs with
``u <= U``: each such sync puts every record from ``U`` on at ``d`` or later, so nothing unread
is skipped; records between ``u`` and ``U`` may be read twice (MM2's ``translateOffsets``
likewise never skips, and re-reads up to the distance to the previous sync). With a sync at
exactly ``U`` (a group caught up with a mirror that is caught up) the translation is exact.

Memory is bounded: past :data:`MAX_SYNCS` per partition the older half is thinned to every
other sync (recent offsets stay precise, old ones coarse, as MM2's ``OffsetSyncStore``).

Not thread-safe; the mirror's loop owns it.
"""

from __future__ import annotations

import bisect

MAX_SYNCS = 2048


class OffsetSyncStore:
    def __init__(self) -> None:
        # (topic, partition) -> syncs sorted by upstream offset; per upstream the largest d
        self._syncs: dict[tuple[str, int], list[tuple[int, int]]] = {}

    def add(self, topic: str, partition: int, upstream: int, downstream: int) -> None:
        syncs = self._syncs.setdefault((topic, partition), [])
        i = bisect.bisect_left(syncs, (upstream, -1))
        if i < len(syncs) and syncs[i][0] == upstream:
            if syncs[i][1] >= downstream:
                return
            syncs[i] = (upstream, downstream)
        else:
            syncs.insert(i, (upstream, downstream))
        if len(syncs) > MAX_SYNCS:
            half = len(syncs) // 2
            syncs[:half] = syncs[:half:2]

    def translate(self, topic: str, partition: int, upstream: int) -> int | None:
        """The target offset a group at source offset ``upstream`` resumes from, or None when no
        sync is at or before it (the mirror has not reached that far back)."""
        syncs = self._syncs.get((topic, partition))
        if not syncs:
            return None
        i = bisect.bisect_right(syncs, (upstream, 1 << 62))
        if i == 0:
            return None
        return max(d for _, d in syncs[:i])

    def __len__(self) -> int:
        return sum(len(s) for s in self._syncs.values())
