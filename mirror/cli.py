"""``sftraffic mirror``: copy topics from a source cluster to a target (MirrorMaker 2's model).

Topics matching ``--topics`` are copied to ``<source-alias>.<topic>`` on the target, same
partitions (new ones picked up every ``--refresh-interval``), allow-listed topic configs, each
record's key, value, headers and timestamp; progress, offset syncs, checkpoints of the source's
consumer groups (``--groups``) and heartbeats are kept in the target cluster
(``mm2-offsets.<alias>.internal``, ``mm2-offset-syncs.<alias>.internal``,
``<alias>.checkpoints.internal``, ``heartbeats``). Killed, it resumes from its last commit:
nothing lost, records copied after that commit copied again (with ``--exactly-once`` they
are aborted with their transaction: a read_committed reader sees each record once).
``--sync-group-offsets`` commits the translated offsets to the target's groups while they have
no members there, so a group moved to the target resumes where it stopped. Runs until SIGTERM
or Ctrl-C. Works against any Kafka-API clusters.

Each cluster takes the connection options of every client command, prefixed with its side
(``--source-bootstrap-server``, ``--source-command-config FILE``, ``--source-X KEY=VALUE``, the
same with ``--target-``; ``--source``/``--target`` and ``--source-config``/``--target-config``
are kept as aliases); the environment's defaults apply to neither.
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType
from typing import Any

from framework.cli.connection import add_connection, connection
from framework.client.connection import Connection, check_address, ensure_reachable
from framework.errors import StoreError
from mirror.mirror import Mirror, MirrorError, MirrorSettings, MirrorStats
from mirror.policy import ReplicationPolicy

EPILOG = """\
example (copy every topic of the cluster "east" to "west" as east.<topic>, with group offsets):
  sftraffic mirror --source-bootstrap-server east-1:9092 --target-bootstrap-server west-1:9092 \\
      --source-alias east --target-command-config west.properties --sync-group-offsets"""


def _positive(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected seconds, e.g. 1 or 0.5") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: must be more than 0")
    return v


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "mirror",
        help="copy topics and consumer-group offsets to another cluster (MirrorMaker 2's model)",
        description=__doc__,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_connection(p, "source", "source")
    add_connection(p, "target", "target")
    a = p.add_argument
    a("--source-alias", required=True, metavar="A", help="the source's name; copies are A.<topic>")
    a("--target-alias", default="target", metavar="B", help="the target's name (default target)")
    a("--topics", default=".*", metavar="REGEX", help="topics to copy (default: all but internal ones)")
    a("--groups", default=".*", metavar="REGEX", help="consumer groups to checkpoint (default all)")
    a(
        "--sync-group-offsets",
        action="store_true",
        help="commit translated offsets to the target's groups while they have no members there",
    )
    a(
        "--exactly-once",
        action="store_true",
        help="copies and progress in one transaction per commit (needs transactions on the target)",
    )
    a("--commit-interval", type=_positive, default=1.0, metavar="S", help="progress committed every S s (1)")
    a("--checkpoint-interval", type=_positive, default=5.0, metavar="S", help="checkpoints every S s (5)")
    a("--heartbeat-interval", type=_positive, default=1.0, metavar="S", help="heartbeats every S s (1)")
    a(
        "--refresh-interval",
        type=_positive,
        default=10.0,
        metavar="S",
        help="new topics, partitions and configs looked for every S s (10)",
    )
    a("--status-interval", type=float, default=10.0, metavar="S", help="status line every S s (10; 0: none)")
    a("--replication-factor", type=int, default=-1, metavar="N", help="of topics created on the target")
    a("--metrics", metavar="HOST:PORT", help="serve Prometheus metrics (records behind per partition)")
    p.set_defaults(func=run_mirror)


def _side(args: argparse.Namespace, side: str) -> Connection:
    """The ``side`` (source or target) cluster's connection; its bootstrap flag is required."""
    address = getattr(args, f"{side}_bootstrap")
    if not address:
        raise StoreError(f"--{side}-bootstrap-server HOST:PORT (or --{side}) is required: the {side} cluster")
    check_address(address, f"--{side}-bootstrap-server")
    return connection(args, side)


