"""The sensor-lookup panel: the latest event the dashboard received from a sensor."""

from __future__ import annotations

from dash import Dash, Input, Output

from dashboard.data import DashboardData


def sensor_text(data: DashboardData, sensor_id: str | None) -> str:
    if not sensor_id:
        return "type a sensor id, e.g. a pavement sensor's ts-market-st-00-E1-000"
    ev = data.sensor(sensor_id.strip())
    return "no event from this sensor yet" if ev is None else "\n".join(f"{k}: {v}" for k, v in ev.items())


def register(app: Dash, data: DashboardData) -> None:
    @app.callback(
        Output("sensor-event", "children"), Input("sensor-id", "value"), Input("tick", "n_intervals")
    )
    def _sensor(sensor_id: str | None, _: int) -> str:
        return sensor_text(data, sensor_id)
