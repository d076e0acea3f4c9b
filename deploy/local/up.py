"""``sftraffic up``: the whole demo on this machine, until Ctrl-C.

Starts, in order, each part as a :class:`~deploy.local.process.ManagedProcess` (its own
session, its output appended to ``<data-dir>/logs/<part>.log``):

1. the event store (127.0.0.1:9092, metrics on :9644, data in ``<data-dir>/store-1``); with
   ``--cluster N`` N brokers on 9092.. 9092+N-1 (metrics 9644.., controller endpoints
   19092..), data in ``store-1`` .. ``store-N``, topics replicated min(N, 3) times
2. Mosquitto (127.0.0.1:1883) and the stream layout (stream + topics, created if missing)
3. an MQTT edge gateway
4. the sensor fleet: 10,000 sensors producing directly, plus 500 MQTT devices through the gateway
5. the Spark streaming jobs (aggregates, correlation, anomalies), which take a while to warm up
6. the dashboard on http://127.0.0.1:8050

A part is "ready" when it logs its ready line (an event, not a timer). A cluster broker may be
lost while the demo runs (the cluster carries on); any other part exiting stops the demo.
Ctrl-C (or SIGTERM) stops every part in reverse order — SIGTERM to its process group, SIGKILL
after a grace period — so nothing is left running; the pids are kept in ``<data-dir>/up.json``
meanwhile.
"""

from __future__ import annotations

import argparse
import json
import signal
import threading
import time
from pathlib import Path

from rich.console import Console

from deploy.local.mosquitto import MosquittoProcess
from deploy.local.process import ManagedProcess, sftraffic
from framework.cli.common import require_modules
from framework.errors import StoreError
from pipelines.jobs import RESULT_TOPICS
from sensors.layout import STREAM, ensure_layout, topic

# the parts it starts need the app extras (pyspark: through pipelines.jobs)
require_modules("numpy", "msgspec", "paho", "dash")

console = Console(stderr=True)


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("up", help="run the whole demo locally until Ctrl-C")
    p.add_argument(
        "--data-dir", default=".sftraffic", help="where the demo keeps its data (default ./.sftraffic)"
    )
    p.add_argument("--port", type=int, default=9092, help="Kafka port of the embedded store (default 9092)")
    p.add_argument(
        "--metrics-port", type=int, default=9644, help="Prometheus port of the store (default 9644)"
    )
    p.add_argument("--mqtt-port", type=int, default=1883, help="Mosquitto port (default 1883)")
    p.add_argument("--dashboard-port", type=int, default=8050, help="dashboard port (default 8050)")
    p.add_argument(
        "--sensors", type=int, default=10_000, help="pavement sensors producing directly (default 10000)"
    )
    p.add_argument("--mqtt-devices", type=int, default=500, help="sensors publishing over MQTT (default 500)")
    p.add_argument("--speed", type=float, default=1.0, help="simulated seconds per second (1 = live)")
    p.add_argument("--no-spark", action="store_true", help="skip the Spark jobs (quicker start, less CPU)")
    p.add_argument(
        "--cluster",
        type=int,
        default=1,
        help="store brokers: 1 (default) or a replicated cluster of 3-9 (topics get min(N, 3) replicas)",
    )
    p.set_defaults(func=run)


def _part(name: str, cmd: list[str], ready: str | None, root: Path, env: dict[str, str]) -> ManagedProcess:
    return ManagedProcess(name, cmd, ready=ready, log=root / "logs" / f"{name}.log", env=env)


def store_part(
    py: list[str], root: Path, bootstrap: str, metrics_port: int, env: dict[str, str]
) -> ManagedProcess:
    """The embedded single-node store, data in ``<root>/store-1``."""
    cmd = [*py, "broker", "--node-id", "1", "--listen", bootstrap, "--data-dir", str(root / "store-1")]
    if metrics_port:
        cmd += ["--metrics", f"127.0.0.1:{metrics_port}"]
    return _part("store", cmd, " listening on ", root, env)


