"""``sftraffic sensors``: run the simulated fleet against a store (direct or over MQTT)."""

from __future__ import annotations

import argparse
import datetime as dt
import multiprocessing as mp
import signal
import sys
import time
from typing import Any

from framework.cli.common import add_bootstrap, ensure_reachable, require_modules

require_modules("numpy", "msgspec", "paho")  # the fleet, its encoder, MQTT devices


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "sensors",
        help="run the simulated San Francisco sensor fleet",
        description="Simulated pavement sensors, weather stations and infrastructure of San Francisco.",
    )
    add_bootstrap(p)
    p.add_argument("--sensors", type=int, default=10_000, help="fleet size (default 10000)")
    p.add_argument(
        "--via", choices=["kafka", "mqtt"], default="kafka", help="publish directly to the store or over MQTT"
    )
    p.add_argument("--mqtt", default="127.0.0.1:1883", metavar="HOST:PORT", help="MQTT broker for --via mqtt")
    p.add_argument(
        "--speed", type=float, default=1.0, help="simulated seconds per wall second (0 = as fast as possible)"
    )
    p.add_argument(
        "--start", help="simulated start, ISO 8601 (default: now); e.g. 2026-11-18T00:00 replays that day"
    )
    p.add_argument("--duration", type=float, help="simulated seconds to run (default: until Ctrl-C)")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument(
        "--rain-share", type=float, default=0.25, help="share of time it rains (weather ground truth)"
    )
    p.add_argument(
        "--volume-scale", type=float, default=1.0, help="scale traffic volumes (e.g. 0.2: a light day)"
    )
    p.add_argument("--partitions", type=int, default=6, help="partitions of topics created if missing")
    p.add_argument("--workers", type=int, default=1, help="processes sharing the fleet (direct mode)")
    p.add_argument("--prefix", default="", help="prefix of pavement-sensor ids (keeps two fleets apart)")
    p.add_argument(
        "--no-infrastructure", action="store_true", help="pavement sensors only (no weather/infra)"
    )
    p.add_argument("--quiet", action="store_true", help="no live status line")
    p.set_defaults(func=run)


def parse_start(text: str | None) -> int:
    if not text:
        return int(time.time() * 1000)
    when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone(dt.timedelta(hours=-8)))  # San Francisco (PST)
    return int(when.timestamp() * 1000)


def _worker(args: argparse.Namespace, index: int, counter: Any, stop: Any) -> None:
    from sensors.fleet import SensorFleet
    from sensors.model import ModelConfig
    from sensors.publish import KafkaSink, MqttSink

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    cfg = ModelConfig(seed=args.seed, rain_share=args.rain_share, volume_scale=args.volume_scale)
    fleet = SensorFleet(
        args.sensors,
        cfg,
        shard=(index, args.workers),
        prefix=args.prefix,
        infrastructure=not args.no_infrastructure,
    )
    if args.via == "mqtt":
        host, _, port = args.mqtt.rpartition(":")
        sink: Any = MqttSink(host, int(port), client_prefix=f"sftraffic-devices-{index}")
    else:
        sink = KafkaSink(args.bootstrap, client_id=f"sftraffic-sensors-{index}")

    def tick(st: Any) -> None:
        with counter.get_lock():
            counter.value += st.events - tick.last  # type: ignore[attr-defined]
        tick.last = st.events  # type: ignore[attr-defined]

    tick.last = 0  # type: ignore[attr-defined]
    fleet.run(sink, parse_start(args.start), args.duration, args.speed, stop=stop.is_set, on_second=tick)
    left = sink.flush(60)
    if left:
        print(f"sftraffic sensors: {left} events not acknowledged at exit", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from sensors.layout import ensure_layout

    console = Console(stderr=True)
    ensure_reachable(args.bootstrap)
    ensure_layout(args.bootstrap, partitions=args.partitions)
    ctx = mp.get_context("spawn")
    counter = ctx.Value("q", 0)
    stop = ctx.Event()
    procs = [
        ctx.Process(target=_worker, args=(args, i, counter, stop), daemon=True) for i in range(args.workers)
    ]
    for p in procs:
        p.start()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    t0 = time.monotonic()
    last = (t0, 0)
    while any(p.is_alive() for p in procs):
        time.sleep(1.0)
        now = time.monotonic()
        n = counter.value
        rate = (n - last[1]) / max(now - last[0], 1e-6)
        last = (now, n)
        if not args.quiet:
            console.print(f"[dim]sensors[/dim] {n:,} events sent, {rate:,.0f}/s via {args.via}", end="\r")
    for p in procs:
        p.join()
    console.print(f"sensors: {counter.value:,} events sent in {time.monotonic() - t0:.1f}s")
    return 0 if all(p.exitcode == 0 for p in procs) else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    add_parser(sub)
    a = parser.parse_args(["sensors", *sys.argv[1:]])
    sys.exit(a.func(a))
