"""Browser tests: dash[testing] driving the machine's Chromium headless, offline."""

from __future__ import annotations

import os
from typing import Any

os.environ.setdefault("SE_OFFLINE", "true")  # Selenium Manager must not try to download a driver


def pytest_configure(config: Any) -> None:
    if hasattr(config.option, "headless"):
        config.option.headless = True


def pytest_setup_options() -> Any:
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