def cluster_parts(
    py: list[str], root: Path, size: int, port: int, metrics_port: int, env: dict[str, str]
) -> list[ManagedProcess]:
    """``size`` brokers of one cluster: Kafka on port.., controller (Raft) on port+10000.."""
    voters = ",".join(f"{i}@127.0.0.1:{port + 10_000 + i - 1}" for i in range(1, size + 1))
    parts = []
    for i in range(1, size + 1):
        cmd = [*py, "broker", "--node-id", str(i), "--listen", f"127.0.0.1:{port + i - 1}"]
        cmd += ["--data-dir", str(root / f"store-{i}"), "--voters", voters]
        if metrics_port:
            cmd += ["--metrics", f"127.0.0.1:{metrics_port + i - 1}"]
        parts.append(_part(f"store-{i}", cmd, "registered with the controller", root, env))
    return parts


def mosquitto_part(root: Path, port: int) -> MosquittoProcess:
    """Mosquitto with its own config and persistence in ``<root>/mosquitto``."""
    return MosquittoProcess(root / "mosquitto", port, persistence=True, log=root / "logs" / "mosquitto.log")


def gateway_part(py: list[str], root: Path, bootstrap: str, mqtt: str, env: dict[str, str]) -> ManagedProcess:
    cmd = [*py, "gateway", "-b", bootstrap, "--mqtt", mqtt, "--id", "gw-1"]
    cmd += ["--queue-dir", str(root / "gateway-queue")]
    return _part("gateway", cmd, "ready", root, env)


def dashboard_part(
    py: list[str], root: Path, bootstrap: str, port: int, env: dict[str, str]
) -> ManagedProcess:
    cmd = [*py, "dashboard", "-b", bootstrap, "--port", str(port)]
    return _part("dashboard", cmd, "dashboard on", root, env)


