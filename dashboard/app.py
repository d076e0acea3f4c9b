"""The live traffic dashboard (Plotly Dash): map, time series, weather effects, alerts, system.

Everything is drawn from :class:`dashboard.data.DashboardData` caches, refreshed every 2 s by a
``dcc.Interval``; no callback talks to the store. The map needs no internet: San Francisco's
shoreline (:mod:`dashboard.basemap`) and the monitored roads are plain Plotly traces on
longitude/latitude axes. A panel without data says what it waits for and roughly when it
arrives (:mod:`dashboard.status`); no chart is drawn as empty axes.

The weather story: the effect chart sets Spark's estimates (bars, 95 % CI) beside the effect the
simulator was configured with (``sensors.model.WeatherEffect``, the ground truth), and the
selected segment's speeds are shaded by its weather station's regime over time.

JSON endpoints for scripts and tests: ``/api/health`` and ``/api/sensor/<sensor-id>`` (the latest
event the dashboard received from that sensor).
"""

from __future__ import annotations

import datetime as dt
import math
import time
from typing import Any

from dash import Dash, Input, Output, State, dcc, html
from flask import jsonify
from plotly.subplots import make_subplots

from dashboard import basemap, status
from dashboard.data import DashboardData
from dashboard.status import Wait
from sensors import geo

BANDS = [  # speed / free-flow ratio → colour
    (0.8, "#1a9850", "flowing"),
    (0.6, "#a6d96a", "busy"),
    (0.4, "#fdae61", "slow"),
    (0.0, "#d73027", "congested"),
]
RANGES = {"15m": 15, "1h": 60, "6h": 360}
# the map, the series and the weather-effect chart fit a 1280x800 screen (the README's picture);
# responsive graphs take their height from their style, not from the figure's layout
MAP_HEIGHT, EFFECTS_HEIGHT = 400, 280
LAT0 = math.cos(math.radians(37.77))
PST = dt.timezone(dt.timedelta(hours=-8), "PST")
DISTRICT_OF_STATION = {s.station_id: s.district for s in geo.STATIONS}
# the ground truth: the speed factor of each regime the simulator applies (sensors.model)


def configured_text(configured: dict[str, float]) -> str:
    return ", ".join(f"{c.replace('_', ' ')} {(f - 1) * 100:+.0f} %" for c, f in configured.items())


# the selected segment's background by its station's weather: colour, legend name
REGIME_STYLE = {
    "fog": ("rgba(120,120,120,0.18)", "fog"),
    "rain": ("rgba(66,146,198,0.20)", "rain"),
    "heavy_rain": ("rgba(8,81,156,0.32)", "heavy rain"),
}


def _band(ratio: float | None) -> tuple[str, str]:
    if ratio is None:
        return "#9e9e9e", "no data"
    for lo, colour, name in BANDS:
        if ratio >= lo:
            return colour, name
    return BANDS[-1][1], BANDS[-1][2]


def data_now_ms(data: DashboardData) -> int:
    """ "Now" on the data's clock (a replayed day runs on simulated time)."""
    latest = data.snapshot_latest()
    if latest:
        return max(r["t"] for r in latest.values()) + 60_000
    return int(time.time() * 1000)


def _note(wait: Wait, y: float = 0.5, width: int = 78) -> dict[str, Any]:
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
            _note(wait, y=0.62 if height < MAP_HEIGHT else 0.5, width=64 if height < MAP_HEIGHT else 78)
        ],
        **layout,
    }
    if title:
        lay["title"] = {"text": title, "font": {"size": 14}}
    return {"data": [], "layout": lay}


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
        mids_t.append(
            f"{s.road} #{s.index}<br>{s.segment_id}<br>"
            + (
                f"{rec['mean_speed_kmh']:.0f} km/h ({label}), {rec['volume']} veh/min"
                + (" (this minute, live)" if rec.get("live") else "")
                if rec
                else "no data yet"
            )
        )
    for _lo, colour, label in [*BANDS, (None, "#9e9e9e", "no data")]:
        if label in groups:
            xs, ys = groups[label]
            traces.append(
                {
                    "type": "scatter",
                    "x": xs,
                    "y": ys,
                    "mode": "lines",
                    "name": label,
                    "line": {"color": colour, "width": 5},
                    "hoverinfo": "skip",
                }
            )
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
        s = geo.SEGMENTS_BY_ID[selected]
        traces.append(
            {
                "type": "scatter",
                "x": [s.mid[1]],
                "y": [s.mid[0]],
                "mode": "markers",
                "showlegend": False,
                "hoverinfo": "skip",
                "marker": {"size": 18, "color": "rgba(0,0,0,0)", "line": {"width": 3, "color": "#1f3b73"}},
            }
        )
    wait = None if latest else status.events(data.facts())
    if wait is None:
        return {"data": traces, "layout": _MAP_LAYOUT}
    return {"data": traces, "layout": {**_MAP_LAYOUT, "annotations": [_note(wait, y=0.92, width=64)]}}


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


