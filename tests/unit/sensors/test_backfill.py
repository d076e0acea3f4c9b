"""The backfill generator: a seeded replay of the past, every weather regime in it,
event times in the past and continued by the live fleet without a gap or a repeat."""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest

from framework.errors import StoreError
from sensors import backfill as bf
from sensors.cli import _tick_ms, parse_speed, parse_when
from sensors.fleet import SensorFleet, load_seq_state, save_seq_state
from sensors.model import CONDITIONS, SLOT_MS, Model, ModelConfig, day_plan, showcase_weather

SF = dt.timezone(dt.timedelta(hours=-8))
REGIMES = {"clear", "fog", "rain", "heavy_rain"}


def at(y: int, m: int, d: int, h: int, minute: int = 0, s: int = 0) -> int:
    return int(dt.datetime(y, m, d, h, minute, s, tzinfo=SF).timestamp() * 1000)


class Collect:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, dict[str, Any], int]] = []

    def send(self, topic: str, key: str, value: dict[str, Any], ts_ms: int) -> None:
        self.events.append((topic, key, value, ts_ms))

    def poll(self) -> None:
        pass


def replay(plan: bf.Backfill, n_sensors: int = 2000, tick_ms: int = 5000, seed: int = 42) -> Collect:
    """What ``sftraffic sensors`` runs for a backfill, in process."""
    fleet = SensorFleet(n_sensors, plan.model_config(seed), shard=(0, plan.sample), assets=False)
    sink = Collect()
    fleet.run(sink, plan.from_ms, plan.duration_ms / 1000, speed=0, tick_ms=tick_ms)
    return sink


def digest(events: list[tuple[str, str, dict[str, Any], int]]) -> str:
    h = hashlib.sha256()
    for e in events:
        h.update(msgspec.json.encode(e))
    return h.hexdigest()


def test_a_backfill_ends_at_the_last_minute_boundary_and_spans_whole_minutes() -> None:
    now = at(2026, 11, 18, 14, 37, 12) + 345
    b = bf.Backfill.ending_now(6 * 3_600_000 + 30_000, sample=40, now_ms=now)
    assert b.until_ms == at(2026, 11, 18, 14, 37) and b.until_ms <= now
    assert b.duration_ms == 6 * 3_600_000 + 60_000  # rounded up to whole minutes
    assert b.from_ms % 60_000 == 0 and b.showcase == (b.from_ms, b.until_ms)
    again, extra = bf.Backfill.from_json(b.to_json(state="stored", events=12))
    assert again == b and extra == {"state": "stored", "events": 12}


def test_the_default_sample_replays_about_250_sensors() -> None:
    assert bf.sample_for(10_000) == 40
    assert bf.sample_for(1_000) == 4
    assert bf.sample_for(300) == 1 and bf.sample_for(10) == 1


def test_the_replay_is_deterministic_with_a_seed() -> None:
    plan = bf.Backfill.ending_now(20 * 60_000, sample=20, now_ms=at(2026, 11, 18, 8, 0))
    a, b = replay(plan), replay(plan)
    assert len(a.events) > 1000
    assert digest(a.events) == digest(b.events)
    assert digest(replay(plan, seed=7).events) != digest(a.events)


