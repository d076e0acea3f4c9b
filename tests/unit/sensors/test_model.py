"""Statistical checks of the seeded simulator: what the analytics will be judged against."""

from __future__ import annotations

import datetime as dt
import json
import tracemalloc
from collections import defaultdict

import numpy as np
import pytest

from sensors import geo, schema
from sensors.fleet import TRAFFIC, SensorFleet
from sensors.layout import STREAM
from sensors.model import CONDITIONS, Model, ModelConfig, WeatherEffect, profile

SF = dt.timezone(dt.timedelta(hours=-8))


def ms(y: int, m: int, d: int, h: int = 0, minute: int = 0) -> int:
    return int(dt.datetime(y, m, d, h, minute, tzinfo=SF).timestamp() * 1000)


WEDNESDAY = (2026, 11, 18)
SATURDAY = (2026, 11, 21)


def count_events(fleet: SensorFleet, start: int, seconds: int) -> int:
    return sum(1 for t, *_ in _events(fleet, start, seconds) if t.endswith(TRAFFIC))


def _events(fleet: SensorFleet, start: int, seconds: int):  # type: ignore[no-untyped-def]
    for s in range(seconds):
        yield from fleet.tick(start + s * 1000)


def test_weekday_rush_hours_peak_and_nights_are_quiet() -> None:
    f = SensorFleet(2000, ModelConfig(seed=1, rain_share=0.0))
    night = count_events(f, ms(*WEDNESDAY, 3), 120)
    morning = count_events(f, ms(*WEDNESDAY, 8), 120)
    midday = count_events(f, ms(*WEDNESDAY, 11), 120)
    evening = count_events(f, ms(*WEDNESDAY, 17), 120)
    assert morning > 2.0 * midday * 0.6 and evening > midday, (night, morning, midday, evening)
    assert morning > 10 * night
    assert evening > 10 * night


def test_weekends_have_a_midday_hump_not_rush_hours() -> None:
    sat8, sat13 = profile(ms(*SATURDAY, 8)), profile(ms(*SATURDAY, 13))
    wed8 = profile(ms(*WEDNESDAY, 8))
    assert sat13 > sat8
    assert wed8 > 2 * sat8


def test_rush_hour_slows_arterials() -> None:
    m = Model(ModelConfig(seed=2, rain_share=0.0, incident_rate_per_hour=0.0))
    speed_peak, _, _ = m.segment_state(ms(*WEDNESDAY, 8))
    speed_night, _, _ = m.segment_state(ms(*WEDNESDAY, 3))
    market = m.seg_index["market-st-02"]
    assert speed_peak[market] < 0.8 * speed_night[market]


