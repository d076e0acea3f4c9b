"""JSON endpoints for scripts and tests, on the dashboard's Flask server: ``/api/health`` and
``/api/sensor/<sensor-id>`` (the latest event the dashboard received from that sensor)."""

from __future__ import annotations

from flask import Flask, Response, jsonify

from dashboard.data import DashboardData


def register(server: Flask, data: DashboardData) -> None:
    @server.route("/api/health")
    def _api_health() -> Response:
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
    def _api_sensor(sensor_id: str) -> tuple[Response, int]:
        ev = data.sensor(sensor_id)
        return (
            (jsonify(ev), 200)
            if ev is not None
            else (jsonify({"error": "no event from this sensor yet"}), 404)
        )
