"""Pure transforms: DataFrame in, DataFrame out, no I/O (the jobs wire sources and sinks).

They work on batch and streaming DataFrames alike; the streaming jobs add watermarks so state
stays bounded and every window is emitted once, when the watermark passes its end.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from pipelines import spark_schemas

HEAVY = ("bus", "truck", "semi")


CORRUPT = "_corrupt_record"


def pruned(schema: StructType, required: tuple[str, ...], fields: tuple[str, ...] | None) -> StructType:
    """``schema`` restricted to ``required`` + ``fields`` (all of it when ``fields`` is None)."""
    keep = None if fields is None else set(fields) | set(required)
    return StructType([f for f in schema.fields if keep is None or f.name in keep])


def tag_json(
    raw: DataFrame, schema: StructType, required: tuple[str, ...], fields: tuple[str, ...] | None = None
) -> DataFrame:
    """Parse raw ``value`` bytes: ``topic, partition, offset``, the event ``e`` (a struct), the
    ``reason`` it is a dead letter (null when it is good) and, for dead letters only, the
    ``value``. :func:`split_json` turns this into (good, bad); batch jobs persist it in between,
    so that one pass over the source feeds both.

    ``fields``: parse only these (plus the required ones); the jobs name what they use, which
    spares building the rest (arrays of axle distances, ...). When ``raw`` has a ``json``
    column (the data source's ``valueFormat=json``, decoded in the Python workers, much cheaper
    than ``from_json`` in the JVM), that struct is used as it is.

    Otherwise each value is parsed once: ``from_json`` sits under a generator (``explode(array(...))``),
    which the optimiser cannot inline into the filters and projections that read its fields —
    otherwise it copies the expression into each of them and the JSON is parsed once per use.
    A value Jackson cannot read whole against the schema has ``_corrupt_record`` set.
    """
    if "json" in raw.columns:  # decoded by the data source (valueFormat=json, no value column)
        raw_text = F.col(f"json.{CORRUPT}").cast("binary")
        parsed = raw.select("topic", "partition", "offset", raw_text.alias("value"), F.col("json").alias("e"))
    else:
        sch = StructType([*pruned(schema, required, fields).fields, StructField(CORRUPT, StringType())])
        opts = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT}
        parsed = raw.select(
            "topic",
            "partition",
            "offset",
            "value",
            F.explode(F.array(F.from_json(F.col("value").cast("string"), sch, opts))).alias("e"),
        )
    missing: Column = F.lit(None).cast("string")
    none_of_them: Column = F.col(f"e.{CORRUPT}").isNotNull()
    for name in reversed(required):
        missing = F.when(F.col(f"e.{name}").isNull(), F.lit(f"missing or invalid {name}")).otherwise(missing)
        none_of_them = none_of_them & F.col(f"e.{name}").isNull()
    # unreadable (or not an object: 42, [..], null) and nothing we need could be read from it
    not_json = F.col("e").isNull() | none_of_them
    reason = F.when(not_json, F.lit("not a JSON object")).otherwise(missing)
    return parsed.select(
        "topic",
        "partition",
        "offset",
        F.col("e").dropFields(CORRUPT).alias("e"),
        reason.alias("reason"),
        F.when(reason.isNotNull(), F.col("value")).alias("value"),
    )


def split_json(tagged: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(parsed events with ``event_ts``, dead letters ``topic, partition, offset, raw, reason``)."""
    good = (
        tagged.where(F.col("reason").isNull())
        .select("e.*")
        .withColumn("event_ts", F.timestamp_millis(F.col("event_time")))
    )
    bad = tagged.where(F.col("reason").isNotNull()).select(
        "topic", "partition", "offset", F.col("value").cast("string").alias("raw"), "reason"
    )
    return good, bad


def in_event_range(tagged: DataFrame, from_ms: int | None, until_ms: int | None) -> DataFrame:
    """Keep the events of :func:`tag_json` whose ``event_time`` is in ``[from_ms, until_ms)``
    (either bound may be None) and every dead letter (they have no trusted event time).

    How a backfill and the live jobs split the work: the batch over ``[from, until)``, the
    streaming queries from ``until`` on, so a window is computed by one side only."""
    if from_ms is None and until_ms is None:
        return tagged
    ok = F.lit(True)
    if from_ms is not None:
        ok = ok & (F.col("e.event_time") >= F.lit(from_ms))
    if until_ms is not None:
        ok = ok & (F.col("e.event_time") < F.lit(until_ms))
    return tagged.where(F.col("reason").isNotNull() | ok)


