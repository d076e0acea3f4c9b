"""The traffic and weather model behind the simulated fleet: seeded, deterministic, checkable.

Everything is a function of the seed and the simulated time, so a day replayed twice produces
the same conditions, and the analytics can be checked against the configured ground truth:

* **Volume** per lane follows weekday / weekend hourly profiles (morning and evening rush
  hours on weekdays, a midday hump at weekends) times the lane capacity of the road kind.
* **Speed** of a segment = free-flow speed × congestion (BPR curve on the dry-weather
  volume/capacity) × weather factor of its nearest station × incident factor, so the weather's
  speed effect is exactly the configured factor (outside incidents). Vehicles scatter around it.
* **Weather** per station in 10-minute slots: regional rain episodes (clear → rain → heavy
  rain), morning/evening fog on the ocean side, clouds. The **effect on traffic is
  configurable** (:class:`WeatherEffect`): rain lowers speeds by a set share and raises the
  incident rate.
* **Incidents** arrive per segment as a Poisson process whose rate the weather multiplies;
  one slows its segment hard and spreads upstream, one segment further back every few
  minutes, weaker each step.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from sensors import geo

CONDITIONS = ("clear", "cloudy", "fog", "rain", "heavy_rain")
CLEAR, CLOUDY, FOG, RAIN, HEAVY_RAIN = range(5)
SLOT_MS = 600_000  # weather resolution: 10 minutes
DAY_MS = 86_400_000

WEEKDAY = [
    0.08,
    0.05,
    0.04,
    0.04,
    0.07,
    0.20,
    0.50,
    0.85,
    1.00,
    0.75,
    0.60,
    0.62,
    0.65,
    0.62,
    0.62,
    0.70,
    0.85,
    1.00,
    0.90,
    0.60,
    0.42,
    0.32,
    0.22,
    0.13,
]
WEEKEND = [
    0.12,
    0.08,
    0.06,
    0.05,
    0.05,
    0.08,
    0.15,
    0.25,
    0.38,
    0.50,
    0.60,
    0.68,
    0.72,
    0.72,
    0.70,
    0.68,
    0.66,
    0.62,
    0.55,
    0.45,
    0.38,
    0.30,
    0.22,
    0.16,
]

# vehicles per lane per hour at the profile's peak, by road kind
PEAK_PER_LANE_HOUR = {"arterial": 650.0, "freeway": 1500.0, "bridge": 1600.0}
BPR_ALPHA = {"arterial": 0.6, "freeway": 0.45, "bridge": 0.45}
VC_AT_PEAK = 0.95

VEHICLE_CLASSES = ("motorcycle", "car", "van", "bus", "truck", "semi")
CLASS_P = {
    "arterial": (0.03, 0.78, 0.08, 0.03, 0.06, 0.02),
    "freeway": (0.02, 0.76, 0.08, 0.01, 0.08, 0.05),
    "bridge": (0.02, 0.77, 0.08, 0.01, 0.07, 0.05),
}
CLASS_WEIGHT = {  # mean, sd (kg)
    "motorcycle": (250, 50),
    "car": (1500, 300),
    "van": (2500, 400),
    "bus": (13000, 2000),
    "truck": (9000, 3000),
    "semi": (25000, 8000),
}
CLASS_AXLES = {
    "motorcycle": [1.45],
    "car": [2.7],
    "van": [3.3],
    "bus": [6.0],
    "truck": [4.5, 1.3],
    "semi": [3.6, 1.3, 9.5, 1.3],
}
CLASS_SPEED = {"motorcycle": 1.03, "car": 1.0, "van": 0.98, "bus": 0.9, "truck": 0.92, "semi": 0.9}
HEAVY = frozenset({"bus", "truck", "semi"})


@dataclass(frozen=True, slots=True)
class WeatherEffect:
    """Ground truth: how weather changes traffic (what the Spark job should recover)."""

    rain_speed_factor: float = 0.85  # rain: speeds -15 %
    heavy_rain_speed_factor: float = 0.72  # heavy rain: -28 %
    fog_speed_factor: float = 0.90  # fog: -10 %
    rain_volume_factor: float = 0.95
    heavy_rain_volume_factor: float = 0.88
    rain_incident_multiplier: float = 2.0
    heavy_rain_incident_multiplier: float = 3.0
    fog_incident_multiplier: float = 1.5

    def speed_factor(self, condition: int) -> float:
        return {
            RAIN: self.rain_speed_factor,
            HEAVY_RAIN: self.heavy_rain_speed_factor,
            FOG: self.fog_speed_factor,
        }.get(condition, 1.0)

    def volume_factor(self, condition: int) -> float:
        return {RAIN: self.rain_volume_factor, HEAVY_RAIN: self.heavy_rain_volume_factor}.get(condition, 1.0)

    def incident_multiplier(self, condition: int) -> float:
        return {
            RAIN: self.rain_incident_multiplier,
            HEAVY_RAIN: self.heavy_rain_incident_multiplier,
            FOG: self.fog_incident_multiplier,
        }.get(condition, 1.0)


@dataclass(frozen=True, slots=True)
class ModelConfig:
    seed: int = 42
    effect: WeatherEffect = field(default_factory=WeatherEffect)
    rain_share: float = 0.25  # share of time a regional rain episode is under way
    incident_rate_per_hour: float = 0.03  # per segment, clear weather
    incident_minutes: tuple[int, int] = (15, 45)
    incident_speed_factor: float = 0.35
    spillback_minutes: float = 6.0  # the slowdown reaches one more upstream segment every N minutes
    spillback_decay: float = 0.55
    speed_noise: float = 0.12
    volume_scale: float = 1.0
    # [from_ms, until_ms): a showery spell with coastal fog banks instead of the day's weather
    # (see :func:`showcase_weather`), so that a replay of a few hours holds every regime
    showcase: tuple[int, int] | None = None


def profile(t_ms: int) -> float:
    """Traffic volume as a share of the weekday peak, at event time ``t_ms`` (San Francisco time)."""
    local = dt.datetime.fromtimestamp(t_ms / 1000, tz=_SF)
    table = WEEKEND if local.weekday() >= 5 else WEEKDAY
    h = local.hour + local.minute / 60 + local.second / 3600
    i = int(h) % 24
    frac = h - int(h)
    return table[i] * (1 - frac) + table[(i + 1) % 24] * frac


_SF = dt.timezone(dt.timedelta(hours=-8), "PST")


def _day_start(t_ms: int) -> int:
    return (t_ms + 8 * 3_600_000) // DAY_MS * DAY_MS - 8 * 3_600_000


@dataclass(frozen=True)
class DayPlan:
    """Weather per station per 10-minute slot and incidents per segment, for one day."""

    day_start_ms: int
    conditions: np.ndarray  # [station, slot] -> condition code
    precipitation: np.ndarray  # [station, slot] -> mm/h
    incidents: dict[str, list[tuple[int, int]]]  # segment -> [(start_ms, end_ms)]


STATION_INDEX = {s.station_id: i for i, s in enumerate(geo.STATIONS)}


@lru_cache(maxsize=8)
def day_plan(cfg: ModelConfig, day_start_ms: int) -> DayPlan:
    rng = np.random.default_rng([cfg.seed, day_start_ms // DAY_MS])
    slots = DAY_MS // SLOT_MS
    n_st = len(geo.STATIONS)
    # regional rain intensity: a smooth random process, thresholded to the configured share
    noise = rng.normal(size=slots + 12)
    kernel = np.hanning(13)
    smooth = np.convolve(noise, kernel / kernel.sum(), mode="valid")[:slots]
    smooth = (smooth - smooth.mean()) / (smooth.std() + 1e-9)
    if cfg.rain_share <= 0:
        rain_thr = math.inf
    elif cfg.rain_share >= 1:
        rain_thr = -math.inf
    else:
        rain_thr = float(np.quantile(smooth, 1 - cfg.rain_share))
    heavy_thr = float(np.quantile(smooth, 1 - cfg.rain_share * 0.3)) if 0 < cfg.rain_share < 1 else rain_thr
    conditions = np.zeros((n_st, slots), dtype=np.int8)
    precip = np.zeros((n_st, slots))
    for si, st in enumerate(geo.STATIONS):
        local = smooth + rng.normal(scale=0.15, size=slots)
        for k in range(slots):
            hour = k * SLOT_MS / 3_600_000
            if local[k] >= heavy_thr and smooth[k] >= heavy_thr:
                conditions[si, k] = HEAVY_RAIN
                precip[si, k] = 8 + 6 * rng.random()
            elif local[k] >= rain_thr and smooth[k] >= rain_thr:
                conditions[si, k] = RAIN
                precip[si, k] = 1 + 3 * rng.random()
            elif st.coastal and (5 <= hour < 10 or 19 <= hour < 23) and rng.random() < 0.55:
                conditions[si, k] = FOG
            elif rng.random() < 0.3:
                conditions[si, k] = CLOUDY
    if cfg.showcase is not None:
        _apply_showcase(cfg, day_start_ms, conditions, precip)
    incidents: dict[str, list[tuple[int, int]]] = {}
    for seg in geo.SEGMENTS:
        row = STATION_INDEX[geo.STATION_OF_SEGMENT[seg.segment_id]]
        events: list[tuple[int, int]] = []
        for minute in range(24 * 60):
            cond = int(conditions[row, minute // 10])
            p = cfg.incident_rate_per_hour / 60 * cfg.effect.incident_multiplier(cond)
            if rng.random() < p:
                start = day_start_ms + minute * 60_000
                dur = int(rng.integers(cfg.incident_minutes[0], cfg.incident_minutes[1] + 1))
                events.append((start, start + dur * 60_000))
        incidents[seg.segment_id] = events
    return DayPlan(day_start_ms, conditions, precip, incidents)


@lru_cache(maxsize=4)
def showcase_weather(cfg: ModelConfig) -> tuple[int, np.ndarray, np.ndarray]:
    """The weather of ``cfg.showcase``: ``(first slot, conditions[station, slot], precipitation)``,
    slots counted from the epoch (``t_ms // SLOT_MS``).

    A showery spell, as San Francisco gets when a winter front breaks up: showers of 20-30
    minutes with a heavy core (10 minutes; a quarter of the stations get only rain) alternate
    with dry spells of 20-40 minutes, moving in from the ocean (western stations get each
    shower up to 20 minutes earlier); on the coast a fog bank fills the first half of every
    other dry spell. From about an hour on, every regime therefore appears, within each hour or
    two next to clear weather on the same roads, which is what the weather-effect estimate (a
    comparison within segment and hour) needs; a day of the ordinary model has long rain
    episodes and fog only in the morning and evening. Seeded: the same config, the same spell.
    """
    start, end = cfg.showcase or (0, 0)
    k0 = start // SLOT_MS
    n = max(0, -(-end // SLOT_MS) - k0)
    rng = np.random.default_rng([cfg.seed, 11, k0, n])
    lag_max = 2
    regional: list[int] = []
    spell: list[int] = []  # which dry or wet spell each slot belongs to
    while len(regional) < n + lag_max:
        dry = int(rng.integers(2, 5))
        regional += [CLEAR] * dry
        spell += [len(spell)] * dry
        wet = int(rng.integers(2, 4))
        heavy_at = int(rng.integers(0, wet))  # every shower has a heavy core somewhere
        regional += [HEAVY_RAIN if j == heavy_at else RAIN for j in range(wet)]
        spell += [len(spell)] * wet
    lons = np.array([s.lon for s in geo.STATIONS])
    lags = np.rint((lons - lons.min()) / (lons.max() - lons.min()) * lag_max).astype(int)
    conditions = np.zeros((len(geo.STATIONS), n), dtype=np.int8)
    precip = np.zeros((len(geo.STATIONS), n))
    for si, st in enumerate(geo.STATIONS):
        # on the coast a fog bank covers the first half of every other dry spell (rolling out as
        # it clears)
        dry_spells = sorted({sp for sp, c in zip(spell, regional, strict=True) if c == CLEAR})
        parity = int(rng.integers(0, 2))
        foggy = {sp for k, sp in enumerate(dry_spells) if st.coastal and k % 2 == parity}
        for j in range(n):
            i = j + lags[si]  # a western station (lag 0) is ahead of an eastern one (lag 2)
            c = regional[i]
            if c == HEAVY_RAIN and rng.random() < 0.25:
                c = RAIN
            if c == CLEAR:
                first = spell.index(spell[i])
                length = spell.count(spell[i])
                fog = spell[i] in foggy and i - first < (length + 1) // 2
                c = FOG if fog else (CLOUDY if rng.random() < 0.25 else CLEAR)
            conditions[si, j] = c
            if c == HEAVY_RAIN:
                precip[si, j] = 8 + 6 * rng.random()
            elif c == RAIN:
                precip[si, j] = 1 + 3 * rng.random()
    return k0, conditions, precip


def _apply_showcase(cfg: ModelConfig, day_start_ms: int, conditions: np.ndarray, precip: np.ndarray) -> None:
    """Overwrite the day's slots that fall in ``cfg.showcase`` with :func:`showcase_weather`."""
    k0, sc, sp = showcase_weather(cfg)
    d0 = day_start_ms // SLOT_MS
    lo, hi = max(k0, d0), min(k0 + sc.shape[1], d0 + conditions.shape[1])
    if lo < hi:
        conditions[:, lo - d0 : hi - d0] = sc[:, lo - k0 : hi - k0]
        precip[:, lo - d0 : hi - d0] = sp[:, lo - k0 : hi - k0]


class Model:
    """Vectorised state of the road network at a simulated instant."""

    def __init__(self, cfg: ModelConfig | None = None) -> None:
        self.cfg = cfg or ModelConfig()
        self.segments = geo.SEGMENTS
        self.seg_index = {s.segment_id: i for i, s in enumerate(self.segments)}
        self.seg_station = np.array(
            [STATION_INDEX[geo.STATION_OF_SEGMENT[s.segment_id]] for s in self.segments]
        )
        self.free_flow = np.array([s.free_flow_kmh for s in self.segments])
        self.alpha = np.array([BPR_ALPHA[s.kind] for s in self.segments])
        self.peak_lane_rate = np.array([PEAK_PER_LANE_HOUR[s.kind] / 3600.0 for s in self.segments])
        # upstream chains for spillback
        self.upstream_chain: list[list[int]] = []
        for s in self.segments:
            chain: list[int] = []
            up = s.upstream
            while up is not None and len(chain) < 4:
                chain.append(self.seg_index[up])
                up = geo.SEGMENTS_BY_ID[up].upstream
            self.upstream_chain.append(chain)
        # weather factors by condition code: one array look-up per tick instead of 116 calls
        eff = self.cfg.effect
        self._speed_f = np.array([eff.speed_factor(c) for c in range(len(CONDITIONS))])
        self._volume_f = np.array([eff.volume_factor(c) for c in range(len(CONDITIONS))])
        self._incidents: dict[int, tuple[DayPlan, tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}

    def plan(self, t_ms: int) -> DayPlan:
        return day_plan(self.cfg, _day_start(t_ms))

    def _incident_table(self, plan: DayPlan) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The plan's incidents as arrays (segment index, start, end), so a tick finds the active
        ones with one comparison instead of a Python loop over every segment."""
        cached = self._incidents.get(plan.day_start_ms)
        if cached is None or cached[0] is not plan:
            rows = [
                (i, start, end)
                for i, seg in enumerate(self.segments)
                for start, end in plan.incidents.get(seg.segment_id, ())
            ]
            arr = np.array(rows, dtype=np.int64).reshape(-1, 3)
            if len(self._incidents) > 4:
                self._incidents.clear()
            cached = self._incidents[plan.day_start_ms] = (plan, (arr[:, 0], arr[:, 1], arr[:, 2]))
        return cached[1]

    def station_conditions(self, t_ms: int) -> np.ndarray:
        p = self.plan(t_ms)
        slot = min((t_ms - p.day_start_ms) // SLOT_MS, p.conditions.shape[1] - 1)
        return p.conditions[:, slot]

    def weather_of_segments(self, t_ms: int) -> np.ndarray:
        conditions: np.ndarray = self.station_conditions(t_ms)[self.seg_station]
        return conditions

    def incident_factor(self, t_ms: int) -> np.ndarray:
        """Per segment speed multiplier from incidents and their upstream spillback."""
        seg_i, starts, ends = self._incident_table(self.plan(t_ms))
        f = np.ones(len(self.segments))
        cfg = self.cfg
        for j in np.flatnonzero((starts <= t_ms) & (t_ms < ends)).tolist():
            i, start = int(seg_i[j]), int(starts[j])
            f[i] = min(f[i], cfg.incident_speed_factor)
            age_min = (t_ms - start) / 60_000
            for k, up in enumerate(self.upstream_chain[i], start=1):
                if age_min >= cfg.spillback_minutes * k:
                    drop = (1 - cfg.incident_speed_factor) * cfg.spillback_decay**k
                    f[up] = min(f[up], 1 - drop)
        return f

    def segment_state(self, t_ms: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(mean speed km/h, vehicles per lane per second, weather code) per segment."""
        prof = profile(t_ms) * self.cfg.volume_scale
        wx = self.weather_of_segments(t_ms)
        vol_f = self._volume_f[wx]
        spd_f = self._speed_f[wx]
        # congestion follows the dry-weather demand, so the weather's speed effect is exactly the
        # configured factor (the ground truth the analytics are checked against)
        vc = prof * VC_AT_PEAK
        congestion = 1.0 / (1.0 + self.alpha * vc**4)
        speed = self.free_flow * congestion * spd_f * self.incident_factor(t_ms)
        rate = self.peak_lane_rate * prof * vol_f
        return speed, rate, wx

    def incident_active(self, segment_id: str, t_ms: int) -> bool:
        return any(s <= t_ms < e for s, e in self.plan(t_ms).incidents.get(segment_id, ()))


def weather_reading(
    model: Model, station_index: int, t_ms: int, rng: np.random.Generator
) -> dict[str, float | str]:
    """One weather station reading at ``t_ms``."""
    p = model.plan(t_ms)
    slot = min((t_ms - p.day_start_ms) // SLOT_MS, p.conditions.shape[1] - 1)
    cond = int(p.conditions[station_index, slot])
    hour = ((t_ms - p.day_start_ms) / 3_600_000) % 24
    st = geo.STATIONS[station_index]
    temp = 13.0 + 4.0 * math.sin((hour - 9) / 24 * 2 * math.pi) - (1.5 if st.coastal else 0.0)
    if cond in (RAIN, HEAVY_RAIN):
        temp -= 2.0
    visibility = {
        FOG: 300 + 400 * rng.random(),
        RAIN: 4000 + 2000 * rng.random(),
        HEAVY_RAIN: 1500 + 1000 * rng.random(),
    }.get(cond, 10_000 + 5000 * rng.random())
    wind = 10 + 8 * rng.random() + (15 if cond == HEAVY_RAIN else 0) + (6 if st.coastal else 0)
    return {
        "temperature_c": round(temp + rng.normal(scale=0.3), 2),
        "precipitation_mm_h": round(float(p.precipitation[station_index, slot]), 2),
        "wind_kmh": round(wind, 1),
        "visibility_m": round(visibility),
        "condition": CONDITIONS[cond],
    }
