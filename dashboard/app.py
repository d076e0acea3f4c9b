"""The live traffic dashboard (Plotly Dash): map, time series, weather effects, alerts, system.

Everything is drawn from :class:`dashboard.data.DashboardData` caches, refreshed every 2 s by a
``dcc.Interval``; no callback talks to the store. The map needs no internet: San Francisco's
shoreline and the monitored roads are plain Plotly traces on longitude/latitude axes.

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

from dashboard.data import DashboardData
from sensors import geo

# a simplified shoreline of San Francisco (lat, lon), clockwise from Fort Point
SF_OUTLINE = [
    (37.8107, -122.4770),
    (37.8076, -122.4480),
    (37.8063, -122.4300),
    (37.8087, -122.4150),
    (37.8065, -122.4040),
    (37.7990, -122.3960),
    (37.7895, -122.3880),
    (37.7770, -122.3870),
    (37.7600, -122.3850),
    (37.7450, -122.3800),
    (37.7300, -122.3700),
    (37.7160, -122.3820),
    (37.7080, -122.3930),
    (37.7080, -122.5030),
    (37.7350, -122.5070),
    (37.7700, -122.5110),
    (37.7800, -122.5130),
    (37.7880, -122.4920),
    (37.7900, -122.4810),
    (37.8107, -122.4770),
]
BANDS = [  # speed / free-flow ratio → colour
    (0.8, "#1a9850", "flowing"),
    (0.6, "#a6d96a", "busy"),
    (0.4, "#fdae61", "slow"),
    (0.0, "#d73027", "congested"),
]
RANGES = {"15m": 15, "1h": 60, "6h": 360}
LAT0 = math.cos(math.radians(37.77))
PST = dt.timezone(dt.timedelta(hours=-8), "PST")
DISTRICT_OF_STATION = {s.station_id: s.district for s in geo.STATIONS}


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


_OUTLINE_TRACE: dict[str, Any] = {
    "type": "scatter",
    "x": [p[1] for p in SF_OUTLINE],
    "y": [p[0] for p in SF_OUTLINE],
    "mode": "lines",
    "fill": "toself",
    "fillcolor": "#f4f1ea",
    "line": {"color": "#b0a999", "width": 1},
    "hoverinfo": "skip",
    "showlegend": False,
}
_MAP_LAYOUT: dict[str, Any] = {
    "margin": {"l": 0, "r": 0, "t": 0, "b": 0},
    "plot_bgcolor": "#cfe3ee",
    "paper_bgcolor": "white",
    "height": 430,
    "legend": {"orientation": "h", "y": 0.01, "x": 0.01, "bgcolor": "rgba(255,255,255,0.7)"},
    "xaxis": {"visible": False, "range": [-122.52, -122.35]},
    "yaxis": {"visible": False, "range": [37.70, 37.83], "scaleanchor": "x", "scaleratio": 1 / LAT0},
    "uirevision": "map",
}


def map_figure(data: DashboardData, selected: str | None, district: str | None) -> dict[str, Any]:
    """The map as a plain figure dict: Dash sends it as is (no plotly validation, no template),
    which keeps the 2-second refresh cheap with 10k sensors live."""
    latest = data.snapshot_latest()
    traces: list[dict[str, Any]] = [_OUTLINE_TRACE]
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
    return {"data": traces, "layout": _MAP_LAYOUT}


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
        height=430,
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


def series_figure(data: DashboardData, segment: str, minutes: int) -> dict[str, Any]:
    now = data_now_ms(data)
    since = now - minutes * 60_000
    rows = data.series(segment, since)
    station = geo.STATION_OF_SEGMENT.get(segment, "")
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
    seg = geo.SEGMENTS_BY_ID.get(segment)
    title = f"{seg.road} #{seg.index} ({segment})" if seg else segment
    layout = {**_SERIES_LAYOUT, "title": {"text": title, "font": {"size": 14}}, "uirevision": segment}
    return {"data": traces, "layout": layout}


def effects_figure(data: DashboardData) -> dict[str, Any]:
    rows = sorted(
        data.effects_overall(),
        key=lambda r: (
            ["fog", "rain", "heavy_rain"].index(r["condition"])
            if r["condition"] in ("fog", "rain", "heavy_rain")
            else 9
        ),
    )
    traces: list[dict[str, Any]] = []
    if rows:
        y = [r.get("ols_factor") or r["speed_factor"] for r in rows]
        lo = [r.get("ols_ci_low") or r.get("ci_low") or v for r, v in zip(rows, y, strict=True)]
        hi = [r.get("ols_ci_high") or r.get("ci_high") or v for r, v in zip(rows, y, strict=True)]
        traces.append(
            {
                "type": "bar",
                "x": [r["condition"].replace("_", " ") for r in rows],
                "y": [(v - 1) * 100 for v in y],
                "error_y": {
                    "type": "data",
                    "symmetric": False,
                    "array": [(h - v) * 100 for h, v in zip(hi, y, strict=True)],
                    "arrayminus": [(v - low) * 100 for v, low in zip(y, lo, strict=True)],
                },
                "marker": {"color": ["#9ecae1", "#4292c6", "#08519c"][: len(rows)]},
                "text": [f"{(v - 1) * 100:+.1f}%" for v in y],
                "textposition": "outside",
                "hovertext": [
                    f"n={r['n']} cells, {r['windows']} windows; congestion {r['congestion_delta']:+.3f}"
                    for r in rows
                ],
            }
        )
    layout = {
        "margin": {"l": 40, "r": 10, "t": 30, "b": 30},
        "height": 300,
        "yaxis": {"title": {"text": "speed vs clear (%)"}},
        "title": {"text": "Weather effect on speed (95% CI)", "font": {"size": 14}},
    }
    return {"data": traces, "layout": layout}


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
                        [dcc.Graph(id="map", config={"displayModeBar": False}, responsive=True)],
                        className="card wide",
                    ),
                    html.Section(
                        [dcc.Graph(id="series", config={"displayModeBar": False}, responsive=True)],
                        className="card wide",
                    ),
                    html.Section(
                        [
                            dcc.Graph(id="effects", config={"displayModeBar": False}, responsive=True),
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
        rows = data.effects_overall()
        table = _table(
            ["regime", "factor (OLS)", "95% CI", "n"],
            [
                [
                    r["condition"],
                    f"{r.get('ols_factor') or r['speed_factor']:.3f}",
                    f"{r.get('ols_ci_low') or r.get('ci_low') or 0:.3f} to "
                    f"{r.get('ols_ci_high') or r.get('ci_high') or 0:.3f}",
                    r["n"],
                ]
                for r in rows
            ],
            "no estimates yet (the correlation job publishes them)",
        )
        return effects_figure(data), table

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
        return _table(["time", "segment", "km/h", "usual", "severity"], rows, "no congestion")

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
        return _table(["asset", "status"], rows, "no infrastructure readings yet")

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
            ["pipeline freshness", "-" if h.pipeline_lag_s is None else f"{h.pipeline_lag_s:.0f} s behind"],
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
