"""The weather-effect panel: Spark's estimates (bars, 95 % CI) beside the effect the simulator
was configured with (``sensors.model.WeatherEffect``, the ground truth), and a table of how
close each estimate came."""

from __future__ import annotations

from typing import Any

from dash import Dash, Input, Output, html

from dashboard import status
from dashboard.data import DashboardData
from dashboard.layout import EFFECTS_HEIGHT
from dashboard.panels.common import message_figure, note, table
from dashboard.status import Wait

EFFECTS_TITLE = "Weather effect on speed: estimate vs configured"


def configured_text(configured: dict[str, float]) -> str:
    """The simulator's speed factors as percentages, e.g. "fog -10 %, rain -15 %"."""
    return ", ".join(f"{c.replace('_', ' ')} {(f - 1) * 100:+.0f} %" for c, f in configured.items())


def _estimate(r: dict[str, Any]) -> tuple[float, float, float]:
    """(factor, CI low, CI high): the regression's when the job computed it, else the ratio's."""
    v = r.get("ols_factor") or r["speed_factor"]
    lo = r.get("ols_ci_low") or r.get("ci_low") or v
    hi = r.get("ols_ci_high") or r.get("ci_high") or v
    return float(v), float(lo), float(hi)


def _effect_rows(data: DashboardData) -> list[dict[str, Any]]:
    order = [*status.REGIMES]
    return sorted(
        data.effects_overall(),
        key=lambda r: order.index(r["condition"]) if r["condition"] in order else len(order),
    )


def _waiting_figure(data: DashboardData) -> dict[str, Any]:
    """No estimate yet: what the chart waits for, and the configured effect it will be set beside."""
    wait = status.effects(data.facts()) or Wait("no estimates yet")
    fig = message_figure(wait, EFFECTS_HEIGHT, EFFECTS_TITLE)
    truth_note = Wait(
        "configured in the simulator (the truth to recover)", configured_text(data.configured_effects())
    )
    fig["layout"]["annotations"].append(
        {**note(truth_note, y=0.02), "name": "waiting-truth", "bgcolor": None}
    )
    return fig


def effects_figure(data: DashboardData) -> dict[str, Any]:
    rows = _effect_rows(data)
    if not rows:
        return _waiting_figure(data)
    est = [_estimate(r) for r in rows]
    names = [r["condition"].replace("_", " ") for r in rows]
    configured = data.configured_effects()
    truth = [configured.get(r["condition"]) for r in rows]
    traces: list[dict[str, Any]] = [
        {
            "type": "bar",
            "x": names,
            "y": [(v - 1) * 100 for v, _, _ in est],
            "name": "Spark's estimate, 95% CI",
            "error_y": {
                "type": "data",
                "symmetric": False,
                "array": [(hi - v) * 100 for v, _, hi in est],
                "arrayminus": [(v - lo) * 100 for v, lo, _ in est],
                "color": "#1f2937",
            },
            "marker": {"color": ["#9ecae1", "#4292c6", "#08519c"][: len(rows)]},
            "text": [f"{(v - 1) * 100:+.1f}%" for v, _, _ in est],
            "textposition": "inside",
            "insidetextanchor": "start",
            "hovertext": [
                f"n={r['n']} cells, {r['windows']} windows; congestion {r['congestion_delta']:+.3f}"
                for r in rows
            ],
        },
        {
            "type": "scatter",
            "x": names,
            "y": [None if t is None else (t - 1) * 100 for t in truth],
            "name": "configured in the simulator",
            "mode": "markers",
            "marker": {"symbol": "line-ew", "size": 46, "line": {"width": 3, "color": "#d95f02"}},
            "hovertemplate": "configured: %{y:+.1f}%<extra></extra>",
        },
    ]
    layout = {
        "margin": {"l": 50, "r": 10, "t": 34, "b": 30},
        "height": EFFECTS_HEIGHT,
        "yaxis": {"title": {"text": "speed vs clear (%)"}, "zeroline": True},
        "title": {"text": EFFECTS_TITLE, "font": {"size": 14}},
        "legend": {"orientation": "h", "y": -0.12},
        "showlegend": True,
    }
    return {"data": traces, "layout": layout}


def effects_table(data: DashboardData) -> html.Table | html.P | None:
    """How close Spark got: each estimate, its CI, the configured factor, the difference."""
    rows = []
    configured = data.configured_effects()
    for r in _effect_rows(data):
        v, lo, hi = _estimate(r)
        truth = configured.get(r["condition"])
        diff = "-"
        if truth is not None:
            diff = f"{(v - truth) * 100:+.1f} pp" + (" ✓ in CI" if lo <= truth <= hi else "")
        rows.append(
            [
                r["condition"],
                f"{v:.3f}",
                f"{lo:.3f} to {hi:.3f}",
                "-" if truth is None else f"{truth:.3f}",
                diff,
                r["n"],
            ]
        )
    if not rows:
        return None
    return table(["regime", "factor (OLS)", "95% CI", "configured", "estimate - configured", "n"], rows, "")


def register(app: Dash, data: DashboardData) -> None:
    @app.callback(
        Output("effects", "figure"), Output("effects-table", "children"), Input("tick", "n_intervals")
    )
    def _effects(_: int) -> tuple[dict[str, Any], Any]:
        return effects_figure(data), effects_table(data)
