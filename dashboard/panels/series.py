"""The series panel: the selected segment's speeds and volumes, its station's rain, and the
background shaded by that station's weather regime over time."""

from __future__ import annotations

from typing import Any

from dash import Dash, Input, Output
from plotly.subplots import make_subplots

from dashboard import status
from dashboard.data import DashboardData
from dashboard.layout import MAP_HEIGHT, RANGES
from dashboard.panels.common import data_now_ms, message_figure, times
from sensors import geo

# the selected segment's background by its station's weather: colour, legend name
REGIME_STYLE = {
    "fog": ("rgba(120,120,120,0.18)", "fog"),
    "rain": ("rgba(66,146,198,0.20)", "rain"),
    "heavy_rain": ("rgba(8,81,156,0.32)", "heavy rain"),
}


def _series_layout() -> dict[str, Any]:
    """The two-row layout (speed; volume with rain on a second axis), built once by plotly."""
    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        row_heights=[0.6, 0.4],
        vertical_spacing=0.06,
        specs=[[{}], [{"secondary_y": True}]],
    )
    fig.update_layout(
        margin={"l": 40, "r": 40, "t": 30, "b": 20},
        height=MAP_HEIGHT,
        legend={"orientation": "h", "y": -0.12},
    )
    fig.update_yaxes(title_text="km/h", row=1, col=1)
    fig.update_yaxes(title_text="veh/min", row=2, col=1, secondary_y=False)
    fig.update_yaxes(title_text="rain mm/h", row=2, col=1, secondary_y=True, rangemode="tozero")
    layout: dict[str, Any] = fig.to_plotly_json()["layout"]
    layout.pop("template", None)
    return layout


_SERIES_LAYOUT = _series_layout()


def regime_bands(readings: list[dict[str, Any]], interval_ms: int = 60_000) -> list[tuple[int, int, str]]:
    """Runs of one weather regime in a station's readings: (from, until, condition), for the
    regimes that have a background (fog, rain, heavy rain). A reading holds until the next one;
    the last for one reading interval."""
    runs: list[list[Any]] = []
    for r in sorted(readings, key=lambda r: r["event_time"]):
        t, cond = r["event_time"], r.get("condition") or "clear"
        if runs:
            runs[-1][1] = t
            if runs[-1][2] == cond:
                runs[-1][1] = t + interval_ms
                continue
        runs.append([t, t + interval_ms, cond])
    return [(a, b, c) for a, b, c in runs if c in REGIME_STYLE]


def _band_shapes(bands: list[tuple[int, int, str]]) -> list[dict[str, Any]]:
    shapes, named = [], set()
    for a, b, cond in bands:
        colour, label = REGIME_STYLE[cond]
        shapes.append(
            {
                "type": "rect",
                "xref": "x",
                "yref": "paper",
                "x0": times([a])[0],
                "x1": times([b])[0],
                "y0": 0,
                "y1": 1,
                "fillcolor": colour,
                "line": {"width": 0},
                "layer": "below",
                "name": label,
                "legendgroup": cond,
                "showlegend": cond not in named,
            }
        )
        named.add(cond)
    return shapes


def _traces(rows: list[dict[str, Any]], wx: list[dict[str, Any]], station: str) -> list[dict[str, Any]]:
    """Mean and 85th-percentile speed, volume, and the station's rain on its own axis."""
    ts = times([r["t"] for r in rows])
    return [
        {
            "type": "scatter",
            "x": ts,
            "y": [r["mean_speed_kmh"] for r in rows],
            "name": "mean speed",
            "line": {"color": "#1f3b73"},
            "xaxis": "x",
            "yaxis": "y",
        },
        {
            "type": "scatter",
            "x": ts,
            "y": [r.get("p85_speed_kmh") for r in rows],
            "name": "85th pct",
            "line": {"color": "#7a9cc6", "dash": "dot"},
            "xaxis": "x",
            "yaxis": "y",
        },
        {
            "type": "bar",
            "x": ts,
            "y": [r["volume"] for r in rows],
            "name": "vehicles/min",
            "marker": {"color": "#9fb7cf"},
            "xaxis": "x2",
            "yaxis": "y2",
        },
        {
            "type": "scatter",
            "x": times([r["event_time"] for r in wx]),
            "y": [r["precipitation_mm_h"] for r in wx],
            "name": f"rain mm/h ({station})",
            "line": {"color": "#2c7fb8"},
            "fill": "tozeroy",
            "fillcolor": "rgba(44,127,184,0.15)",
            "xaxis": "x2",
            "yaxis": "y3",
        },
    ]


def series_figure(data: DashboardData, segment: str, minutes: int) -> dict[str, Any]:
    now = data_now_ms(data)
    since = now - minutes * 60_000
    rows = data.series(segment, since)
    station = geo.STATION_OF_SEGMENT.get(segment, "")
    seg = geo.SEGMENTS_BY_ID.get(segment)
    title = f"{seg.road} #{seg.index} ({segment})" if seg else segment
    if not rows:
        older = data.series(segment, 0)
        wait = status.segment(data.facts(), title, since, older[-1]["t"] if older else None)
        if wait is not None:
            return message_figure(wait, MAP_HEIGHT, title, uirevision=segment)
    wx = data.weather_series(station, since)
    now_wx = (wx[-1].get("condition") or "?").replace("_", " ") if wx else "no reading"
    layout = {
        **_SERIES_LAYOUT,
        "title": {"text": f"{title} · {station}: {now_wx}", "font": {"size": 14}},
        "shapes": _band_shapes(regime_bands(wx)),
        "uirevision": segment,
    }
    return {"data": _traces(rows, wx, station), "layout": layout}


def register(app: Dash, data: DashboardData) -> None:
    @app.callback(
        Output("series", "figure"),
        Input("tick", "n_intervals"),
        Input("segment", "value"),
        Input("range", "value"),
    )
    def _series(_: int, segment: str, rng: str) -> dict[str, Any]:
        return series_figure(data, segment, RANGES.get(rng, 60))
