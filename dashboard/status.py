"""What a panel without data is waiting for, and roughly when it arrives.

Computed from what the dashboard knows (:class:`Facts`, a snapshot of
:class:`dashboard.data.DashboardData`): when it started, whether the store answers, which of the
stream's topics exist and hold records, the sensor events it received (their event times: the
data clock, which a replay runs faster than the wall clock), and the Spark jobs' window and
watermark. A window of ``window`` closes on the data clock at its end, and Spark writes it once
the watermark (the newest event time minus ``watermark``) passes that end; the weather-effect
estimates follow from joined windows, recomputed at most every ``effects_every_s``.

Every function returns None when the panel has data to draw, else a :class:`Wait`: a headline
and a line of detail, in words a person can act on.
"""

from __future__ import annotations

import datetime as dt
import re
import textwrap
from dataclasses import dataclass, field

from sensors.layout import topic

PST = dt.timezone(dt.timedelta(hours=-8), "PST")
RUN_PIPELINE = "sftraffic pipeline all"
RUN_FLEET = "sftraffic sensors (or everything: sftraffic up)"
REGIMES = ("fog", "rain", "heavy_rain")
# how long past the expected time before "is the pipeline running?" (micro-batch trigger, a
# slow first Spark batch: it starts Python workers)
GRACE_MS = 90_000


def spark_interval_ms(text: str) -> int:
    """'1 minute', '2 minutes', '30 seconds', '1 hour', '500 milliseconds' -> ms."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-z]+)\s*", text.lower())
    units = {"millisecond": 1, "second": 1000, "minute": 60_000, "hour": 3_600_000, "day": 86_400_000}
    if m:
        unit = m.group(2).removesuffix("s")
        if unit in units:
            return int(float(m.group(1)) * units[unit])
    raise ValueError(f"cannot read the interval {text!r} (e.g. '1 minute', '30 seconds')")


def job_timing() -> tuple[int, int, float]:
    """The Spark jobs' defaults (``pipelines.jobs``): window, watermark (ms), and how often at
    most the weather effects are recomputed (s)."""
    import inspect

    from pipelines.jobs import EffectsPublisher, JobConfig

    cfg = JobConfig()
    every = inspect.signature(EffectsPublisher).parameters["every"].default
    return spark_interval_ms(cfg.window), spark_interval_ms(cfg.watermark), float(every)


def hhmm(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, tz=PST).strftime("%H:%M")


def span(ms: int) -> str:
    """60000 -> '1 min', 90000 -> '90 s', 10800000 -> '3 h'."""
    if ms % 3_600_000 == 0:
        return f"{ms // 3_600_000} h"
    if ms % 60_000 == 0:
        return f"{ms // 60_000} min"
    return f"{ms / 1000:g} s"


def window_name(ms: int) -> str:
    """60000 -> '1-minute', 30000 -> '30-second'."""
    if ms % 3_600_000 == 0:
        return f"{ms // 3_600_000}-hour"
    if ms % 60_000 == 0:
        return f"{ms // 60_000}-minute"
    return f"{ms / 1000:g}-second"


@dataclass(frozen=True)
class Wait:
    headline: str
    detail: str = ""

    def html(self, width: int = 78) -> str:
        """For a Plotly annotation: the headline in bold, the detail wrapped with <br>."""
        lines = textwrap.wrap(self.detail, width) if self.detail else []
        return "<br>".join([f"<b>{self.headline}</b>", *lines])

    def text(self) -> str:
        return f"{self.headline}: {self.detail}" if self.detail else self.headline


@dataclass(frozen=True)
class Facts:
    bootstrap: str
    now_ms: int  # wall clock
    started_ms: int  # when the dashboard started
    lookback_ms: int
    window_ms: int
    watermark_ms: int
    effects_every_s: float
    store_checked: bool = False  # the health poll has answered once (either way)
    store_ok: bool = False
    error: str = ""
    topics: dict[str, int] = field(default_factory=dict)  # existing topic -> records (end offsets)
    events_seen: int = 0
    oldest_event_ms: int | None = None  # data clock: event times of the sensor events received
    newest_event_ms: int | None = None
    segments_with_windows: int = 0
    newest_window_ms: int | None = None
    effects: int = 0
    weather_readings: int = 0
    conditions_seen: frozenset[str] = frozenset()
    infra_readings: int = 0


def _topic_state(f: Facts, name: str) -> str:
    """'missing', 'empty' or 'has data' (records the dashboard may not have read)."""
    t = topic(name)
    if t not in f.topics:
        return "missing"
    return "has data" if f.topics[t] > 0 else "empty"


def store(f: Facts) -> Wait | None:
    """None once the store answers."""
    if f.store_ok:
        return None
    if not f.store_checked:
        return Wait(f"connecting to the store at {f.bootstrap}", f"dashboard started at {hhmm(f.started_ms)}")
    return Wait(
        f"waiting for the store at {f.bootstrap}",
        f"it does not answer ({f.error[:100] or 'no reply'}); start it with sftraffic up or sftraffic broker",
    )


def events(f: Facts, what: str = "traffic", label: str = "sensor events") -> Wait | None:
    """Raw events of topic ``what`` (traffic, infrastructure, weather_conditions)."""
    have = {
        "traffic": f.events_seen,
        "infrastructure": f.infra_readings,
        "weather_conditions": f.weather_readings,
    }[what]
    if have:
        return None
    w = store(f)
    if w is not None:
        return w
    head = f"waiting for the first {label} from the store at {f.bootstrap}"
    state = _topic_state(f, what)
    if state == "missing":
        return Wait(head, f"topic {topic(what)} does not exist yet: start the fleet with {RUN_FLEET}")
    if state == "has data":
        return Wait(
            head,
            f"{topic(what)} holds records, none from the last {span(f.lookback_ms)} "
            "(the dashboard's --lookback): is the fleet still running?",
        )
    return Wait(
        head,
        f"{topic(what)} is empty; the dashboard has listened since {hhmm(f.started_ms)}: "
        f"start the fleet with {RUN_FLEET}",
    )


def first_window(f: Facts) -> tuple[int, int]:
    """(end of the first window holding a received event, when Spark writes it: that end plus
    the watermark), both on the data clock."""
    assert f.oldest_event_ms is not None
    end = f.oldest_event_ms - f.oldest_event_ms % f.window_ms + f.window_ms
    return end, end + f.watermark_ms


def windows(f: Facts, job: str = "aggregates", result: str = "traffic_aggregates") -> Wait | None:
    """The Spark jobs' windows (aggregates, and the alerts computed from them)."""
    if f.segments_with_windows:
        return None
    w = events(f)
    if w is not None:
        return w
    if _topic_state(f, result) == "missing":
        return Wait(
            f"pipeline not running: start it with {RUN_PIPELINE}",
            f"sensor events are arriving, but the {job} job's topic {topic(result)} does not exist yet",
        )
    end, due = first_window(f)
    newest = f.newest_event_ms or end
    closes = f"first {window_name(f.window_ms)} window closes at {hhmm(end)}"
    closes += f" + {span(f.watermark_ms)} watermark"
    if newest < due + GRACE_MS:
        return Wait(
            closes,
            f"Spark writes it once events reach {hhmm(due)} (data time now {hhmm(newest)}); "
            f"the map shows the current minute from raw events meanwhile",
        )
    if _topic_state(f, result) == "has data":
        return Wait(
            f"no windows from the last {span(f.lookback_ms)}",
            f"{topic(result)} holds older windows only: is the pipeline still running? ({RUN_PIPELINE})",
        )
    return Wait(
        f"pipeline not running? start it with {RUN_PIPELINE}",
        f"the {closes.removeprefix('first ')} was due when events reached {hhmm(due)}, "
        f"events are at {hhmm(newest)} and {topic(result)} is still empty",
    )


