"""Sensor-fleet benchmark: events/s the direct fleet (``sftraffic sensors --via kafka``) gets
acknowledged by the store, with one worker process and with ``--workers 2``.

Goals: one process with 10,000 sensors >= 100,000 events/s acknowledged; with ``--formats
json,avro``, Avro's events/s >= 0.9x JSON's.

How it measures, in full: ``docs/benchmarks.md``, "bench fleet".
"""

from __future__ import annotations

import argparse
import contextlib
import re
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from load.harness import procfs, services
from load.harness.kafka import EndOffsets
from load.harness.profiler import Profiler
from load.harness.report import document, goal, loadavg, log
from load.harness.runner import Processes
from load.harness.stats import median
from sensors.layout import topic

SENSORS = 10_000
PARTITIONS = 6
GOAL_EVENTS_S = 100_000
GOAL_AVRO_RATIO = 0.9  # the fleet on Avro >= 0.9x its events/s on JSON
START = "2026-11-18T07:30"  # a Wednesday's morning rush hour, PST
TOPICS = ("traffic", "weather_conditions", "infrastructure")
SENT_RE = re.compile(r"sensors: ([\d,]+) events sent in ([\d.]+)s")


class OffsetWatcher(threading.Thread):
    """Samples (monotonic time, sum of end offsets) of the fleet's topics until stopped."""

    def __init__(self, bootstrap: str, topics: list[str], partitions: int, interval: float = 0.25) -> None:
        super().__init__(daemon=True, name="offset-watcher")
        self.offsets = EndOffsets(bootstrap, topics, partitions)
        self.interval = interval
        self.samples: list[tuple[float, int]] = []
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            t = time.monotonic()
            self.samples.append((t, self.offsets.total()))
            self.halt.wait(max(0.0, self.interval - (time.monotonic() - t)))

    def finish(self) -> int:
        """Stop sampling; returns the end offsets now."""
        self.halt.set()
        self.join(30)
        return self.offsets.total()


def _workers(pid: int) -> list[int]:
    """The fleet's worker processes (spawned children running ``spawn_main``, not the
    multiprocessing resource tracker)."""
    cmds = {kid: procfs.cmdline(kid) for kid in procfs.children(pid, recursive=True)}
    return [kid for kid, cmd in cmds.items() if "spawn_main" in cmd and "resource_tracker" not in cmd]


def _profile_workers(
    proc: Any, watch: OffsetWatcher, base: int, profile_dir: Path, workers: int
) -> list[Profiler]:
    """py-spy on every worker, once the workers have built their fleet and are producing."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.alive():
        if watch.samples and watch.samples[-1][1] > base:
            break
        time.sleep(0.1)
    return [
        Profiler(
            pid, profile_dir / f"fleet-w{workers}-worker{i}.txt", 8, focus=("sensors/", "msgspec", "numpy")
        )
        for i, pid in enumerate(_workers(proc.pid))
    ]


def _steady_rate(
    samples: list[tuple[float, int]], t0: float
) -> tuple[float | None, tuple[float, float] | None]:
    """Events/s from the first sample that saw events to the last sample that saw new ones."""
    moving = [i for i in range(1, len(samples)) if samples[i][1] > samples[i - 1][1]]
    if len(moving) < 2:
        return None, None
    a, b = samples[moving[0]], samples[moving[-1]]
    if b[0] <= a[0]:
        return None, None
    return (b[1] - a[1]) / (b[0] - a[0]), (round(a[0] - t0, 2), round(b[0] - t0, 2))


def measure_fleet(
    bootstrap: str,
    broker_pid: int,
    workers: int,
    duration: float,
    start: str,
    profile_dir: Path | None,
    fmt_args: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Run the fleet command once; returns its figures (see the module docstring)."""
    watch = OffsetWatcher(bootstrap, [topic(t) for t in TOPICS], PARTITIONS)
    base = watch.offsets.total()
    args = ["--sensors", str(SENSORS), "--speed", "0", "--start", start, "--duration", str(duration)]
    args += fmt_args
    proc = services.fleet(bootstrap, *args, *f"--partitions {PARTITIONS} --workers {workers} --quiet".split())
    cpu_children0, broker0 = procfs.own_cpu(children=True), procfs.cpu_seconds(broker_pid)
    busy0, own0 = procfs.machine_busy_seconds() or 0.0, procfs.own_cpu()
    watch.start()
    t0 = time.monotonic()
    proc.launch()
    profilers = _profile_workers(proc, watch, base, profile_dir, workers) if profile_dir is not None else []
    assert proc.proc is not None
    try:
        proc.proc.wait(900)
    except subprocess.TimeoutExpired:
        proc.signal(signal.SIGINT)  # the fleet flushes and reports on Ctrl-C
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.proc.wait(60)
    proc.stop()  # reaped: its CPU (and its workers') is in RUSAGE_CHILDREN now
    wall = time.monotonic() - t0
    fleet_cpu = procfs.own_cpu(children=True) - cpu_children0
    busy, own = (procfs.machine_busy_seconds() or 0.0) - busy0, procfs.own_cpu() - own0
    final = watch.finish()
    broker_cpu = procfs.cpu_seconds(broker_pid) - broker0
    text = proc.logs()
    m = SENT_RE.search(text)
    sent = int(m.group(1).replace(",", "")) if m else None
    acked = final - base
    samples = [(t, n - base) for t, n in watch.samples] + [(time.monotonic(), acked)]
    steady, steady_window = _steady_rate(samples, t0)
    res: dict[str, Any] = {
        "workers": workers,
        "format": fmt_args[1] if fmt_args else "json",
        "sensors": SENSORS,
        "simulated_s": duration,
        "command": " ".join(proc.cmd[1:]),
        "exit_code": proc.returncode,
        "sent": sent,
        "acknowledged": acked,
        "unacknowledged": (sent - acked) if sent is not None else None,
        "steady_events_s": round(steady) if steady else None,
        "steady_window_s": steady_window,
        "wall_s": round(wall, 2),
        "wall_events_s": round(acked / wall) if wall > 0 else None,
        "simulated_speedup": round(duration / wall, 1) if wall > 0 else None,
        "fleet_cpu_s": round(fleet_cpu, 2),
        "fleet_cores": round(fleet_cpu / wall, 2) if wall > 0 else None,
        "fleet_cpu_us_per_event": round(fleet_cpu / acked * 1e6, 2) if acked else None,
        "broker_cpu_s": round(broker_cpu, 2),
        "broker_cores": round(broker_cpu / wall, 2) if wall > 0 else None,
        "broker_cpu_us_per_event": round(broker_cpu / acked * 1e6, 2) if acked else None,
        # everything else on the machine meanwhile (this process's offset polling excluded)
        "other_processes_cores": round((busy - fleet_cpu - broker_cpu - own) / wall, 2) if wall > 0 else None,
        "loadavg_after": loadavg(),
        "output_tail": text.strip().splitlines()[-3:],
    }
    if profilers:
        res["profiles"] = {f"worker{i}": p.summary() for i, p in enumerate(profilers)}
    errors = [f"fleet exited with {proc.returncode}: {text[-500:]}"] if proc.returncode != 0 else []
    if sent is None:
        errors.append("no 'events sent' line in the fleet's output")
    elif acked < sent:
        errors.append(f"{sent - acked} of {sent} sent events not in the store")
    return res | ({"error": "; ".join(errors)} if errors else {})


