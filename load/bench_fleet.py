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

Goal (from the issues): one process with 10,000 sensors >= 100,000 events/s acknowledged.

Usage::

    python -m load.bench_fleet [--quick | --smoke] [--json FILE] [--profile DIR]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from load.bench_groups import (
    Profiler,
    bench_main,
    goal,
    loadavg,
    machine,
    machine_busy_seconds,
    own_cpu,
    start_broker,
)
from load.peers import proc_cpu_seconds, quiet_logger

SENSORS = 10_000
PARTITIONS = 6
GOAL_EVENTS_S = 100_000
START = "2026-11-18T07:30"  # a Wednesday's morning rush hour, PST
TOPICS = ("traffic", "weather_conditions", "infrastructure")
SENT_RE = re.compile(r"sensors: ([\d,]+) events sent in ([\d.]+)s")


class OffsetWatcher(threading.Thread):
    """Samples (monotonic time, sum of end offsets) of the fleet's topics until stopped."""

    def __init__(self, bootstrap: str, topics: list[str], partitions: int, interval: float = 0.25) -> None:
        super().__init__(daemon=True, name="offset-watcher")
        from confluent_kafka import Consumer, TopicPartition

        self.consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "bench-fleet-watch", "logger": quiet_logger()}
        )
        self.tps = [TopicPartition(t, p) for t in topics for p in range(partitions)]
        self.interval = interval
        self.samples: list[tuple[float, int]] = []
        self.halt = threading.Event()

    def end_offsets(self) -> int:
        return sum(self.consumer.get_watermark_offsets(tp, timeout=10, cached=False)[1] for tp in self.tps)

    def run(self) -> None:
        while not self.halt.is_set():
            t = time.monotonic()
            self.samples.append((t, self.end_offsets()))
            self.halt.wait(max(0.0, self.interval - (time.monotonic() - t)))

    def finish(self) -> int:
        """Stop sampling; returns the end offsets now."""
        self.halt.set()
        self.join(30)
        try:
            return self.end_offsets()
        finally:
            self.consumer.close()


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _descendants(pid: int) -> list[int]:
    out: list[int] = []
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                kids = Path(f"/proc/{p}/task/{task}/children").read_text().split()
                out += [int(k) for k in kids]
                todo += [int(k) for k in kids]
        except OSError:
            continue
    return out