def _client_conf(conn: Connection, side: str) -> dict[str, Any]:
    conf = conn.client_config()
    conf.setdefault("client.id", f"sftraffic-mirror-{side}")
    return conf


def _check(conn: Connection, side: str) -> None:
    """One line when the ``side`` cluster does not answer or refuses the credentials."""
    try:
        ensure_reachable(conn.bootstrap)
    except StoreError:
        raise StoreError(
            f"--{side}-bootstrap-server {conn.bootstrap}: no broker reachable there; is the cluster running?"
        ) from None
    try:
        conn.check()
    except StoreError as exc:
        raise StoreError(f"{side} cluster: {exc.message}") from None


def run_mirror(args: argparse.Namespace) -> int:
    source, target = _side(args, "source"), _side(args, "target")
    try:
        policy = ReplicationPolicy(args.source_alias, args.target_alias, args.topics, args.groups)
    except ValueError as exc:
        raise StoreError(str(exc)) from None
    settings = MirrorSettings(
        source=_client_conf(source, "source"),
        target=_client_conf(target, "target"),
        policy=policy,
        commit_interval=args.commit_interval,
        checkpoint_interval=args.checkpoint_interval,
        heartbeat_interval=args.heartbeat_interval,
        refresh_interval=args.refresh_interval,
        status_interval=max(args.status_interval, 0.0),
        sync_group_offsets=args.sync_group_offsets,
        replication_factor=args.replication_factor,
        exactly_once=args.exactly_once,
    )
    _check(source, "source")
    _check(target, "target")

    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(levelname)s %(message)s")

    def say(line: str) -> None:
        print(f"mirror {policy.source_alias}->{policy.target_alias}: {line}", flush=True)

    mirror = Mirror(settings, say=say)
    server = _serve_metrics(args.metrics, mirror.stats, policy) if args.metrics else None
    stop = threading.Event()

    def on_signal(_sig: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    say(f"{source.bootstrap} -> {target.bootstrap}, topics {policy.topics!r}, groups {policy.groups!r}")
    try:
        mirror.run(stop)
    except MirrorError as exc:
        raise StoreError(str(exc)) from None
    finally:
        if server is not None:
            server.shutdown()
    snap = mirror.stats.snapshot()
    say(f"stopped: {snap['copied']} records copied, progress committed")
    return 0


def _serve_metrics(address: str, stats: MirrorStats, policy: ReplicationPolicy) -> ThreadingHTTPServer:
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise StoreError(f"--metrics {address!r}: expected HOST:PORT")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            snap = stats.snapshot()
            src = policy.source_alias
            lines = [
                "# HELP sftraffic_mirror_records_behind Source records not yet copied, per partition.",
                "# TYPE sftraffic_mirror_records_behind gauge",
                *(
                    f'sftraffic_mirror_records_behind{{source="{src}",topic="{t}",partition="{p}"}} {n}'
                    for (t, p), n in sorted(snap["behind"].items())
                ),
                "# TYPE sftraffic_mirror_records_copied_total counter",
                f'sftraffic_mirror_records_copied_total{{source="{src}"}} {snap["copied"]}',
                "# TYPE sftraffic_mirror_checkpoints_total counter",
                f'sftraffic_mirror_checkpoints_total{{source="{src}"}} {snap["checkpoints"]}',
                "# TYPE sftraffic_mirror_last_commit_timestamp_seconds gauge",
                f'sftraffic_mirror_last_commit_timestamp_seconds{{source="{src}"}} {snap["last_commit"]:.3f}',
            ]
            body = ("\n".join(lines) + "\n").encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    try:
        server = ThreadingHTTPServer((host, int(port)), Handler)
    except OSError as exc:
        raise StoreError(f"--metrics {address}: {exc.strerror or exc}") from None
    threading.Thread(target=server.serve_forever, name="mirror-metrics", daemon=True).start()
    return server
