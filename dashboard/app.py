"""The live traffic dashboard (Plotly Dash): map, time series, weather effects, alerts, system.

Everything is drawn from :class:`dashboard.data.DashboardData` caches, refreshed every 2 s by a
``dcc.Interval``; no callback talks to the store. The page is :mod:`dashboard.layout`; each
panel's figures and callbacks are a module of :mod:`dashboard.panels`. The map needs no
internet: San Francisco's shoreline (:mod:`dashboard.basemap`) and the monitored roads are plain
Plotly traces on longitude/latitude axes. A panel without data says what it waits for and
roughly when it arrives (:mod:`dashboard.status`); no chart is drawn as empty axes.

The weather story: the effect chart sets Spark's estimates (bars, 95 % CI) beside the effect the
simulator was configured with (``sensors.model.WeatherEffect``, the ground truth), and the
selected segment's speeds are shaded by its weather station's regime over time.

JSON endpoints for scripts and tests (:mod:`dashboard.api`): ``/api/health`` and
``/api/sensor/<sensor-id>`` (the latest event the dashboard received from that sensor).
"""

from __future__ import annotations

from dash import Dash
from flask import Flask

from dashboard import api, layout
from dashboard.data import DashboardData
from dashboard.panels import alerts, controls, effects, infra, sensor_lookup, series, system, traffic_map

PANELS = (controls, traffic_map, series, effects, alerts, infra, system, sensor_lookup)


def create_app(data: DashboardData) -> Dash:
    # Dash documents update_title=None (the tab keeps its title while a callback runs); its
    # annotation says str
    app = Dash(
        __name__,
        title="SF traffic — sftraffic",
        update_title=None,  # type: ignore[arg-type]
        assets_folder="assets",
    )
    app.layout = layout.page()
    for panel in PANELS:
        panel.register(app, data)
    server: Flask = app.server
    api.register(server, data)
    return app
