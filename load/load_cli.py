"""``sftraffic load <scenario>``: locust load tests against the local system.

Scenarios (``load/locustfiles/<scenario>.py``): ``smoke`` (≤ 60 s; starts the services it needs
itself), ``steady``, ``rush-hour``, ``burst``. Without ``--start-services`` the non-smoke
scenarios target what ``sftraffic up`` runs (store 127.0.0.1:9092, Mosquitto :1883, dashboard
:8050); with it they start their own store, Mosquitto, gateway and dashboard on free ports in a
temporary folder, and ``burst`` then stops the store for a few seconds before the burst (a real
broker failure: the gateway parks messages on disk, producers retry).

Headless by default (locust's CSV and HTML reports and our ``summary.json`` go to
``--reports``); ``--web`` serves locust's UI on http://127.0.0.1:8089 instead. The exit code is
non-zero when any request failed (1), when an acknowledged message was never consumed (3), or
when the services could not start (2). Only 127.0.0.1 is ever targeted.

The store is given as to every client command (``-b/--bootstrap-server``; default
``$SFTRAFFIC_BOOTSTRAP``); the locust users speak PLAINTEXT to it (and plain MQTT), so security
settings (``--command-config``, ``-X``, ``$SFTRAFFIC_CLIENT_CONFIG``) are refused in one line.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

from framework.cli.common import require_modules
from framework.cli.connection import add_connection, connection
from framework.client.connection import CONFIG_ENV, LEGACY_CONFIG_ENV
from framework.errors import StoreError
from load.harness import services
from load.harness.report import stderr as console
from load.harness.report import table
from load.harness.runner import Processes, on_sigterm_interrupt

# locust and its device users (paho), and what smoke starts: the gateway (msgspec), the dashboard (dash)
require_modules("locust", "paho", "msgspec", "dash")

HERE = Path(__file__).resolve().parent / "locustfiles"
SCENARIOS = {
    "smoke": ("smoke.py", 30.0, 40),
    "steady": ("steady.py", 120.0, 100),
    "rush-hour": ("rush_hour.py", 180.0, 150),
    "burst": ("burst.py", 90.0, 150),
}


EPILOG = """\
example (the rush-hour shape against what `sftraffic up` runs, reports in ./load-reports):
  sftraffic load rush-hour -b 127.0.0.1:9092 --mqtt 127.0.0.1:1883 --dashboard http://127.0.0.1:8050"""


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "load",
        help="locust load tests: smoke, steady, rush-hour, burst",
        description="Locust load tests of the system: MQTT devices, direct producers and dashboard "
        "users; the per-request table and a ledger of every acknowledged message at the end.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("scenario", choices=sorted(SCENARIOS), help="the load shape to run")
    p.add_argument("--users", type=int, help="peak users (default: per scenario, 40-150)")
    p.add_argument("--duration", type=float, help="seconds of load (default: per scenario, 30-180)")
    p.add_argument("--rate", type=float, default=5.0, help="messages/s per device or producer user (5)")
    p.add_argument("--qos", type=int, choices=(0, 1), default=1, help="MQTT QoS of the device users (1)")
    add_connection(p)
    p.add_argument("--mqtt", default="127.0.0.1:1883", help="Mosquitto with a gateway (127.0.0.1:1883)")
    p.add_argument("--dashboard", default="http://127.0.0.1:8050", help="the dashboard URL")
    p.add_argument(
        "--start-services",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="start a private store, Mosquitto, gateway and dashboard (default: only for smoke)",
    )
    p.add_argument("--reports", help="folder for CSV/HTML/summary (default ./load-reports/<scenario>-<time>)")
    p.add_argument("--web", action="store_true", help="serve locust's web UI on 127.0.0.1:8089")
    p.set_defaults(func=run)


class Services(Processes):
    """A private store, Mosquitto, gateway and dashboard on free ports, as ``sftraffic up`` runs
    them; every one is stopped when the ``with`` block ends."""

    def __init__(self, root: Path) -> None:
        super().__init__()
        self.root = root

    def start_all(self) -> dict[str, str]:
        from deploy.local.mosquitto import MosquittoProcess
        from sensors.layout import ensure_layout
        from testing import BrokerProcess, free_port

        self.store = self.start(BrokerProcess(self.root / "store-1"), 60)
        console.print(f"[green]✓[/green] event store on {self.store.bootstrap}")
        mqtt = self.start(MosquittoProcess(self.root / "mosquitto", persistence=True), 30)
        console.print(f"[green]✓[/green] Mosquitto on {mqtt.address}")
        ensure_layout(self.store.bootstrap)
        self.start(services.gateway(self.store.bootstrap, mqtt.address, self.root, "gw-1"), 60)
        dash_port = free_port()
        self.start(services.dashboard(self.store.bootstrap, dash_port), 60)
        console.print("[green]✓[/green] gateway and dashboard")
        return {
            "bootstrap": self.store.bootstrap,
            "mqtt": mqtt.address,
            "dashboard": f"http://127.0.0.1:{dash_port}",
        }

    def pause_store(self, at: float, seconds: float, stop: threading.Event) -> threading.Thread:
        """SIGSTOP the store ``at`` seconds from now for ``seconds`` (a broker failure)."""

        def fail() -> None:
            if stop.wait(at):
                return
            console.print(f"[yellow]store stopped for {seconds:.0f}s (simulated broker failure)[/yellow]")
            self.store.signal(signal.SIGSTOP)
            try:
                stop.wait(seconds)
            finally:
                self.store.signal(signal.SIGCONT)
                console.print("[yellow]store resumed[/yellow]")

        t = threading.Thread(target=fail, daemon=True)
        t.start()
        return t


