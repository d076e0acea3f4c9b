"""Pure transforms (DataFrame → DataFrame) on small hand-made inputs."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import numpy as np
import pandas as pd
import pytest
from pyspark.testing import assertDataFrameEqual

from pipelines import spark_schemas, transforms

pytestmark = pytest.mark.spark

T0 = int(dt.datetime(2026, 11, 18, 16, 0, tzinfo=dt.UTC).timestamp() * 1000)  # 08:00 in San Francisco


def raw(spark: Any, values: list[bytes]) -> Any:
    rows = [(None, v, "t", 0, i, dt.datetime(2026, 1, 1), 0) for i, v in enumerate(values)]
    return spark.createDataFrame(
        rows,
        "key binary, value binary, topic string, partition int, offset long, "
        "timestamp timestamp, timestampType int",
    )


def ev(seg: str, speed: float, t: int, cls: str = "car", sensor: str = "s1", seq: int = 0) -> bytes:
    return json.dumps(
        {
            "type": "traffic",
            "sensor_id": sensor,
            "seq": seq,
            "event_time": t,
            "segment_id": seg,
            "speed_kmh": speed,
            "vehicle_class": cls,
            "lat": 37.7,
            "lon": -122.4,
        }
    ).encode()


def test_parse_json_separates_bad_records_with_reasons(spark: Any) -> None:
    good, bad = transforms.parse_json(
        raw(
            spark,
            [
                ev("a", 30, T0),
                b"{oops",
                json.dumps({"type": "traffic", "sensor_id": "x"}).encode(),
                b"42",
                b"[1, 2]",
                b"",
                ev("a", 30, T0).replace(b'"speed_kmh": 30', b'"speed_kmh": "fast"'),
                ev("b", 40, T0).replace(b'"lat": 37.7', b'"lat": "north"'),  # optional field
            ],
        ),
        spark_schemas.TRAFFIC,
        spark_schemas.TRAFFIC_REQUIRED,
    )
    assert [(r.segment_id, r.lat) for r in good.collect()] == [("a", 37.7), ("b", None)]
    dead = sorted((r.offset, r.reason, r.raw) for r in bad.collect())
    assert [(o, reason) for o, reason, _ in dead] == [
        (1, "not a JSON object"),
        (2, "missing or invalid event_time"),
        (3, "not a JSON object"),
        (4, "not a JSON object"),
        (5, "not a JSON object"),
        (6, "missing or invalid speed_kmh"),
    ]
    assert dead[0][2] == "{oops", "a dead letter keeps the record as it came"


def test_traffic_aggregates_per_segment_and_window(spark: Any) -> None:
    evs = [
        ev("a", 30, T0 + 1000),
        ev("a", 50, T0 + 2000, "truck"),
        ev("a", 40, T0 + 61_000),
        ev("b", 80, T0 + 5000),
    ]
    good, _ = transforms.parse_json(raw(spark, evs), spark_schemas.TRAFFIC, spark_schemas.TRAFFIC_REQUIRED)
    out = transforms.traffic_aggregates(good, "1 minute", None).select(
        "segment_id", "window_start", "volume", "mean_speed_kmh", "heavy_share"
    )
    start = dt.datetime(2026, 11, 18, 16, 0)
    expected = spark.createDataFrame(
        [
            ("a", start, 2, 40.0, 0.5),
            ("a", start + dt.timedelta(minutes=1), 1, 40.0, 0.0),
            ("b", start, 1, 80.0, 0.0),
        ],
        "segment_id string, window_start timestamp, volume long, mean_speed_kmh double, heavy_share double",
    )
    assertDataFrameEqual(out, expected)


def test_hour_of_week_is_san_francisco_local(spark: Any) -> None:
    from pyspark.sql import functions as F

    df = spark.createDataFrame([(dt.datetime(2026, 11, 16, 16, 30),)], "ts timestamp")  # Mon 08:30 PST
    assert df.select(transforms.hour_of_week(F.col("ts")).alias("h")).first().h == 8


def test_congestion_alerts_compare_with_the_hour_of_week_baseline(spark: Any) -> None:
    aggs = spark.createDataFrame(
        [
            ("a", dt.datetime(2026, 11, 16, 16, 0), dt.datetime(2026, 11, 16, 16, 1), 10, 15.0),
            ("a", dt.datetime(2026, 11, 16, 16, 1), dt.datetime(2026, 11, 16, 16, 2), 10, 35.0),
            ("a", dt.datetime(2026, 11, 16, 16, 2), dt.datetime(2026, 11, 16, 16, 3), 1, 5.0),
        ],
        "segment_id string, window_start timestamp, window_end timestamp, volume long, mean_speed_kmh double",
    )
    base = spark.createDataFrame([("a", 8, 40.0)], "segment_id string, hour_of_week int, baseline_kmh double")
    out = transforms.congestion_alerts(aggs, base, 0.5).collect()
    assert [(r.mean_speed_kmh, r.severity) for r in out] == [(15.0, "slow")]  # low-volume window ignored


def test_weather_effect_estimates_recover_known_factors() -> None:
    rng = np.random.default_rng(0)
    rows = []
    t = pd.Timestamp("2026-11-18 08:00", tz="UTC")
    for seg in range(30):
        base = 40 + seg
        for k in range(24 * 60):
            ts = t + pd.Timedelta(minutes=k)
            cond = ["clear", "rain", "heavy_rain", "fog"][(k // 10 + seg) % 4]
            factor = {"clear": 1.0, "rain": 0.85, "heavy_rain": 0.7, "fog": 0.9}[cond]
            congestion = 1.0 - 0.3 * np.sin(k / 1440 * 2 * np.pi) ** 2
            rows.append(
                (
                    f"s{seg}",
                    ts,
                    8,
                    base * factor * congestion * rng.lognormal(0, 0.05),
                    cond,
                    2.0 if "rain" in cond else 0.0,
                )
            )
    df = pd.DataFrame(
        rows,
        columns=["segment_id", "window_start", "volume", "mean_speed_kmh", "condition", "precipitation_mm_h"],
    )
    eff = transforms.estimate_weather_effects(df).set_index(["segment_id", "condition"])
    for cond, truth in (("rain", 0.85), ("heavy_rain", 0.7), ("fog", 0.9)):
        row = eff.loc[("*", cond)]
        assert row.ols_factor == pytest.approx(truth, abs=0.01)
        assert row.ols_ci_low <= truth <= row.ols_ci_high or abs(row.ols_factor - truth) < 0.005
        assert row.ci_low <= row.speed_factor <= row.ci_high
