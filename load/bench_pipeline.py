"""Benchmark of the Spark jobs against our store, on ``local[2]``, written as JSON.

Goals: the streaming correlation job sustains >= 100k events/s input on local[2] with
end-to-end latency (event time → result in the store) p95 <= 10 s; a batch job over 10M
events completes.

How it measures, in full: ``docs/benchmarks.md``, "bench pipeline".
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import functools
import json
import multiprocessing as mp
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from load.harness import procfs, report, services
from load.harness.kafka import EndOffsets, quiet_logger
from load.harness.profiler import Profiler, count_collapsed, py_spy
from load.harness.report import log, verdict
from load.harness.stats import summary

GOAL_EVENTS_S = 100_000.0
GOAL_P95_S = 10.0
GOAL_BATCH_EVENTS = 10_000_000
RETENTION = {"log.retention.check.interval.ms": 300_000}
REPLAY_START = "2026-11-18T07:00"  # a Wednesday morning in San Francisco (PST)
WEATHER_PERIOD_MS = 60_000  # weather stations report on whole minutes (sensors.fleet)


@dataclass
class PipelineBenchConfig:
    mode: str = "full"
    stream_events: int = 12_000_000
    max_offsets_per_trigger: int = 1_000_000  # the job's default (sftraffic pipeline)
    live_job: str = "correlation"
    live_rate: int = 5_000
    live_seconds: float = 360.0
    live_window: str = "1 minute"
    live_watermark: str = "2 minutes"
    trigger: str = "1 second"
    batch_events: int = 10_000_000
    batch_jobs: tuple[str, ...] = ("aggregates", "correlation")
    sensors: int = 10_000
    partitions: int = 6
    replay_workers: int = 2
    master: str = "local[2]"
    spark_conf: dict[str, str] = field(default_factory=dict)
    phases: tuple[str, ...] = ("stream", "live", "batch")
    py_spy: bool = False
    jfr: bool = False
    seed: int = 42
    source: str = "sftraffic"  # how the jobs read the topics (jobs.SOURCES; load.bench_spark_source)


# the sizes of --quick and --smoke (the full run: the defaults above)
MODES: dict[str, dict[str, Any]] = {"full": {}}
MODES["quick"] = {"stream_events": 600_000, "max_offsets_per_trigger": 150_000, "live_rate": 3_000}
MODES["quick"] |= {"live_seconds": 300.0, "batch_events": 200_000}
MODES["smoke"] = {"stream_events": 4_000, "max_offsets_per_trigger": 3_000, "live_job": "aggregates"}
MODES["smoke"] |= {
    "live_rate": 500,
    "live_seconds": 6.0,
    "live_window": "2 seconds",
    "live_watermark": "1 second",
}
MODES["smoke"] |= {"batch_events": 6_000, "batch_jobs": ("aggregates",), "replay_workers": 1}


# -- small helpers ----------------------------------------------------------------------------
_UNITS_MS = {"millisecond": 1, "second": 1000, "minute": 60_000, "hour": 3_600_000, "day": 86_400_000}


def interval_ms(text: str) -> int:
    """'2 minutes' → 120000 (the interval strings the jobs take)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-z]+?)s?\s*", text.lower())
    if not m or m.group(2) not in _UNITS_MS:
        raise ValueError(f"cannot read the interval {text!r} (e.g. '1 minute', '30 seconds')")
    return int(float(m.group(1)) * _UNITS_MS[m.group(2)])


def _epoch_ms(iso: str) -> int:
    return int(dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000)


# -- processes: CPU by kind, py-spy -----------------------------------------------------------
def _tree() -> dict[int, str]:
    """This process and its descendants: pid → command line."""
    return {pid: procfs.cmdline(pid) for pid in [os.getpid(), *procfs.children(os.getpid(), recursive=True)]}


def _kind(pid: int, cmd: str, fleet_pids: set[int]) -> str:
    if pid == os.getpid():
        return "driver_python"
    if pid in fleet_pids:
        return "fleet"
    if " kafka.Kafka " in cmd:  # Apache Kafka as the store (load.bench_spark_source --store kafka)
        return "broker"
    if "java" in cmd.split(" ", 1)[0]:
        return "spark_jvm"
    marks = {"pyspark": "python_workers", "framework.cli.main broker": "broker", "py-spy": "profiler"}
    return next((kind for mark, kind in marks.items() if mark in cmd), "other")


