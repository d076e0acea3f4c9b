"""Headless Chromium for the tests: the options every browser test starts it with (dash[testing]'s
``pytest_setup_options`` hook in ``tests/browser/conftest.py``, and the system tests' own
webdriver), and what tests read from a page through ``dash_duo``."""

from __future__ import annotations

import os
from typing import Any

from tests.support.brokers import ARTIFACTS

os.environ.setdefault("SE_OFFLINE", "true")  # Selenium Manager must not try to download a driver


def chromium_options() -> Any:
    """The machine's Chromium at the screenshot's window size (dash[testing] adds ``--headless``;
    a test driving its own webdriver adds it itself)."""
    from selenium.webdriver.chrome.options import Options

    o = Options()
    o.binary_location = "/usr/bin/chromium"
    for a in (
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-dev-shm-usage",
        "--window-size=1280,1000",
    ):
        o.add_argument(a)
    return o


def plot_data(dash_duo: Any, graph_id: str) -> list[Any]:
    return (
        dash_duo.driver.execute_script(
            f"var g = document.querySelector('#{graph_id} .js-plotly-plot'); return g ? g.data : null;"
        )
        or []
    )


def shot(dash_duo: Any, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    dash_duo.driver.save_screenshot(str(ARTIFACTS / f"dashboard-{name}.png"))