def run(args: argparse.Namespace) -> dict[str, Any]:
    from sensors.layout import ensure_layout

    duration = dict(args.sizes)["duration"]
    workers_list = [1] if args.smoke else [int(w) for w in args.workers.split(",") if w.strip()]
    reps = max(1, args.reps)
    config = {"sensors": SENSORS, "simulated_s": duration, "start": args.start, "partitions": PARTITIONS}
    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    doc = document("fleet", args, config | {"workers": workers_list, "formats": formats, "reps": reps})
    doc["runs"] = []
    with tempfile.TemporaryDirectory(prefix="sftraffic-bench-fleet-") as tmp, Processes() as running:
        broker = running.start(services.broker(Path(tmp)))
        ensure_layout(broker.bootstrap, partitions=PARTITIONS)
        fmt_args: dict[str, tuple[str, ...]] = {"json": ()}
        if "avro" in formats:  # the events as Avro, schemas in sftraffic registry
            from deploy.local.registry import RegistryProcess

            registry = running.start(RegistryProcess(broker.bootstrap, log=Path(tmp) / "registry.log"))
            fmt_args["avro"] = ("--format", "avro", "--registry", registry.url)
        for workers in workers_list:
            for rep in range(reps):  # the formats alternate: A B, B A, A B ...
                for fmt in formats if rep % 2 == 0 else formats[::-1]:
                    log(
                        f"fleet of {SENSORS:,} sensors, {workers} worker(s), {fmt}, "
                        f"{duration:.0f} simulated s (repetition {rep + 1}/{reps})"
                    )
                    profile = Path(args.profile) if args.profile else None
                    res = measure_fleet(
                        broker.bootstrap, broker.pid, workers, duration, args.start, profile, fmt_args[fmt]
                    )
                    res["rep"] = rep + 1
                    doc["runs"].append(res)
                    if res.get("error"):
                        doc["errors"].append(f"workers={workers} {fmt}: {res['error']}")
    doc["medians"] = {  # per workers and format, over the repetitions
        f"{w} {f}": {
            k: median(r[k] for r in doc["runs"] if r["workers"] == w and r["format"] == f)
            for k in ("steady_events_s", "fleet_cpu_us_per_event")
        }
        for w in workers_list
        for f in formats
    }
    one = {f: doc["medians"].get(f"1 {f}", {}).get("steady_events_s") for f in formats}
    first = one[formats[0]] if formats else None
    doc["goals"] = [
        goal("fleet, 1 process, 10k sensors: events/s acknowledged", first, GOAL_EVENTS_S, "events/s", True)
    ]
    if one.get("avro") and one.get("json"):
        ratio = round(one["avro"] / one["json"], 2)
        doc["goals"].append(
            goal("fleet events/s, Avro / JSON (1 process, medians)", ratio, GOAL_AVRO_RATIO, "x", True)
        )
        cpu = {f: doc["medians"]["1 " + f]["fleet_cpu_us_per_event"] for f in ("json", "avro")}
        if cpu["avro"] and cpu["json"]:  # what the machine's other work moves least
            doc["avro_json_cpu_per_event"] = round(cpu["avro"] / cpu["json"], 2)
    return doc


if __name__ == "__main__":
    from load.scenarios import main

    raise SystemExit(main("fleet"))
