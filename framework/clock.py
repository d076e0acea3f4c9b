"""The broker's one clock: wall time (what the store stamps and compares) and monotonic time.

Wall time, in milliseconds since the epoch, is what a record batch's LogAppendTime, a segment's
age, retention, transaction timeouts, producer-id expiry and session re-authentication are
measured in; monotonic time, in seconds, only measures durations (back-offs, deadlines).

The composition root (:class:`framework.server.broker.Broker`) makes one :class:`SystemClock`
and passes it to every part that reads time, as Kafka passes its ``Time``; a test passes a
:class:`ManualClock` instead and moves it with :meth:`ManualClock.advance` (Kafka's
``MockTime``), so expiry is tested without sleeping. Parts of the storage layer that tools and
tests also open on their own default to :data:`SYSTEM`.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def wall_ms(self) -> int:
        """Milliseconds since the Unix epoch (may jump: NTP, an operator)."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (durations and deadlines only)."""
        ...


class SystemClock:
    """The machine's clocks."""

    def wall_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        return time.monotonic()


SYSTEM = SystemClock()


class ManualClock:
    """A clock that moves only when told to (tests): both times advance together."""

    def __init__(self, wall_ms: int = 1_700_000_000_000, monotonic: float = 1000.0) -> None:
        self._wall_ms = wall_ms
        self._monotonic = monotonic

    def wall_ms(self) -> int:
        return self._wall_ms

    def monotonic(self) -> float:
        return self._monotonic

    def advance(self, ms: int) -> None:
        """Move both clocks ``ms`` milliseconds forward."""
        if ms < 0:
            raise ValueError("a clock does not go back")
        self._wall_ms += ms
        self._monotonic += ms / 1000
