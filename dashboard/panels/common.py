"""What the panels share: the data's clock, empty states (a message instead of empty axes) and
tables."""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

from dash import html

from dashboard.data import DashboardData
from dashboard.layout import MAP_HEIGHT
from dashboard.status import Wait

PST = dt.timezone(dt.timedelta(hours=-8), "PST")


def data_now_ms(data: DashboardData) -> int:
    """ "Now" on the data's clock (a replayed day runs on simulated time)."""
    latest = data.snapshot_latest()
    if latest:
        newest: int = max(r["t"] for r in latest.values())
        return newest + 60_000
    return int(time.time() * 1000)


def times(ms: list[int]) -> list[str]:
    """Epoch milliseconds as PST date-times, as the charts' x axes take them."""
    return [dt.datetime.fromtimestamp(t / 1000, tz=PST).strftime("%Y-%m-%d %H:%M:%S") for t in ms]


def fmt_t(ms: int) -> str:
    """Epoch milliseconds as a PST clock time (HH:MM)."""
    return dt.datetime.fromtimestamp(ms / 1000, tz=PST).strftime("%H:%M")


def note(wait: Wait, y: float = 0.5, width: int = 78) -> dict[str, Any]:
    """A panel's empty state as a centred annotation."""
    return {
        "text": wait.html(width),
        "xref": "paper",
        "yref": "paper",
        "x": 0.5,
        "y": y,
        "showarrow": False,
        "align": "center",
        "font": {"size": 13, "color": "#374151"},
        "bgcolor": "rgba(255,255,255,0.88)",
        "bordercolor": "#d1d5db",
        "borderpad": 8,
        "name": "waiting",
    }


def message_figure(wait: Wait, height: int, title: str | None = None, **layout: Any) -> dict[str, Any]:
    """A chart with nothing to draw yet: its message, no axes."""
    lay: dict[str, Any] = {
        "height": height,
        "margin": {"l": 10, "r": 10, "t": 40 if title else 10, "b": 10},
        "xaxis": {"visible": False},
        "yaxis": {"visible": False},
        "plot_bgcolor": "white",
        "annotations": [
            note(wait, y=0.62 if height < MAP_HEIGHT else 0.5, width=64 if height < MAP_HEIGHT else 78)
        ],
        **layout,
    }
    if title:
        lay["title"] = {"text": title, "font": {"size": 14}}
    return {"data": [], "layout": lay}


def table(header: list[str], rows: list[list[Any]], empty: str) -> html.Table | html.P:
    """A table panel's rows under ``header``; ``empty`` when there are none."""
    if not rows:
        return html.P(empty, className="muted")
    return html.Table(
        [
            html.Thead(html.Tr([html.Th(h) for h in header])),
            html.Tbody([html.Tr([html.Td(c) for c in r]) for r in rows]),
        ],
        className="tbl",
    )


def waiting(wait: Wait) -> html.P:
    """A table panel's empty state."""
    return html.P([html.B(wait.headline), html.Br(), wait.detail], className="muted waiting")
