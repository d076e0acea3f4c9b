"""``sftraffic cluster roll``: a rolling restart, one broker at a time (issue 21).

Each broker is restarted by ``--restart-command`` (``{id}`` is its node id), after every
partition is fully in sync and before the next one, with preferred leaders elected again after
each; see ``framework/client/roll.py`` for the steps. The command must return once the broker
has stopped and been started again (``systemctl restart sftraffic-broker@{id}``; ``kubectl
delete pod sftraffic-broker-{id}``, which waits for the pod to go, and the StatefulSet starts
it again). Works against any Kafka-API cluster.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
from collections.abc import Callable

from rich.console import Console

from framework.cli.common import ensure_reachable, quiet_logger
from framework.cli.streams import add_connection, client_config
from framework.client.roll import RollError, roll
from framework.errors import StoreError

console = Console()


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("cluster", help="operations on a whole cluster (rolling restart)")
    csub = p.add_subparsers(dest="action", metavar="ACTION")
    csub.required = True
    r = csub.add_parser(
        "roll",
        help="restart the brokers one at a time, each once every partition is in sync",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_connection(r)
    r.add_argument(
        "--restart-command",
        required=True,
        metavar="CMD",
        help="command restarting one broker; {id} is its node id "
        "(e.g. 'systemctl restart sftraffic-broker@{id}')",
    )
    r.add_argument(
        "--brokers", metavar="ID,...", help="only these brokers (default: all, the controller last)"
    )
    r.add_argument(
        "--timeout", type=float, default=300.0, help="seconds each step may take to be in sync (default 300)"
    )
    r.add_argument(
        "--no-elect", action="store_true", help="do not elect preferred leaders after each restart"
    )
    r.set_defaults(func=run_roll)


def _restart_with(template: str) -> Callable[[int], None]:
    if "{id}" not in template:
        raise StoreError("--restart-command must contain {id} (the node id of the broker to restart)")

    def restart(node_id: int) -> None:
        argv = shlex.split(template.replace("{id}", str(node_id)))
        try:
            done = subprocess.run(argv, check=False, capture_output=True, text=True)
        except OSError as exc:
            raise RollError(f"broker {node_id}: cannot run {argv[0]!r}: {exc.strerror}") from None
        if done.returncode != 0:
            why = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            raise RollError(f"broker {node_id}: {shlex.join(argv)} exited {done.returncode}: {why[0]}")

    return restart


def run_roll(args: argparse.Namespace) -> int:
    only = None
    if args.brokers:
        try:
            only = [int(b) for b in args.brokers.split(",") if b.strip()]
        except ValueError:
            raise StoreError(f"--brokers {args.brokers!r}: expected node ids, e.g. 1,2,3") from None
    restart = _restart_with(args.restart_command)
    ensure_reachable(args.bootstrap)
    conf = {"bootstrap.servers": args.bootstrap, "logger": quiet_logger(), **client_config(args)}
    done = roll(
        conf,
        restart,
        timeout=args.timeout,
        elect=not args.no_elect,
        only=only,
        say=lambda line: console.print(line, highlight=False),
    )
    console.print(f"rolled {len(done)} brokers: {', '.join(map(str, done))}", highlight=False)
    return 0
