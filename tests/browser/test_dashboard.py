"""The dashboard in real headless Chromium (dash[testing]) against a real store."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from dashboard.app import create_app
from dashboard.data import DashboardData
from pipelines import jobs
from sensors.layout import ensure_layout
from testing import wait_for
from tests.support.brokers import ARTIFACTS, BrokerFactory
from tests.support.browser import plot_data, shot
from tests.support.dashboard_seed import seed

pytestmark = [pytest.mark.browser, pytest.mark.integration]


@pytest.fixture
def live(broker_factory: BrokerFactory) -> Any:
    b = broker_factory()
    ensure_layout(
        b.bootstrap,
        partitions=2,
        extra_topics={jobs.t(n): {} for n in jobs.RESULT_TOPICS if n != "dead_letter"},
    )
    now = int(time.time() * 1000)
    seed(b.bootstrap, now - 5 * 60_000, minutes=60)
    data = DashboardData(b.bootstrap).start()
    wait_for(
        lambda: (
            len(data.snapshot_latest()) == 116
            and len(data.aggregates.get("market-st-02", ())) >= 60
            and data.health.store_ok
        ),
        timeout=30,
        what="dashboard caches to hold the seeded hour",
    )
    yield b, data, now
    data.stop()


def choose(dash_duo: Any, dropdown_id: str, search: str, value: str) -> None:
    """Pick an option in a Dash 4 dropdown the way a user does: open, search, click."""
    dash_duo.find_element(f"#{dropdown_id}").click()
    box = dash_duo.wait_for_element(".dash-dropdown-search", timeout=10)
    box.send_keys(search)
    option = dash_duo.wait_for_element(f".dash-dropdown-option input[value='{value}']", timeout=10)
    option.find_element("xpath", "./ancestor::label").click()


def test_page_renders_live_data_without_console_errors(dash_duo: Any, live: Any) -> None:
    _b, data, _now = live
    dash_duo.start_server(create_app(data))
    dash_duo.wait_for_element("#map .js-plotly-plot", timeout=20)
    wait_for(
        lambda: len(plot_data(dash_duo, "series")) >= 3 and plot_data(dash_duo, "series")[0].get("y"),
        timeout=20,
        what="the speed series",
    )
    seg_marks = [t for t in plot_data(dash_duo, "map") if t.get("name") == "segments"]
    assert seg_marks and len(seg_marks[0]["x"]) == 116
    assert "km/h" in " ".join(seg_marks[0]["text"])
    assert len(plot_data(dash_duo, "series")[0]["y"]) >= 50  # about an hour of minutes
    dash_duo.wait_for_contains_text("#effects-table", "heavy_rain", timeout=20)
    dash_duo.wait_for_contains_text("#system", "up", timeout=20)
    shot(dash_duo, "desktop")
    assert [e for e in dash_duo.get_logs() if e.get("level") == "SEVERE"] == []


def test_values_change_between_polls_without_reload(dash_duo: Any, live: Any) -> None:
    b, data, now = live
    dash_duo.start_server(create_app(data))
    wait_for(
        lambda: len(plot_data(dash_duo, "series")) >= 1 and plot_data(dash_duo, "series")[0].get("y"),
        timeout=20,
        what="the speed series",
    )
    before = plot_data(dash_duo, "series")[0]["y"]
    dash_duo.driver.execute_script("window.__marker = 42;")  # disappears if the page reloads
    seed(b.bootstrap, now, minutes=5, speed_offset=-15.0)  # five new, much slower minutes

    def recent_mean(ys: list[float]) -> float:
        return sum(ys[-5:]) / len(ys[-5:])

    # The window also slides with the clock (changing y every minute), so wait for what the
    # user must see: the newest five minutes, 15 km/h slower, at the end of the series.
    wait_for(
        lambda: recent_mean(plot_data(dash_duo, "series")[0]["y"]) < recent_mean(before) - 10,
        timeout=20,
        what="the five slower minutes at the end of the series",
    )
    assert dash_duo.driver.execute_script("return window.__marker;") == 42


def test_selecting_a_segment_updates_the_charts(dash_duo: Any, live: Any) -> None:
    _b, data, _now = live
    dash_duo.start_server(create_app(data))
    dash_duo.wait_for_element("#series .js-plotly-plot", timeout=20)
    choose(dash_duo, "segment", "Bay Bridge", "bay-bridge-west-span-01")
    wait_for(
        lambda: "bay-bridge-west-span-01" in (dash_duo.find_element("#series .gtitle").text or ""),
        timeout=20,
        what="the series title to follow the selection",
    )
    speeds = plot_data(dash_duo, "series")[0]["y"]
    assert speeds and max(speeds) > 50  # a bridge, not Market Street
    dash_duo.driver.set_window_size(390, 1400)

    def plot_width() -> float:
        return float(
            dash_duo.driver.execute_script(
                "return document.querySelector('#map .main-svg').getBoundingClientRect().width;"
            )
        )

    wait_for(lambda: plot_width() <= 390, timeout=20, what="the map to fit a phone-width screen")
    shot(dash_duo, "phone")


def test_banner_appears_when_the_store_stops(dash_duo: Any, live: Any) -> None:
    b, data, _now = live
    dash_duo.start_server(create_app(data))
    dash_duo.wait_for_element("#map .js-plotly-plot", timeout=20)
    assert not dash_duo.driver.find_elements("css selector", "#store-banner")
    b.stop()
    dash_duo.wait_for_element("#store-banner", timeout=30)
    assert "unreachable" in dash_duo.find_element("#store-banner").text
    seg_marks = [t for t in plot_data(dash_duo, "map") if t.get("name") == "segments"]
    assert seg_marks, "the last data stays on screen"
    shot(dash_duo, "store-down")
    b.start()
    wait_for(
        lambda: not dash_duo.driver.find_elements("css selector", "#store-banner"),
        timeout=30,
        what="the banner to go away",
    )


def test_json_api_serves_the_latest_sensor_event(dash_duo: Any, live: Any) -> None:
    import json
    import urllib.request

    _b, data, _now = live
    dash_duo.start_server(create_app(data))
    sensor = next(iter(data.sensors))
    with urllib.request.urlopen(f"{dash_duo.server_url}/api/sensor/{sensor}") as r:
        assert json.loads(r.read())["sensor_id"] == sensor
    with urllib.request.urlopen(f"{dash_duo.server_url}/api/health") as r:
        assert json.loads(r.read())["segments_with_data"] == 116
    Path(ARTIFACTS).mkdir(parents=True, exist_ok=True)
