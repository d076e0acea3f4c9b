"""The page: a header, the controls (district, segment, time range) and a grid of panels.

Each element a callback reads or writes has an id here; :mod:`dashboard.panels` holds the
callbacks, one module per panel. The map, the series and the weather-effect chart fit a
1280x800 screen (docs/dashboard.png); responsive graphs take their height from their style, not
from the figure's layout.
"""

from __future__ import annotations

from typing import Any

from dash import dcc, html

from sensors import geo

RANGES = {"15m": 15, "1h": 60, "6h": 360}  # the time-range choices, in minutes
MAP_HEIGHT, EFFECTS_HEIGHT = 400, 280
DISTRICT_OF_STATION = {s.station_id: s.district for s in geo.STATIONS}
DEFAULT_SEGMENT = "market-st-02"


def segment_options(district: str | None = None) -> list[dict[str, str]]:
    """The segment choices, those of ``district`` only when one is given."""
    return [
        {"label": f"{s.road} #{s.index}", "value": s.segment_id}
        for s in geo.SEGMENTS
        if not district or DISTRICT_OF_STATION[geo.STATION_OF_SEGMENT[s.segment_id]] == district
    ]


def _controls() -> html.Div:
    districts = sorted({s.district for s in geo.STATIONS})
    return html.Div(
        [
            dcc.Dropdown(
                id="district",
                options=[{"label": d, "value": d} for d in districts],
                placeholder="All districts",
                clearable=True,
                className="ctl",
            ),
            dcc.Dropdown(
                id="segment",
                options=segment_options(),
                value=DEFAULT_SEGMENT,
                clearable=False,
                className="ctl",
            ),
            dcc.RadioItems(
                id="range",
                options=[{"label": k, "value": k} for k in RANGES],
                value="1h",
                inline=True,
                className="ctl",
            ),
        ],
        className="controls",
    )


def _graph(graph_id: str, height: int) -> dcc.Graph:
    return dcc.Graph(
        id=graph_id, config={"displayModeBar": False}, responsive=True, style={"height": f"{height}px"}
    )


def _card(title: str, *children: Any) -> html.Section:
    return html.Section([html.H2(title), *children], className="card")


def _panels() -> html.Div:
    return html.Div(
        [
            html.Section([_graph("map", MAP_HEIGHT)], className="card wide"),
            html.Section([_graph("series", MAP_HEIGHT)], className="card wide"),
            html.Section([_graph("effects", EFFECTS_HEIGHT), html.Div(id="effects-table")], className="card"),
            _card("Congestion alerts", html.Div(id="alerts")),
            _card("Infrastructure", html.Div(id="infra")),
            _card("System", html.Div(id="system")),
            _card(
                "Sensor lookup",
                dcc.Input(id="sensor-id", placeholder="sensor id", debounce=True),
                html.Pre(id="sensor-event"),
            ),
        ],
        className="grid",
    )


def page() -> html.Div:
    """The whole page; ``tick`` (every 2 s) drives the panels' refresh."""
    return html.Div(
        [
            html.Div(id="banner"),
            html.Header([html.H1("San Francisco traffic"), html.Span(id="clock", className="muted")]),
            _controls(),
            _panels(),
            dcc.Interval(id="tick", interval=2000),
        ]
    )
