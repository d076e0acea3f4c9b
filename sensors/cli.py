"""``sftraffic sensors``: run the simulated fleet against a store (direct or over MQTT).

Live (the default): event time is the wall clock. A replay: ``--from``/``--until`` (or
``--duration``) pick the simulated period and ``--speed`` how fast it runs, ``max`` as fast as
the store takes it; e.g. the last six hours as a backfill, then exit::

    sftraffic sensors --from -6h --until now --speed max --sample 20

``--catch-up`` ties the simulated clock to the wall clock: from a past ``--from`` the fleet
runs as fast as it can until it reaches now, then live (``sftraffic up`` continues a backfill
this way). ``--progress`` prints a machine-readable line a second (events, simulated time).

The store: ``-b/--bootstrap-server``, ``--command-config FILE`` and ``-X KEY=VALUE`` as every
client command (:mod:`framework.cli.connection`); the worker processes get the same settings.
"""

from __future__ import annotations

import argparse
import datetime as dt
import multiprocessing as mp
import re
import signal
import ssl
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from framework.cli.common import add_registry, parse_kv, require_modules
from framework.cli.connection import add_connection, configure_process
from framework.errors import StoreError

if TYPE_CHECKING:
    from sensors.fleet import SensorFleet

require_modules("numpy", "msgspec", "paho")  # the fleet, its encoder, MQTT devices

PROGRESS = "sensors progress:"  # the line --progress prints (sftraffic up reads it)
DEVICES_PER_PROCESS = 200  # devices logging in as themselves (--mqtt-credentials): see run


EPILOG = """\
example (the last six simulated hours as fast as the store takes them, then exit):
  sftraffic sensors -b 127.0.0.1:9092 --from -6h --until now --speed max --sample 20"""


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "sensors",
        help="run the simulated San Francisco sensor fleet",
        description="Simulated pavement sensors, weather stations and infrastructure of San Francisco, "
        "publishing to the store directly or over MQTT; live, or a replay of a simulated period.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_connection(p)
    _add_publish_options(p)
    _add_time_options(p)
    _add_model_options(p)
    _add_run_options(p)
    add_registry(p)
    # `--from -6h`: argparse takes "-6h" for an option unless it looks like a negative number
    p._negative_number_matcher = re.compile(r"^-\d+(\.\d+)?[a-z]*$")
    p.set_defaults(func=run)


def _add_publish_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sensors", type=int, default=10_000, help="fleet size (default 10000)")
    p.add_argument(
        "--via", choices=["kafka", "mqtt"], default="kafka", help="publish directly to the store or over MQTT"
    )
    p.add_argument("--mqtt", default="127.0.0.1:1883", metavar="HOST:PORT", help="MQTT broker for --via mqtt")
    p.add_argument(
        "--mqtt-credentials",
        metavar="FILE",
        help="--via mqtt: DEVICE:PASSWORD lines; each device then logs in as itself on its own connection",
    )
    p.add_argument("--mqtt-ca", metavar="FILE", help="--via mqtt: TLS, trusting this CA (PEM)")


def _add_time_options(p: argparse.ArgumentParser) -> None:
    """The simulated period and how fast it runs."""
    p.add_argument(
        "--speed",
        type=parse_speed,
        default=1.0,
        help="simulated seconds per wall second (0 or max = as fast as possible)",
    )
    p.add_argument(
        "--start",
        "--from",
        dest="start",
        help="simulated start: ISO 8601 (San Francisco time when no zone), epoch ms, now, or relative "
        "to now such as -6h (default: now); e.g. 2026-11-18T00:00 replays that day",
    )
    p.add_argument("--until", help="simulated end (exclusive), the same forms as --from; or --duration")
    p.add_argument("--duration", type=float, help="simulated seconds to run (default: until Ctrl-C)")
    p.add_argument(
        "--catch-up",
        action="store_true",
        help="simulated time = wall clock: a past --from is generated at full speed until now, then live",
    )
    p.add_argument(
        "--tick",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="simulated seconds per step of the model (default 1; a replay may take 5: the same "
        "events, each step's vehicles spread over it, a fifth of the per-step work)",
    )


