"""The figures as data, no browser: the weather story (configured truth beside each estimate,
speeds over weather-regime bands) and the empty states (a message, never bare axes)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from dashboard.data import TOPICS, DashboardData
from dashboard.demo_data import iso
from dashboard.panels import effects, series, traffic_map
from sensors.model import WeatherEffect

T = (int(time.time()) // 60 - 30) * 60_000  # half an hour ago, on a minute


def data_with(effects: bool = True, minutes: int = 20, conditions: list[str] | None = None) -> DashboardData:
    """A cache filled the way the consumer fills it (no store): aggregates of one segment, its
    station's weather, the overall weather-effect estimates."""
    d = DashboardData("127.0.0.1:1")
    for k in range(minutes):
        t = T + k * 60_000
        agg = {
            "segment_id": "market-st-02",
            "window_start": iso(t),
            "volume": 30,
            "mean_speed_kmh": 30 - k % 3,
        }
        d.ingest(TOPICS["aggregates"], b"market-st-02", json.dumps(agg).encode())
        cond = (conditions or ["clear"])[k % len(conditions or ["clear"])]
        wx = {"station": "wx-fidi", "event_time": t, "condition": cond, "precipitation_mm_h": 0.0}
        d.ingest(TOPICS["weather"], b"wx-fidi", json.dumps(wx).encode())
    if effects:
        for cond, f in (("fog", 0.91), ("rain", 0.84), ("heavy_rain", 0.75)):
            eff = {"segment_id": "*", "condition": cond, "n": 50, "windows": 500, "speed_factor": f}
            eff |= {"ols_factor": f, "ols_ci_low": f - 0.02, "ols_ci_high": f + 0.02, "congestion_delta": 0.0}
            d.ingest(TOPICS["effects"], f"*|{cond}".encode(), json.dumps(eff).encode())
    return d


def readings(*conds: str) -> list[dict[str, Any]]:
    return [{"event_time": T + k * 60_000, "condition": c} for k, c in enumerate(conds)]


def test_the_configured_truth_is_the_simulators() -> None:
    eff = WeatherEffect()
    truth = {
        "fog": eff.fog_speed_factor,
        "rain": eff.rain_speed_factor,
        "heavy_rain": eff.heavy_rain_speed_factor,
    }
    d = DashboardData("127.0.0.1:1")
    assert d.configured_effects() == truth  # no fleet has published its settings: the defaults
    assert effects.configured_text(truth) == "fog -10 %, rain -15 %, heavy rain -28 %"


def test_the_configured_truth_is_what_the_running_fleet_published() -> None:
    d = DashboardData("127.0.0.1:1")
    d.ground_truth = {"weather_effect": {"speed_factor": {"fog": 0.8, "rain": 0.7, "heavy_rain": 0.6}}}
    assert d.configured_effects() == {"fog": 0.8, "rain": 0.7, "heavy_rain": 0.6}
    fig = effects.effects_figure(data_with())
    d2 = data_with()
    d2.ground_truth = d.ground_truth
    _bars, truth = effects.effects_figure(d2)["data"]
    assert truth["y"] == pytest.approx([-20.0, -30.0, -40.0])
    assert fig["data"][1]["y"] == pytest.approx([-10.0, -15.0, -28.0])


def test_each_estimate_has_the_configured_effect_beside_it() -> None:
    fig = effects.effects_figure(data_with())
    bars, truth = fig["data"]
    assert bars["x"] == truth["x"] == ["fog", "rain", "heavy rain"]
    assert bars["y"] == pytest.approx([-9.0, -16.0, -25.0])
    assert bars["error_y"]["array"] == pytest.approx([2.0, 2.0, 2.0])
    assert truth["y"] == pytest.approx([-10.0, -15.0, -28.0])
    assert truth["mode"] == "markers" and truth["name"] == "configured in the simulator"


def test_the_table_says_how_close_the_estimate_got() -> None:
    table = effects.effects_table(data_with())
    cells = [[str(td.children) for td in tr.children] for tr in table.children[1].children]
    fog, rain, heavy = cells
    assert fog[:4] == ["fog", "0.910", "0.890 to 0.930", "0.900"]
    assert fog[4] == "+1.0 pp ✓ in CI"
    assert rain[4] == "-1.0 pp ✓ in CI"
    assert heavy[4] == "+3.0 pp"  # 0.73-0.77 misses 0.72: said plainly


def test_regime_bands_merge_runs_and_skip_clear_weather() -> None:
    bands = series.regime_bands(readings("clear", "rain", "rain", "heavy_rain", "cloudy", "fog"))
    assert bands == [
        (T + 60_000, T + 3 * 60_000, "rain"),
        (T + 3 * 60_000, T + 4 * 60_000, "heavy_rain"),
        (T + 5 * 60_000, T + 6 * 60_000, "fog"),
    ]
    assert series.regime_bands(readings("clear", "cloudy")) == []
    assert series.regime_bands([]) == []


def test_the_series_is_shaded_by_its_stations_regimes() -> None:
    fig = series.series_figure(
        data_with(conditions=["clear", "rain", "rain", "heavy_rain"]), "market-st-02", 60
    )
    shapes = fig["layout"]["shapes"]
    assert {s["legendgroup"] for s in shapes} == {"rain", "heavy_rain"}
    assert sum(s["showlegend"] for s in shapes) == 2  # one legend entry per regime
    assert all(s["layer"] == "below" and s["yref"] == "paper" for s in shapes)
    assert "wx-fidi: heavy rain" in fig["layout"]["title"]["text"]
    assert len(fig["data"][0]["y"]) == 20


def test_charts_without_data_show_a_message_and_no_axes() -> None:
    empty = DashboardData("127.0.0.1:1")
    for fig in (series.series_figure(empty, "market-st-02", 60), effects.effects_figure(empty)):
        lay = fig["layout"]
        assert fig["data"] == []
        assert lay["xaxis"]["visible"] is False and lay["yaxis"]["visible"] is False
        assert "connecting to the store at 127.0.0.1:1" in lay["annotations"][0]["text"]
    assert "fog -10 %" in effects.effects_figure(empty)["layout"]["annotations"][1]["text"]
    m = traffic_map.map_figure(empty, None, None)
    assert "connecting to the store" in m["layout"]["annotations"][0]["text"]
    assert "annotations" not in traffic_map.map_figure(data_with(), None, None)["layout"]


def test_a_segment_without_windows_while_others_have_them() -> None:
    fig = series.series_figure(data_with(), "geary-blvd-03", 60)
    assert fig["data"] == [] and "no windows for Geary Blvd #3" in fig["layout"]["annotations"][0]["text"]
