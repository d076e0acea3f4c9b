"""San Francisco's shoreline for the offline map, from ``dashboard/sf_map.geojson``.

The GeoJSON is made once by ``tools/make_sf_map.py`` from the full-resolution GSHHG shorelines
(LGPL-3.0-or-later, licence texts beside it) and committed: nothing is fetched at run time. It is
drawn as one filled Plotly trace on longitude/latitude axes (no tiles, no map style).
"""

from __future__ import annotations

import json
from functools import cache
from itertools import pairwise
from pathlib import Path
from typing import Any

PATH = Path(__file__).resolve().parent / "sf_map.geojson"
Ring = list[tuple[float, float]]  # (lon, lat), closed

LAND = "#f4f1ea"
WATER = "#cfe3ee"
SHORE = "#b0a999"
# a few names to read the map by: (text, lat, lon), all on water or at the edge of the view
LABELS = [
    ("Golden Gate", 37.8145, -122.4770),
    ("San Francisco Bay", 37.8190, -122.4000),
    ("Pacific Ocean", 37.7420, -122.5330),
    ("Treasure Island", 37.8200, -122.3530),
]


@cache
def land_rings() -> tuple[Ring, ...]:
    """Exterior rings of the land polygons (the file holds no holes: no lakes at this scale)."""
    fc = json.loads(PATH.read_text())
    rings: list[Ring] = []
    for feature in fc["features"]:
        geom = feature["geometry"]
        polys = [geom["coordinates"]] if geom["type"] == "Polygon" else geom["coordinates"]
        rings += [[(float(x), float(y)) for x, y in poly[0]] for poly in polys]
    return tuple(rings)


def on_land(lat: float, lon: float) -> bool:
    """Whether the point is inside the drawn land (even-odd ray casting)."""
    inside = False
    for ring in land_rings():
        for (x0, y0), (x1, y1) in pairwise(ring):
            if (y0 > lat) != (y1 > lat) and lon < x0 + (lat - y0) * (x1 - x0) / (y1 - y0):
                inside = not inside
    return inside


@cache
def land_trace() -> dict[str, Any]:
    """All land as one filled scatter trace: rings separated by gaps, each filled on its own."""
    xs: list[float | None] = []
    ys: list[float | None] = []
    for ring in land_rings():
        xs += [p[0] for p in ring] + [None]
        ys += [p[1] for p in ring] + [None]
    return {
        "type": "scatter",
        "x": xs,
        "y": ys,
        "mode": "lines",
        "fill": "toself",
        "fillcolor": LAND,
        "line": {"color": SHORE, "width": 1},
        "hoverinfo": "skip",
        "showlegend": False,
        "name": "land",
    }


def label_trace() -> dict[str, Any]:
    return {
        "type": "scatter",
        "x": [lon for _, _, lon in LABELS],
        "y": [lat for _, lat, _ in LABELS],
        "text": [t for t, _, _ in LABELS],
        "mode": "text",
        "textfont": {"size": 10, "color": "#6a8796", "style": "italic"},
        "hoverinfo": "skip",
        "showlegend": False,
        "name": "labels",
    }