def _add_model_options(p: argparse.ArgumentParser) -> None:
    """What the model simulates (sensors.model)."""
    p.add_argument("--seed", type=int, default=42)
    p.add_argument(
        "--rain-share", type=float, default=0.25, help="share of time it rains (weather ground truth)"
    )
    p.add_argument(
        "--volume-scale", type=float, default=1.0, help="scale traffic volumes (e.g. 0.2: a light day)"
    )
    p.add_argument(
        "--showcase",
        metavar="FROM,UNTIL",
        help="a showery spell with coastal fog banks over this period (every weather regime within "
        "hours; sensors.model.showcase_weather); FROM and UNTIL as --from",
    )
    p.add_argument(
        "--sample",
        type=int,
        default=1,
        help="simulate every N-th pavement sensor of the fleet (a lighter replay: 1/N of the vehicles)",
    )


def _add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--partitions", type=int, default=6, help="partitions of topics created if missing")
    p.add_argument("--workers", type=int, default=1, help="processes sharing the fleet (direct mode)")
    p.add_argument("--prefix", default="", help="prefix of pavement-sensor ids (keeps two fleets apart)")
    p.add_argument(
        "--no-infrastructure", action="store_true", help="pavement sensors only (no weather/infra)"
    )
    p.add_argument(
        "--no-assets", action="store_true", help="no infrastructure assets (weather stations still report)"
    )
    p.add_argument(
        "--seq-state",
        type=Path,
        metavar="FILE",
        help="go on from the sequence numbers saved in FILE, and save them there at exit",
    )
    p.add_argument("--quiet", action="store_true", help="no live status line")
    p.add_argument("--progress", action="store_true", help=f"print '{PROGRESS} ...' lines (for scripts)")
    p.add_argument(
        "--format",
        choices=["json", "avro"],
        default="json",
        help="value format (--via kafka): avro is Confluent's wire format with schemas in --registry",
    )


def parse_speed(text: str) -> float:
    if text.strip().lower() in ("max", "inf"):
        return 0.0
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"speed {text!r}: a number, or max") from None
    if v < 0:
        raise argparse.ArgumentTypeError("speed must be 0 (max) or more")
    return v


def parse_when(text: str | None, now_ms: int | None = None) -> int:
    """A simulated instant in epoch ms: ISO 8601 (SF time when no zone), epoch ms, ``now``, or
    a duration relative to now (``-6h``, ``+90s``)."""
    from framework.config import parse_duration_ms

    now = int(time.time() * 1000) if now_ms is None else now_ms
    s = (text or "now").strip()
    if s == "now":
        return now
    if s[0] in "+-" and not s[1:].isdigit():
        delta = parse_duration_ms(s[1:])
        return now - delta if s[0] == "-" else now + delta
    if s.lstrip("-").isdigit():
        return int(s)
    when = dt.datetime.fromisoformat(s.replace("Z", "+00:00"))
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone(dt.timedelta(hours=-8)))  # San Francisco (PST)
    return int(when.timestamp() * 1000)


def parse_start(text: str | None) -> int:
    return parse_when(text)


def _period(args: argparse.Namespace) -> tuple[int, float | None]:
    """(start ms, simulated seconds or None), from --from/--until/--duration."""
    _tick_ms(args.tick)  # refuse a bad one before starting anything
    now = int(time.time() * 1000)
    start = parse_when(args.start, now)
    if args.until is not None:
        if args.duration is not None:
            raise StoreError("give --until or --duration, not both")
        end = parse_when(args.until, now)
        if end < start:
            raise StoreError(f"--until ({end}) is before --from ({start})")
        return start, (end - start) / 1000
    return start, args.duration


def _tick_ms(seconds: float) -> int:
    """A tick that divides a minute (weather stations report on the minute)."""
    ms = round(seconds * 1000)
    if ms <= 0 or 60_000 % ms:
        raise StoreError(f"--tick {seconds}: use a divisor of 60 s (1, 2, 5, 10 ...)")
    return ms


def _showcase(text: str | None) -> tuple[int, int] | None:
    if not text:
        return None
    a, sep, b = text.partition(",")
    if not sep:
        raise StoreError("--showcase FROM,UNTIL")
    now = int(time.time() * 1000)
    return parse_when(a, now), parse_when(b, now)