class CpuByKind:
    """CPU seconds of this process tree over a phase, per kind of process (from /proc).

    The driver counts only its own time (its reaped children are fleets, counted in
    ``fleet`` from what they report); the others include their reaped children (Python
    workers forked by the PySpark daemon). Deltas are taken per process: a process that
    exits during the phase (a PySpark daemon) is left out, and so is the time its parent
    gains by reaping it (which would move its whole lifetime into the parent's kind); what
    such a process used within the phase is then not counted (``exited`` says how many)."""

    def __init__(self) -> None:
        self.fleet_pids: set[int] = set()
        self.fleet_cpu, self._start, self._t0 = 0.0, self._snapshot(), time.monotonic()

    def _snapshot(self) -> dict[int, tuple[str, float, float, int]]:
        """pid → (kind, own CPU, CPU of its reaped children, parent pid)."""
        out: dict[int, tuple[str, float, float, int]] = {}
        for pid, cmd in _tree().items():
            kind = _kind(pid, cmd, self.fleet_pids)
            if kind == "fleet":
                continue  # reported by the fleet itself (it may exit before the snapshot)
            with contextlib.suppress(OSError):
                own = procfs.cpu_seconds(pid)
                reaped = procfs.cpu_seconds(pid, reaped=True) - own if kind != "driver_python" else 0.0
                out[pid] = (kind, own, reaped, procfs.parent(pid))
        return out

    def result(self) -> dict[str, Any]:
        end = self._snapshot()
        wall = time.monotonic() - self._t0
        gone = set(self._start) - set(end)
        acc: dict[str, float] = {}
        for pid, (kind, own, reaped, _ppid) in end.items():
            _k, own0, reaped0, _p = self._start.get(pid, (kind, 0.0, 0.0, 0))
            # a child that was alive at the start and reaped since: its lifetime is not this phase's
            lost = sum(self._start[g][1] + self._start[g][2] for g in gone if self._start[g][3] == pid)
            acc[kind] = acc.get(kind, 0.0) + (own - own0) + max(0.0, reaped - reaped0 - lost)
        cpu = {k: round(v, 1) for k, v in sorted(acc.items())}
        if self.fleet_cpu:
            cpu["fleet"] = round(self.fleet_cpu, 1)
        total = sum(cpu.values())
        return {
            "wall_s": round(wall, 1),
            "cpu_s": cpu,
            "cpu_total_s": round(total, 1),
            "cores_busy": round(total / wall, 2) if wall > 0 else None,
            "share": {k: round(v / total, 3) for k, v in cpu.items()} if total > 0 else {},
            "exited": len(gone),
        }


class PySpy:
    """py-spy on the PySpark daemons (and the workers they fork) of this process tree."""

    rate = 50

    def __init__(self, out_dir: Path) -> None:
        self.out_dir, self.t0 = out_dir, 0.0
        self.profilers: list[tuple[Profiler, str]] = []

    def start(self) -> bool:
        if py_spy() is None:
            return False
        tree = _tree()
        for pid, cmd in tree.items():
            if "pyspark.daemon" in cmd and "pyspark.daemon" not in tree.get(procfs.parent(pid), ""):
                prof = Profiler(pid, self.out_dir / f"py-spy-{pid}.txt", None, self.rate, "--subprocesses")
                self.profilers.append((prof, cmd.split(" ", 3)[-1]))
        self.t0 = time.monotonic()
        return bool(self.profilers)

    def stop(self) -> dict[str, Any]:
        wall = time.monotonic() - self.t0
        self_, incl, total = Counter[str](), Counter[str](), 0
        for prof, _name in self.profilers:
            if prof.stop(30) is None:  # the daemon's accept loop is not a worker at work
                text = prof.out.read_text(errors="replace")
                leaf, inclusive, n = count_collapsed(text, _frame, "manager (daemon.py)")
                self_.update(leaf)
                incl.update(inclusive)
                total += n

        def top(c: Counter[str]) -> list[dict[str, Any]]:
            return [{"function": f, "share": round(n / total, 3)} for f, n in c.most_common(15) if total]

        return {
            "daemons": [name for _p, name in self.profilers],
            "seconds": round(wall, 1),
            "rate_hz": self.rate,
            "samples": total,
            "busy_workers_avg": round(total / self.rate / wall, 2) if wall > 0 else None,
            "top_self": top(self_),
            "top_inclusive": top(incl),
        }


# where the JVM spends its time: innermost recognised frame of each sample (JFR, Java 11+)
JVM_AREAS: dict[str, list[str]] = {
    label: patterns.split()
    for label, _, patterns in (
        line.partition(": ")
        for line in """\
json parsing (from_json, get_json_object): jackson JacksonParser JsonToStructs GetJsonObject
compression (lz4/zstd/snappy): lz4 LZ4 zstd Zstd snappy Snappy
state store (join/aggregation state): StateStore SymmetricHashJoinStateManager RocksDB
arrow batches from the Python workers: org.apache.arrow ArrowColumnVector PythonArrow ArrowUtils
python worker I/O: PythonRunner PythonDataSource PythonWorker api.python
parquet: parquet
shuffle / sort: shuffle Shuffle UnsafeExternalSorter ShuffleExternalSorter
aggregation / join: HashAggregate UnsafeFixedWidthAggregationMap HashedRelation SymmetricHashJoin
generated code (projections, filters): GeneratedClass GeneratedIterator
query planning / codegen compile: janino codehaus catalyst.rules catalyst.optimizer QueryExecution
checkpoint / file system: hadoop.fs CheckpointFileManager HDFSMetadataLog""".splitlines()
    )
}


def jvm_area(frames: list[str]) -> str:
    """``frames``: leaf first. The area of the innermost frame that names one."""
    return next((a for f in frames for a, pats in JVM_AREAS.items() if any(x in f for x in pats)), "other")


