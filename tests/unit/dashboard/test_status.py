"""What each empty panel says it waits for (dashboard/status.py), state by state, no browser."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from dashboard import status
from dashboard.status import Facts, Wait
from sensors.layout import topic

PST = dt.timezone(dt.timedelta(hours=-8))
T0 = int(dt.datetime(2026, 11, 18, 15, 18, 20, tzinfo=PST).timestamp() * 1000)  # 15:18:20 PST
RESULTS = ("traffic_aggregates", "traffic_weather", "weather_effects", "congestion_alerts")


def facts(**kw: object) -> Facts:
    base = Facts(
        bootstrap="127.0.0.1:9092",
        now_ms=T0,
        started_ms=T0 - 60_000,
        lookback_ms=3 * 3_600_000,
        window_ms=60_000,
        watermark_ms=120_000,
        effects_every_s=30.0,
        store_checked=True,
        store_ok=True,
    )
    return dataclasses.replace(base, **kw)  # type: ignore[arg-type]


def flowing(**kw: object) -> Facts:
    """The fleet has sent events since 15:18:20 (data clock); every topic exists."""
    topics = {topic(n): 1000 for n in ("traffic", "weather_conditions", "infrastructure")}
    topics |= {topic(n): 0 for n in RESULTS}
    base = dict(topics=topics, events_seen=5000, oldest_event_ms=T0, newest_event_ms=T0 + 30_000)
    return facts(**{**base, **kw})


def test_the_jobs_timing_is_read_from_the_pipeline() -> None:
    from pipelines.jobs import JobConfig

    window, watermark, every = status.job_timing()
    assert window == status.spark_interval_ms(JobConfig().window) == 60_000
    assert watermark == status.spark_interval_ms(JobConfig().watermark) == 120_000
    assert every > 0


@pytest.mark.parametrize(
    ("text", "ms"),
    [("1 minute", 60_000), ("2 minutes", 120_000), ("30 seconds", 30_000), ("1 hour", 3_600_000)],
)
def test_spark_intervals(text: str, ms: int) -> None:
    assert status.spark_interval_ms(text) == ms


def test_spark_interval_refuses_nonsense() -> None:
    with pytest.raises(ValueError):
        status.spark_interval_ms("soon")


def test_before_the_first_health_poll_it_is_connecting() -> None:
    w = status.events(facts(store_checked=False, store_ok=False))
    assert w is not None and w.headline == "connecting to the store at 127.0.0.1:9092"
    assert "15:17" in w.detail  # when the dashboard started


def test_an_unreachable_store_is_named_with_its_error() -> None:
    w = status.windows(facts(store_ok=False, error="Connection refused"))
    assert w is not None and w.headline == "waiting for the store at 127.0.0.1:9092"
    assert "Connection refused" in w.detail


def test_an_empty_store_waits_for_the_first_sensor_events() -> None:
    w = status.events(facts())
    assert w is not None
    assert w.headline == "waiting for the first sensor events from the store at 127.0.0.1:9092"
    assert "does not exist yet" in w.detail and "sftraffic sensors" in w.detail
    w = status.events(facts(topics={topic("traffic"): 0}))
    assert w is not None and "is empty" in w.detail and "since 15:17" in w.detail
    w = status.events(facts(topics={topic("traffic"): 10}))
    assert w is not None and "none from the last 3 h" in w.detail


def test_infrastructure_and_weather_wait_for_their_own_topics() -> None:
    f = flowing(infra_readings=0, topics={topic("traffic"): 5})
    w = status.events(f, "infrastructure", "infrastructure readings")
    assert w is not None and w.headline.startswith("waiting for the first infrastructure readings")
    assert topic("infrastructure") in w.detail
    assert status.events(flowing(infra_readings=3), "infrastructure", "x") is None


def test_events_without_result_topics_mean_the_pipeline_is_not_running() -> None:
    f = flowing(topics={topic("traffic"): 5000})
    w = status.windows(f)
    assert w is not None and w.headline == "pipeline not running: start it with sftraffic pipeline all"


def test_the_first_window_is_announced_with_its_close_and_watermark() -> None:
    w = status.windows(flowing())
    assert w is not None
    assert w.headline == "first 1-minute window closes at 15:19 + 2 min watermark"
    assert "once events reach 15:21" in w.detail and "data time now 15:18" in w.detail


def test_a_window_overdue_asks_whether_the_pipeline_runs() -> None:
    w = status.windows(flowing(newest_event_ms=T0 + 5 * 60_000))
    assert w is not None and w.headline == "pipeline not running? start it with sftraffic pipeline all"
    assert "15:21" in w.detail and "still empty" in w.detail


def test_windows_older_than_the_lookback_are_told_apart() -> None:
    topics = flowing().topics | {topic("traffic_aggregates"): 700}
    w = status.windows(flowing(topics=topics, newest_event_ms=T0 + 5 * 60_000))
    assert w is not None and w.headline == "no windows from the last 3 h"


def test_other_window_and_watermark_lengths() -> None:
    w = status.windows(flowing(window_ms=30_000, watermark_ms=90_000))
    assert w is not None and w.headline == "first 30-second window closes at 15:18 + 90 s watermark"


def test_nothing_to_say_once_windows_arrive() -> None:
    assert status.windows(flowing(segments_with_windows=116)) is None
    assert status.effects(flowing(effects=3)) is None


def test_effects_wait_for_windows_then_for_the_weather_to_turn() -> None:
    w = status.effects(flowing())
    assert w is not None and w.headline.startswith("first 1-minute window closes")
    assert "then the correlation job estimates" in w.detail
    w = status.effects(
        flowing(segments_with_windows=116, weather_readings=90, conditions_seen=frozenset({"clear"}))
    )
    assert w is not None and w.headline == "no fog or rain yet: waiting for the weather to turn"
    assert "weather so far: clear" in w.detail and "within 30 s" in w.detail
    w = status.effects(
        flowing(segments_with_windows=116, weather_readings=90, conditions_seen=frozenset({"clear", "rain"}))
    )
    assert w is not None and w.headline == "first estimates within 30 s of the joined windows"


def test_effects_without_their_topic_mean_the_correlation_job_is_not_running() -> None:
    topics = {k: v for k, v in flowing().topics.items() if k != topic("weather_effects")}
    f = flowing(topics=topics, segments_with_windows=116, weather_readings=9)
    w = status.effects(f)
    assert w is not None and w.headline.startswith("correlation job not running")


def test_a_segment_without_windows_in_range_points_at_the_range() -> None:
    f = flowing(segments_with_windows=100, newest_window_ms=T0)
    w = status.segment(f, "Market St #2", T0 - 15 * 60_000, T0 - 40 * 60_000)
    assert w is not None and "choose a longer range" in w.detail
    w = status.segment(f, "Market St #2", T0 - 15 * 60_000, None)
    assert w is not None and w.headline == "no windows for Market St #2 yet"


def test_messages_render_for_plotly_and_for_tables() -> None:
    w = Wait("waiting for x", "a long detail " * 12)
    assert w.html(40).startswith("<b>waiting for x</b><br>") and w.html(40).count("<br>") >= 3
    assert w.text().startswith("waiting for x: a long detail")
