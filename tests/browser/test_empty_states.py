"""Honest empty states in headless Chromium: against an empty store every panel says what it
waits for, and each chart shows its message instead of empty axes; as the fleet and then the
pipeline's topics appear, the messages move on to the next thing awaited."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from confluent_kafka import Producer

from dashboard.app import create_app
from dashboard.data import DashboardData
from pipelines import jobs
from sensors.fleet import SensorFleet
from sensors.layout import ensure_layout
from testing import wait_for
from tests.support.brokers import BrokerFactory, quiet_logger
from tests.support.browser import shot

pytestmark = [pytest.mark.browser, pytest.mark.integration]
GRAPHS = ("map", "series", "effects")


def note(dash_duo: Any, graph_id: str) -> str:
    """The text of the graph's "waiting" annotation ('' when it has none)."""
    return str(
        dash_duo.driver.execute_script(
            f"var g = document.querySelector('#{graph_id} .js-plotly-plot');"
            "var a = g && g.layout && g.layout.annotations || [];"
            "return a.filter(x => x.name && x.name.startsWith('waiting')).map(x => x.text).join(' ');"
        )
        or ""
    )


def drawn_axes(dash_duo: Any, graph_id: str) -> int:
    """Axis ticks and axis lines drawn in the graph's SVG."""
    return int(
        dash_duo.driver.execute_script(
            f"return document.querySelectorAll('#{graph_id} .xtick, #{graph_id} .ytick').length;"
        )
    )


def plain(html: str) -> str:
    return html.replace("<br>", " ").replace("<b>", "").replace("</b>", "")


@pytest.fixture
def empty_store(broker_factory: BrokerFactory) -> Any:
    b = broker_factory()
    data = DashboardData(b.bootstrap).start()
    wait_for(lambda: data.health_checked and data.health.store_ok, timeout=30, what="the first health poll")
    yield b, data
    data.stop()


def test_an_empty_store_shows_what_every_panel_waits_for(dash_duo: Any, empty_store: Any) -> None:
    b, data = empty_store
    dash_duo.start_server(create_app(data))
    first_events = f"waiting for the first sensor events from the store at {b.bootstrap}"
    for g in GRAPHS:
        wait_for(lambda g=g: first_events in plain(note(dash_duo, g)), timeout=20, what=f"{g}'s message")
    assert drawn_axes(dash_duo, "series") == 0 and drawn_axes(dash_duo, "effects") == 0
    assert "start the fleet" in plain(note(dash_duo, "series"))
    assert "fog -10 %, rain -15 %, heavy rain -28 %" in plain(note(dash_duo, "effects"))  # the truth
    for table in ("alerts", "infra"):
        dash_duo.wait_for_contains_text(f"#{table}", "waiting for the first", timeout=20)
    dash_duo.wait_for_contains_text("#infra", "infrastructure readings", timeout=5)
    dash_duo.wait_for_contains_text("#system", "waiting for the first sensor events", timeout=5)
    shot(dash_duo, "empty-store")
    assert [e for e in dash_duo.get_logs() if e.get("level") == "SEVERE"] == []

    # the fleet starts (its topics, one second of events); the pipeline's topics do not exist
    ensure_layout(b.bootstrap, partitions=2)
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5, "logger": quiet_logger()})
    now = int(time.time() * 1000)
    for topic, key, ev, ts in SensorFleet(300).tick(now):
        p.produce(topic, key=key.encode(), value=json.dumps(ev).encode(), timestamp=ts)
    assert p.flush(30) == 0
    wait_for(lambda: note(dash_duo, "map") == "", timeout=30, what="the map to draw the live minute")
    wait_for(
        lambda: (
            "pipeline not running: start it with sftraffic pipeline all" in plain(note(dash_duo, "series"))
        ),
        timeout=30,
        what="the series to name the missing pipeline",
    )
    dash_duo.wait_for_contains_text("#alerts", "pipeline not running", timeout=20)
    assert drawn_axes(dash_duo, "series") == 0

    # the pipeline's topics appear: now the first window's close is announced
    ensure_layout(b.bootstrap, partitions=2, extra_topics={jobs.t(n): {} for n in jobs.RESULT_TOPICS})
    wait_for(
        lambda: "first 1-minute window closes at" in plain(note(dash_duo, "series")),
        timeout=30,
        what="the series to announce the first window",
    )
    text = plain(note(dash_duo, "series"))
    assert "+ 2 min watermark" in text and "once events reach" in text
    assert "first 1-minute window closes at" in plain(note(dash_duo, "effects"))
    assert drawn_axes(dash_duo, "series") == 0 and drawn_axes(dash_duo, "effects") == 0
    shot(dash_duo, "waiting-for-windows")
