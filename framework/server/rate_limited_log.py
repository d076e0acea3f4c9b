"""A log line source that cannot flood the log: at most ``burst`` lines per ``period_s``.

What a client can cause at will (a refused batch, a failed authentication, a connection closed
for abuse) is logged through one of these, so a misbehaving client costs the log a few lines
per period, not one per request. The first line let through after some were left out says how
many were.

Thread-safety: none; the broker logs through it on its event loop.
"""

from __future__ import annotations

import logging
import time

__all__ = ["LOG_BURST", "LOG_PERIOD_S", "RateLimitedLog"]

LOG_PERIOD_S = 10.0
LOG_BURST = 10


class RateLimitedLog:
    """At most ``burst`` lines per ``period_s``; the first line after that counts the rest."""

    __slots__ = ("_count", "_left_out", "_start", "burst", "logger", "period_s")

    def __init__(
        self, logger: logging.Logger, period_s: float = LOG_PERIOD_S, burst: int = LOG_BURST
    ) -> None:
        self.logger = logger
        self.period_s = period_s
        self.burst = burst
        self._start = -period_s
        self._count = 0
        self._left_out = 0

    def __call__(self, level: int, message: str, now: float | None = None) -> bool:
        """Log ``message`` unless over the limit; True when it was logged."""
        t = time.monotonic() if now is None else now
        if t - self._start >= self.period_s:
            self._start = t
            self._count = 0
        if self._count >= self.burst:
            self._left_out += 1
            return False
        self._count += 1
        if self._left_out:
            message += f" ({self._left_out} more not logged in the last {self.period_s:g} s)"
            self._left_out = 0
        self.logger.log(level, message)
        return True
