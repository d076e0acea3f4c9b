"""``sftraffic up``: the whole demo on this machine, until Ctrl-C.

Every part runs as a child process in its own process group; Ctrl-C (or SIGTERM) stops them
in reverse start order — SIGTERM, then SIGKILL after a grace period — so nothing is left
running. Parts that depend on the store wait for it to be ready (an event, not a sleep).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from rich.console import Console

from framework.server.process import BrokerProcess

console = Console(stderr=True)


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("up", help="run the whole demo locally until Ctrl-C")
    p.add_argument(
        "--data-dir",
        default=".sftraffic",
        help="where the demo keeps its data (default ./.sftraffic)",
    )
    p.add_argument("--port", type=int, default=9092, help="Kafka port of the embedded store (default 9092)")
    p.add_argument(
        "--metrics-port", type=int, default=9644, help="Prometheus port of the store (default 9644)"
    )
    p.set_defaults(func=run)


class Supervisor:
    """Start children, stop them all (reverse order) on Ctrl-C or when one dies."""

    def __init__(self) -> None:
        self.stopping = threading.Event()
        self.brokers: list[BrokerProcess] = []

    def install_signals(self) -> None:
        def handler(signum: int, frame: object) -> None:
            self.stopping.set()

        signal.signal(signal.SIGINT, handler)
        signal.signal(signal.SIGTERM, handler)

    def stop_all(self) -> None:
        for b in reversed(self.brokers):
            console.print(f"stopping store node {b.node_id} ...")
            b.stop()


def run(args: argparse.Namespace) -> int:
    root = Path(args.data_dir).resolve()
    sup = Supervisor()
    sup.install_signals()
    try:
        store = BrokerProcess(
            root / "store-1",
            port=args.port,
            overrides={"metrics.listen": f"127.0.0.1:{args.metrics_port}"},
        )
        console.print(f"starting the event store on 127.0.0.1:{args.port} (data in {store.data_dir}) ...")
        sup.brokers.append(store.start())
        console.print(
            f"[green]store ready[/green]: bootstrap 127.0.0.1:{args.port}, metrics http://127.0.0.1:{args.metrics_port}/metrics"
        )
        console.print("press Ctrl-C to stop")
        while not sup.stopping.is_set():
            for b in sup.brokers:
                if b.proc is not None and b.proc.poll() is not None:
                    console.print(
                        f"[red]store node {b.node_id} exited[/red]:\n" + "\n".join(list(b.log_lines)[-20:])
                    )
                    sup.stopping.set()
            sup.stopping.wait(0.5)
    finally:
        sup.stop_all()
    console.print("all parts stopped")
    return 0


if __name__ == "__main__":
    sys.exit(run(argparse.Namespace(data_dir=".sftraffic", port=9092, metrics_port=9644)))
