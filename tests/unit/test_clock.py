"""The broker's clock (framework/clock.py): the manual one tests move, the system one."""

from __future__ import annotations

import time

import pytest

from framework.clock import SYSTEM, Clock, ManualClock


def test_a_manual_clock_moves_both_times_only_when_told() -> None:
    c: Clock = ManualClock(wall_ms=5_000, monotonic=2.0)
    assert (c.wall_ms(), c.monotonic()) == (5_000, 2.0)
    assert isinstance(c, ManualClock)
    c.advance(1_500)
    assert (c.wall_ms(), c.monotonic()) == (6_500, 3.5)
    with pytest.raises(ValueError, match="does not go back"):
        c.advance(-1)


def test_the_system_clock_is_the_machines() -> None:
    before = int(time.time() * 1000)
    assert before <= SYSTEM.wall_ms() <= int(time.time() * 1000)
    m = time.monotonic()
    assert m <= SYSTEM.monotonic() <= time.monotonic()
