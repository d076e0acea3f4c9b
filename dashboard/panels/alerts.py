"""The congestion-alerts panel: the anomaly job's latest alerts within the chosen time range."""

from __future__ import annotations

from typing import Any

from dash import Dash, Input, Output, html

from dashboard import status
from dashboard.data import DashboardData
from dashboard.layout import RANGES
from dashboard.panels.common import data_now_ms, fmt_t, table, waiting


def alerts_panel(data: DashboardData, rng: str) -> Any:
    since = data_now_ms(data) - RANGES.get(rng, 60) * 60_000
    rows = [
        [
            fmt_t(a["t"]),
            a["segment_id"],
            f"{a['mean_speed_kmh']:.0f}",
            f"{a['baseline_kmh']:.0f}",
            a["severity"],
        ]
        for a in data.recent_alerts(since)[:15]
    ]
    if not rows:
        wait = status.windows(data.facts(), "anomalies", "congestion_alerts")
        return waiting(wait) if wait else html.P(f"no congestion in the last {rng}", className="muted")
    return table(["time", "segment", "km/h", "usual", "severity"], rows, "")


def register(app: Dash, data: DashboardData) -> None:
    @app.callback(Output("alerts", "children"), Input("tick", "n_intervals"), Input("range", "value"))
    def _alerts(_: int, rng: str) -> Any:
        return alerts_panel(data, rng)