def _worker(
    args: argparse.Namespace,
    bootstrap: str,
    index: int,
    start: int,
    duration: float | None,
    counter: Any,
    sim: Any,
    stop: Any,
) -> None:
    """One worker process of the fleet; a StoreError (a device refused ...) ends it with one line.
    It inherits the settings file ($SFTRAFFIC_CLIENT_CONFIG); -X settings are set here again."""
    from framework.client.security import configure

    try:
        configure(None, parse_kv(args.client_config, "-X"))
        _work(args, bootstrap, index, start, duration, counter, sim, stop)
    except StoreError as exc:
        print(f"sftraffic sensors: {exc.message}", file=sys.stderr, flush=True)
        sys.exit(2)


def _work(
    args: argparse.Namespace,
    bootstrap: str,
    index: int,
    start: int,
    duration: float | None,
    counter: Any,
    sim: Any,
    stop: Any,
) -> None:
    from sensors.fleet import save_seq_state

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the parent sets stop, then the fleet flushes
    fleet = _fleet(args, index)
    sink = _sink(args, bootstrap, index, fleet)
    tick_ms = _tick_ms(args.tick)
    sent = 0  # the events already added to the shared counter

    def tick(st: Any) -> None:
        nonlocal sent
        with counter.get_lock():
            counter.value += st.events - sent
        sent = st.events
        sim[index] = st.sim_ms + tick_ms

    fleet.run(
        sink,
        start,
        duration,
        args.speed,
        stop=stop.is_set,
        on_second=tick,
        tick_ms=tick_ms,
        catch_up=args.catch_up,
    )
    left = sink.flush(60)
    if args.seq_state is not None:
        path = args.seq_state
        if args.workers > 1:
            path = path.with_name(f"{path.name}.{index}")
        save_seq_state(path, fleet.seq_state())
    if left:
        print(f"sftraffic sensors: {left} events not acknowledged at exit", file=sys.stderr)
        sys.exit(1)


def _fleet(args: argparse.Namespace, index: int) -> SensorFleet:
    """Worker ``index``'s share of the fleet (every --sample-th sensor of its shard)."""
    from sensors.fleet import SensorFleet, load_seq_state
    from sensors.model import ModelConfig

    cfg = ModelConfig(
        seed=args.seed,
        rain_share=args.rain_share,
        volume_scale=args.volume_scale,
        showcase=_showcase(args.showcase),
    )
    k = max(1, args.sample)
    fleet = SensorFleet(
        args.sensors,
        cfg,
        shard=(index * k, args.workers * k),
        prefix=args.prefix,
        infrastructure=not args.no_infrastructure,
        assets=not args.no_assets,
    )
    if args.seq_state is not None:
        fleet.restore_seq(load_seq_state(args.seq_state))
    return fleet


def _sink(args: argparse.Namespace, bootstrap: str, index: int, fleet: SensorFleet) -> Any:
    """Where worker ``index`` publishes: the store (JSON or Avro), or the MQTT broker (with each
    device logged in as itself when --mqtt-credentials names them)."""
    from sensors.publish import KafkaSink, MqttSink, read_credentials

    if args.via == "mqtt":
        host, _, port = args.mqtt.rpartition(":")
        creds = read_credentials(args.mqtt_credentials) if args.mqtt_credentials else None
        tls = ssl.create_default_context(cafile=args.mqtt_ca) if args.mqtt_ca else None
        sink = MqttSink(
            host,
            int(port),
            client_prefix=f"sftraffic-devices-{index}{args.prefix}",
            credentials=creds,
            tls=tls,
        )
        if creds is not None:
            sink.connect_devices(fleet.sensor_ids)
        return sink
    encoders = None
    if args.format == "avro":
        from sensors.avro import AvroEncoder

        encoders = AvroEncoder(args.registry).by_topic
    return KafkaSink(bootstrap, client_id=f"sftraffic-sensors-{index}", encoders=encoders)