def parse_json(
    raw: DataFrame, schema: StructType, required: tuple[str, ...], fields: tuple[str, ...] | None = None
) -> tuple[DataFrame, DataFrame]:
    """Split raw ``value`` bytes into (parsed events, dead letters with a ``reason``).

    A record that is not a JSON object, or lacks a required field (or has it with the wrong
    type), goes to the dead-letter side, so one bad record never stops a job.
    """
    return split_json(tag_json(raw, schema, required, fields))


def traffic_aggregates(
    traffic: DataFrame, window: str = "1 minute", watermark: str | None = "2 minutes"
) -> DataFrame:
    """Per road segment and event-time window: volume, mean / p50 / p85 speed, heavy share."""
    src = traffic.withWatermark("event_ts", watermark) if watermark else traffic
    return (
        src.groupBy(F.window("event_ts", window).alias("w"), "segment_id")
        .agg(
            F.count(F.lit(1)).alias("volume"),
            F.avg("speed_kmh").alias("mean_speed_kmh"),
            F.percentile_approx("speed_kmh", 0.5, 1000).alias("p50_speed_kmh"),
            F.percentile_approx("speed_kmh", 0.85, 1000).alias("p85_speed_kmh"),
            F.avg(F.when(F.col("vehicle_class").isin(*HEAVY), 1.0).otherwise(0.0)).alias("heavy_share"),
        )
        .select(
            "segment_id",
            F.col("w.start").alias("window_start"),
            F.col("w.end").alias("window_end"),
            "volume",
            F.round("mean_speed_kmh", 2).alias("mean_speed_kmh"),
            "p50_speed_kmh",
            "p85_speed_kmh",
            F.round("heavy_share", 4).alias("heavy_share"),
        )
    )


def _severity(col: Column) -> Column:
    expr = F.lit(None).cast("int")
    for name, level in spark_schemas.SEVERITY.items():
        expr = F.when(col == name, F.lit(level)).otherwise(expr)
    return expr


def _condition_of(level: Column) -> Column:
    expr = F.lit("clear")
    for name, lv in spark_schemas.SEVERITY.items():
        expr = F.when(level == lv, F.lit(name)).otherwise(expr)
    return expr


def traffic_with_weather(
    traffic: DataFrame,
    weather: DataFrame,
    segment_stations: DataFrame,
    window: str = "1 minute",
    watermark: str | None = "2 minutes",
) -> DataFrame:
    """Traffic aggregates per segment and window joined with the nearest station's weather in
    the same window (a stream-stream join of two windowed aggregations).

    Both sides are aggregated before the join: per (segment, window) the volume and mean speed,
    per (station, window) the worst condition, mean precipitation and visibility. The join
    therefore keeps a few rows per segment and window in its state, not every vehicle, and
    in append mode each side's window reaches the join once, when the watermark passes its
    end (Spark >= 3.4 chains stateful operators; the ``window`` struct carries the event-time
    watermark, so the join's state is evicted as it passes).
    """
    t = traffic.join(F.broadcast(segment_stations), "segment_id")
    w = weather
    if watermark:
        t = t.withWatermark("event_ts", watermark)
        w = w.withWatermark("event_ts", watermark)
    ta = t.groupBy(F.window("event_ts", window).alias("w"), "segment_id", "station").agg(
        F.count(F.lit(1)).alias("volume"),
        F.avg("speed_kmh").alias("mean_speed_kmh"),
    )
    wa = _weather_windows(w, window)
    joined = ta.join(wa, (ta.station == wa.w_station) & (ta.w == wa.ww), "inner")
    return _joined_columns(joined, F.col("w.start"), F.col("w.end"), F.round("mean_speed_kmh", 2))


def aggregates_with_weather(
    aggs: DataFrame, weather: DataFrame, segment_stations: DataFrame, window: str = "1 minute"
) -> DataFrame:
    """:func:`traffic_with_weather` for a batch that already has :func:`traffic_aggregates`:
    the same rows, from the aggregates instead of a second pass over every vehicle (a
    segment's station is fixed, so its windows are the same groups)."""
    a = aggs.join(F.broadcast(segment_stations), "segment_id")
    wa = _weather_windows(weather, window)
    joined = a.join(wa, (a.station == wa.w_station) & (a.window_start == wa.ww.start), "inner")
    return _joined_columns(joined, F.col("window_start"), F.col("window_end"), F.col("mean_speed_kmh"))


