"""A simulated past replayed before going live (``sftraffic up --backfill 6h``).

The backfill is the fleet itself run over ``[from_ms, until_ms)`` as fast as the store takes
it (``sftraffic sensors --from ... --until ... --speed max``), through the same path as live
data: most of it produced directly, a share published by MQTT devices through Mosquitto and
the gateway. It is lighter than the live fleet: every ``sample``-th pavement sensor (speeds
are the model's, so unchanged; volumes are 1/``sample`` of live ones), all weather stations,
no infrastructure assets (the dashboard shows only their latest reading). Its weather is a
showery spell with coastal fog banks (:func:`sensors.model.showcase_weather`), so a few hours
hold every regime the weather-effect estimate needs.

Where live begins: ``until_ms`` is a minute boundary (no 1-minute window straddles it). The
live fleets start there with ``--catch-up`` (simulated time = wall clock: they generate the
minutes since ``until_ms`` at once, then run live), the replay stops just before it, and the
sensors' sequence numbers run on from the replay into live (``--seq-state``). The Spark jobs
split the work by event time the same way: the batch jobs over ``[from_ms, until_ms)``, the
streaming queries from ``until_ms`` on (``sftraffic pipeline all --backfill FROM,UNTIL``).
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sensors.model import ModelConfig

DEFAULT_DURATION = "6h"
# pavement sensors a backfill replays by default: 1 in 40 of the 10k fleet, ~1M events for six
# hours, ~45 events per simulated second; enough for the weather-effect estimates (within
# 0.005 of the configured factors in 6 h) and for congestion alerts (>= 3 vehicles a window)
DEFAULT_SENSORS = 250
DEFAULT_SAMPLE = 40
MINUTE_MS = 60_000


def sample_for(n_sensors: int, target: int = DEFAULT_SENSORS) -> int:
    """Replay every N-th of ``n_sensors`` so that about ``target`` of them run (N >= 1)."""
    return max(1, round(n_sensors / target))


@dataclass(frozen=True)
class Backfill:
    from_ms: int
    until_ms: int
    sample: int = DEFAULT_SAMPLE

    @classmethod
    def ending_now(
        cls, duration_ms: int, sample: int = DEFAULT_SAMPLE, now_ms: int | None = None
    ) -> Backfill:
        """The last ``duration_ms`` (whole minutes) before the current minute boundary."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        until = now - now % MINUTE_MS
        minutes = max(1, -(-duration_ms // MINUTE_MS))
        return cls(until - minutes * MINUTE_MS, until, max(1, sample))

    @property
    def duration_ms(self) -> int:
        return self.until_ms - self.from_ms

    @property
    def showcase(self) -> tuple[int, int]:
        """The period of the showery spell: the backfill's."""
        return (self.from_ms, self.until_ms)

    def model_config(self, seed: int = 42, **kw: Any) -> ModelConfig:
        """The model every fleet of this run uses (replay and live alike)."""
        return ModelConfig(seed=seed, showcase=self.showcase, **kw)

    # -- command lines (``sftraffic sensors``) ----------------------------------------------
    def showcase_arg(self) -> list[str]:
        return ["--showcase", f"{self.from_ms},{self.until_ms}"]

    def replay_args(self) -> list[str]:
        """Options of a ``sftraffic sensors`` run that replays the backfill and exits."""
        return [
            "--from",
            str(self.from_ms),
            "--until",
            str(self.until_ms),
            "--speed",
            "max",
            "--tick",
            "5",
            "--sample",
            str(self.sample),
            "--no-assets",
            *self.showcase_arg(),
            "--progress",
            "--quiet",
        ]

    def live_args(self) -> list[str]:
        """Options of a live ``sftraffic sensors`` run that continues the backfill."""
        return ["--start", str(self.until_ms), "--catch-up", *self.showcase_arg()]

    # -- persisted plan ---------------------------------------------------------------------
    def to_json(self, **extra: Any) -> str:
        return json.dumps({**dataclasses.asdict(self), **extra}, indent=1)

    @classmethod
    def from_json(cls, text: str) -> tuple[Backfill, dict[str, Any]]:
        d = json.loads(text)
        b = cls(int(d.pop("from_ms")), int(d.pop("until_ms")), int(d.pop("sample", DEFAULT_SAMPLE)))
        return b, d

    def describe(self) -> str:
        import datetime as dt

        pst = dt.timezone(dt.timedelta(hours=-8))
        a = dt.datetime.fromtimestamp(self.from_ms / 1000, pst)
        b = dt.datetime.fromtimestamp(self.until_ms / 1000, pst)
        return f"{a:%a %H:%M} to {b:%H:%M} PST"


# -- progress of a replaying ``sftraffic sensors --progress`` ---------------------------------
_PROGRESS = re.compile(r"sensors progress: events=(\d+) sim_ms=(-?\d+) rate=(\d+)( done)?")


@dataclass
class Progress:
    events: int = 0
    sim_ms: int = 0
    rate: float = 0.0
    done: bool = False


def parse_progress(line: str) -> Progress | None:
    """A ``sensors progress: events=N sim_ms=T rate=R [done]`` line, or None."""
    m = _PROGRESS.search(line)
    if m is None:
        return None
    return Progress(int(m.group(1)), int(m.group(2)), float(m.group(3)), m.group(4) is not None)


# -- the store holding the replay -------------------------------------------------------------
def end_offsets(bootstrap: str, topics: list[str]) -> int:
    """Sum of the log end offsets of ``topics`` (every partition)."""
    from confluent_kafka import Consumer, TopicPartition

    from framework.client.security import secured
    from sensors.publish import _quiet

    conf = {"bootstrap.servers": bootstrap, "group.id": "sftraffic-backfill", "logger": _quiet()}
    c = Consumer(secured(conf))
    try:
        md = c.list_topics(timeout=10)
        total = 0
        for t in topics:
            tm = md.topics.get(t)
            if tm is None:
                continue
            for p in tm.partitions:
                total += int(c.get_watermark_offsets(TopicPartition(t, p), timeout=10, cached=False)[1])
        return total
    finally:
        c.close()


def save_plan(path: Path, backfill: Backfill, **extra: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(backfill.to_json(**extra))
    tmp.replace(path)
