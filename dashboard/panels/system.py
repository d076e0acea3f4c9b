"""The system panel (store, brokers, partitions, throughput, lag, pipeline freshness), the
banner while the store is unreachable, and the data clock in the header."""

from __future__ import annotations

import time
from typing import Any

from dash import Dash, Input, Output, html

from dashboard import status
from dashboard.data import DashboardData, Health
from dashboard.panels.common import data_now_ms, fmt_t, table
from dashboard.status import Wait


def _rows(data: DashboardData, h: Health) -> list[list[Any]]:
    rows: list[list[Any]] = [
        ["store", "up" if h.store_ok else "unreachable"],
        ["brokers", ", ".join(h.brokers) or "-"],
        ["partitions", h.partitions],
        ["under-replicated", h.under_replicated],
        ["events received", f"{data.events_seen:,}"],
        [
            "pipeline freshness",
            (status.windows(data.facts()) or Wait("-")).headline
            if h.pipeline_lag_s is None
            else f"{h.pipeline_lag_s:.0f} s behind",
        ],
    ]
    rows += [[f"in: {t.split('.', 1)[1]}", f"{v:,.0f}/s"] for t, v in sorted(h.throughput.items()) if v > 0]
    rows += [[f"lag: {g}", f"{n:,}"] for g, n in sorted(h.lag.items())]
    return rows


def _banner(h: Health) -> html.Div | None:
    if h.store_ok:
        return None
    since = time.strftime("%H:%M:%S", time.localtime(h.last_ok)) if h.last_ok else "start-up"
    return html.Div(
        f"Store unreachable since {since}: showing the last data received. ({h.error[:120]})",
        className="banner",
        id="store-banner",
    )


def register(app: Dash, data: DashboardData) -> None:
    @app.callback(
        Output("system", "children"),
        Output("banner", "children"),
        Output("clock", "children"),
        Input("tick", "n_intervals"),
    )
    def _system(_: int) -> tuple[Any, Any, str]:
        h = data.health
        clock = "data time " + fmt_t(data_now_ms(data)) + " PST"
        return table(["", ""], _rows(data, h), ""), _banner(h), clock