class JavaFlightRecorder:
    """JFR on the Spark JVM (started and dumped with jcmd; summarised from ``jfr print --json``)."""

    def __init__(self, out_dir: Path) -> None:
        self.out, self.t0 = out_dir / "spark.jfr", 0.0
        self.jcmd: list[str] = []

    def _run(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False)

    def start(self) -> bool:
        jvms = [p for p, cmd in _tree().items() if "java" in cmd.split(" ", 1)[0]]
        if not jvms:
            return False
        self.bin = Path(os.path.realpath(f"/proc/{jvms[0]}/exe")).parent
        self.jcmd = [str(self.bin / "jcmd"), str(jvms[0])]
        self.t0 = time.monotonic()
        return self._run(*self.jcmd, "JFR.start", "name=bench", "settings=profile").returncode == 0

    def stop(self) -> dict[str, Any]:
        wall = time.monotonic() - self.t0
        self._run(*self.jcmd, "JFR.dump", "name=bench", f"filename={self.out}", timeout=120)
        self._run(*self.jcmd, "JFR.stop", "name=bench")
        args = ["print", "--json", "--stack-depth", "96", "--events", "jdk.ExecutionSample", str(self.out)]
        r = self._run(str(self.bin / "jfr"), *args, timeout=600)
        with contextlib.suppress(OSError):
            self.out.unlink()
        try:
            events = json.loads(r.stdout)["recording"]["events"]
        except (ValueError, KeyError):
            return {"error": (r.stderr or "no output from jfr print")[-500:]}
        areas, leaf, threads = Counter[str](), Counter[str](), Counter[str]()
        for e in events:
            v = e.get("values", {})
            methods = [fr.get("method") or {} for fr in (v.get("stackTrace") or {}).get("frames", [])]
            frames = [f"{m.get('type', {}).get('name', '?')}.{m.get('name', '?')}" for m in methods]
            if not frames:
                continue
            areas[jvm_area(frames)] += 1
            leaf[frames[0]] += 1
            name = str((v.get("sampledThread") or {}).get("javaName") or "?")
            threads[re.sub(r"[-\s#]*\d+$", "", re.sub(r"\s*\[id = .*", "", name))] += 1
        n = sum(areas.values())

        def top(t: Counter[str], k: int) -> list[dict[str, Any]]:
            return [{"name": a, "share": round(c / n, 3)} for a, c in t.most_common(k)] if n else []

        return {
            "seconds": round(wall, 1),
            "samples": n,
            "note": "Java execution samples (JFR 'profile' settings); GC and JIT threads are not sampled",
            "areas": top(areas, len(JVM_AREAS) + 1),
            "top_methods": top(leaf, 15),
            "threads": top(threads, 8),
        }


def _frame(f: str) -> str:
    """'read_range (pipelines/source.py:312)' → 'read_range (pipelines/source.py)'."""
    f = re.sub(r":\d+\)$", ")", f.strip())
    return re.sub(r"\(/.*?/(site-packages|lib/python3\.\d+|main)/", "(", f)


# -- timing the job's steps (wrappers; behaviour unchanged) -----------------------------------
class StepTimers:
    """Times the module-level steps the jobs call, by wrapping them for the duration of a phase.

    ``jobs._parquet`` / ``jobs._to_topic`` / ``jobs._dead_letters`` / ``jobs.publish_effects``
    are looked up by name when the sink runs, so wrapping the module attributes reaches them;
    ``DataFrame.isEmpty`` / ``count`` are the actions that compute a micro-batch (the sink's
    first action on the persisted batch) or re-read the source (run_batch's dead-letter count).
    """

    def __init__(self) -> None:
        self.events: list[tuple[str, float, float]] = []  # (step, start epoch s, seconds)
        self._undo: list[Callable[[], None]] = []

    def _wrap(self, owner: Any, attr: str, label: str) -> None:
        orig = getattr(owner, attr)

        @functools.wraps(orig)
        def timed(*a: Any, **k: Any) -> Any:
            t0, w0 = time.perf_counter(), time.time()
            try:
                return orig(*a, **k)
            finally:
                self.events.append((label, w0, time.perf_counter() - t0))

        setattr(owner, attr, timed)
        self._undo.append(lambda: setattr(owner, attr, orig))

    def __enter__(self) -> StepTimers:
        from pipelines import jobs

        for name in ("_parquet", "_to_topic", "_dead_letters", "publish_effects"):
            self._wrap(jobs, name, name.lstrip("_"))
        with contextlib.suppress(ImportError):
            from pyspark.sql.classic.dataframe import DataFrame

            self._wrap(DataFrame, "isEmpty", "compute (isEmpty)")
            self._wrap(DataFrame, "count", "count")
        return self

    def __exit__(self, *exc: object) -> None:
        for undo in reversed(self._undo):
            undo()
        self._undo.clear()

    def totals(self, since: float = 0.0, until: float = float("inf")) -> dict[str, float]:
        out: dict[str, float] = {}
        for name, w0, secs in self.events:
            if since <= w0 < until:
                out[name] = round(out.get(name, 0.0) + secs, 2)
        return out


