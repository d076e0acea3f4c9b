"""The controls' callbacks: the district filters the segment choices; a click on the map picks
a segment."""

from __future__ import annotations

from typing import Any

from dash import Dash, Input, Output, State

from dashboard.data import DashboardData
from dashboard.layout import segment_options
from sensors import geo


def register(app: Dash, data: DashboardData) -> None:
    @app.callback(Output("segment", "options"), Input("district", "value"))
    def _segments(district: str | None) -> list[dict[str, str]]:
        return segment_options(district)

    @app.callback(
        Output("segment", "value"),
        Input("map", "clickData"),
        State("segment", "value"),
        prevent_initial_call=True,
    )
    def _click(click: dict[str, Any] | None, current: str) -> str:
        for p in (click or {}).get("points", []):
            if p.get("customdata") in geo.SEGMENTS_BY_ID:
                return str(p["customdata"])
        return current