class Supervisor:
    """The parts started so far, in order; stops them in reverse order."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.parts: list[ManagedProcess] = []
        self.survivable: set[str] = set()  # cluster brokers: the demo goes on without one
        self.stopping = threading.Event()

    def install_signals(self) -> None:
        def handler(signum: int, frame: object) -> None:
            self.stopping.set()

        signal.signal(signal.SIGINT, handler)
        signal.signal(signal.SIGTERM, handler)

    def record(self) -> None:
        (self.root / "up.json").write_text(
            json.dumps({p.name: p.pid for p in self.parts if p.proc is not None}, indent=1)
        )

    def launch(
        self, part: ManagedProcess | list[ManagedProcess], timeout: float, what: str, survivable: bool = False
    ) -> None:
        """Start a part (or several that need each other, e.g. a cluster) and wait until ready."""
        group = part if isinstance(part, list) else [part]
        for p in group:
            try:
                p.launch()
            except OSError as exc:  # e.g. Mosquitto not installed
                raise StoreError(f"cannot start {p.name}: {exc}") from None
            self.parts.append(p)
            if survivable:
                self.survivable.add(p.name)
        self.record()
        t0 = time.monotonic()
        with console.status(f"starting {what} ...") as status:
            while not all(p.is_ready() for p in group):
                if self.stopping.is_set():
                    raise KeyboardInterrupt
                for p in group:
                    if not p.alive():
                        p.stop()  # reaped: its last lines are in
                        raise StoreError(f"{p.name} exited while starting; its log ({p.log}):\n{p.tail()}")
                if time.monotonic() - t0 > timeout:
                    late = ", ".join(p.name for p in group if not p.is_ready())
                    logs = ", ".join(str(p.log) for p in group)
                    raise StoreError(f"{late} not ready after {timeout:.0f}s; see {logs}")
                status.update(f"starting {what} ... {time.monotonic() - t0:.0f}s")
                self.stopping.wait(0.2)
        console.print(f"[green]✓[/green] {what} ({time.monotonic() - t0:.1f}s)")

    def watch(self) -> None:
        """Until Ctrl-C: report a lost cluster broker; stop when any other part exits."""
        lost: set[str] = set()
        while not self.stopping.is_set():
            for p in self.parts:
                if p.alive() or p.name in lost:
                    continue
                if p.name in self.survivable:
                    lost.add(p.name)
                    console.print(
                        f"[yellow]{p.name} exited[/yellow] (code {p.returncode}); "
                        f"the cluster carries on without it (restart: sftraffic {' '.join(p.cmd[3:])})"
                    )
                    continue
                p.stop()  # reaped: its last lines are in
                console.print(
                    f"[red]{p.name} exited[/red] (code {p.returncode}); last lines of {p.log}:\n{p.tail()}"
                )
                self.stopping.set()
                break
            self.stopping.wait(0.5)

    def stop_all(self) -> None:
        for p in reversed(self.parts):
            if p.alive():
                console.print(f"stopping {p.name} ...")
                if p.stop() == -signal.SIGKILL:
                    console.print(f"[yellow]{p.name} did not stop in {p.grace:.0f}s: killed it[/yellow]")
            else:
                p.stop()  # already gone: reap it and whatever it left in its process group
        (self.root / "up.json").unlink(missing_ok=True)


def run(args: argparse.Namespace) -> int:
    if not (args.cluster == 1 or 3 <= args.cluster <= 9):
        raise StoreError(
            f"--cluster {args.cluster}: use 1 (a single node) or 3 to 9 brokers "
            "(a 2-broker quorum cannot survive the loss of either)"
        )
    root = Path(args.data_dir).resolve()
    root.mkdir(parents=True, exist_ok=True)
    py = sftraffic()
    bootstrap = ",".join(f"127.0.0.1:{args.port + i}" for i in range(args.cluster))
    mqtt = f"127.0.0.1:{args.mqtt_port}"
    env = {"SFTRAFFIC_BOOTSTRAP": bootstrap, "PYTHONUNBUFFERED": "1"}
    sup = Supervisor(root)
    sup.install_signals()
    try:
        if args.cluster == 1:
            sup.launch(
                store_part(py, root, bootstrap, args.metrics_port, env), 60, f"event store on {bootstrap}"
            )
        else:
            sup.launch(
                cluster_parts(py, root, args.cluster, args.port, args.metrics_port, env),
                90,
                f"{args.cluster}-broker event store cluster on {bootstrap}",
                survivable=True,
            )
        sup.launch(mosquitto_part(root, args.mqtt_port), 30, f"Mosquitto on {mqtt}")
        ensure_layout(
            bootstrap,
            replication_factor=min(args.cluster, 3),
            extra_topics={topic(n): {} for n in RESULT_TOPICS if n != "dead_letter"},
        )
        console.print(f"[green]✓[/green] stream {STREAM} and its topics")
        sup.launch(gateway_part(py, root, bootstrap, mqtt, env), 60, "MQTT gateway")
        common = ["-b", bootstrap, "--speed", str(args.speed), "--quiet"]
        sup.launch(
            _part("sensors", [*py, "sensors", *common, "--sensors", str(args.sensors)], None, root, env),
            10,
            f"{args.sensors:,} sensors producing directly",
        )
        if args.mqtt_devices:
            devices = [*py, "sensors", *common, "--via", "mqtt", "--mqtt", mqtt]
            devices += ["--sensors", str(args.mqtt_devices), "--prefix", "mqtt-", "--no-infrastructure"]
            sup.launch(
                _part("devices", devices, None, root, env),
                10,
                f"{args.mqtt_devices} MQTT devices via the gateway",
            )
        sup.launch(dashboard_part(py, root, bootstrap, args.dashboard_port, env), 60, "dashboard")
        if not args.no_spark:
            spark = [*py, "pipeline", "all", "-b", bootstrap, "--checkpoint-dir", str(root / "checkpoints")]
            spark += ["--output-dir", str(root / "parquet"), "--trigger", "2 seconds"]
            sup.launch(_part("spark", spark, "pipeline all running", root, env), 300, "Spark streaming jobs")
        console.print(
            f"\n[bold]dashboard: http://127.0.0.1:{args.dashboard_port}[/bold]   store: {bootstrap}   "
            f"MQTT: {mqtt}   metrics: http://127.0.0.1:{args.metrics_port}/metrics"
        )
        console.print("press Ctrl-C to stop everything")
        sup.watch()
    except KeyboardInterrupt:
        pass
    finally:
        sup.stop_all()
    console.print("all parts stopped")
    return 0
