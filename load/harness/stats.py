"""Statistics every benchmark uses: one percentile definition, medians and their spread."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from typing import Any


def percentile(values: Iterable[float], q: float) -> float | None:
    """Nearest-rank percentile: the smallest observed value with at least ``q`` % of the values
    at or below it, i.e. the ceil(q/100 * n)-th smallest (1-based; q = 0 gives the smallest).

    No interpolation: the result is always one of the values. When q*n/100 is whole it is that
    rank exactly: p50 of 10 values is the 5th smallest, p90 of 10 the 9th. ``values`` need not be
    sorted; None when there are none.
    """
    s = sorted(values)
    if not s:
        return None
    rank = math.ceil(round(q * len(s) / 100, 9))  # round: 99.9 * 1000 / 100 is 999.0000000000001
    return s[min(len(s), max(1, rank)) - 1]


def rounded(value: float | None, digits: int = 3) -> float | None:
    """``round(value, digits)``, None staying None (a figure that could not be measured)."""
    return None if value is None else round(value, digits)


def median(values: Iterable[float | None]) -> float | None:
    """Median of the values that are not None (None when there are none)."""
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def spread(values: Iterable[float | None]) -> dict[str, Any] | None:
    """Median with the range it comes from: {"median", "min", "max", "n"} (None without values)."""
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals), "n": len(vals)}


def summary(values: Iterable[float], digits: int = 3) -> dict[str, Any]:
    """n, min, p50, p95, p99, max and mean of ``values``, rounded (``{"n": 0}`` without values)."""
    v = sorted(values)
    if not v:
        return {"n": 0}
    pick = {"min": v[0], **{f"p{q}": percentile(v, q) or 0.0 for q in (50, 95, 99)}, "max": v[-1]}
    return {
        "n": len(v),
        **{k: round(x, digits) for k, x in pick.items()},
        "mean": round(sum(v) / len(v), digits),
    }