def effects(f: Facts) -> Wait | None:
    """The correlation job's weather-effect estimates."""
    if f.effects:
        return None
    every = f"{f.effects_every_s:g} s"
    w = windows(f)
    if w is not None:
        return Wait(
            w.headline,
            f"then the correlation job estimates each regime's effect from joined windows (every {every})",
        )
    w = events(f, "weather_conditions", "weather readings")
    if w is not None:
        return w
    if _topic_state(f, "weather_effects") == "missing":
        return Wait(
            f"correlation job not running: start it with {RUN_PIPELINE}",
            f"topic {topic('weather_effects')} does not exist yet",
        )
    seen = ", ".join(c.replace("_", " ") for c in sorted(f.conditions_seen)) or "none"
    if not f.conditions_seen & set(REGIMES):
        return Wait(
            "no fog or rain yet: waiting for the weather to turn",
            f"an estimate compares each regime with clear weather on the same road and hour "
            f"(weather so far: {seen}); it follows within {every} of such a window",
        )
    return Wait(
        f"first estimates within {every} of the joined windows",
        f"once a road has had fog or rain next to clear weather in the same hour (weather so far: {seen})",
    )


def segment(f: Facts, segment_name: str, since_ms: int, newest_ms: int | None) -> Wait | None:
    """The selected segment's series: the jobs' windows, then this segment's within the range."""
    w = windows(f)
    if w is not None:
        return w
    if newest_ms is None:
        return Wait(
            f"no windows for {segment_name} yet",
            f"other segments have windows up to {hhmm(f.newest_window_ms or f.now_ms)}; "
            "this one has had no vehicles since the dashboard started",
        )
    return Wait(
        f"no windows for {segment_name} in this range",
        f"its newest window is at {hhmm(newest_ms)}, before {hhmm(since_ms)}: choose a longer range",
    )