def _times(ms: list[int]) -> list[str]:
    return [dt.datetime.fromtimestamp(t / 1000, tz=PST).strftime("%Y-%m-%d %H:%M:%S") for t in ms]


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
                "x0": _times([a])[0],
                "x1": _times([b])[0],
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
    ts = _times([r["t"] for r in rows])
    wts = _times([r["event_time"] for r in wx])
    traces = [
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
            "x": wts,
            "y": [r["precipitation_mm_h"] for r in wx],
            "name": f"rain mm/h ({station})",
            "line": {"color": "#2c7fb8"},
            "fill": "tozeroy",
            "fillcolor": "rgba(44,127,184,0.15)",
            "xaxis": "x2",
            "yaxis": "y3",
        },
    ]
    now_wx = (wx[-1].get("condition") or "?").replace("_", " ") if wx else "no reading"
    layout = {
        **_SERIES_LAYOUT,
        "title": {"text": f"{title} · {station}: {now_wx}", "font": {"size": 14}},
        "shapes": _band_shapes(regime_bands(wx)),
        "uirevision": segment,
    }
    return {"data": traces, "layout": layout}


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


EFFECTS_TITLE = "Weather effect on speed: estimate vs configured"


def effects_figure(data: DashboardData) -> dict[str, Any]:
    rows = _effect_rows(data)
    if not rows:
        wait = status.effects(data.facts()) or Wait("no estimates yet")
        fig = message_figure(wait, EFFECTS_HEIGHT, EFFECTS_TITLE)
        truth_note = Wait(
            "configured in the simulator (the truth to recover)", configured_text(data.configured_effects())
        )
        fig["layout"]["annotations"].append(
            {**_note(truth_note, y=0.02), "name": "waiting-truth", "bgcolor": None}
        )
        return fig
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


def effects_table(data: DashboardData) -> Any:
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
    return _table(["regime", "factor (OLS)", "95% CI", "configured", "estimate - configured", "n"], rows, "")


def _table(header: list[str], rows: list[list[Any]], empty: str) -> html.Table | html.P:
    if not rows:
        return html.P(empty, className="muted")
    return html.Table(
        [
            html.Thead(html.Tr([html.Th(h) for h in header])),
            html.Tbody([html.Tr([html.Td(c) for c in r]) for r in rows]),
        ],
        className="tbl",
    )


def _waiting(wait: Wait) -> html.P:
    """A table panel's empty state."""
    return html.P([html.B(wait.headline), html.Br(), wait.detail], className="muted waiting")


def _fmt_t(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, tz=PST).strftime("%H:%M")


def segment_options(district: str | None = None) -> list[dict[str, str]]:
    return [
        {"label": f"{s.road} #{s.index}", "value": s.segment_id}
        for s in geo.SEGMENTS
        if not district or DISTRICT_OF_STATION[geo.STATION_OF_SEGMENT[s.segment_id]] == district
    ]


