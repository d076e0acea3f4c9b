"""``sftraffic up``: the whole demo on this machine, until Ctrl-C.

Starts, in order, each as a child process in its own process group with its log in
``<data-dir>/logs/<part>.log``:

1. the event store (127.0.0.1:9092, metrics on :9644, data in ``<data-dir>/store-1``); with
   ``--cluster N`` N brokers on 9092.. 9092+N-1 (metrics 9644.., controller endpoints
   19092..), data in ``store-1`` .. ``store-N``, topics replicated min(N, 3) times
2. Mosquitto (127.0.0.1:1883) and the stream layout (stream + topics, created if missing)
3. an MQTT edge gateway
4. the sensor fleet: 10,000 sensors producing directly, plus 500 MQTT devices through the gateway
5. the Spark streaming jobs (aggregates, correlation, anomalies), which take a while to warm up
6. the dashboard on http://127.0.0.1:8050

A part is "ready" when it logs its ready line (an event, not a timer). Ctrl-C (or SIGTERM)
stops every part in reverse order — SIGTERM to its process group, SIGKILL after a grace
period — so nothing is left running; the pids are kept in ``<data-dir>/up.json`` meanwhile.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from framework.errors import StoreError

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


@dataclass
class Part:
    name: str
    cmd: list[str]
    ready: str | None  # substring of a log line meaning "ready"
    log: Path
    env: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None
    survivable: bool = False  # a cluster broker: the demo goes on without it

    def start(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, **self.env)
        with open(self.log, "ab") as fh:
            fh.write(f"\n--- {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(self.cmd)}\n".encode())
            self.proc = subprocess.Popen(
                self.cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )

    def is_ready(self) -> bool:
        if self.ready is None:
            return True
        try:
            return self.ready in self.log.read_text(errors="replace").rsplit("\n--- ", 1)[-1]
        except FileNotFoundError:
            return False

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def tail(self, n: int = 15) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except FileNotFoundError:
            return ""

    def stop(self, grace: float = 20.0) -> None:
        if not self.alive():
            return
        assert self.proc is not None
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            self.proc.wait(grace)
        except subprocess.TimeoutExpired:
            console.print(f"[yellow]{self.name} did not stop in {grace:.0f}s: killing it[/yellow]")
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()


def store_part(py: list[str], root: Path, bootstrap: str, metrics_port: int, env: dict[str, str]) -> Part:
    """The embedded single-node store, data in ``<root>/store-1``."""
    cmd = [*py, "broker", "--node-id", "1", "--listen", bootstrap, "--data-dir", str(root / "store-1")]
    if metrics_port:
        cmd += ["--metrics", f"127.0.0.1:{metrics_port}"]
    return Part("store", cmd, " listening on ", root / "logs" / "store.log", env)


def cluster_parts(
    py: list[str], root: Path, size: int, port: int, metrics_port: int, env: dict[str, str]
) -> list[Part]:
    """``size`` brokers of one cluster: Kafka on port.., controller (Raft) on port+10000.."""
    voters = ",".join(f"{i}@127.0.0.1:{port + 10_000 + i - 1}" for i in range(1, size + 1))
    parts = []
    for i in range(1, size + 1):
        cmd = [
            *py,
            "broker",
            "--node-id",
            str(i),
            "--listen",
            f"127.0.0.1:{port + i - 1}",
            "--data-dir",
            str(root / f"store-{i}"),
            "--voters",
            voters,
        ]
        if metrics_port:
            cmd += ["--metrics", f"127.0.0.1:{metrics_port + i - 1}"]
        part = Part(
            f"store-{i}", cmd, "registered with the controller", root / "logs" / f"store-{i}.log", env
        )
        part.survivable = True
        parts.append(part)
    return parts


def mosquitto_part(root: Path, port: int) -> Part:
    """Mosquitto with its own config and persistence in ``<root>/mosquitto``."""
    from sensors.mosquitto import CONF, find_mosquitto

    mq_dir = root / "mosquitto"
    mq_dir.mkdir(parents=True, exist_ok=True)
    (mq_dir / "mosquitto.conf").write_text(CONF.format(port=port, persistence="true", data=mq_dir))
    return Part(
        "mosquitto",
        [find_mosquitto(), "-c", str(mq_dir / "mosquitto.conf")],
        " running",
        root / "logs" / "mosquitto.log",
    )


def gateway_part(py: list[str], root: Path, bootstrap: str, mqtt: str, env: dict[str, str]) -> Part:
    cmd = [
        *py,
        "gateway",
        "-b",
        bootstrap,
        "--mqtt",
        mqtt,
        "--id",
        "gw-1",
        "--queue-dir",
        str(root / "gateway-queue"),
    ]
    return Part("gateway", cmd, "ready", root / "logs" / "gateway.log", env)


def dashboard_part(py: list[str], root: Path, bootstrap: str, port: int, env: dict[str, str]) -> Part:
    cmd = [*py, "dashboard", "-b", bootstrap, "--port", str(port)]
    return Part("dashboard", cmd, "dashboard on", root / "logs" / "dashboard.log", env)


class Supervisor:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.parts: list[Part] = []
        self.stopping = threading.Event()

    def install_signals(self) -> None:
        def handler(signum: int, frame: object) -> None:
            self.stopping.set()

        signal.signal(signal.SIGINT, handler)
        signal.signal(signal.SIGTERM, handler)

    def record(self) -> None:
        (self.root / "up.json").write_text(
            json.dumps({p.name: p.proc.pid for p in self.parts if p.proc is not None}, indent=1)
        )

    def launch(self, part: Part | list[Part], timeout: float, what: str) -> None:
        """Start a part (or several that need each other, e.g. a cluster) and wait until ready."""
        group = part if isinstance(part, list) else [part]
        for p in group:
            p.start()
            self.parts.append(p)
        self.record()
        t0 = time.monotonic()
        with console.status(f"starting {what} ...") as status:
            while not all(p.is_ready() for p in group):
                if self.stopping.is_set():
                    raise KeyboardInterrupt
                for p in group:
                    if not p.alive():
                        raise StoreError(f"{p.name} exited while starting; its log ({p.log}):\n{p.tail()}")
                if time.monotonic() - t0 > timeout:
                    late = ", ".join(p.name for p in group if not p.is_ready())
                    raise StoreError(f"{late} not ready after {timeout:.0f}s; see {root_logs(group)}")
                status.update(f"starting {what} ... {time.monotonic() - t0:.0f}s")
                self.stopping.wait(0.2)
        console.print(f"[green]✓[/green] {what} ({time.monotonic() - t0:.1f}s)")

    def watch(self) -> None:
        lost: set[str] = set()
        while not self.stopping.is_set():
            for p in self.parts:
                if p.survivable and not p.alive() and p.name not in lost:
                    lost.add(p.name)
                    console.print(
                        f"[yellow]{p.name} exited[/yellow] (code {p.proc.returncode if p.proc else '?'}); "
                        f"the cluster carries on without it (restart: sftraffic {' '.join(p.cmd[3:])})"
                    )
                    continue
                if not p.survivable and not p.alive():
                    console.print(
                        f"[red]{p.name} exited[/red] (code {p.proc.returncode if p.proc else '?'}); "
                        f"last lines of {p.log}:\n{p.tail()}"
                    )
                    self.stopping.set()
                    break
            self.stopping.wait(0.5)

    def stop_all(self) -> None:
        for p in reversed(self.parts):
            if p.alive():
                console.print(f"stopping {p.name} ...")
            p.stop()
        (self.root / "up.json").unlink(missing_ok=True)


def root_logs(group: list[Part]) -> str:
    return ", ".join(str(p.log) for p in group)


def run(args: argparse.Namespace) -> int:
    if not (args.cluster == 1 or 3 <= args.cluster <= 9):
        raise StoreError(
            f"--cluster {args.cluster}: use 1 (a single node) or 3 to 9 brokers "
            "(a 2-broker quorum cannot survive the loss of either)"
        )
    root = Path(args.data_dir).resolve()
    root.mkdir(parents=True, exist_ok=True)
    logs = root / "logs"
    py = [sys.executable, "-m", "framework.cli.main"]
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
            )
        sup.launch(mosquitto_part(root, args.mqtt_port), 30, f"Mosquitto on {mqtt}")
        from pipelines.jobs import RESULT_TOPICS, t
        from sensors.layout import ensure_layout

        ensure_layout(
            bootstrap,
            replication_factor=min(args.cluster, 3),
            extra_topics={t(n): {} for n in RESULT_TOPICS if n != "dead_letter"},
        )
        console.print("[green]✓[/green] stream traffic_monitoring and its topics")
        sup.launch(gateway_part(py, root, bootstrap, mqtt, env), 60, "MQTT gateway")
        common = ["-b", bootstrap, "--speed", str(args.speed), "--quiet"]
        sup.launch(
            Part(
                "sensors",
                [*py, "sensors", *common, "--sensors", str(args.sensors)],
                None,
                logs / "sensors.log",
                env,
            ),
            10,
            f"{args.sensors:,} sensors producing directly",
        )
        if args.mqtt_devices:
            sup.launch(
                Part(
                    "devices",
                    [
                        *py,
                        "sensors",
                        *common,
                        "--via",
                        "mqtt",
                        "--mqtt",
                        mqtt,
                        "--sensors",
                        str(args.mqtt_devices),
                        "--prefix",
                        "mqtt-",
                        "--no-infrastructure",
                    ],
                    None,
                    logs / "devices.log",
                    env,
                ),
                10,
                f"{args.mqtt_devices} MQTT devices via the gateway",
            )
        sup.launch(dashboard_part(py, root, bootstrap, args.dashboard_port, env), 60, "dashboard")
        if not args.no_spark:
            sup.launch(
                Part(
                    "spark",
                    [
                        *py,
                        "pipeline",
                        "all",
                        "-b",
                        bootstrap,
                        "--checkpoint-dir",
                        str(root / "checkpoints"),
                        "--output-dir",
                        str(root / "parquet"),
                        "--trigger",
                        "2 seconds",
                    ],
                    "pipeline all running",
                    logs / "spark.log",
                    env,
                ),
                300,
                "Spark streaming jobs",
            )
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