# -- fleets (child processes: their CPU does not share the driver's GIL) ----------------------
def _fleet_child(
    bootstrap: str, q: Any, cfg: PipelineBenchConfig, shard: tuple[int, int], until: int, stop: Any
) -> None:
    """One fleet process. Without ``stop``: a shard of the fleet replays history from REPLAY_START
    at full speed until it sent ``until`` traffic events. With it: the whole fleet runs live (event
    time = wall clock), its volume scaled to emit ``cfg.live_rate`` events/s now, until ``stop``."""
    from sensors.cli import parse_start
    from sensors.fleet import SensorFleet
    from sensors.model import ModelConfig
    from sensors.publish import KafkaSink

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    live, scale = stop is not None, 1.0
    start = int(time.time() * 1000) if live else parse_start(REPLAY_START)
    if live:
        base = SensorFleet(cfg.sensors, ModelConfig(seed=cfg.seed))
        per_s = float(base.model.segment_state(start)[1][base.sensor_seg].sum())
        scale = cfg.live_rate / per_s if per_s > 0 else 1.0
        q.put({"ready": True, "volume_scale": scale})
    fleet = SensorFleet(cfg.sensors, ModelConfig(seed=cfg.seed, volume_scale=scale), shard=shard)
    sink = KafkaSink(bootstrap, client_id=f"bench-{'live' if live else 'replay'}-{shard[0]}")
    t0 = time.perf_counter()
    if live:
        st = fleet.run(sink, int(time.time() * 1000), speed=1.0, stop=stop.is_set)
    else:
        st = fleet.run(sink, start, speed=0, stop=lambda: fleet.stats.by_topic["traffic"] >= until)
    wall = time.perf_counter() - t0
    out: dict[str, Any] = {"events": st.events, "by_topic": dict(st.by_topic), "seconds": wall}
    if live:
        per_s = 1 / wall if wall > 0 else 0.0
        out |= {"events_per_s": st.events * per_s, "traffic_per_s": st.by_topic["traffic"] * per_s}
        out["volume_scale"] = scale
    else:
        out["sim_end_ms"] = st.sim_ms + 1000
    left = sink.flush(60 if live else 300)
    q.put(out | {"unacknowledged": left, "errors": sink.errors, "cpu_s": time.process_time()})


