"""The weather story on the page, and the screenshot of it that the README shows.

The browser test renders the dashboard at 1280x800 with an hour of realistic results (seeded where
the selected segment's station had rain between clear spells) and rewrites ``docs/dashboard.png``
every run, so the picture never goes stale; a plain test checks that the README shows it.
"""

from __future__ import annotations

import shutil
import struct
import time
from pathlib import Path
from typing import Any

import pytest

from dashboard.app import create_app
from dashboard.data import DEFAULT_EFFECTS, DashboardData
from pipelines import jobs
from sensors.layout import ensure_layout
from testing import wait_for
from tests.support.brokers import ARTIFACTS, BrokerFactory
from tests.support.browser import plot_data
from tests.support.dashboard_seed import rainy_hour_end, seed

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOT = ROOT / "docs" / "dashboard.png"
SIZE = (1280, 800)


def png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    w, h = struct.unpack(">II", head[16:24])
    return w, h


def plot_layout(dash_duo: Any, graph_id: str) -> dict[str, Any]:
    return (
        dash_duo.driver.execute_script(
            f"var g = document.querySelector('#{graph_id} .js-plotly-plot'); return g ? g.layout : null;"
        )
        or {}
    )


@pytest.fixture
def rainy_hour(broker_factory: BrokerFactory) -> Any:
    b = broker_factory()
    ensure_layout(
        b.bootstrap,
        partitions=2,
        extra_topics={jobs.t(n): {} for n in jobs.RESULT_TOPICS if n != "dead_letter"},
    )
    now = int(time.time() * 1000)
    end = rainy_hour_end(now)
    seed(b.bootstrap, end, minutes=60)
    data = DashboardData(b.bootstrap, lookback_ms=now - end + 2 * 3_600_000).start()
    wait_for(
        lambda: (
            len(data.snapshot_latest()) == 116
            and len(data.aggregates.get("market-st-02", ())) >= 60
            and len(data.effects_overall()) == 3
            and data.health.store_ok
        ),
        timeout=30,
        what="dashboard caches to hold the seeded hour",
    )
    yield data
    data.stop()


@pytest.mark.browser
@pytest.mark.integration
def test_the_weather_story_and_the_readme_screenshot(dash_duo: Any, rainy_hour: Any) -> None:
    data = rainy_hour
    dash_duo.start_server(create_app(data))
    wait_for(
        lambda: (
            len(plot_data(dash_duo, "series")) >= 3
            and len(plot_data(dash_duo, "series")[0].get("y") or []) >= 50
        ),
        timeout=20,
        what="the speed series",
    )
    # the selected segment's speeds over bands of its station's weather regimes
    shapes = plot_layout(dash_duo, "series").get("shapes") or []
    regimes = {s["legendgroup"] for s in shapes}
    assert regimes & {"rain", "heavy_rain"}, shapes
    assert all(s["yref"] == "paper" and s["layer"] == "below" for s in shapes)
    assert "wx-fidi: " in dash_duo.find_element("#series .gtitle").text

    # Spark's estimates beside the ground truth the simulator was configured with
    wait_for(lambda: len(plot_data(dash_duo, "effects")) == 2, timeout=20, what="the weather-effect chart")
    bars, truth = plot_data(dash_duo, "effects")
    assert bars["type"] == "bar" and len(bars["error_y"]["array"]) == 3
    assert truth["name"] == "configured in the simulator"
    assert truth["y"] == pytest.approx([(f - 1) * 100 for f in DEFAULT_EFFECTS.values()])
    assert bars["x"] == truth["x"] == ["fog", "rain", "heavy rain"]
    dash_duo.wait_for_contains_text("#effects-table", "✓ in CI", timeout=10)
    assert "configured" in dash_duo.find_element("#effects-table").text

    dash_duo.wait_for_contains_text("#system", "up", timeout=20)
    dash_duo.driver.execute_cdp_cmd(  # the viewport exactly, whatever the window's frame
        "Emulation.setDeviceMetricsOverride",
        {"width": SIZE[0], "height": SIZE[1], "deviceScaleFactor": 1, "mobile": False},
    )
    time.sleep(2.0)  # the responsive graphs follow the new size on the next frames
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    assert dash_duo.driver.save_screenshot(str(SCREENSHOT))
    assert png_size(SCREENSHOT) == SIZE
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(SCREENSHOT, ARTIFACTS / "dashboard-readme.png")
    assert [e for e in dash_duo.get_logs() if e.get("level") == "SEVERE"] == []


def test_the_readme_shows_the_current_screenshot() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "](docs/dashboard.png)" in readme
    assert png_size(SCREENSHOT) == SIZE
