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
"""

from __future__ import annotations

import argparse
import json
import os
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

from framework.errors import StoreError

console = Console(stderr=True)
HERE = Path(__file__).resolve().parent / "locustfiles"
SCENARIOS = {
    "smoke": ("smoke.py", 30.0, 40),
    "steady": ("steady.py", 120.0, 100),
    "rush-hour": ("rush_hour.py", 180.0, 150),
    "burst": ("burst.py", 90.0, 150),
}


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("load", help="locust load tests: smoke, steady, rush-hour, burst")
    p.add_argument("scenario", choices=sorted(SCENARIOS), help="the load shape to run")
    p.add_argument("--users", type=int, help="peak users (default: per scenario, 40-150)")
    p.add_argument("--duration", type=float, help="seconds of load (default: per scenario, 30-180)")
    p.add_argument("--rate", type=float, default=5.0, help="messages/s per device or producer user (5)")
    p.add_argument("--qos", type=int, choices=(0, 1), default=1, help="MQTT QoS of the device users (1)")
    p.add_argument("-b", "--bootstrap", default="127.0.0.1:9092", help="the store (127.0.0.1:9092)")
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


class Services:
    """A private store, Mosquitto, gateway and dashboard, the way ``sftraffic up`` starts them."""

    def __init__(self, root: Path) -> None:
        from framework.cli.up import Supervisor

        self.root = root
        self.sup = Supervisor(root)

    def start(self) -> dict[str, str]:
        from deploy.local.process import free_port
        from framework.cli.up import dashboard_part, gateway_part, mosquitto_part, store_part
        from sensors.layout import ensure_layout

        py = [sys.executable, "-m", "framework.cli.main"]
        bootstrap, mqtt_port, dash_port = f"127.0.0.1:{free_port()}", free_port(), free_port()
        env = {"PYTHONUNBUFFERED": "1"}
        self.sup.launch(store_part(py, self.root, bootstrap, 0, env), 60, f"event store on {bootstrap}")
        self.sup.launch(mosquitto_part(self.root, mqtt_port), 30, f"Mosquitto on 127.0.0.1:{mqtt_port}")
        ensure_layout(bootstrap)
        self.sup.launch(gateway_part(py, self.root, bootstrap, f"127.0.0.1:{mqtt_port}", env), 60, "gateway")
        self.sup.launch(dashboard_part(py, self.root, bootstrap, dash_port, env), 60, "dashboard")
        return {
            "bootstrap": bootstrap,
            "mqtt": f"127.0.0.1:{mqtt_port}",
            "dashboard": f"http://127.0.0.1:{dash_port}",
        }

    def pause_store(self, at: float, seconds: float, stop: threading.Event) -> threading.Thread:
        """SIGSTOP the store ``at`` seconds from now for ``seconds`` (a broker failure)."""
        store = next(p for p in self.sup.parts if p.name == "store")

        def fail() -> None:
            if stop.wait(at) or store.proc is None:
                return
            console.print(f"[yellow]store stopped for {seconds:.0f}s (simulated broker failure)[/yellow]")
            os.kill(store.proc.pid, signal.SIGSTOP)
            try:
                stop.wait(seconds)
            finally:
                os.kill(store.proc.pid, signal.SIGCONT)
                console.print("[yellow]store resumed[/yellow]")

        t = threading.Thread(target=fail, daemon=True)
        t.start()
        return t

    def stop(self) -> None:
        self.sup.stop_all()


def locust_command(locustfile: Path, reports: Path, web: bool, host: str) -> list[str]:
    cmd = [sys.executable, "-m", "locust", "-f", str(locustfile), "--host", host, "--stop-timeout", "20"]
    if web:
        return [*cmd, "--web-host", "127.0.0.1", "--web-port", "8089"]
    prefix = reports / "locust"
    return [*cmd, "--headless", "--only-summary", "--csv", str(prefix), "--html", f"{prefix}.html"]


def run(args: argparse.Namespace) -> int:
    file, default_duration, default_users = SCENARIOS[args.scenario]
    duration = args.duration or default_duration
    users = args.users or default_users
    start_services = args.start_services if args.start_services is not None else args.scenario == "smoke"
    stamp = time.strftime("%Y%m%d-%H%M%S")
    reports = Path(args.reports or f"load-reports/{args.scenario}-{stamp}").resolve()
    reports.mkdir(parents=True, exist_ok=True)
    targets = {"bootstrap": args.bootstrap, "mqtt": args.mqtt, "dashboard": args.dashboard}
    services: Services | None = None
    stop = threading.Event()
    tmp: tempfile.TemporaryDirectory[str] | None = None
    try:
        if start_services:
            tmp = tempfile.TemporaryDirectory(prefix="sftraffic-load-")
            services = Services(Path(tmp.name))
            targets = services.start()
            if args.scenario == "burst":
                services.pause_store(max(1.0, duration / 3 - 8), 6.0, stop)
        env = dict(
            os.environ,
            SFTRAFFIC_BOOTSTRAP=targets["bootstrap"],
            SFTRAFFIC_MQTT=targets["mqtt"],
            SFTRAFFIC_DASHBOARD=targets["dashboard"],
            SFTRAFFIC_LOAD_USERS=str(users),
            SFTRAFFIC_LOAD_DURATION=str(duration),
            SFTRAFFIC_LOAD_RATE=str(args.rate),
            SFTRAFFIC_LOAD_QOS=str(args.qos),
            SFTRAFFIC_LOAD_SUMMARY=str(reports / "summary.json"),
        )
        cmd = locust_command(HERE / file, reports, args.web, targets["dashboard"])
        console.print(
            f"[bold]{args.scenario}[/bold]: {users} users, {duration:.0f}s, {args.rate:g} msgs/s each, "
            f"store {targets['bootstrap']}, MQTT {targets['mqtt']}, dashboard {targets['dashboard']}"
        )
        if args.web:
            console.print("locust UI: http://127.0.0.1:8089 (Ctrl-C to stop)")
        with open(reports / "locust.log", "wb") as log:
            proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
            try:
                rc = proc.wait()
            except KeyboardInterrupt:
                proc.send_signal(signal.SIGINT)
                rc = proc.wait()
    except StoreError as exc:
        console.print(f"[red]sftraffic load: {exc.message}[/red]")
        return 2
    finally:
        stop.set()
        if services is not None:
            services.stop()
        if tmp is not None:
            tmp.cleanup()
    return report(reports, rc)


def _read_stats(reports: Path) -> list[dict[str, str]]:
    import csv

    path = reports / "locust_stats.csv"
    if not path.exists():
        return []
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def report(reports: Path, rc: int) -> int:
    """Print the per-request table and the ledger; the exit code is locust's."""
    table = Table(title="requests")
    for col in ("type", "name", "requests", "failures", "p50 ms", "p95 ms", "p99 ms", "req/s"):
        table.add_column(col, justify="left" if col in ("type", "name") else "right")
    for row in _read_stats(reports):
        table.add_row(
            row["Type"],
            row["Name"],
            row["Request Count"],
            row["Failure Count"],
            row["50%"],
            row["95%"],
            row["99%"],
            f"{float(row['Requests/s']):.1f}",
        )
    console.print(table)
    summary: dict[str, Any] = {}
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