def replay(
    bootstrap: str, traffic_events: int, cfg: PipelineBenchConfig, cpu: CpuByKind | None = None
) -> Any:
    """Start fleet processes replaying history until ``traffic_events`` traffic events are sent;
    returns a function that waits for them and returns the figures."""
    from sensors.cli import parse_start

    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    n = max(1, cfg.replay_workers)
    args = [(bootstrap, q, cfg, (i, n), -(-traffic_events // n), None) for i in range(n)]
    procs = [ctx.Process(target=_fleet_child, args=a, daemon=True) for a in args]
    t0 = time.perf_counter()
    for p in procs:
        p.start()
        if cpu is not None and p.pid is not None:
            cpu.fleet_pids.add(p.pid)

    def wait() -> dict[str, Any]:
        parts = [q.get(timeout=3600) for _ in procs]
        for p in procs:
            p.join(30)
        wall = time.perf_counter() - t0
        events = sum(r["events"] for r in parts)
        if cpu is not None:
            cpu.fleet_cpu += sum(r["cpu_s"] for r in parts)
        if bad := sum(r["unacknowledged"] + r["errors"] for r in parts):
            raise RuntimeError(f"the fleet could not write {bad} events to the store")
        return {
            "events": events,
            "by_topic": {k: sum(r["by_topic"].get(k, 0) for r in parts) for k in parts[0]["by_topic"]},
            "seconds": round(wall, 1),
            "events_per_s": round(events / wall) if wall > 0 else None,
            "processes": n,
            "sensors": cfg.sensors,
            "simulated_minutes": round(
                (max(r["sim_end_ms"] for r in parts) - parse_start(REPLAY_START)) / 60_000, 1
            ),
            "simulated_from": f"{REPLAY_START} PST",
        }

    return wait


def _job_config(bootstrap: str, base: Path, cfg: PipelineBenchConfig, start: str, **kw: Any) -> Any:
    """The settings ``sftraffic pipeline`` would use, checkpoints and Parquet under ``base``."""
    from pipelines import jobs

    kw |= {"trigger": cfg.trigger, "starting_offsets": start, "master": cfg.master, "source": cfg.source}
    return jobs.JobConfig(
        bootstrap=bootstrap, checkpoint_dir=f"{base}-checkpoints", output_dir=f"{base}-parquet", **kw
    )


# -- Spark query progress ---------------------------------------------------------------------
class ProgressLog:
    """Every micro-batch's progress report of a query (``recentProgress`` keeps only the last ones)."""

    def __init__(self, q: Any) -> None:
        self.q = q
        self.batches: dict[int, dict[str, Any]] = {}

    def poll(self) -> None:
        for p in self.q.recentProgress:
            j = getattr(p, "json", None)
            d = json.loads(j) if isinstance(j, str) else json.loads(json.dumps(dict(p), default=str))
            self.batches.setdefault(int(d["batchId"]), d)

    def rows(self) -> int:
        return sum(int(p.get("numInputRows") or 0) for p in self.batches.values())

    def ordered(self) -> list[dict[str, Any]]:
        return [self.batches[k] for k in sorted(self.batches)]


def _batch_window(p: dict[str, Any]) -> tuple[float, float]:
    start = _epoch_ms(p["timestamp"]) / 1000
    return start, start + int(p.get("durationMs", {}).get("triggerExecution", 0)) / 1000


def _batch_row(p: dict[str, Any], steps: StepTimers | None) -> dict[str, Any]:
    start, end = _batch_window(p)
    row: dict[str, Any] = {
        "batch": p["batchId"],
        "input_rows": p.get("numInputRows", 0),
        "rows_per_s": round(float(p.get("processedRowsPerSecond") or 0.0)),
        "seconds": round(end - start, 2),
        "duration_ms": p.get("durationMs", {}),
        "state": [
            {
                "operator": s.get("operatorName"),
                "rows": s.get("numRowsTotal"),
                "memory_mb": round(mem / 1e6, 1),
            }
            for s in p.get("stateOperators", [])
            for mem in [s.get("memoryUsedBytes") or 0]
        ],
        "watermark": (p.get("eventTime") or {}).get("watermark"),
    }
    if steps is not None:
        row["sink_steps_s"] = steps.totals(start - 0.05, end + 0.05)
    return row


def _durations_share(batches: list[dict[str, Any]]) -> dict[str, Any]:
    tot: dict[str, int] = {}
    for p in batches:
        for k, v in (p.get("durationMs") or {}).items():
            tot[k] = tot.get(k, 0) + int(v)
    trig = tot.get("triggerExecution", 0)
    share = {k: round(v / trig, 3) for k, v in tot.items() if k != "triggerExecution"} if trig else {}
    return {"total_ms": tot, "share_of_trigger": share}


# -- phase 1: streaming throughput over a backlog ---------------------------------------------
def stream_phase(
    spark: Any, bootstrap: str, cfg: PipelineBenchConfig, work: Path, backlog: dict[str, Any]
) -> dict[str, Any]:
    from pipelines import jobs

    ends = EndOffsets(bootstrap, [jobs.t("traffic"), jobs.t("weather_conditions")]).by_topic()
    total, per_trigger = sum(ends.values()), cfg.max_offsets_per_trigger
    jcfg = _job_config(bootstrap, work / "stream", cfg, "earliest", max_offsets_per_trigger=per_trigger)
    out: dict[str, Any] = {
        "job": "correlation",
        "backlog": {**backlog, "input_rows": total, "by_topic": ends},
    }
    out |= {"max_offsets_per_trigger": per_trigger, "trigger": cfg.trigger}
    out |= {"window": jcfg.window, "watermark": jcfg.watermark}
    timeout = max(180.0, total / 2_000)
    cpu = CpuByKind()
    spy = PySpy(work) if cfg.py_spy else None
    jfr = JavaFlightRecorder(work) if cfg.jfr else None
    spying = recording = False
    log(f"stream: correlation over a backlog of {total:,} input rows (timeout {timeout:.0f}s)")
    with StepTimers() as steps:
        t0 = time.monotonic()
        queries = jobs.start_correlation(spark, jcfg)
        progress = ProgressLog(queries[0])
        try:
            while True:
                progress.poll()
                if progress.rows() >= total:
                    break
                if not queries[0].isActive:
                    out["error"] = f"query stopped: {queries[0].exception()}"
                    break
                if time.monotonic() - t0 > timeout:
                    out["error"] = (
                        f"timed out after {timeout:.0f}s with {progress.rows():,} of {total:,} rows"
                    )
                    break
                if any(p.get("numInputRows") for p in progress.ordered()):  # after the warm-up batch
                    spying = spying or (spy is not None and spy.start())  # the daemons exist now
                    recording = recording or (jfr is not None and jfr.start())
                time.sleep(0.25)
        finally:
            wall = time.monotonic() - t0
            profile = spy.stop() if spy is not None and spying else None
            jvm_profile = jfr.stop() if jfr is not None and recording else None
            jobs.stop_gracefully(queries)
            progress.poll()
    out["cpu"] = cpu.result()
    out |= _stream_figures(progress.ordered(), steps, wall)
    if profile is not None:
        out["py_spy"] = profile
    if jvm_profile is not None:
        out["jfr"] = jvm_profile
    return out


def _stream_figures(batches: list[dict[str, Any]], steps: StepTimers, wall: float) -> dict[str, Any]:
    """The sustained rate over the data batches, the first one left out as warm-up."""
    data = [p for p in batches if int(p.get("numInputRows") or 0) > 0]
    measured = data[1:] if len(data) > 1 else data
    out: dict[str, Any] = {"batches": [_batch_row(p, steps) for p in batches]}
    out["query_wall_s"] = round(wall, 1)
    if measured:
        s0, e1 = _batch_window(measured[0])[0], _batch_window(measured[-1])[1]
        rows = sum(int(p["numInputRows"]) for p in measured)
        out["sustained_events_per_s"] = round(rows / (e1 - s0)) if e1 > s0 else None
        out["sustained_basis"] = (
            f"{rows:,} input rows of batches {measured[0]['batchId']}..{measured[-1]['batchId']} "
            f"in {e1 - s0:.1f}s (first data batch left out as warm-up)"
            if len(data) > 1
            else "only one data batch: it is the measurement"
        )
        all_s0, all_e1 = _batch_window(data[0])[0], _batch_window(data[-1])[1]
        out["overall_events_per_s"] = round(sum(int(p["numInputRows"]) for p in data) / (all_e1 - all_s0))
        out["first_batch_s"] = round(_batch_window(data[0])[1] - all_s0, 1)
        out["durations"] = _durations_share(measured)
        out["sink_steps_s"] = steps.totals(s0 - 0.05, e1 + 0.05)
    return out


# -- phase 2: latency under a live load -------------------------------------------------------
class ResultCollector(threading.Thread):
    """Reads every record of a result topic appended after start, with the time it was seen."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True, name="bench-results")
        from confluent_kafka import Consumer, TopicPartition

        conf = {"bootstrap.servers": bootstrap, "group.id": "bench-latency", "enable.auto.commit": False}
        self.c = Consumer(conf | {"fetch.wait.max.ms": 10, "logger": quiet_logger()})
        parts = [
            TopicPartition(topic, p) for p in self.c.list_topics(topic, timeout=10).topics[topic].partitions
        ]
        self.c.assign(
            [TopicPartition(topic, tp.partition, self.c.get_watermark_offsets(tp, 10)[1]) for tp in parts]
        )
        self.records: list[dict[str, Any]] = []
        self.stop_flag = threading.Event()
        self.errors = 0

    def run(self) -> None:
        while not self.stop_flag.is_set():
            for m in self.c.consume(1000, timeout=0.1):
                seen = time.time() * 1000
                if m.error() is not None:
                    continue
                try:
                    v = json.loads(m.value() or b"")
                    rec = {"visible_ms": seen, "produced_ms": m.timestamp()[1]}
                    self.records.append(
                        rec | {f"{k}_ms": _epoch_ms(v[k]) for k in ("window_start", "window_end")}
                    )
                except (ValueError, KeyError, TypeError):
                    self.errors += 1
        self.c.close()

    def stop(self) -> None:
        self.stop_flag.set()
        self.join(10)


def latency_figures(records: list[dict[str, Any]], watermark_ms: int, weather_gated: bool) -> dict[str, Any]:
    def close_of(end: int) -> int:
        c = end + watermark_ms
        return -(-c // WEATHER_PERIOD_MS) * WEATHER_PERIOD_MS if weather_gated else c

    raw = [(r["visible_ms"] - r["window_end_ms"]) / 1000 for r in records]
    after = [(r["visible_ms"] - close_of(r["window_end_ms"])) / 1000 for r in records]
    after_prod = [(r["produced_ms"] - close_of(r["window_end_ms"])) / 1000 for r in records]
    per_window: dict[int, list[float]] = {}
    for r, a in zip(records, after, strict=True):
        per_window.setdefault(r["window_end_ms"], []).append(a)
    return {
        "records": len(records),
        "windows": len(per_window),
        "raw_s": summary(raw),
        "after_close_s": summary(after),
        "after_close_by_produce_timestamp_s": summary(after_prod),
        "per_window": [
            {
                "window_end": dt.datetime.fromtimestamp(end / 1000, dt.UTC).isoformat(),
                "records": len(v),
                "after_close_s_min": round(min(v), 2),
                "after_close_s_max": round(max(v), 2),
            }
            for end, v in sorted(per_window.items())
        ],
    }


def live_phase(spark: Any, bootstrap: str, cfg: PipelineBenchConfig, work: Path) -> dict[str, Any]:
    from pipelines import jobs

    result = "traffic_weather" if cfg.live_job == "correlation" else "traffic_aggregates"
    jcfg = _job_config(
        bootstrap, work / "live", cfg, "latest", window=cfg.live_window, watermark=cfg.live_watermark
    )
    out: dict[str, Any] = {"job": cfg.live_job, "result_topic": jobs.t(result), "window": cfg.live_window}
    out |= {
        "watermark": cfg.live_watermark,
        "trigger": cfg.trigger,
        "target_rate_events_per_s": cfg.live_rate,
    }
    out["seconds_planned"] = cfg.live_seconds
    collector = ResultCollector(bootstrap, jobs.t(result))
    collector.start()
    ctx = mp.get_context("spawn")
    q, stop = ctx.Queue(), ctx.Event()
    fleet = ctx.Process(target=_fleet_child, args=(bootstrap, q, cfg, (0, 1), 0, stop), daemon=True)
    steps = StepTimers().__enter__()
    queries = jobs.JOBS[cfg.live_job](spark, jcfg)
    progress = ProgressLog(queries[0])
    cpu: CpuByKind | None = None
    try:
        _await_first_batch(progress, queries[0])
        fleet.start()
        cpu = CpuByKind()
        if fleet.pid is not None:
            cpu.fleet_pids.add(fleet.pid)
        out["volume_scale"] = round(q.get(timeout=120)["volume_scale"], 2)
        log(f"live: {cfg.live_job} with the fleet at ~{cfg.live_rate:,} events/s for {cfg.live_seconds:.0f}s")
        t_start = time.time()
        _keep_load_on(cfg, fleet, collector, progress, queries[0], t_start, out)
        stop.set()
        fig = q.get(timeout=120)
        fleet.join(30)
        cpu.fleet_cpu += fig.pop("cpu_s")
        t_end = time.time()
        _await_last_results(progress, queries[0])
    finally:
        stop.set()
        jobs.stop_gracefully(queries)
        steps.__exit__()
        collector.stop()
        if fleet.is_alive():
            fleet.kill()
    out["fleet"] = {k: (round(v, 1) if isinstance(v, float) else v) for k, v in fig.items()}
    out["cpu"] = cpu.result() if cpu is not None else None
    records = [r for r in collector.records if r["visible_ms"] <= t_end * 1000 + 20_000]
    out |= _live_figures(cfg, progress, steps, fig, t_start)
    gated = cfg.live_job == "correlation"
    out["latency"] = latency_figures(records, interval_ms(cfg.live_watermark), gated)
    out["latency"]["definition"] = (
        "raw = visible - window_end; after_close = visible - close, close = window_end + watermark"
        + (" rounded up to a whole minute (weather reports gate the join's watermark)" if gated else "")
    )
    out["result_parse_errors"] = collector.errors
    out |= _emitting_batches(progress, steps, t_start)
    if len(queries) > 1:
        out["sink_steps_note"] = (
            f"{len(queries)} queries run side by side ({', '.join(q.name for q in queries)}); "
            "steps are attributed to batches by time, so theirs overlap"
        )
    return out


def _keep_load_on(
    cfg: PipelineBenchConfig,
    fleet: Any,
    collector: ResultCollector,
    progress: ProgressLog,
    query: Any,
    t_start: float,
    out: dict[str, Any],
) -> None:
    """The load stays on for live_seconds, and longer (up to 3x) until a first result arrived."""
    while fleet.is_alive():
        elapsed = time.time() - t_start
        if elapsed >= cfg.live_seconds and (collector.records or elapsed >= 3 * cfg.live_seconds):
            break
        progress.poll()
        if not query.isActive:
            out["error"] = f"query stopped: {query.exception()}"
            break
        time.sleep(0.5)


def _await_first_batch(progress: ProgressLog, query: Any) -> None:
    """The query's first (empty) batch plans and starts workers: live load starts after it."""
    deadline = time.monotonic() + 180
    while not progress.batches and time.monotonic() < deadline and query.isActive:
        progress.poll()
        time.sleep(0.2)


def _await_last_results(progress: ProgressLog, query: Any) -> None:
    """Results already being computed when the load stopped still count."""
    grace = time.monotonic() + 15
    while time.monotonic() < grace and query.isActive and query.status.get("isTriggerActive"):
        time.sleep(0.2)
    time.sleep(1.0)
    progress.poll()


def _live_figures(
    cfg: PipelineBenchConfig, progress: ProgressLog, steps: StepTimers, fig: dict[str, Any], t_start: float
) -> dict[str, Any]:
    """The micro-batches of the live load and whether they kept up with the fleet."""
    out: dict[str, Any] = {}
    batches = [p for p in progress.ordered() if _batch_window(p)[0] >= t_start - 1]
    produced = fig["by_topic"].get("traffic", 0) + fig["by_topic"].get("weather_conditions", 0)
    processed = sum(int(p.get("numInputRows") or 0) for p in batches)
    secs = [_batch_window(p)[1] - _batch_window(p)[0] for p in batches]
    out["batches"] = {
        "count": len(batches),
        "seconds": summary(secs),
        "input_rows": summary([float(p.get("numInputRows") or 0) for p in batches]),
        "durations": _durations_share(batches),
        "last_state": _batch_row(batches[-1], None)["state"] if batches else [],
    }
    out |= {"input_rows_processed": processed, "input_rows_produced": produced}
    out["kept_up"] = processed >= 0.95 * produced
    return out


def _emitting_batches(progress: ProgressLog, steps: StepTimers, t_start: float) -> dict[str, Any]:
    """The micro-batches that wrote results: the last step of every window's way to the store."""
    batches = [p for p in progress.ordered() if _batch_window(p)[0] >= t_start - 1]
    rows = [_batch_row(p, steps) for p in batches]
    emitting = [
        {k: r[k] for k in ("batch", "input_rows", "seconds", "sink_steps_s")}
        for r in rows
        if "to_topic" in r["sink_steps_s"]
    ]
    return {"emitting_batches": emitting, "sink_steps_s": steps.totals(t_start - 1)}


# -- phase 3: batch over N events -------------------------------------------------------------
def batch_phase(spark: Any, cfg: PipelineBenchConfig, work: Path) -> dict[str, Any]:
    from pipelines import jobs

    out: dict[str, Any] = {"jobs": {}}
    with services.broker(work / "batch", **RETENTION) as b:
        _layout(b.bootstrap, cfg)
        log(f"batch: replaying {cfg.batch_events:,} traffic events")
        cpu_gen = CpuByKind()
        out["input"] = replay(b.bootstrap, cfg.batch_events, cfg, cpu_gen)() | {"cpu": cpu_gen.result()}
        ends = EndOffsets(b.bootstrap, [jobs.t("traffic"), jobs.t("weather_conditions")]).by_topic()
        out["input"]["stored"], traffic = ends, ends[jobs.t("traffic")]
        for job in cfg.batch_jobs:
            jcfg = _job_config(b.bootstrap, work / f"batch-{job}", cfg, "earliest")
            log(f"batch: run_batch {job} over {traffic:,} traffic events")
            cpu = CpuByKind()
            res: dict[str, Any] = {}
            with StepTimers() as steps:
                t0 = time.perf_counter()
                try:
                    results = jobs.run_batch(spark, jcfg, job)
                    eff = results.pop("effects", None)
                    res["results"] = {**results, **({"effects": len(eff)} if eff is not None else {})}
                except Exception as exc:  # reported, the other jobs still run
                    res["error"] = f"{type(exc).__name__}: {str(exc)[:500]}"
                wall = time.perf_counter() - t0
            res |= {"wall_s": round(wall, 1), "traffic_events": traffic}
            res |= {"events_per_s": round(traffic / wall) if wall > 0 else None, "steps_s": steps.totals()}
            res["steps_note"] = (
                "parquet: computes and writes the results (first full read); count: results from the "
                "cache, then dead letters (a second full read); dead_letters: isEmpty (a third full "
                "read); publish_effects: weather-effect estimates from the Parquet history"
            )
            res["cpu"] = cpu.result()
            out["jobs"][job] = res
    shutil.rmtree(work / "batch", ignore_errors=True)
    return out


# -- orchestration ----------------------------------------------------------------------------
def _layout(bootstrap: str, cfg: PipelineBenchConfig) -> None:
    from pipelines.jobs import RESULT_TOPICS, t
    from sensors.layout import ensure_layout

    extra: dict[str, dict[str, str]] = {t(n): {} for n in RESULT_TOPICS if n != "dead_letter"}
    ensure_layout(bootstrap, partitions=cfg.partitions, extra_topics=extra)


def run(args: argparse.Namespace) -> dict[str, Any]:
    return measure(args.cfg)


def measure(cfg: PipelineBenchConfig) -> dict[str, Any]:
    from pipelines.spark import session

    config = {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(cfg).items()}
    machine = report.machine_info("load.bench_pipeline")
    doc: dict[str, Any] = {"benchmark": "pipeline", "mode": cfg.mode, "machine": machine, "config": config}
    doc["errors"] = []

    def phase(name: str, fn: Callable[[], dict[str, Any]]) -> None:
        """``doc[name] = fn()``; a failing phase is an error and the others still run."""
        try:
            doc[name] = fn()
        except Exception as exc:
            doc["errors"].append(f"{name}: {type(exc).__name__}: {exc}")

    spark = None
    with tempfile.TemporaryDirectory(prefix="sftraffic-bench-pipeline-") as tmp:
        work = Path(tmp)
        with services.broker(work, **RETENTION) as b:
            _layout(b.bootstrap, cfg)
            wait_backlog = None
            if "stream" in cfg.phases:
                log(f"stream: replaying a backlog of {cfg.stream_events:,} traffic events")
                wait_backlog = replay(b.bootstrap, cfg.stream_events, cfg)
            log(f"starting Spark ({cfg.master})")
            t_spark = time.perf_counter()
            spark = session("sftraffic-bench-pipeline", master=cfg.master, conf=cfg.spark_conf or None)
            doc["spark_start_s"] = round(time.perf_counter() - t_spark, 1)
            doc["spark_version"] = spark.version
            if wait_backlog is not None:
                backlog = wait_backlog()
                phase("stream", lambda: stream_phase(spark, b.bootstrap, cfg, work, backlog))
            if "live" in cfg.phases:
                phase("live", lambda: live_phase(spark, b.bootstrap, cfg, work))
        shutil.rmtree(work / "broker", ignore_errors=True)
        try:
            if "batch" in cfg.phases and spark is not None:
                phase("batch", lambda: batch_phase(spark, cfg, work))
        finally:
            if spark is not None:
                spark.stop()
    for name in ("stream", "live"):
        if (doc.get(name) or {}).get("error"):
            doc["errors"].append(f"{name}: {doc[name]['error']}")
    jobs = (doc.get("batch") or {}).get("jobs") or {}
    doc["errors"] += [f"batch {job}: {r['error']}" for job, r in jobs.items() if r.get("error")]
    stream = (doc.get("stream") or {}).get("sustained_events_per_s")
    p95 = (((doc.get("live") or {}).get("latency") or {}).get("after_close_s") or {}).get("p95")
    n = max((j["traffic_events"] for j in jobs.values() if "error" not in j), default=None)
    sustains = f"streaming correlation sustains >= 100k input events/s on {cfg.master}"
    doc["goals"] = [
        verdict(sustains, stream, GOAL_EVENTS_S, True),
        verdict(
            "end-to-end latency p95 <= 10 s (after window close, under live load)", p95, GOAL_P95_S, False
        ),
        verdict("a batch job over 10M events completes", n, GOAL_BATCH_EVENTS, True),
    ]
    if cfg.batch_events < GOAL_BATCH_EVENTS:
        doc["goals"][2]["met"] = None  # a smaller batch says nothing about 10M events
    doc["loadavg_at_end"] = os.getloadavg()
    return doc


# options that set the config field of the same name
OVERRIDES: tuple[str, ...] = (
    "batch_events",
    "max_offsets_per_trigger",
    "master",
    "py_spy",
    "jfr",
    "live_rate",
    "live_seconds",
)
OVERRIDES += ("live_job", "live_window", "live_watermark")


def check(a: argparse.Namespace, error: Callable[[str], Any]) -> None:
    """The options into ``a.cfg`` (a :class:`PipelineBenchConfig`)."""
    given = {k: getattr(a, k) for k in OVERRIDES} | {"stream_events": a.events}
    given["phases"] = tuple(x.strip() for x in a.phases.split(",") if x.strip())
    if a.batch_jobs:
        given["batch_jobs"] = tuple(j.strip() for j in a.batch_jobs.split(",") if j.strip())
    mode = report.mode(a)
    cfg = PipelineBenchConfig(mode=mode, **MODES[mode] | {k: v for k, v in given.items() if v is not None})
    if unknown := set(cfg.phases) - {"stream", "live", "batch"}:
        error(f"unknown phase(s) {', '.join(sorted(unknown))}")
    for item in a.spark_conf:
        k, sep, v = item.partition("=")
        if not sep:
            error(f"--spark-conf {item!r}: expected KEY=VALUE")
        cfg.spark_conf[k.strip()] = v.strip()
    try:
        interval_ms(cfg.live_watermark)
        interval_ms(cfg.live_window)
    except ValueError as exc:
        error(str(exc))
    a.cfg = cfg


if __name__ == "__main__":
    from load.scenarios import main

    raise SystemExit(main("pipeline"))