def _workers(pid: int) -> list[int]:
    """The fleet's worker processes (spawned children running ``spawn_main``, not the
    multiprocessing resource tracker)."""
    out = []
    for kid in _descendants(pid):
        try:
            cmdline = Path(f"/proc/{kid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"spawn_main" in cmdline and b"resource_tracker" not in cmdline:
            out.append(kid)
    return out


def fleet_command(bootstrap: str, workers: int, duration: float, start: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "framework.cli.main",
        "sensors",
        "--bootstrap",
        bootstrap,
        "--via",
        "kafka",
        "--sensors",
        str(SENSORS),
        "--speed",
        "0",
        "--start",
        start,
        "--duration",
        str(duration),
        "--partitions",
        str(PARTITIONS),
        "--workers",
        str(workers),
        "--quiet",
    ]


def measure_fleet(
    bootstrap: str,
    broker_pid: int,
    workers: int,
    duration: float,
    *,
    start: str = START,
    profile_dir: Path | None = None,
    timeout: float = 900.0,
) -> dict[str, Any]:
    """Run the fleet command once; returns its figures (see the module docstring)."""
    topics = [f"traffic_monitoring.{t}" for t in TOPICS]
    watch = OffsetWatcher(bootstrap, topics, PARTITIONS)
    base = watch.end_offsets()
    cmd = fleet_command(bootstrap, workers, duration, start)
    cpu_children0 = _children_cpu()
    broker0 = proc_cpu_seconds(broker_pid)
    busy0, own0 = machine_busy_seconds(), own_cpu()
    watch.start()
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    profilers: list[Profiler] = []
    if profile_dir is not None:
        # once the workers have built their fleet and are producing
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and proc.poll() is None:
            if watch.samples and watch.samples[-1][1] > base:
                break
            time.sleep(0.1)
        for i, pid in enumerate(_workers(proc.pid)):
            out = profile_dir / f"fleet-w{workers}-worker{i}.txt"
            profilers.append(Profiler(pid, 8, out, focus=("sensors/", "msgspec", "numpy")))
    try:
        out_text, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)
        out_text, _ = proc.communicate(timeout=60)
    wall = time.monotonic() - t0
    fleet_cpu = _children_cpu() - cpu_children0
    busy, own = machine_busy_seconds() - busy0, own_cpu() - own0
    final = watch.finish()
    broker_cpu = proc_cpu_seconds(broker_pid) - broker0
    text = out_text.decode(errors="replace")
    m = SENT_RE.search(text)
    sent = int(m.group(1).replace(",", "")) if m else None
    acked = final - base
    samples = [(t, n - base) for t, n in watch.samples] + [(time.monotonic(), acked)]
    moving = [i for i in range(1, len(samples)) if samples[i][1] > samples[i - 1][1]]
    steady = None
    steady_window = None
    if len(moving) >= 2:
        # from the first sample that saw events to the last sample that saw new ones
        a, b = samples[moving[0]], samples[moving[-1]]
        if b[0] > a[0]:
            steady = (b[1] - a[1]) / (b[0] - a[0])
            steady_window = (round(a[0] - t0, 2), round(b[0] - t0, 2))
    res: dict[str, Any] = {
        "workers": workers,
        "sensors": SENSORS,
        "simulated_s": duration,
        "command": " ".join(cmd[1:]),
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
    errors = []
    if proc.returncode != 0:
        errors.append(f"fleet exited with {proc.returncode}: {text[-500:]}")
    if sent is None:
        errors.append("no 'events sent' line in the fleet's output")
    elif acked < sent:
        errors.append(f"{sent - acked} of {sent} sent events not in the store")
    if errors:
        res["error"] = "; ".join(errors)
    return res


def run(args: argparse.Namespace, console: Console) -> dict[str, Any]:
    from sensors.layout import ensure_layout

    duration = args.duration or (30.0 if args.smoke else 300.0 if args.quick else 1800.0)
    workers_list = [1] if args.smoke else [1, 2]
    doc: dict[str, Any] = {
        "benchmark": "fleet",
        "machine": machine("load.bench_fleet"),
        "config": {
            "sensors": SENSORS,
            "simulated_s": duration,
            "start": args.start,
            "partitions": PARTITIONS,
            "workers": workers_list,
            "mode": "smoke" if args.smoke else "quick" if args.quick else "full",
        },
        "runs": [],
        "errors": [],
    }
    with tempfile.TemporaryDirectory(prefix="sftraffic-bench-fleet-") as tmp:
        broker = start_broker(Path(tmp))
        try:
            ensure_layout(broker.bootstrap, partitions=PARTITIONS)
            for workers in workers_list:
                console.print(
                    f"fleet of {SENSORS:,} sensors, {workers} worker(s), {duration:.0f} simulated s ..."
                )
                res = measure_fleet(
                    broker.bootstrap,
                    broker.pid,
                    workers,
                    duration,
                    start=args.start,
                    profile_dir=Path(args.profile) if args.profile else None,
                )
                doc["runs"].append(res)
                if res.get("error"):
                    doc["errors"].append(f"workers={workers}: {res['error']}")
        finally:
            broker.stop()
    one = next((r for r in doc["runs"] if r["workers"] == 1), None)
    doc["goals"] = [
        goal(
            "fleet, 1 process, 10k sensors: events/s acknowledged",
            one["steady_events_s"] if one else None,
            GOAL_EVENTS_S,
            "events/s",
            True,
        )
    ]
    return doc


def render(doc: dict[str, Any], console: Console) -> None:
    m = doc["machine"]
    t = Table(
        title=f"sensor fleet --via kafka — {m['cpu_model']}, {m['cores']} cores, load {m['loadavg_at_start']}"
    )
    for col in (
        "workers",
        "acked events",
        "steady events/s",
        "wall events/s",
        "fleet CPU",
        "broker CPU",
        "note",
    ):
        t.add_column(col, justify="left" if col == "note" else "right")
    for r in doc["runs"]:
        t.add_row(
            str(r["workers"]),
            f"{r['acknowledged']:,}",
            f"{r['steady_events_s'] or 0:,}",
            f"{r['wall_events_s'] or 0:,}",
            f"{r['fleet_cores']} cores, {r['fleet_cpu_us_per_event']} µs/ev",
            f"{r['broker_cores']} cores, {r['broker_cpu_us_per_event']} µs/ev",
            r.get("error")
            or f"{r['simulated_s']:.0f} sim s in {r['wall_s']} s (x{r['simulated_speedup']}); "
            f"other processes {r['other_processes_cores']} cores",
        )
    console.print(t)
    for g in doc["goals"]:
        verdict = {True: "[green]pass[/green]", False: "[red]FAIL[/red]", None: "[yellow]n/a[/yellow]"}
        console.print(f"{verdict[g['passed']]} {g['name']}: {g['measured']} >= {g['target']}")
    for r in doc["runs"]:
        for name, prof in (r.get("profiles") or {}).items():
            console.print(
                f"[dim]py-spy workers={r['workers']} {name}: "
                + ", ".join(f"{f} {p}%" for f, p in prof.get("self", [])[:6])
            )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m load.bench_fleet", description=__doc__.split("\n\n")[0])
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="300 simulated seconds per run")
    size.add_argument("--smoke", action="store_true", help="tiny: 30 simulated seconds, one worker (tests)")
    p.add_argument("--duration", type=float, help="simulated seconds per run (default 1800)")
    p.add_argument("--start", default=START, help=f"simulated start (default {START}, rush hour)")
    p.add_argument("--profile", metavar="DIR", help="py-spy the fleet workers for 8 s of each run")
    p.add_argument("--json", metavar="FILE", help="write the results as JSON")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    return bench_main(parse_args(argv), run, render)


if __name__ == "__main__":
    sys.exit(main())