def _weather_windows(weather: DataFrame, window: str) -> DataFrame:
    """Per station and window: the worst condition, mean precipitation and visibility."""
    return weather.groupBy(F.window("event_ts", window).alias("ww"), F.col("station").alias("w_station")).agg(
        F.max(_severity(F.col("condition"))).alias("severity"),
        F.avg("precipitation_mm_h").alias("precipitation_mm_h"),
        F.avg("visibility_m").alias("visibility_m"),
    )


def _joined_columns(joined: DataFrame, start: Column, end: Column, mean_speed: Column) -> DataFrame:
    return joined.select(
        "segment_id",
        "station",
        start.alias("window_start"),
        end.alias("window_end"),
        "volume",
        mean_speed.alias("mean_speed_kmh"),
        _condition_of(F.col("severity")).alias("condition"),
        F.round("precipitation_mm_h", 2).alias("precipitation_mm_h"),
        F.round("visibility_m", 0).alias("visibility_m"),
    )


def hour_of_week(ts: Column) -> Column:
    """0..167 in San Francisco local time (PST, UTC-8), Monday 00:00 = 0."""
    local = ts - F.expr("INTERVAL 8 HOURS")
    return ((F.dayofweek(local) + 5) % 7) * 24 + F.hour(local)


def congestion_alerts(
    aggs: DataFrame, baselines: DataFrame, ratio: float = 0.5, min_volume: int = 3
) -> DataFrame:
    """Windows whose mean speed is below ``ratio`` × the segment's baseline for that hour of week.

    ``baselines``: ``segment_id, hour_of_week, baseline_kmh`` (from history, or free-flow).
    """
    a = aggs.withColumn("hour_of_week", hour_of_week(F.col("window_start")))
    j = a.join(F.broadcast(baselines), ["segment_id", "hour_of_week"], "inner")
    r = F.col("mean_speed_kmh") / F.col("baseline_kmh")
    return j.where((F.col("volume") >= min_volume) & (r < ratio)).select(
        "segment_id",
        "window_start",
        "window_end",
        "volume",
        "mean_speed_kmh",
        "baseline_kmh",
        F.round(r, 3).alias("ratio"),
        F.when(r < ratio / 2, "severe").otherwise("slow").alias("severity"),
    )


def baselines_from_history(history: DataFrame) -> DataFrame:
    """Median window speed per segment and hour of week, over clear weather."""
    h = history
    if "condition" in h.columns:
        h = h.where(F.col("condition").isin("clear", "cloudy"))
    return (
        h.withColumn("hour_of_week", hour_of_week(F.col("window_start")))
        .groupBy("segment_id", "hour_of_week")
        .agg(F.percentile_approx("mean_speed_kmh", 0.5, 1000).alias("baseline_kmh"))
    )


def free_flow_baselines(spark: SparkSession) -> DataFrame:
    """Fallback baselines before any history exists: the road's free-flow speed, every hour."""
    from sensors import geo

    rows = [(s.segment_id, h, float(s.free_flow_kmh)) for s in geo.SEGMENTS for h in range(168)]
    return spark.createDataFrame(rows, "segment_id string, hour_of_week int, baseline_kmh double")


def segment_stations(spark: SparkSession) -> DataFrame:
    from sensors import geo

    return spark.createDataFrame(list(geo.STATION_OF_SEGMENT.items()), "segment_id string, station string")


# -- statistics of the weather effect (pure pandas: small inputs after aggregation) ----------

RAIN_REGIMES = ("fog", "rain", "heavy_rain")
ROBUST_ITERATIONS = 5
TUKEY_C = 4.685


