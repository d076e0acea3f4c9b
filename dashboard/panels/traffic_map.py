"""The map panel: every monitored road segment coloured by its speed against free flow.

No internet needed: San Francisco's shoreline (:mod:`dashboard.basemap`) and the roads are plain
Plotly traces on longitude/latitude axes.
"""

from __future__ import annotations

import math
from typing import Any

from dash import Dash, Input, Output

from dashboard import basemap, status
from dashboard.data import DashboardData
from dashboard.layout import DISTRICT_OF_STATION, MAP_HEIGHT
from dashboard.panels.common import note
from sensors import geo

BANDS = [  # speed / free-flow ratio → colour
    (0.8, "#1a9850", "flowing"),
    (0.6, "#a6d96a", "busy"),
    (0.4, "#fdae61", "slow"),
    (0.0, "#d73027", "congested"),
]
LAT0 = math.cos(math.radians(37.77))

_MAP_LAYOUT: dict[str, Any] = {
    "margin": {"l": 0, "r": 0, "t": 0, "b": 0},
    "plot_bgcolor": basemap.WATER,
    "paper_bgcolor": "white",
    "height": MAP_HEIGHT,
    "legend": {"orientation": "h", "y": 0.01, "x": 0.01, "bgcolor": "rgba(255,255,255,0.7)"},
    "xaxis": {"visible": False, "range": [-122.52, -122.35]},
    "yaxis": {"visible": False, "range": [37.702, 37.838], "scaleanchor": "x", "scaleratio": 1 / LAT0},
    "uirevision": "map",
}


def _band(ratio: float | None) -> tuple[str, str]:
    if ratio is None:
        return "#9e9e9e", "no data"
    for lo, colour, name in BANDS:
        if ratio >= lo:
            return colour, name
    return BANDS[-1][1], BANDS[-1][2]


def _hover(s: geo.Segment, rec: dict[str, Any] | None, label: str) -> str:
    return f"{s.road} #{s.index}<br>{s.segment_id}<br>" + (
        f"{rec['mean_speed_kmh']:.0f} km/h ({label}), {rec['volume']} veh/min"
        + (" (this minute, live)" if rec.get("live") else "")
        if rec
        else "no data yet"
    )


def _band_trace(xs: list[float | None], ys: list[float | None], colour: str, label: str) -> dict[str, Any]:
    return {
        "type": "scatter",
        "x": xs,
        "y": ys,
        "mode": "lines",
        "name": label,
        "line": {"color": colour, "width": 5},
        "hoverinfo": "skip",
    }


def _selected_trace(s: geo.Segment) -> dict[str, Any]:
    return {
        "type": "scatter",
        "x": [s.mid[1]],
        "y": [s.mid[0]],
        "mode": "markers",
        "showlegend": False,
        "hoverinfo": "skip",
        "marker": {"size": 18, "color": "rgba(0,0,0,0)", "line": {"width": 3, "color": "#1f3b73"}},
    }


def map_figure(data: DashboardData, selected: str | None, district: str | None) -> dict[str, Any]:
    """The map as a plain figure dict: Dash sends it as is (no plotly validation, no template),
    which keeps the 2-second refresh cheap with 10k sensors live."""
    latest = data.snapshot_latest()
    traces: list[dict[str, Any]] = [basemap.land_trace(), basemap.label_trace()]
    groups: dict[str, tuple[list[float | None], list[float | None]]] = {}
    mids_x, mids_y, mids_c, mids_t, mids_id = [], [], [], [], []
    for s in geo.SEGMENTS:
        station = geo.STATION_OF_SEGMENT[s.segment_id]
        if district and DISTRICT_OF_STATION[station] != district:
            continue
        rec = latest.get(s.segment_id)
        ratio = None if rec is None else rec["mean_speed_kmh"] / s.free_flow_kmh
        colour, label = _band(ratio)
        xs, ys = groups.setdefault(label, ([], []))
        xs += [s.start[1], s.end[1], None]
        ys += [s.start[0], s.end[0], None]
        mids_x.append(s.mid[1])
        mids_y.append(s.mid[0])
        mids_c.append(colour)
        mids_id.append(s.segment_id)
        mids_t.append(_hover(s, rec, label))
    for _lo, colour, label in [*BANDS, (None, "#9e9e9e", "no data")]:
        if label in groups:
            traces.append(_band_trace(*groups[label], colour, label))
    traces.append(
        {
            "type": "scatter",
            "x": mids_x,
            "y": mids_y,
            "mode": "markers",
            "marker": {"color": mids_c, "size": 9, "line": {"width": 1, "color": "#333"}},
            "text": mids_t,
            "customdata": mids_id,
            "hovertemplate": "%{text}<extra></extra>",
            "showlegend": False,
            "name": "segments",
        }
    )
    if selected in geo.SEGMENTS_BY_ID:
        traces.append(_selected_trace(geo.SEGMENTS_BY_ID[selected]))
    wait = None if latest else status.events(data.facts())
    if wait is None:
        return {"data": traces, "layout": _MAP_LAYOUT}
    return {"data": traces, "layout": {**_MAP_LAYOUT, "annotations": [note(wait, y=0.92, width=64)]}}


def register(app: Dash, data: DashboardData) -> None:
    @app.callback(
        Output("map", "figure"),
        Input("tick", "n_intervals"),
        Input("segment", "value"),
        Input("district", "value"),
    )
    def _map(_: int, segment: str, district: str | None) -> dict[str, Any]:
        return map_figure(data, segment, district)