@pytest.mark.parametrize(
    "effect", [WeatherEffect(), WeatherEffect(rain_speed_factor=0.70, heavy_rain_speed_factor=0.55)]
)
def test_weather_effect_present_with_the_configured_size(effect: WeatherEffect) -> None:
    """Event speeds in rain / clear ≈ the configured factor, once the time of day is removed.

    Each event's speed is divided by its segment's dry-weather speed at that second (the same
    model with every weather factor 1): what is left is the weather factor times noise and
    vehicle-class mix, which do not depend on the weather. Comparing raw speeds of rain and
    clear minutes within an hour is confounded by rush hour (congestion moves within the hour).
    """
    cfg = ModelConfig(seed=5, effect=effect, rain_share=0.45, incident_rate_per_hour=0.0)
    dry = Model(
        ModelConfig(
            seed=5,
            effect=WeatherEffect(1.0, 1.0, 1.0, 1.0, 1.0),
            rain_share=0.45,
            incident_rate_per_hour=0.0,
        )
    )
    f = SensorFleet(1200, cfg)
    day = ms(*WEDNESDAY)
    norm: dict[str, list[float]] = defaultdict(list)
    per_cell: dict[tuple[str, int, str], list[float]] = defaultdict(list)
    dry_speed: dict[int, np.ndarray] = {}
    # the first 10 seconds of every 10-minute weather slot, across the whole day: the weather
    # varies between slots, not within one, so more seconds of a slot add little; this gives
    # ~200k events (>15k heavy rain) and means within ~0.002 of the factor (seeds 5-7 checked)
    for slot in range(144):
        t0 = day + slot * 600_000
        wx = f.model.weather_of_segments(t0)  # constant within the slot
        for topic, _key, ev, ts in _events(f, t0, 10):
            if topic.endswith(TRAFFIC):
                i = f.model.seg_index[ev["segment_id"]]
                second = ts - ts % 1000
                if second not in dry_speed:
                    dry_speed[second] = dry.segment_state(second)[0]
                cond = CONDITIONS[int(wx[i])]
                r = ev["speed_kmh"] / dry_speed[second][i]
                norm[cond].append(r)
                per_cell[(ev["segment_id"], slot // 6, cond)].append(r)
    assert len(norm["rain"]) > 5_000 and len(norm["heavy_rain"]) > 1_000, "too few wet events"
    clear = np.mean(norm["clear"] + norm["cloudy"])
    assert np.mean(norm["rain"]) / clear == pytest.approx(effect.rain_speed_factor, abs=0.02)
    assert np.mean(norm["heavy_rain"]) / clear == pytest.approx(effect.heavy_rain_speed_factor, abs=0.02)
    if norm["fog"]:
        assert np.mean(norm["fog"]) / clear == pytest.approx(effect.fog_speed_factor, abs=0.03)
    # and it holds segment by segment, not only on average
    cells = []
    for (seg, h, c), v in per_cell.items():
        base = per_cell.get((seg, h, "clear")) or per_cell.get((seg, h, "cloudy"), [])
        if c == "rain" and len(v) >= 30 and len(base) >= 30:
            cells.append(np.mean(v) / np.mean(base))
    assert len(cells) >= 20
    assert np.median(cells) == pytest.approx(effect.rain_speed_factor, abs=0.03)


def test_rain_raises_the_incident_rate() -> None:
    m = Model(ModelConfig(seed=9, rain_share=0.5, incident_rate_per_hour=0.2))
    rain_minutes = clear_minutes = rain_inc = clear_inc = 0
    for day in range(4):
        plan = m.plan(ms(2026, 11, 16 + day) + 3_600_000)
        for seg in geo.SEGMENTS:
            st = m.seg_station[m.seg_index[seg.segment_id]]
            starts = {(s - plan.day_start_ms) // 60_000 for s, _ in plan.incidents[seg.segment_id]}
            for minute in range(1440):
                cond = int(plan.conditions[st, minute // 10])
                hit = minute in starts
                if cond >= 3:
                    rain_minutes += 1
                    rain_inc += hit
                elif cond <= 1:
                    clear_minutes += 1
                    clear_inc += hit
    assert (rain_inc / rain_minutes) > 1.6 * (clear_inc / clear_minutes)


def test_incidents_slow_their_segment_and_spill_upstream() -> None:
    m = Model(ModelConfig(seed=3, rain_share=0.0, incident_rate_per_hour=0.5))
    day = ms(*WEDNESDAY)
    plan = m.plan(day + 3_600_000)
    seg = next(
        s
        for s in geo.SEGMENTS
        if s.upstream and geo.SEGMENTS_BY_ID[s.upstream].upstream and plan.incidents[s.segment_id]
    )
    start, end = plan.incidents[seg.segment_id][0]
    assert end - start >= 15 * 60_000
    at_start = m.incident_factor(start + 1000)
    later = m.incident_factor(start + int(m.cfg.spillback_minutes * 60_000 * 2) + 1000)
    i, up1, up2 = (
        m.seg_index[seg.segment_id],
        m.seg_index[seg.upstream],
        m.seg_index[geo.SEGMENTS_BY_ID[seg.upstream].upstream],
    )  # type: ignore[index]
    assert at_start[i] == pytest.approx(m.cfg.incident_speed_factor)
    assert later[up1] < 1.0 and later[up2] < 1.0
    assert later[i] <= later[up1] <= later[up2], "the slowdown weakens away from the incident"


def test_same_seed_same_events() -> None:
    a = [ev for _, _, ev, _ in _events(SensorFleet(300, ModelConfig(seed=11)), ms(*WEDNESDAY, 8), 20)]
    b = [ev for _, _, ev, _ in _events(SensorFleet(300, ModelConfig(seed=11)), ms(*WEDNESDAY, 8), 20)]
    assert a == b and len(a) > 20


def test_events_match_the_schema_and_sequences_increase_per_sensor() -> None:
    f = SensorFleet(500)
    last: dict[str, int] = {}
    for topic, key, ev, ts in _events(f, ms(*WEDNESDAY, 17), 65):
        decoded = schema.decode(json.dumps(ev).encode())
        assert decoded["sensor_id"] == key and ev["event_time"] == ts
        assert topic.startswith(STREAM + ".")
        assert ev["seq"] == last.get(key, -1) + 1
        last[key] = ev["seq"]


def test_ten_thousand_sensors_run_in_bounded_memory() -> None:
    f = SensorFleet(10_000)
    assert f.fleet.size == 10_000
    start = ms(*WEDNESDAY, 8)
    for _ in _events(f, start, 5):
        pass
    tracemalloc.start()
    base = tracemalloc.take_snapshot()
    n = sum(1 for _ in _events(f, start + 5000, 60))
    grown = sum(s.size_diff for s in tracemalloc.take_snapshot().compare_to(base, "filename"))
    tracemalloc.stop()
    assert n > 50_000
    assert grown < 2_000_000, f"memory grew by {grown} bytes over {n} events"
