"""Browser tests: dash[testing] driving the machine's Chromium headless, offline."""

from __future__ import annotations

from typing import Any

from tests.support.browser import chromium_options


def pytest_configure(config: Any) -> None:
    if hasattr(config.option, "headless"):
        config.option.headless = True


def pytest_setup_options() -> Any:
    return chromium_options()