def locust_command(locustfile: Path, reports: Path, web: bool, host: str) -> list[str]:
    cmd = [sys.executable, "-m", "locust", "-f", str(locustfile), "--host", host, "--stop-timeout", "20"]
    if web:
        return [*cmd, "--web-host", "127.0.0.1", "--web-port", "8089"]
    prefix = reports / "locust"
    return [*cmd, "--headless", "--only-summary", "--csv", str(prefix), "--html", f"{prefix}.html"]


def run(args: argparse.Namespace) -> int:
    from testing import ManagedProcess, ProcessError

    file, default_duration, default_users = SCENARIOS[args.scenario]
    duration = args.duration or default_duration
    users = args.users or default_users
    start_services = args.start_services if args.start_services is not None else args.scenario == "smoke"
    if start_services:
        if args.bootstrap or args.command_config or args.client_config:
            raise StoreError(
                "--start-services (the default of smoke) starts a store of its own: the connection "
                "options (-b, --command-config, -X) go with --no-start-services"
            )
        # the private services speak PLAINTEXT, whatever settings file the shell names
        os.environ.update({CONFIG_ENV: "", LEGACY_CONFIG_ENV: ""})
    conn = connection(args)
    if conn.security():
        raise StoreError(
            "the locust users speak PLAINTEXT (and plain MQTT): a secured store is not supported "
            f"(--command-config, -X, ${CONFIG_ENV})"
        )
    if not start_services:
        conn.check()  # no store there: one line before locust starts
    stamp = time.strftime("%Y%m%d-%H%M%S")
    reports = Path(args.reports or f"load-reports/{args.scenario}-{stamp}").resolve()
    reports.mkdir(parents=True, exist_ok=True)
    targets = {"bootstrap": conn.bootstrap, "mqtt": args.mqtt, "dashboard": args.dashboard}
    stop = threading.Event()
    on_sigterm_interrupt()  # SIGTERM unwinds like Ctrl-C: the services are stopped
    try:
        with tempfile.TemporaryDirectory(prefix="sftraffic-load-") as tmp, Services(Path(tmp)) as svc:
            if start_services:
                targets = svc.start_all()
                if args.scenario == "burst":
                    svc.pause_store(max(1.0, duration / 3 - 8), 6.0, stop)
            # the locustfiles' configuration (load/locustfiles/common.py)
            env = {f"SFTRAFFIC_{k.upper()}": v for k, v in targets.items()}
            load = {"users": users, "duration": duration, "rate": args.rate, "qos": args.qos}
            env |= {f"SFTRAFFIC_LOAD_{k.upper()}": str(v) for k, v in load.items()}
            env["SFTRAFFIC_LOAD_SUMMARY"] = str(reports / "summary.json")
            cmd = locust_command(HERE / file, reports, args.web, targets["dashboard"])
            console.print(
                f"[bold]{args.scenario}[/bold]: {users} users, {duration:.0f}s, {args.rate:g} msgs/s each, "
                f"store {targets['bootstrap']}, MQTT {targets['mqtt']}, dashboard {targets['dashboard']}"
            )
            if args.web:
                console.print("locust UI: http://127.0.0.1:8089 (Ctrl-C to stop)")
            locust = svc.add(ManagedProcess("locust", cmd, env=env, log=reports / "locust.log", grace=60.0))
            locust.launch()
            assert locust.proc is not None
            try:
                locust.proc.wait()
            except KeyboardInterrupt:
                locust.signal(signal.SIGINT)  # locust writes its reports on Ctrl-C
                locust.proc.wait()
            rc = locust.stop()  # reaped, its output all in locust.log
            stop.set()
    except (ProcessError, StoreError) as exc:
        console.print(f"[red]sftraffic load: {getattr(exc, 'message', exc)}[/red]")
        return 2
    finally:
        stop.set()
    return report(reports, rc)


def report(reports: Path, rc: int) -> int:
    """Print the per-request table and the ledger; the exit code is locust's."""
    import csv

    stats = reports / "locust_stats.csv"
    keys = ("Type", "Name", "Request Count", "Failure Count", "50%", "95%", "99%")
    with open(stats if stats.exists() else os.devnull, newline="") as fh:
        rows = [[*(row[k] for k in keys), f"{float(row['Requests/s']):.1f}"] for row in csv.DictReader(fh)]
    console.print(table("requests", "type|name|>requests|>failures|>p50 ms|>p95 ms|>p99 ms|>req/s", *rows))
    path = reports / "summary.json"
    if path.exists():
        summary = json.loads(path.read_text())
        console.print(
            f"messages: {summary['acknowledged']:,} acknowledged, {summary['consumed']:,} consumed, "
            f"[{'red' if summary['missing'] else 'green'}]{summary['missing']:,} missing[/], "
            f"{summary['duplicates']:,} duplicates, {summary['failed_sends']:,} failed sends"
        )
    else:
        console.print("[red]locust wrote no summary: see locust.log[/red]")
        rc = rc or 1
    verdict = {0: "[green]passed[/green]", 1: "[red]requests failed[/red]", 3: "[red]messages lost[/red]"}
    console.print(f"{verdict.get(rc, f'[red]locust exited {rc}[/red]')}; reports in {reports}")
    return rc
