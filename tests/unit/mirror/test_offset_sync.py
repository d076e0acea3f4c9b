"""OffsetSyncStore: translation never skips an unread record, bounded memory."""

from __future__ import annotations

import random

from mirror.offset_sync import MAX_SYNCS, OffsetSyncStore


def test_no_sync_at_or_before_the_offset_translates_to_nothing() -> None:
    s = OffsetSyncStore()
    assert s.translate("t", 0, 5) is None
    s.add("t", 0, 10, 0)
    assert s.translate("t", 0, 9) is None
    assert s.translate("t", 1, 10) is None


def test_exact_at_a_sync_and_never_past_it_between_syncs() -> None:
    s = OffsetSyncStore()
    s.add("t", 0, 0, 0)
    s.add("t", 0, 100, 100)
    s.add("t", 0, 200, 230)  # duplicates after a restart shifted the copies
    assert s.translate("t", 0, 100) == 100
    assert s.translate("t", 0, 150) == 100  # re-reads 100..149 rather than skip anything
    assert s.translate("t", 0, 200) == 230
    assert s.translate("t", 0, 10**9) == 230


def test_the_largest_downstream_among_earlier_syncs_wins() -> None:
    s = OffsetSyncStore()
    s.add("t", 0, 50, 80)  # a later session: 50 copied again at 80
    s.add("t", 0, 60, 60)  # the first session: 60 at 60 (its copy at 90 came later)
    assert s.translate("t", 0, 60) == 80
    s.add("t", 0, 50, 40)  # a smaller downstream for the same upstream is ignored
    assert s.translate("t", 0, 55) == 80


def test_a_simulated_mirror_with_crashes_never_skips() -> None:
    """Copies of records 0..n-1 with restarts from random earlier points: for every group offset
    U, every record >= U has a copy at or after translate(U)."""
    rnd = random.Random(7)
    s = OffsetSyncStore()
    target: list[int] = []  # upstream offset of each target record
    u, committed = 0, 0
    s.add("t", 0, 0, 0)
    while u < 2000:
        for _ in range(rnd.randint(1, 80)):
            if u >= 2000:
                break
            target.append(u)
            if rnd.random() < 0.05:
                s.add("t", 0, u, len(target) - 1)
            u += 1
        if rnd.random() < 0.5:
            committed = u
            s.add("t", 0, u, len(target))
        else:  # a crash: copy again from the last commit
            u = committed
            s.add("t", 0, u, len(target))
    for group in range(0, 2000, 7):
        d = s.translate("t", 0, group)
        assert d is not None
        after = set(target[d:])
        assert all(x in after for x in range(group, 2000)), group


def test_memory_is_bounded_and_recent_syncs_stay_exact() -> None:
    s = OffsetSyncStore()
    for i in range(10 * MAX_SYNCS):
        s.add("t", 0, i * 10, i * 10)
    assert len(s) <= MAX_SYNCS
    last = (10 * MAX_SYNCS - 1) * 10
    assert s.translate("t", 0, last) == last
    assert s.translate("t", 0, 5) == 0
