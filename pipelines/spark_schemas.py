"""Spark schemas of the events read and of the results written (docs/application/events.md).

Inputs follow :mod:`sensors.schema`. Results:

``traffic_monitoring.traffic_aggregates`` / ``aggregates/`` (Parquet), one row per segment and
window: ``segment_id, window_start, window_end, volume, mean_speed_kmh, p50_speed_kmh,
p85_speed_kmh, heavy_share``.

``traffic_monitoring.traffic_weather`` / ``traffic_weather/``: the same per segment and window,
joined with the nearest station's weather: ``station, condition, precipitation_mm_h,
visibility_m``.

``traffic_monitoring.weather_effects``: per weather regime (and ``segment_id = "*"`` for all
segments) the estimated speed factor vs clear weather with a 95 % confidence interval
(``speed_factor, ci_low, ci_high, n``), the regression estimate (``ols_factor, ols_ci_low,
ols_ci_high``), the congestion-rate delta and the precipitation/speed correlation.

``traffic_monitoring.congestion_alerts`` / ``alerts/``: windows where a segment's mean speed
is below ``ratio`` × its baseline for that hour of the week: ``segment_id, window_start,
mean_speed_kmh, baseline_kmh, ratio, severity``.
"""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

TRAFFIC = StructType(
    [
        StructField("type", StringType()),
        StructField("sensor_id", StringType()),
        StructField("seq", LongType()),
        StructField("event_time", LongType()),
        StructField("segment_id", StringType()),
        StructField("road", StringType()),
        StructField("lat", DoubleType()),
        StructField("lon", DoubleType()),
        StructField("direction", StringType()),
        StructField("lane", IntegerType()),
        StructField("vehicle_class", StringType()),
        StructField("weight_kg", DoubleType()),
        StructField("axle_count", IntegerType()),
        StructField("axle_distances_m", ArrayType(DoubleType())),
        StructField("speed_kmh", DoubleType()),
    ]
)

WEATHER = StructType(
    [
        StructField("type", StringType()),
        StructField("sensor_id", StringType()),
        StructField("seq", LongType()),
        StructField("event_time", LongType()),
        StructField("station", StringType()),
        StructField("district", StringType()),
        StructField("lat", DoubleType()),
        StructField("lon", DoubleType()),
        StructField("temperature_c", DoubleType()),
        StructField("precipitation_mm_h", DoubleType()),
        StructField("wind_kmh", DoubleType()),
        StructField("visibility_m", DoubleType()),
        StructField("condition", StringType()),
    ]
)

TRAFFIC_REQUIRED = ("sensor_id", "event_time", "segment_id", "speed_kmh", "vehicle_class")
WEATHER_REQUIRED = ("station", "event_time", "condition")

# severity order of weather conditions (the worst reading of a window wins)
SEVERITY = {"clear": 0, "cloudy": 1, "fog": 2, "rain": 3, "heavy_rain": 4}
