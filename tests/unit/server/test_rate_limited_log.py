"""The rate-limited log (framework/server/rate_limited_log.py): a burst per period, then a
count of the lines left out on the next line let through."""

from __future__ import annotations

import logging

from framework.server.rate_limited_log import RateLimitedLog


class Sink(logging.Logger):
    def __init__(self) -> None:
        super().__init__("sink")
        self.lines: list[str] = []

    def log(self, level: int, msg: object, *args: object, **kwargs: object) -> None:  # type: ignore[override]
        self.lines.append(str(msg))


def test_a_burst_per_period_then_a_count_of_the_lines_left_out() -> None:
    sink = Sink()
    limited = RateLimitedLog(sink, period_s=10, burst=3)
    logged = [limited(logging.INFO, f"refused {i}", now=100.0 + i * 0.1) for i in range(10)]
    assert logged == [True] * 3 + [False] * 7
    assert sink.lines == ["refused 0", "refused 1", "refused 2"]
    assert limited(logging.INFO, "refused later", now=111.0)
    assert sink.lines[-1] == "refused later (7 more not logged in the last 10 s)"
    assert limited(logging.INFO, "and after", now=111.5)
    assert sink.lines[-1] == "and after"  # the count is told once