@pytest.mark.parametrize(
    "now",
    [
        at(2026, 11, 18, 14, 0),  # an afternoon: the ordinary model has no fog then
        at(2026, 11, 21, 3, 30),  # a Saturday night
        at(2026, 7, 1, 18, 45),
        at(2027, 2, 3, 9, 10),
    ],
)
def test_every_weather_regime_appears_next_to_clear_weather(now: int) -> None:
    """The estimate compares a regime with clear weather on the same segment in the same hour:
    each regime must share (station, hour) cells with clear weather, whatever the time of day."""
    plan = bf.Backfill.ending_now(3 * 3_600_000, now_ms=now)
    model = Model(plan.model_config())
    cells: dict[tuple[int, int], set[str]] = defaultdict(set)
    for t in range(plan.from_ms, plan.until_ms, 60_000):
        for station, code in enumerate(model.station_conditions(t).tolist()):
            name = CONDITIONS[code]
            cells[(station, t // 3_600_000)].add("clear" if name == "cloudy" else name)
    seen = set().union(*cells.values())
    assert seen >= REGIMES
    for regime in ("fog", "rain", "heavy_rain"):
        shared = sum(1 for c in cells.values() if {regime, "clear"} <= c)
        assert shared >= 2, f"{regime} shares no hour with clear weather"


def test_the_showcase_leaves_the_rest_of_the_day_as_it_was() -> None:
    plan = bf.Backfill.ending_now(2 * 3_600_000, now_ms=at(2026, 11, 18, 16, 0))
    plain = day_plan(ModelConfig(), at(2026, 11, 18, 0, 0))
    showcase = day_plan(plan.model_config(), at(2026, 11, 18, 0, 0))
    first = (plan.from_ms - plain.day_start_ms) // SLOT_MS
    last = -(-(plan.until_ms - plain.day_start_ms) // SLOT_MS)
    outside = np.r_[0:first, last : plain.conditions.shape[1]]
    assert (showcase.conditions[:, outside] == plain.conditions[:, outside]).all()
    assert (showcase.conditions[:, first:last] != plain.conditions[:, first:last]).any()
    k0, cond, _precip = showcase_weather(plan.model_config())
    assert k0 == plan.from_ms // SLOT_MS and cond.shape == (9, 12)


def test_event_times_lie_in_the_past_and_the_live_fleet_continues_them() -> None:
    """Replay [from, until), then the live fleet from ``until`` with catch-up (as ``sftraffic
    up`` runs them): no event at or after ``until`` in the replay, the live one's first tick is
    ``until`` exactly, and each sensor's sequence numbers go on from the replay's."""
    plan = bf.Backfill.ending_now(10 * 60_000, sample=20, now_ms=int(time.time() * 1000))
    cfg = plan.model_config()
    past = SensorFleet(2000, cfg, shard=(0, plan.sample), assets=False)
    old = Collect()
    past.run(old, plan.from_ms, plan.duration_ms / 1000, speed=0, tick_ms=5000)
    times = [ts for *_, ts in old.events]
    assert min(times) >= plan.from_ms and max(times) < plan.until_ms <= time.time() * 1000
    assert max(times) >= plan.until_ms - 5000, "the replay stops short of its end"
    weather = sorted({ts for topic, _k, _v, ts in old.events if topic.endswith("weather_conditions")})
    assert weather == list(range(plan.from_ms, plan.until_ms, 60_000)), "a station reading every minute"

    live = SensorFleet(2000, cfg)  # the whole fleet: the replayed sensors are among them
    live.restore_seq(past.seq_state())
    new = Collect()
    live.run(new, plan.until_ms, duration_s=3, catch_up=True)  # `until` is past: no waiting
    assert min(ts for *_, ts in new.events) >= plan.until_ms
    assert min(ts for *_, ts in new.events) < plan.until_ms + 1000
    last_seq: dict[str, int] = {}
    for _t, key, ev, _ts in old.events:
        last_seq[key] = ev["seq"]
    for _t, key, ev, _ts in new.events:
        if key in last_seq:
            assert ev["seq"] == last_seq[key] + 1, (key, ev["seq"], last_seq[key])
            last_seq[key] = ev["seq"]


def test_catch_up_waits_for_a_start_in_the_future() -> None:
    fleet = SensorFleet(200, ModelConfig())
    start = (int(time.time() * 1000) // 1000 + 2) * 1000
    sink = Collect()
    t0 = time.time()
    fleet.run(sink, start, duration_s=1, catch_up=True)
    assert time.time() >= start / 1000 - 0.05 and time.time() - t0 < 4
    assert all(start <= ts < start + 1000 for *_, ts in sink.events)


def test_sequence_numbers_survive_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "fleet" / "sensors.json"
    a = SensorFleet(300, ModelConfig())
    a.run(Collect(), at(2026, 11, 18, 8, 0), duration_s=30, speed=0)
    save_seq_state(path, a.seq_state())
    save_seq_state(path.with_name("sensors.json.1"), {"ts-extra": 5})  # a second worker's file
    state = load_seq_state(path)
    assert state["ts-extra"] == 5 and all(state[k] == v for k, v in a.seq_state().items())
    b = SensorFleet(300, ModelConfig())
    assert b.restore_seq(state) == len(a.seq_state())
    assert b.seq_state() == a.seq_state()
    assert load_seq_state(tmp_path / "missing.json") == {}


def test_time_and_speed_arguments() -> None:
    now = at(2026, 11, 18, 12, 0)
    assert parse_when("now", now) == now
    assert parse_when("-6h", now) == now - 6 * 3_600_000
    assert parse_when("+90s", now) == now + 90_000
    assert parse_when(str(now - 5), now) == now - 5
    assert parse_when("2026-11-18T04:00", now) == at(2026, 11, 18, 4, 0)
    assert parse_speed("max") == 0 and parse_speed("60") == 60
    with pytest.raises(argparse.ArgumentTypeError):
        parse_speed("-1")
    assert _tick_ms(5) == 5000
    with pytest.raises(StoreError, match="--tick 7: use a divisor of 60 s"):
        _tick_ms(7)


def test_from_takes_a_relative_time_on_the_command_line() -> None:
    from sensors.cli import add_parser

    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    args = parser.parse_args(["sensors", "--from", "-6h", "--until", "now", "--speed", "max"])
    assert (args.start, args.until, args.speed) == ("-6h", "now", 0.0)


def test_progress_lines_are_read_back() -> None:
    p = bf.parse_progress("sensors progress: events=1234 sim_ms=1795482060000 rate=48211")
    assert p == bf.Progress(1234, 1795482060000, 48211.0, False)
    done = bf.parse_progress("sensors progress: events=9 sim_ms=5 rate=3 done")
    assert done is not None and done.done
    assert bf.parse_progress("sensors: 9 events sent") is None


def test_replay_and_live_command_lines_agree() -> None:
    plan = bf.Backfill(1_000_000 * 60_000, 1_000_360 * 60_000, sample=40)
    replay_args, live_args = plan.replay_args(), plan.live_args()
    assert replay_args[replay_args.index("--until") + 1] == live_args[live_args.index("--start") + 1]
    assert "--catch-up" in live_args
    showcase = replay_args[replay_args.index("--showcase") + 1]
    assert showcase == live_args[live_args.index("--showcase") + 1] == f"{plan.from_ms},{plan.until_ms}"