def _preflight(args: argparse.Namespace) -> None:
    """What can be refused before anything starts, in one line: Avro over MQTT, a registry that
    does not take the schemas, a bad credentials file. With devices logging in as themselves,
    enough workers for their connections."""
    if args.format == "avro" and args.via == "mqtt":
        raise StoreError(
            "devices publish JSON over MQTT; the gateway converts it (sftraffic gateway --format avro)"
        )
    if args.format == "avro":  # the schemas registered before any worker starts: one line if not
        import requests

        from sensors.avro import RegistryError, register_all, split_url

        try:
            register_all(args.registry)
        except (requests.RequestException, OSError, RegistryError) as exc:
            where = split_url(args.registry)[0]
            raise StoreError(f"schema registry {where}: {exc}") from None
    if args.mqtt_credentials:
        from sensors.publish import read_credentials

        read_credentials(args.mqtt_credentials)  # a bad file: one line, before anything starts
        if args.via == "mqtt":
            # one connection (socket, socket pair, paho thread) per device, and paho's loop uses
            # select(), which takes no file descriptor above 1023: at most this many a process
            need = -(-args.sensors // max(1, args.sample) // DEVICES_PER_PROCESS)
            args.workers = max(args.workers, need)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from sensors.layout import ensure_layout

    console = Console(stderr=True)
    start, duration = _period(args)
    conn = configure_process(args)  # the worker processes' environment too
    _preflight(args)
    conn.check()  # unreachable, a refused password: one line before any worker starts
    ensure_layout(conn.bootstrap, partitions=args.partitions)
    _publish_truth(args, conn.bootstrap)
    ctx = mp.get_context("spawn")
    counter = ctx.Value("q", 0)
    sim = ctx.Array("q", [start] * args.workers)
    stop = ctx.Event()
    procs = [
        ctx.Process(
            target=_worker, args=(args, conn.bootstrap, i, start, duration, counter, sim, stop), daemon=True
        )
        for i in range(args.workers)
    ]
    for p in procs:
        p.start()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    t0 = time.monotonic()
    _report_while_running(args, procs, counter, sim, console, t0)
    for p in procs:
        p.join()
    if args.seq_state is not None and args.workers > 1:
        _merge_seq_state(args.seq_state)
    took = time.monotonic() - t0
    n = counter.value
    if args.progress:
        print(f"{PROGRESS} events={n} sim_ms={min(sim[:])} rate={n / max(took, 1e-6):.0f} done", flush=True)
    console.print(f"sensors: {n:,} events sent in {took:.1f}s ({n / max(took, 1e-6):,.0f}/s)")
    return 0 if all(p.exitcode == 0 for p in procs) else 1


def _report_while_running(
    args: argparse.Namespace, procs: list[Any], counter: Any, sim: Any, console: Any, t0: float
) -> None:
    """A status line (and with --progress a machine-readable one) a second while workers run."""
    last = (t0, 0)
    while any(p.is_alive() for p in procs):
        time.sleep(1.0)
        now = time.monotonic()
        n = counter.value
        rate = (n - last[1]) / max(now - last[0], 1e-6)
        last = (now, n)
        if args.progress:
            print(f"{PROGRESS} events={n} sim_ms={min(sim[:])} rate={rate:.0f}", flush=True)
        if not args.quiet:
            console.print(f"[dim]sensors[/dim] {n:,} events sent, {rate:,.0f}/s via {args.via}", end="\r")


def _merge_seq_state(path: Path) -> None:
    """Fold the workers' ``path.<i>`` files into ``path``."""
    from sensors.fleet import load_seq_state, save_seq_state

    merged = load_seq_state(path)
    save_seq_state(path, merged)
    for f in path.parent.glob(path.name + ".*"):
        if f.name.removeprefix(path.name + ".").isdigit():
            f.unlink(missing_ok=True)


def _publish_truth(args: argparse.Namespace, bootstrap: str) -> None:
    """Declare the weather effects this fleet simulates (``sensors.ground_truth``)."""
    from sensors import ground_truth
    from sensors.model import ModelConfig

    try:
        ground_truth.publish_model(bootstrap, ModelConfig(seed=args.seed, rain_share=args.rain_share))
    except Exception as exc:  # the fleet does not depend on it
        print(f"sftraffic sensors: ground truth not published: {exc}", file=sys.stderr)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    add_parser(sub)
    a = parser.parse_args(["sensors", *sys.argv[1:]])
    sys.exit(a.func(a))