def estimate_weather_effects(df: pd.DataFrame, min_volume: int = 2) -> pd.DataFrame:
    """Speed factor of each weather regime vs clear weather, with 95 % confidence intervals.

    Input rows: segment_id, window_start (datetime), volume, mean_speed_kmh, condition,
    precipitation_mm_h. Congestion and the time of day are controlled for by comparing each
    window with clear-weather windows of the same segment and hour:

    * ``speed_factor``: mean over (segment, hour) cells of the median window speed in the regime
      divided by the median in clear weather, outside incident-like slowdowns; CI from the t
      distribution over cells.
    * ``ols_factor``: regression of log(speed) on regime dummies with a fixed effect and a
      linear time trend per (segment, hour) cell (Frisch-Waugh within estimator), weighted by
      volume and made robust with Tukey's biweight (iteratively reweighted): windows far below
      the fit, mostly an incident's slowdown spreading upstream after the weather that made it
      likelier has passed, get no weight. exp(coefficient) with its 95 % CI (from the final
      weighted fit). This is the estimate to read: it also removes the congestion change within
      an hour that biases the simple ratio.
    * ``congestion_delta``: share of windows at < 50 % of the cell's clear speed, regime minus
      clear (a proxy for incident rates).
    * ``precip_corr``: Pearson correlation of precipitation and the speed ratio.
    """
    d = _against_clear(df, min_volume)
    if d is None:
        return pd.DataFrame()
    clear_cong = d[d["clear"]]["congested"].mean()
    free = _free_flowing(d)
    ols = _robust_ols(free)
    rows: list[dict[str, Any]] = []
    for regime in RAIN_REGIMES:
        sub = d[d["condition"] == regime]
        fsub = free[free["condition"] == regime]
        if fsub.empty:
            continue
        rows.append(_overall_row(regime, sub, fsub, ols, clear_cong))
        rows += _segment_rows(regime, fsub)
    return pd.DataFrame(rows)


def _against_clear(df: pd.DataFrame, min_volume: int) -> pd.DataFrame | None:
    """The windows of at least ``min_volume`` vehicles with their (segment, hour) cell's clear
    speed: ``hour`` (PST), ``clear``, ``clear_speed``, ``ratio`` to it and ``congested`` (under
    half of it); None when no window has enough vehicles."""
    d = df[df["volume"] >= min_volume].copy()
    if d.empty:
        return None
    d["hour"] = (pd.to_datetime(d["window_start"], utc=True) - pd.Timedelta(hours=8)).dt.hour
    d["clear"] = d["condition"].isin(["clear", "cloudy"])
    # medians per (segment, hour) cell: robust to incidents slowing a few clear windows
    clear_med = d[d["clear"]].groupby(["segment_id", "hour"])["mean_speed_kmh"].median().rename("clear_speed")
    d = d.join(clear_med, on=["segment_id", "hour"])
    d = d[d["clear_speed"].notna()]
    d["ratio"] = d["mean_speed_kmh"] / d["clear_speed"]
    d["congested"] = d["ratio"] < 0.5
    return d


def _free_flowing(d: pd.DataFrame) -> pd.DataFrame:
    """The windows outside incident-like slowdowns (those count in congestion_delta), where the
    speed effect is measured, with ``log_speed`` and ``minute`` (within the hour, 0..1)."""
    free = d[~d["congested"]].copy()
    free["log_speed"] = np.log(free["mean_speed_kmh"].clip(lower=0.1))
    ts = pd.to_datetime(free["window_start"], utc=True)
    free["minute"] = ts.dt.minute.to_numpy() / 60.0
    return free


