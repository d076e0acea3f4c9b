"""Sensor-fleet benchmark: events/s the direct fleet (``sftraffic sensors --via kafka``) gets
acknowledged by the store, with one worker process and with ``--workers 2``.

A fresh broker of ours runs on 127.0.0.1; the stream layout is created (``ensure_layout``, 6
partitions). The fleet is the real command, ``python -m framework.cli.main sensors --via kafka
--sensors 10000 --speed 0 --start <rush hour> --duration <simulated s> --quiet [--workers 2]``,
run as a subprocess: ``--speed 0`` replays simulated time as fast as the sink accepts, so the
clock never limits generation; the start is a weekday 07:30 PST, when the 10,000 pavement sensors
produce the most events per simulated second (~2,600). Its producer is the fleet's own
``KafkaSink`` (idempotent, acks=all, lz4, linger 20 ms, murmur2 on the sensor id).

What counts is what the store acknowledged: the end offsets of the traffic, weather and
infrastructure topics are polled (ListOffsets, every 0.25 s) while the fleet runs, and their
final sum (minus the sum before the run) is compared with the fleet's own "events sent" count.
Figures per run:

* ``steady_events_s``: acknowledged events between the first and the last sample in which the
  end offsets moved, divided by the time between them (the headline: start-up excluded);
* ``wall_events_s``: acknowledged events over the whole command, start-up (spawn, imports,
  fleet build, layout check) and final flush included;
* CPU: the fleet's processes (``RUSAGE_CHILDREN`` once the command was reaped: its main
  process and workers) and the broker's (/proc/PID/stat), per event and in cores.

Goal (from the issues): one process with 10,000 sensors >= 100,000 events/s acknowledged;
with ``--formats json,avro``, Avro's events/s >= 0.9x JSON's (issue 20). ``--reps N`` runs each
worker count N times with the formats alternating (A B, B A, ...) and takes medians;
``--workers 1`` skips the two-worker runs. The ratio of fleet CPU per event is reported too
(the machine's other work moves it least).

Usage::

    python -m load.bench_fleet [--quick | --smoke] [--json FILE] [--profile DIR]
    python -m load.bench_fleet --quick --formats json,avro --workers 1 --reps 3
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

from rich.console import Console

from load.harness import procfs, services
from load.harness.kafka import EndOffsets
from load.harness.profiler import Profiler
from load.harness.report import document, goal, loadavg, log, parser, print_goals, sized, table
from load.harness.runner import Processes, run_main
from load.harness.stats import median
from sensors.layout import topic

SENSORS = 10_000
PARTITIONS = 6
GOAL_EVENTS_S = 100_000
GOAL_AVRO_RATIO = 0.9  # issue 20: the fleet on Avro >= 0.9x its events/s on JSON
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
    args = [
        "--sensors",
        str(SENSORS),
        "--speed",
        "0",
        "--start",
        start,
        "--duration",
        str(duration),
        *fmt_args,
    ]
    proc = services.fleet(bootstrap, *args, *f"--partitions {PARTITIONS} --workers {workers} --quiet".split())
    cpu_children0, broker0 = procfs.own_cpu(children=True), procfs.cpu_seconds(broker_pid)
    busy0, own0 = procfs.machine_busy_seconds() or 0.0, procfs.own_cpu()
    watch.start()
    t0 = time.monotonic()
    proc.launch()
    profilers: list[Profiler] = []
    if profile_dir is not None:
        # once the workers have built their fleet and are producing
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and proc.alive():
            if watch.samples and watch.samples[-1][1] > base:
                break
            time.sleep(0.1)
        for i, pid in enumerate(_workers(proc.pid)):
            out = profile_dir / f"fleet-w{workers}-worker{i}.txt"
            profilers.append(Profiler(pid, out, 8, focus=("sensors/", "msgspec", "numpy")))
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
    moving = [i for i in range(1, len(samples)) if samples[i][1] > samples[i - 1][1]]
    steady = steady_window = None
    if len(moving) >= 2:
        # from the first sample that saw events to the last sample that saw new ones
        a, b = samples[moving[0]], samples[moving[-1]]
        if b[0] > a[0]:
            steady = (b[1] - a[1]) / (b[0] - a[0])
            steady_window = (round(a[0] - t0, 2), round(b[0] - t0, 2))
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

    duration = sized(args, {"duration": (1800.0, 300.0, 30.0)})["duration"]
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
        if "avro" in formats:  # the events as Avro, schemas in sftraffic registry (issue 20)
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


def render(doc: dict[str, Any], console: Console) -> None:
    m = doc["machine"]
    rows = [
        (
            f"{r['workers']} {r.get('format', 'json')}"
            + (f" #{r['rep']}" if doc["config"].get("reps", 1) > 1 else ""),
            f"{r['acknowledged']:,}",
            f"{r['steady_events_s'] or 0:,}",
            f"{r['wall_events_s'] or 0:,}",
            f"{r['fleet_cores']} cores, {r['fleet_cpu_us_per_event']} µs/ev",
            f"{r['broker_cores']} cores, {r['broker_cpu_us_per_event']} µs/ev",
            r.get("error")
            or f"{r['simulated_s']:.0f} sim s in {r['wall_s']} s (x{r['simulated_speedup']}); "
            f"other processes {r['other_processes_cores']} cores",
        )
        for r in doc["runs"]
    ]
    title = f"sensor fleet --via kafka — {m['cpu_model']}, {m['cores']} cores, load {m['loadavg_at_start']}"
    columns = ">workers, format|>acked events|>steady events/s|>wall events/s|>fleet CPU|>broker CPU|note"
    console.print(table(title, columns, *rows))
    if doc["config"].get("reps", 1) > 1:
        for key, m in doc.get("medians", {}).items():
            console.print(
                f"median {key}: {m['steady_events_s'] or 0:,.0f} events/s, "
                f"{m['fleet_cpu_us_per_event']} µs/ev"
            )
    if doc.get("avro_json_cpu_per_event"):
        console.print(
            f"fleet CPU per event, Avro / JSON (1 process, medians): {doc['avro_json_cpu_per_event']}"
        )
    print_goals(console, doc["goals"])
    for r in doc["runs"]:
        for name, prof in (r.get("profiles") or {}).items():
            top = ", ".join(f"{f} {p}%" for f, p in prof.get("self", [])[:6])
            console.print(f"[dim]py-spy workers={r['workers']} {name}: {top}")


def main(argv: list[str] | None = None) -> int:
    p = parser(
        "fleet",
        __doc__,
        "300 simulated seconds per run",
        "tiny: 30 simulated seconds, one worker (tests)",
        ("--duration", float, "simulated seconds per run (default 1800)"),
        ("--start", START, "simulated start (rush hour)"),
        ("--profile", str, "DIR: py-spy the fleet workers for 8 s of each run"),
        ("--formats", "json", "comma-separated value formats to run: json, avro (starts sftraffic registry)"),
        ("--workers", "1,2", "comma-separated worker counts to run"),
        ("--reps", 1, "repetitions per worker count, the formats alternating; figures are medians"),
    )
    args = p.parse_args(argv)
    return run_main(lambda: run(args), render, args.json, name="bench_fleet")


if __name__ == "__main__":
    raise SystemExit(main())
