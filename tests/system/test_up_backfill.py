"""``sftraffic up`` replays the past first: within 60 s of "ready" the dashboard's
data has weather-effect estimates matching the configured effects, the default segment's
speed history and congestion alerts, and the page in real Chromium draws them; live windows
follow the backfill's without a gap or a repeat; Ctrl-C stops everything."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from sensors import ground_truth
from sensors.backfill import Backfill
from testing import free_port, wait_for
from tests.support.pipelines import TOLERANCE, results
from tests.support.up import start_up, stop_and_check_nothing_left, up_cmd

if TYPE_CHECKING:
    from dashboard.data import DashboardData

pytestmark = [pytest.mark.system, pytest.mark.spark]

SEGMENT = "market-st-02"  # the dashboard's default segment
RANGE_MIN = 60  # its default range (1h)


def _iso_ms(text: str) -> int:
    import datetime as dt

    return int(dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def _page_figures(url: str, deadline: float) -> tuple[list[Any], list[Any]]:
    """Open the dashboard in headless Chromium; the effect chart's and the speed chart's traces
    once both are drawn with data (or whatever they hold at ``deadline``)."""
    from selenium import webdriver

    from tests.support.browser import chromium_options

    options = chromium_options()
    options.add_argument("--headless=new")  # dash[testing] adds it for its own browser tests
    driver = webdriver.Chrome(options=options)
    script = "var g = document.querySelector('#%s .js-plotly-plot'); return g ? g.data : null;"
    got: tuple[list[Any], list[Any]] = ([], [])

    def drawn() -> bool:
        nonlocal got
        effects = driver.execute_script(script % "effects") or []
        series = driver.execute_script(script % "series") or []
        got = (effects, series)
        return bool(effects) and effects[0].get("type") == "bar" and any(t.get("y") for t in series)

    try:
        driver.get(url)
        # the page polls the store every 2 s: nothing to await but its redraw
        wait_for(drawn, max(0.5, deadline - time.monotonic()), 0.5, "the charts drawn")
    except TimeoutError:
        pass  # the caller's assertions say what was missing
    finally:
        driver.quit()
    return got


def _check_ready(tmp_path: Path, log: Path, pids: dict[str, int]) -> Backfill:
    """Every process of ``up`` in ``pids`` (filled in for the caller's cleanup), and the
    backfill's stored plan."""
    pids.update(json.loads((tmp_path / "up" / "up.json").read_text()))
    assert set(pids) == {"store", "mosquitto", "gateway", "sensors", "devices", "dashboard", "spark"}
    out = log.read_text()
    assert "✓ backfill: 3h00m of simulated time" in out and "events/s" in out, out[-3000:]
    plan, state = Backfill.from_json((tmp_path / "up" / "backfill" / "plan.json").read_text())
    assert plan.duration_ms == 3 * 3_600_000 and plan.sample == 4 and state["state"] == "stored"
    return plan


def _assert_dashboard_data_within_60s(data: DashboardData, bootstrap: str, ready: float) -> dict[str, float]:
    """Weather effects matching the configured ones, the segment's history and alerts, as the
    dashboard reads them; the configured speed factors."""
    configured: dict[str, float] = ground_truth.read(bootstrap)["weather_effect"]["speed_factor"]
    assert configured == {"fog": 0.9, "rain": 0.85, "heavy_rain": 0.72}

    def effects() -> dict[str, dict[str, Any]]:
        return {r["condition"]: r for r in data.effects_overall()}

    def history() -> list[dict[str, Any]]:
        latest = data.snapshot_latest()
        now = max((r["t"] for r in latest.values()), default=0) + 60_000
        return data.series(SEGMENT, now - RANGE_MIN * 60_000)

    def spans_the_range() -> bool:
        # the replay runs 1 in 4 sensors: at night a minute of one street may have no car
        rows = history()
        return bool(rows) and rows[0]["t"] <= rows[-1]["t"] - (RANGE_MIN - 10) * 60_000

    wait_for(
        lambda: set(effects()) == set(configured) and spans_the_range() and data.alerts,
        timeout=max(1.0, 60 - (time.monotonic() - ready)),
        interval=0.5,
        what="weather effects, the segment's history and alerts on the dashboard",
    )
    took = time.monotonic() - ready
    for regime, factor in configured.items():
        r = effects()[regime]
        assert r["ols_factor"] == pytest.approx(factor, abs=TOLERANCE[regime]), (regime, r)
        assert r["ols_ci_low"] < r["ols_factor"] < r["ols_ci_high"], r
    print(f"weather chart, history and alerts on the dashboard {took:.1f}s after ready")
    return configured


def _assert_page_draws_them(url: str, ready: float, configured: dict[str, float]) -> None:
    """Real Chromium draws the estimates beside the configured truth within 60 s of ready."""
    effects_fig, series_fig = _page_figures(url, ready + 60)
    drawn = time.monotonic() - ready
    assert effects_fig and effects_fig[0].get("type") == "bar", effects_fig
    bars = dict(zip(effects_fig[0]["x"], effects_fig[0]["y"], strict=True))
    assert set(bars) == {r.replace("_", " ") for r in configured}, bars
    for regime, factor in configured.items():
        # the chart shows the effect in percent: (factor - 1) * 100
        shown = bars[regime.replace("_", " ")]
        assert shown == pytest.approx((factor - 1) * 100, abs=TOLERANCE[regime] * 100), (regime, shown)
    assert any(len(t.get("y") or []) >= RANGE_MIN // 2 for t in series_fig), series_fig
    assert drawn <= 60, f"the page drew the weather chart {drawn:.1f}s after ready"
    print(f"the page (Chromium) drew the weather and speed charts {drawn:.1f}s after ready")


def _assert_live_windows_follow_the_backfill(bootstrap: str, plan: Backfill) -> None:
    """Each (segment, window) once, no minute missing, from the backfill's first on."""

    def windows() -> Counter[tuple[str, int]]:
        from confluent_kafka import KafkaException

        try:
            rows = results(bootstrap, "traffic_aggregates")
        except KafkaException:  # metadata timed out on a busy machine: ask again
            return Counter()
        return Counter((r["segment_id"], _iso_ms(r["window_start"])) for r in rows)

    wait_for(
        lambda: max((t for _s, t in windows()), default=0) >= plan.until_ms,
        timeout=240,
        interval=2,
        what="the first live window after the backfill's",
    )
    got = windows()
    assert got, "the result topic could not be read"
    assert all(n == 1 for n in got.values()), {k: n for k, n in got.items() if n > 1}
    minutes = sorted({t for _s, t in got})
    assert minutes == list(range(plan.from_ms, minutes[-1] + 60_000, 60_000)), "a minute is missing"


def test_up_backfills_the_past_then_goes_on_live(tmp_path: Path) -> None:
    from dashboard.data import DashboardData

    ports = {k: free_port() for k in ("store", "metrics", "mqtt", "dash")}
    bootstrap = f"127.0.0.1:{ports['store']}"
    # a smaller fleet than the demo's: 1,000 sensors (the backfill replays ~250 of them, 1 in 4)
    # and three simulated hours instead of six, to fit the CI budget
    cmd = up_cmd(tmp_path, ports["store"], ports, "--sensors", "1000", "--backfill", "3h")
    log = tmp_path / "up.out"
    proc = start_up(cmd, log)
    pids: dict[str, int] = {}
    data = None
    try:
        wait_for(lambda: "press Ctrl-C" in log.read_text(), timeout=420, interval=0.5, what="up ready")
        ready = time.monotonic()
        plan = _check_ready(tmp_path, log, pids)

        # what the dashboard reads, the way it reads it
        data = DashboardData(bootstrap).start()
        configured = _assert_dashboard_data_within_60s(data, bootstrap, ready)

        # and the page draws them: real Chromium, the estimates beside the configured truth
        _assert_page_draws_them(f"http://127.0.0.1:{ports['dash']}", ready, configured)

        # live windows follow the backfill's: each (segment, window) once, no minute missing
        _assert_live_windows_follow_the_backfill(bootstrap, plan)
        assert proc.returncode is None
    finally:
        if data is not None:
            data.stop()
        stop_and_check_nothing_left(proc, log, pids, tmp_path / "up")