def _within(
    g: np.ndarray, mnt: np.ndarray, y: np.ndarray, x: np.ndarray, wt: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """y and x with each cell's (``g``) weighted mean and linear time (``mnt``) trend removed."""
    sw_g = np.bincount(g, weights=wt)
    m_bar = np.bincount(g, weights=wt * mnt) / np.maximum(sw_g, 1e-9)
    mc = mnt - m_bar[g]
    var_g = np.bincount(g, weights=wt * mc * mc)

    def residual(v: np.ndarray) -> np.ndarray:
        v_bar = np.bincount(g, weights=wt * v) / np.maximum(sw_g, 1e-9)
        vc = v - v_bar[g]
        slope = np.bincount(g, weights=wt * mc * vc) / np.where(var_g > 1e-12, var_g, np.inf)
        out: np.ndarray = vc - slope[g] * mc
        return out

    return residual(y), np.column_stack([residual(x[:, k]) for k in range(x.shape[1])])


def _robust_ols(free: pd.DataFrame) -> dict[str, tuple[float, float, float]]:
    """Each rain regime's exp(coefficient) and its 95 % CI: log speed on regime dummies with a
    fixed effect *and a linear time trend* per (segment, hour) cell (congestion changes within
    an hour), weighted by volume, Tukey's biweight by iteratively reweighted least squares."""
    regimes = [r for r in RAIN_REGIMES if (free["condition"] == r).any()]
    if not regimes:
        return {}
    x = np.column_stack([(free["condition"] == r).astype(float) for r in regimes])
    g = free.groupby(["segment_id", "hour"]).ngroup().to_numpy()
    w = free["volume"].to_numpy(dtype=float)
    y = free["log_speed"].to_numpy()
    mnt = free["minute"].to_numpy()
    # windows far below the fit (an incident's slowdown spilling upstream, which outlasts the
    # shower that raised the incident rate) get weight 0 instead of pulling their regime's estimate
    rw = np.ones_like(w)
    for _ in range(ROBUST_ITERATIONS + 1):
        wt = w * rw
        yd, xd = _within(g, mnt, y, x, wt)
        sw = np.sqrt(wt)
        beta, *_ = np.linalg.lstsq(xd * sw[:, None], yd * sw, rcond=None)
        resid = yd - xd @ beta
        u = resid * np.sqrt(w)
        scale = float(np.median(np.abs(u[rw > 0]))) / 0.6745
        if scale <= 0:
            break
        z = u / (TUKEY_C * scale)
        rw = np.where(np.abs(z) < 1, (1 - z * z) ** 2, 0.0)
    dof = max(1, int((wt > 0).sum()) - len(regimes) - 2 * (int(g.max()) + 1))
    sigma2 = float((wt * resid**2).sum() / dof)
    xtx = (xd * wt[:, None]).T @ xd
    cov = sigma2 * np.linalg.pinv(xtx)
    ols: dict[str, tuple[float, float, float]] = {}
    for k, r in enumerate(regimes):
        se = float(np.sqrt(max(cov[k, k], 0.0)))
        ols[r] = (
            float(np.exp(beta[k])),
            float(np.exp(beta[k] - 1.96 * se)),
            float(np.exp(beta[k] + 1.96 * se)),
        )
    return ols


def _overall_row(
    regime: str,
    sub: pd.DataFrame,
    fsub: pd.DataFrame,
    ols: dict[str, tuple[float, float, float]],
    clear_cong: float,
) -> dict[str, Any]:
    """The all-segments row (``segment_id`` "*") of one regime: ``sub`` its windows, ``fsub``
    those outside slowdowns."""
    from scipy import stats

    per_cell = fsub.groupby(["segment_id", "hour"])["ratio"].median()
    n = len(per_cell)
    mean = float(per_cell.mean())
    half = float(stats.t.ppf(0.975, n - 1) * per_cell.std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan")
    corr = (
        float(sub["precipitation_mm_h"].corr(sub["ratio"]))
        if sub["precipitation_mm_h"].nunique() > 1
        else float("nan")
    )
    o = ols.get(regime, (float("nan"),) * 3)
    return {
        "segment_id": "*",
        "condition": regime,
        "n": n,
        "windows": len(sub),
        "speed_factor": round(mean, 4),
        "ci_low": round(mean - half, 4),
        "ci_high": round(mean + half, 4),
        "ols_factor": round(o[0], 4),
        "ols_ci_low": round(o[1], 4),
        "ols_ci_high": round(o[2], 4),
        "congestion_delta": round(float(sub["congested"].mean() - clear_cong), 4),
        "precip_corr": None if np.isnan(corr) else round(corr, 4),
    }


def _segment_rows(regime: str, fsub: pd.DataFrame) -> list[dict[str, Any]]:
    """One regime's speed factor per segment (the simple ratio; no CI, no regression)."""
    rows: list[dict[str, Any]] = []
    for seg, grp in fsub.groupby("segment_id"):
        pc = grp.groupby("hour")["ratio"].median()
        rows.append(
            {
                "segment_id": seg,
                "condition": regime,
                "n": len(pc),
                "windows": len(grp),
                "speed_factor": round(float(pc.mean()), 4),
                "ci_low": None,
                "ci_high": None,
                "ols_factor": None,
                "ols_ci_low": None,
                "ols_ci_high": None,
                "congestion_delta": None,
                "precip_corr": None,
            }
        )
    return rows