def create_app(data: DashboardData) -> Dash:
    app = Dash(__name__, title="SF traffic — sftraffic", update_title=None, assets_folder="assets")
    districts = sorted({s.district for s in geo.STATIONS})
    app.layout = html.Div(
        [
            html.Div(id="banner"),
            html.Header([html.H1("San Francisco traffic"), html.Span(id="clock", className="muted")]),
            html.Div(
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
                        value="market-st-02",
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
            ),
            html.Div(
                [
                    html.Section(
                        [
                            dcc.Graph(
                                id="map",
                                config={"displayModeBar": False},
                                responsive=True,
                                style={"height": f"{MAP_HEIGHT}px"},
                            )
                        ],
                        className="card wide",
                    ),
                    html.Section(
                        [
                            dcc.Graph(
                                id="series",
                                config={"displayModeBar": False},
                                responsive=True,
                                style={"height": f"{MAP_HEIGHT}px"},
                            )
                        ],
                        className="card wide",
                    ),
                    html.Section(
                        [
                            dcc.Graph(
                                id="effects",
                                config={"displayModeBar": False},
                                responsive=True,
                                style={"height": f"{EFFECTS_HEIGHT}px"},
                            ),
                            html.Div(id="effects-table"),
                        ],
                        className="card",
                    ),
                    html.Section([html.H2("Congestion alerts"), html.Div(id="alerts")], className="card"),
                    html.Section([html.H2("Infrastructure"), html.Div(id="infra")], className="card"),
                    html.Section([html.H2("System"), html.Div(id="system")], className="card"),
                    html.Section(
                        [
                            html.H2("Sensor lookup"),
                            dcc.Input(id="sensor-id", placeholder="sensor id", debounce=True),
                            html.Pre(id="sensor-event"),
                        ],
                        className="card",
                    ),
                ],
                className="grid",
            ),
            dcc.Interval(id="tick", interval=2000),
        ]
    )

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

    @app.callback(
        Output("map", "figure"),
        Input("tick", "n_intervals"),
        Input("segment", "value"),
        Input("district", "value"),
    )
    def _map(_: int, segment: str, district: str | None) -> dict[str, Any]:
        return map_figure(data, segment, district)

    @app.callback(
        Output("series", "figure"),
        Input("tick", "n_intervals"),
        Input("segment", "value"),
        Input("range", "value"),
    )
    def _series(_: int, segment: str, rng: str) -> dict[str, Any]:
        return series_figure(data, segment, RANGES.get(rng, 60))

    @app.callback(
        Output("effects", "figure"), Output("effects-table", "children"), Input("tick", "n_intervals")
    )
    def _effects(_: int) -> tuple[dict[str, Any], Any]:
        return effects_figure(data), effects_table(data)

    @app.callback(Output("alerts", "children"), Input("tick", "n_intervals"), Input("range", "value"))
    def _alerts(_: int, rng: str) -> Any:
        since = data_now_ms(data) - RANGES.get(rng, 60) * 60_000
        rows = [
            [
                _fmt_t(a["t"]),
                a["segment_id"],
                f"{a['mean_speed_kmh']:.0f}",
                f"{a['baseline_kmh']:.0f}",
                a["severity"],
            ]
            for a in data.recent_alerts(since)[:15]
        ]
        if not rows:
            wait = status.windows(data.facts(), "anomalies", "congestion_alerts")
            return _waiting(wait) if wait else html.P(f"no congestion in the last {rng}", className="muted")
        return _table(["time", "segment", "km/h", "usual", "severity"], rows, "")

    @app.callback(Output("infra", "children"), Input("tick", "n_intervals"))
    def _infra(_: int) -> Any:
        rows = []
        signals: dict[str, int] = {}
        for r in data.infrastructure():
            k = r.get("kind")
            if k == "signal":
                signals[r.get("signal_state", "?")] = signals.get(r.get("signal_state", "?"), 0) + 1
            elif k == "bridge":
                rows.append(
                    [
                        r["asset"],
                        f"strain {r['strain_microstrain']:.0f} µε, vibration {r['vibration_mm_s']:.2f} mm/s",
                    ]
                )
            elif k == "tunnel":
                rows.append([r["asset"], f"CO {r['co_ppm']:.1f} ppm, NO₂ {r['no2_ppb']:.0f} ppb"])
            elif k == "parking":
                rows.append(
                    [
                        r["asset"],
                        f"{r['occupied']}/{r['capacity']} "
                        f"({100 * r['occupied'] / max(r['capacity'], 1):.0f}%)",
                    ]
                )
        if signals:
            rows.append(["traffic signals", ", ".join(f"{n} {s}" for s, n in sorted(signals.items()))])
        if not rows:
            wait = status.events(data.facts(), "infrastructure", "infrastructure readings")
            return _waiting(wait or Wait("no infrastructure readings yet"))
        return _table(["asset", "status"], rows, "")

    @app.callback(
        Output("system", "children"),
        Output("banner", "children"),
        Output("clock", "children"),
        Input("tick", "n_intervals"),
    )
    def _system(_: int) -> tuple[Any, Any, str]:
        h = data.health
        rows = [
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
        rows += [
            [f"in: {t.split('.', 1)[1]}", f"{v:,.0f}/s"] for t, v in sorted(h.throughput.items()) if v > 0
        ]
        rows += [[f"lag: {g}", f"{n:,}"] for g, n in sorted(h.lag.items())]
        banner: Any = None
        if not h.store_ok:
            since = time.strftime("%H:%M:%S", time.localtime(h.last_ok)) if h.last_ok else "start-up"
            banner = html.Div(
                f"Store unreachable since {since}: showing the last data received. ({h.error[:120]})",
                className="banner",
                id="store-banner",
            )
        clock = "data time " + _fmt_t(data_now_ms(data)) + " PST"
        return _table(["", ""], rows, ""), banner, clock

    @app.callback(
        Output("sensor-event", "children"), Input("sensor-id", "value"), Input("tick", "n_intervals")
    )
    def _sensor(sensor_id: str | None, _: int) -> str:
        if not sensor_id:
            return "type a sensor id, e.g. a pavement sensor's ts-market-st-00-E1-000"
        ev = data.sensor(sensor_id.strip())
        return (
            "no event from this sensor yet" if ev is None else "\n".join(f"{k}: {v}" for k, v in ev.items())
        )

    server = app.server

    @server.route("/api/health")
    def _api_health() -> Any:
        h = data.health
        return jsonify(
            {
                "store_ok": h.store_ok,
                "brokers": h.brokers,
                "partitions": h.partitions,
                "under_replicated": h.under_replicated,
                "segments_with_data": len(data.snapshot_latest()),
                "events_seen": data.events_seen,
                "pipeline_lag_s": h.pipeline_lag_s,
            }
        )

    @server.route("/api/sensor/<sensor_id>")
    def _api_sensor(sensor_id: str) -> Any:
        ev = data.sensor(sensor_id)
        return (
            (jsonify(ev), 200)
            if ev is not None
            else (jsonify({"error": "no event from this sensor yet"}), 404)
        )

    return app
