"""Spark's source for the correlation job: our Python data source against Spark's own Kafka
connector (JVM), on the same backlog, alternating, in one run.

Goal: the Python data source's sustained events/s >= 1.0x the JVM connector's.

How it measures, in full: ``docs/benchmarks.md``, "bench spark-source".
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from load.bench_pipeline import (
    PipelineBenchConfig,
    ProgressLog,
    _job_config,
    _layout,
    replay,
    stream_phase,
)
from load.harness import report
from load.harness.kafka import EndOffsets
from load.harness.report import log, verdict
from load.harness.stats import spread

GOAL_RATIO = 1.0  # python / jvm, sustained events/s
LABELS = {"python": "sftraffic", "jvm": "kafka"}  # label -> pipelines.jobs source
STORES = ("ours", "kafka")
KAFKA_HEAP = "1g"
WARM_RECORDS, WARM_OFFSETS = 2_000, 5_000  # the warm-up run of each source (not measured)


@dataclasses.dataclass
class SourceBenchConfig:
    mode: str = "full"
    store: str = "ours"
    events: int = 12_000_000
    reps: int = 2
    max_offsets_per_trigger: int = 1_000_000  # the job's default (sftraffic pipeline)
    partitions: int = 6
    sensors: int = 10_000
    replay_workers: int = 2
    master: str = "local[2]"
    py_spy: bool = False
    seed: int = 42

    def pipeline(self, source: str, py_spy: bool = False) -> PipelineBenchConfig:
        """The ``load.bench_pipeline`` settings of one run (its replay and stream phase)."""
        return PipelineBenchConfig(
            mode=self.mode,
            stream_events=self.events,
            max_offsets_per_trigger=self.max_offsets_per_trigger,
            sensors=self.sensors,
            partitions=self.partitions,
            replay_workers=self.replay_workers,
            master=self.master,
            phases=("stream",),
            py_spy=py_spy,
            seed=self.seed,
            source=source,
        )


MODES: dict[str, dict[str, Any]] = {
    "full": {},
    "quick": {"events": 40_000, "max_offsets_per_trigger": 10_000, "replay_workers": 1},
}


@contextmanager
def store(kind: str, work: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """A fresh store: (bootstrap, what it is)."""
    if kind == "kafka":
        from deploy.kafka import KAFKA_VERSION, KafkaCluster

        cluster = KafkaCluster(1, work / "kafka", heap=KAFKA_HEAP)
        t0 = time.monotonic()
        cluster.start(timeout=180)
        about = {"store": f"Apache Kafka {KAFKA_VERSION} (KRaft single node, -Xmx{KAFKA_HEAP})"}
        try:
            yield cluster.bootstrap, about | {"start_s": round(time.monotonic() - t0, 1)}
        finally:
            cluster.stop()
    else:
        from load.harness import services

        # retention checks rarely: the replayed history is days old in event time
        with services.broker(work, **{"log.retention.check.interval.ms": 300_000}) as b:
            yield b.bootstrap, {"store": "sftraffic (ours)"}


def tail_offsets(bootstrap: str, topics: list[str], n: int) -> str:
    """``startingOffsets`` JSON: ``n`` records before the end of every partition of ``topics``."""
    from confluent_kafka import Consumer, TopicPartition

    from load.harness.kafka import quiet_logger

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-tail", "logger": quiet_logger()})
    try:
        out: dict[str, dict[str, int]] = {}
        for t in topics:
            for p in c.list_topics(t, timeout=10).topics[t].partitions:
                lo, hi = c.get_watermark_offsets(TopicPartition(t, p), timeout=10, cached=False)
                out.setdefault(t, {})[str(p)] = max(lo, hi - n)
        return json.dumps(out)
    finally:
        c.close()


def warm_up(spark: Any, bootstrap: str, cfg: SourceBenchConfig, work: Path, label: str) -> float:
    """The correlation job through one source over the last ``WARM_RECORDS`` records of every
    partition, ``WARM_OFFSETS`` per trigger (not measured): Python workers, the connector's
    classes and the streaming join's generated code are ready before the first measured run,
    whichever source it uses. The query then idles and is stopped between micro-batches."""
    from pipelines import jobs

    start = tail_offsets(bootstrap, [jobs.t("traffic"), jobs.t("weather_conditions")], WARM_RECORDS)
    pcfg = cfg.pipeline(LABELS[label])
    jcfg = _job_config(bootstrap, work / f"warm-{label}", pcfg, start, max_offsets_per_trigger=WARM_OFFSETS)
    total = sum(v for ps in json.loads(start).values() for v in ps.values())
    ends = EndOffsets(bootstrap, [jobs.t("traffic"), jobs.t("weather_conditions")]).by_topic()
    rows = sum(ends.values()) - total
    t0 = time.perf_counter()
    queries = jobs.start_correlation(spark, jcfg)
    progress = ProgressLog(queries[0])
    try:
        while time.perf_counter() - t0 < 300 and queries[0].isActive:
            progress.poll()
            if progress.rows() >= rows:
                break
            time.sleep(0.25)
    finally:
        jobs.stop_gracefully(queries)
    return round(time.perf_counter() - t0, 1)


def _run_figures(res: dict[str, Any]) -> dict[str, Any]:
    keep = ("sustained_events_per_s", "overall_events_per_s", "first_batch_s", "query_wall_s")
    out = {k: res.get(k) for k in keep}
    out["sustained_basis"] = res.get("sustained_basis")
    out["micro_batches"] = len(res.get("batches") or [])
    out["durations_share"] = (res.get("durations") or {}).get("share_of_trigger")
    out["cpu"] = res.get("cpu")
    for k in ("error", "py_spy"):
        if k in res:
            out[k] = res[k]
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    return measure(args.cfg)


def measure(cfg: SourceBenchConfig) -> dict[str, Any]:
    from deploy.spark.connector import SPARK_VERSION
    from pipelines.spark import session

    doc: dict[str, Any] = {"benchmark": "spark_source", "mode": cfg.mode}
    doc["machine"] = report.machine_info("load.bench_spark_source")
    doc["config"] = dataclasses.asdict(cfg)
    doc["errors"] = []
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="sftraffic-bench-spark-source-") as tmp:
        work = Path(tmp)
        with store(cfg.store, work) as (bootstrap, about):
            doc["store"] = about
            _layout(bootstrap, cfg.pipeline("sftraffic"))
            log(f"{about['store']}: replaying a backlog of {cfg.events:,} traffic events")
            wait = replay(bootstrap, cfg.events, cfg.pipeline("sftraffic"))
            log(f"starting Spark ({cfg.master}) with Spark's Kafka connector {SPARK_VERSION}")
            t0 = time.perf_counter()
            spark = session("sftraffic-bench-spark-source", master=cfg.master, kafka_connector=True)
            doc["spark_start_s"] = round(time.perf_counter() - t0, 1)
            doc["spark_version"] = spark.version
            try:
                backlog = wait()
                doc["backlog"] = backlog
                # Python workers, connector classes, generated code; a quick run (a test of the
                # benchmark, not a measurement) goes without
                for label in LABELS if cfg.mode != "quick" else ():
                    doc.setdefault("warm_up_s", {})[label] = warm_up(spark, bootstrap, cfg, work, label)
                for rep in range(1, cfg.reps + 1):
                    for label, source in LABELS.items():  # A B, A B, ...
                        pcfg = cfg.pipeline(source, py_spy=cfg.py_spy and label == "python")
                        log(f"rep {rep}: correlation through the {label} source ({source})")
                        try:
                            res = stream_phase(spark, bootstrap, pcfg, work / f"{label}-{rep}", backlog)
                        except Exception as exc:
                            res = {"error": f"{type(exc).__name__}: {str(exc)[:500]}"}
                        runs.append({"rep": rep, "source": label, **_run_figures(res)})
                        if "error" in res:
                            doc["errors"].append(f"rep {rep} {label}: {res['error']}")
                        shutil.rmtree(work / f"{label}-{rep}-checkpoints", ignore_errors=True)
                        shutil.rmtree(work / f"{label}-{rep}-parquet", ignore_errors=True)
            finally:
                spark.stop()
    doc["runs"] = runs
    doc["sources"] = {
        label: {
            "source": f"--source {source}",
            "sustained_events_per_s": spread(
                r["sustained_events_per_s"] for r in runs if r["source"] == label and "error" not in r
            ),
            "overall_events_per_s": spread(
                r["overall_events_per_s"] for r in runs if r["source"] == label and "error" not in r
            ),
        }
        for label, source in LABELS.items()
    }
    med = {k: (v["sustained_events_per_s"] or {}).get("median") for k, v in doc["sources"].items()}
    ratio = round(med["python"] / med["jvm"], 3) if med["python"] and med["jvm"] else None
    doc["ratio_python_over_jvm"] = ratio
    pairs: list[float | None] = []
    for rep in range(1, cfg.reps + 1):
        by: dict[str, Any] = {r["source"]: r.get("sustained_events_per_s") for r in runs if r["rep"] == rep}
        py, jvm = by.get("python"), by.get("jvm")
        pairs.append(round(py / jvm, 3) if py and jvm else None)
    doc["ratio_by_rep"] = pairs
    on = "Apache Kafka" if cfg.store == "kafka" else "our store"
    doc["goals"] = [
        verdict(
            f"Python data source sustained events/s >= 1.0x the JVM connector's (correlation, {on}, medians)",
            ratio,
            GOAL_RATIO,
            True,
        )
    ]
    doc["loadavg_at_end"] = os.getloadavg()
    return doc


def check(a: argparse.Namespace, error: Callable[[str], Any]) -> None:
    """The options into ``a.cfg`` (a :class:`SourceBenchConfig`)."""
    mode = report.mode(a)
    given = {k: getattr(a, k) for k in ("events", "reps", "max_offsets_per_trigger", "master")}
    kw = MODES[mode] | {k: v for k, v in given.items() if v is not None}
    a.cfg = SourceBenchConfig(mode=mode, store=a.store or "ours", py_spy=a.py_spy, **kw)
    if a.cfg.reps < 1 or a.cfg.events < 1:
        error("--reps and --events must be positive")


if __name__ == "__main__":
    from load.scenarios import main

    raise SystemExit(main("spark-source"))
