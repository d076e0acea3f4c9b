"""The JSON schema of the events the fleet publishes (documented in docs/application/events.md).

Every event is a JSON object with ``type`` ("traffic" | "weather" | "infrastructure"), the
``sensor_id`` (also the Kafka key, so a sensor's events stay ordered in one partition), a
per-sensor sequence number ``seq`` (0, 1, 2 ... : lets consumers drop duplicates) and
``event_time`` in epoch milliseconds (also the record's CreateTime timestamp).
"""

from __future__ import annotations

import json
from typing import Any, Literal, TypedDict

Direction = Literal["N", "S", "E", "W"]
VehicleClass = Literal["motorcycle", "car", "van", "bus", "truck", "semi"]


class TrafficEvent(TypedDict):
    type: Literal["traffic"]
    sensor_id: str
    seq: int
    event_time: int
    segment_id: str
    road: str
    lat: float
    lon: float
    direction: Direction
    lane: int
    vehicle_class: VehicleClass
    weight_kg: float
    axle_count: int
    axle_distances_m: list[float]
    speed_kmh: float


class WeatherEvent(TypedDict):
    type: Literal["weather"]
    sensor_id: str
    seq: int
    event_time: int
    station: str
    district: str
    lat: float
    lon: float
    temperature_c: float
    precipitation_mm_h: float
    wind_kmh: float
    visibility_m: float
    condition: Literal["clear", "cloudy", "fog", "rain", "heavy_rain"]


class InfrastructureEvent(TypedDict, total=False):
    type: Literal["infrastructure"]
    sensor_id: str
    seq: int
    event_time: int
    kind: Literal["signal", "bridge", "tunnel", "parking"]
    asset: str
    lat: float
    lon: float
    signal_state: str
    strain_microstrain: float
    vibration_mm_s: float
    co_ppm: float
    no2_ppb: float
    occupied: int
    capacity: int


REQUIRED = {
    "traffic": (
        "sensor_id",
        "seq",
        "event_time",
        "segment_id",
        "speed_kmh",
        "vehicle_class",
        "lat",
        "lon",
    ),
    "weather": (
        "sensor_id",
        "seq",
        "event_time",
        "station",
        "precipitation_mm_h",
        "visibility_m",
        "condition",
    ),
    "infrastructure": ("sensor_id", "seq", "event_time", "kind", "asset"),
}


class InvalidEvent(ValueError):
    """A payload that is not a valid sensor event; the message says why."""


def encode(event: dict[str, Any]) -> bytes:
    return json.dumps(event, separators=(",", ":")).encode()


def decode(payload: bytes) -> dict[str, Any]:
    """Parse and validate one event; raise InvalidEvent with the reason."""
    try:
        ev = json.loads(payload)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidEvent(f"not JSON: {exc}") from None
    if not isinstance(ev, dict):
        raise InvalidEvent("not a JSON object")
    kind = ev.get("type")
    if not isinstance(kind, str) or kind not in REQUIRED:  # an unhashable type must not raise TypeError
        raise InvalidEvent(f"unknown type {kind!r}")
    missing = [f for f in REQUIRED[kind] if f not in ev]
    if missing:
        raise InvalidEvent(f"{kind} event missing {', '.join(missing)}")
    if not isinstance(ev["event_time"], int) or ev["event_time"] <= 0:
        raise InvalidEvent("event_time must be epoch milliseconds")
    if not isinstance(ev["seq"], int) or ev["seq"] < 0:
        raise InvalidEvent("seq must be a non-negative integer")
    return ev
