"""The infrastructure panel: bridges, tunnels, car parks and a count of signals by state."""

from __future__ import annotations

from typing import Any

from dash import Dash, Input, Output

from dashboard import status
from dashboard.data import DashboardData
from dashboard.panels.common import table, waiting
from dashboard.status import Wait


def _asset_row(r: dict[str, Any]) -> list[Any] | None:
    """A bridge's, tunnel's or car park's latest reading as (asset, status); None for others."""
    k = r.get("kind")
    if k == "bridge":
        return [
            r["asset"],
            f"strain {r['strain_microstrain']:.0f} µε, vibration {r['vibration_mm_s']:.2f} mm/s",
        ]
    if k == "tunnel":
        return [r["asset"], f"CO {r['co_ppm']:.1f} ppm, NO₂ {r['no2_ppb']:.0f} ppb"]
    if k == "parking":
        return [
            r["asset"],
            f"{r['occupied']}/{r['capacity']} ({100 * r['occupied'] / max(r['capacity'], 1):.0f}%)",
        ]
    return None


def infra_panel(data: DashboardData) -> Any:
    rows = []
    signals: dict[str, int] = {}
    for r in data.infrastructure():
        if r.get("kind") == "signal":
            signals[r.get("signal_state", "?")] = signals.get(r.get("signal_state", "?"), 0) + 1
            continue
        row = _asset_row(r)
        if row is not None:
            rows.append(row)
    if signals:
        rows.append(["traffic signals", ", ".join(f"{n} {s}" for s, n in sorted(signals.items()))])
    if not rows:
        wait = status.events(data.facts(), "infrastructure", "infrastructure readings")
        return waiting(wait or Wait("no infrastructure readings yet"))
    return table(["asset", "status"], rows, "")


def register(app: Dash, data: DashboardData) -> None:
    @app.callback(Output("infra", "children"), Input("tick", "n_intervals"))
    def _infra(_: int) -> Any:
        return infra_panel(data)
