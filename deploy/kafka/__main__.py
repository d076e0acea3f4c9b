"""``./run kafka``: Apache Kafka 4.x (KRaft) on this machine until Ctrl-C.

    python -m deploy.kafka [--nodes 1|3] [--port 9092] [--data-dir D] [--heap 512m] [-o KEY=VALUE]
    python -m deploy.kafka resolve            # only resolve the jars; print their folder
    python -m deploy.kafka tool NAME ARGS...  # run a bin/*.sh tool by name (kafka-topics ...)

Without ``--data-dir`` the data lives in a temporary folder removed at the stop; with one, the
node dirs are formatted once and kept (a restart continues them).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time

from deploy.kafka.cluster import KafkaCluster
from deploy.kafka.resolve import KAFKA_VERSION, MavenError, lib_dir, resolve, resolved
from deploy.kafka.tools import TOOLS, tool_cmd
from deploy.local.process import ProcessError


def _override(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value.strip()


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="./run kafka", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd")
    start = sub.add_parser("start", help="start a KRaft cluster until Ctrl-C (the default)")
    for q in (p, start):
        q.add_argument(
            "--nodes", type=int, default=1, help="KRaft nodes, each broker and controller (default 1)"
        )
        q.add_argument(
            "--port",
            type=int,
            default=9092,
            help="Kafka port of node 1 (node i: port+i-1, controllers port+10000..); 0: free ports",
        )
        q.add_argument(
            "--data-dir", help="keep the data here (default: a temporary folder, removed at the stop)"
        )
        q.add_argument("--heap", default="512m", help="-Xmx of each node (default 512m)")
        q.add_argument(
            "-o",
            dest="overrides",
            type=_override,
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="a broker setting for every node (repeatable)",
        )
    sub.add_parser("resolve", help="resolve Apache Kafka's jars with Maven; print their folder")
    tool = sub.add_parser(
        "tool", help=f"run a Kafka tool by its script name ({', '.join(sorted(TOOLS)[:4])}, ...)"
    )
    tool.add_argument("name")
    tool.add_argument("args", nargs=argparse.REMAINDER)
    return p


def cmd_resolve() -> int:
    cold = not resolved()
    t0 = time.monotonic()
    lib = resolve(quiet=False)
    state = f"resolved in {time.monotonic() - t0:.1f}s" if cold else "already resolved"
    print(f"Apache Kafka {KAFKA_VERSION}: {lib} ({state})", file=sys.stderr)
    print(lib)
    return 0


def cmd_start(args: argparse.Namespace) -> int:
    if args.nodes < 1:
        print("--nodes: at least 1", file=sys.stderr)
        return 2
    if not resolved():
        print(
            f"resolving Apache Kafka {KAFKA_VERSION} with Maven into {lib_dir().parent} ...", file=sys.stderr
        )
    cluster = KafkaCluster(
        args.nodes, args.data_dir, port=args.port or None, heap=args.heap, overrides=dict(args.overrides)
    )
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        cluster.start()
    except (ProcessError, TimeoutError, MavenError) as exc:
        print(f"Apache Kafka did not start: {exc}", file=sys.stderr)
        return 1
    t = cluster.timings
    print(
        f"{cluster.describe()} ready in {t['start']:.1f}s (format {t.get('format', 0):.1f}s); "
        f"data in {cluster.base_dir}{' (temporary)' if args.data_dir is None else ''}; "
        f"logs in {cluster.log_dir}",
        file=sys.stderr,
    )
    print(f"bootstrap: {cluster.bootstrap}", flush=True)
    print("press Ctrl-C to stop", file=sys.stderr)
    code = 0
    while not stop.wait(0.5):
        dead = [n for n in cluster.nodes if not n.alive()]
        if dead:
            print(
                f"kafka node {dead[0].node_id} exited ({dead[0].returncode}):\n{dead[0].tail()}",
                file=sys.stderr,
            )
            code = 1
            break
    t0 = time.monotonic()
    cluster.stop()
    print(f"stopped in {time.monotonic() - t0:.1f}s", file=sys.stderr)
    return code


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.cmd == "resolve":
            return cmd_resolve()
        if args.cmd == "tool":
            cmd = tool_cmd(args.name, *args.args)
            os.execv(cmd[0], cmd)  # noqa: S606 (the tool in this process: its signals, its exit code)
    except (MavenError, KeyError) as exc:
        print(exc, file=sys.stderr)
        return 2
    return cmd_start(args)


if __name__ == "__main__":
    sys.exit(main())
