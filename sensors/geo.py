"""San Francisco geography for the simulation: roads, weather stations, infrastructure assets.

Coordinates are real (WGS84, rounded to ~10 m) and follow the actual streets: each road is a
polyline through well-known intersections, cut into segments of about 500 m. A segment's
"upstream" neighbour is the previous segment along the road in the direction of travel, which
is where an incident's slowdown spreads. The dashboard draws the same polylines, so the map
needs no internet tiles.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import pairwise

Point = tuple[float, float]  # (lat, lon)

# name, kind, free-flow speed km/h, lanes per direction, (lat, lon) waypoints
ROADS: list[tuple[str, str, float, int, list[Point]]] = [
    (
        "Market St",
        "arterial",
        40,
        2,
        [
            (37.7946, -122.3952),
            (37.7890, -122.4020),
            (37.7847, -122.4075),
            (37.7785, -122.4150),
            (37.7752, -122.4193),
            (37.7677, -122.4290),
            (37.7625, -122.4350),
        ],
    ),
    (
        "Van Ness Ave",
        "arterial",
        45,
        3,
        [
            (37.7752, -122.4193),
            (37.7855, -122.4213),
            (37.7957, -122.4232),
            (37.8004, -122.4243),
            (37.8040, -122.4250),
        ],
    ),
    (
        "Geary Blvd",
        "arterial",
        50,
        3,
        [
            (37.7876, -122.4035),
            (37.7855, -122.4213),
            (37.7825, -122.4470),
            (37.7803, -122.4718),
            (37.7797, -122.4846),
            (37.7784, -122.5085),
        ],
    ),
    (
        "Mission St",
        "arterial",
        40,
        2,
        [
            (37.7932, -122.3925),
            (37.7826, -122.4062),
            (37.7650, -122.4196),
            (37.7522, -122.4184),
            (37.7400, -122.4210),
            (37.7160, -122.4405),
        ],
    ),
    (
        "US-101 Central Fwy",
        "freeway",
        90,
        3,
        [
            (37.7725, -122.4230),
            (37.7700, -122.4175),
            (37.7660, -122.4050),
        ],
    ),
    (
        "US-101 Bayshore Fwy",
        "freeway",
        100,
        4,
        [
            (37.7660, -122.4050),
            (37.7485, -122.4055),
            (37.7350, -122.4060),
            (37.7120, -122.3960),
        ],
    ),
    (
        "I-80 Approach",
        "freeway",
        90,
        4,
        [
            (37.7700, -122.4110),
            (37.7790, -122.4020),
            (37.7860, -122.3930),
            (37.7880, -122.3890),
        ],
    ),
    (
        "Bay Bridge West Span",
        "bridge",
        90,
        5,
        [
            (37.7880, -122.3890),
            (37.7990, -122.3770),
            (37.8090, -122.3660),
        ],
    ),
    (
        "19th Ave",
        "arterial",
        55,
        3,
        [
            (37.7700, -122.4760),
            (37.7530, -122.4755),
            (37.7340, -122.4750),
            (37.7200, -122.4720),
        ],
    ),
    (
        "Lombard St",
        "arterial",
        45,
        3,
        [
            (37.8004, -122.4243),
            (37.7995, -122.4360),
            (37.8006, -122.4460),
            (37.8030, -122.4580),
            (37.8060, -122.4750),
        ],
    ),
    (
        "The Embarcadero",
        "arterial",
        40,
        2,
        [
            (37.8080, -122.4170),
            (37.8040, -122.4050),
            (37.7955, -122.3937),
            (37.7860, -122.3880),
            (37.7790, -122.3893),
        ],
    ),
    (
        "Oak St",
        "arterial",
        45,
        3,
        [
            (37.7745, -122.4205),
            (37.7730, -122.4330),
            (37.7710, -122.4470),
            (37.7700, -122.4540),
        ],
    ),
]

SEGMENT_KM = 0.5


@dataclass(frozen=True, slots=True)
class Segment:
    segment_id: str
    road: str
    kind: str
    index: int  # position along the road, 0 = first waypoint
    start: Point
    end: Point
    free_flow_kmh: float
    lanes: int
    length_km: float
    upstream: str | None  # previous segment along the road (where spillback goes)

    @property
    def mid(self) -> Point:
        return ((self.start[0] + self.end[0]) / 2, (self.start[1] + self.end[1]) / 2)


@dataclass(frozen=True, slots=True)
class Station:
    station_id: str
    district: str
    lat: float
    lon: float
    coastal: bool  # fog-prone (ocean side)


STATIONS: list[Station] = [
    Station("wx-fidi", "Financial District", 37.7915, -122.3980, False),
    Station("wx-soma", "SoMa", 37.7785, -122.4056, False),
    Station("wx-mission", "Mission", 37.7599, -122.4148, False),
    Station("wx-marina", "Marina", 37.8030, -122.4360, True),
    Station("wx-richmond", "Richmond", 37.7800, -122.4840, True),
    Station("wx-sunset", "Sunset", 37.7530, -122.4940, True),
    Station("wx-twinpeaks", "Twin Peaks", 37.7544, -122.4477, False),
    Station("wx-bayview", "Bayview", 37.7300, -122.3880, False),
    Station("wx-ti", "Treasure Island", 37.8230, -122.3710, True),
]


@dataclass(frozen=True, slots=True)
class Asset:
    asset_id: str
    kind: str  # signal | bridge | tunnel | parking
    name: str
    lat: float
    lon: float
    segment_id: str | None = None  # the road segment it sits on / feeds
    capacity: int = 0


def haversine_km(a: Point, b: Point) -> float:
    lat1, lon1, lat2, lon2 = map(math.radians, (a[0], a[1], b[0], b[1]))
    h = math.sin((lat2 - lat1) / 2) ** 2 + math.cos(lat1) * math.cos(lat2) * math.sin((lon2 - lon1) / 2) ** 2
    return 6371.0 * 2 * math.asin(math.sqrt(h))


def _slug(text: str) -> str:
    return "".join(c.lower() if c.isalnum() else "-" for c in text).strip("-").replace("--", "-")


def build_segments() -> list[Segment]:
    """Cut every road into ~500 m segments along its polyline."""
    out: list[Segment] = []
    for road, kind, ff, lanes, pts in ROADS:
        # densify the polyline into pieces of at most SEGMENT_KM
        cuts: list[Point] = [pts[0]]
        for a, b in pairwise(pts):
            d = haversine_km(a, b)
            n = max(1, round(d / SEGMENT_KM))
            for k in range(1, n + 1):
                cuts.append((a[0] + (b[0] - a[0]) * k / n, a[1] + (b[1] - a[1]) * k / n))
        prev: str | None = None
        for i, (a, b) in enumerate(pairwise(cuts)):
            sid = f"{_slug(road)}-{i:02d}"
            out.append(Segment(sid, road, kind, i, a, b, ff, lanes, haversine_km(a, b), prev))
            prev = sid
    return out


SEGMENTS: list[Segment] = build_segments()
SEGMENTS_BY_ID: dict[str, Segment] = {s.segment_id: s for s in SEGMENTS}


def nearest_station(p: Point) -> Station:
    return min(STATIONS, key=lambda s: haversine_km(p, (s.lat, s.lon)))


STATION_OF_SEGMENT: dict[str, str] = {s.segment_id: nearest_station(s.mid).station_id for s in SEGMENTS}


def _segment_near(p: Point) -> str:
    return min(SEGMENTS, key=lambda s: haversine_km(p, s.mid)).segment_id


def build_assets() -> list[Asset]:
    assets = [
        Asset(
            "bridge-bay-west",
            "bridge",
            "Bay Bridge west span",
            37.7990,
            -122.3770,
            _segment_near((37.7990, -122.3770)),
        ),
        Asset(
            "bridge-golden-gate",
            "bridge",
            "Golden Gate Bridge",
            37.8199,
            -122.4783,
            _segment_near((37.8060, -122.4750)),
        ),
        Asset(
            "tunnel-ybi",
            "tunnel",
            "Yerba Buena Island tunnel",
            37.8090,
            -122.3660,
            _segment_near((37.8090, -122.3660)),
        ),
        Asset(
            "tunnel-broadway",
            "tunnel",
            "Broadway Tunnel",
            37.7967,
            -122.4160,
            _segment_near((37.7957, -122.4232)),
        ),
        Asset(
            "tunnel-stockton",
            "tunnel",
            "Stockton Tunnel",
            37.7905,
            -122.4070,
            _segment_near((37.7890, -122.4020)),
        ),
        Asset("parking-union-square", "parking", "Union Square Garage", 37.7880, -122.4075, None, 985),
        Asset("parking-civic-center", "parking", "Civic Center Garage", 37.7810, -122.4170, None, 843),
        Asset("parking-moscone", "parking", "Moscone Center Garage", 37.7840, -122.4010, None, 732),
        Asset("parking-wharf", "parking", "Fisherman's Wharf Garage", 37.8075, -122.4155, None, 430),
        Asset("parking-japantown", "parking", "Japan Center Garage", 37.7855, -122.4300, None, 920),
        Asset(
            "parking-mission-bartlett", "parking", "Mission-Bartlett Garage", 37.7525, -122.4195, None, 350
        ),
    ]
    # a traffic signal at each segment start of the arterials
    for s in SEGMENTS:
        if s.kind == "arterial":
            assets.append(
                Asset(
                    f"signal-{s.segment_id}",
                    "signal",
                    f"{s.road} signal {s.index}",
                    s.start[0],
                    s.start[1],
                    s.segment_id,
                )
            )
    return assets


ASSETS: list[Asset] = build_assets()


@dataclass(frozen=True, slots=True)
class TrafficSensor:
    sensor_id: str
    segment_id: str
    direction: str
    lane: int
    lat: float
    lon: float


@dataclass
class Fleet:
    traffic: list[TrafficSensor] = field(default_factory=list)
    stations: list[Station] = field(default_factory=list)
    assets: list[Asset] = field(default_factory=list)

    @property
    def size(self) -> int:
        return len(self.traffic) + len(self.stations) + len(self.assets)


def _directions(seg: Segment) -> tuple[str, str]:
    dlat = seg.end[0] - seg.start[0]
    dlon = seg.end[1] - seg.start[1]
    if abs(dlat) > abs(dlon) * math.cos(math.radians(37.77)):
        return ("N", "S") if dlat > 0 else ("S", "N")
    return ("E", "W") if dlon > 0 else ("W", "E")


def build_fleet(n_sensors: int = 10_000) -> Fleet:
    """Place ``n_sensors`` sensors in total: weather stations, infrastructure, and the rest as
    pavement sensors spread over every lane of every segment (several positions per lane)."""
    assets = ASSETS
    stations = STATIONS
    n_traffic = max(len(SEGMENTS), n_sensors - len(assets) - len(stations))
    lane_slots = [(s, d, lane) for s in SEGMENTS for d in _directions(s) for lane in range(1, s.lanes + 1)]
    per_slot = max(1, n_traffic // len(lane_slots))
    extra = n_traffic - per_slot * len(lane_slots)
    traffic: list[TrafficSensor] = []
    for i, (s, d, lane) in enumerate(lane_slots):
        k = per_slot + (1 if i < extra else 0)
        for j in range(k):
            f = (j + 0.5) / k
            lat = s.start[0] + (s.end[0] - s.start[0]) * f
            lon = s.start[1] + (s.end[1] - s.start[1]) * f
            traffic.append(
                TrafficSensor(
                    f"ts-{s.segment_id}-{d}{lane}-{j:03d}",
                    s.segment_id,
                    d,
                    lane,
                    round(lat, 6),
                    round(lon, 6),
                )
            )
    return Fleet(traffic[:n_traffic] if len(traffic) > n_traffic else traffic, stations, assets)
