"""``sftraffic chaos``: the command's options, the verdict table and the exit code.

The run itself (set up, act, heal, judge) is :class:`chaos.runner.Run`. Exit code 0 only when
every check passes, 1 otherwise, 2 when the run could not be set up (:class:`~chaos.runner.
SetupError`: bad options, no cluster).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from chaos.checker import FAIL, INFO, PASS
from chaos.nemesis import KINDS
from chaos.runner import Run, SetupError
from deploy.local import external

EPILOG = """\
examples:
  sftraffic chaos --duration 60 --nemesis kill,pause --json chaos.json     # a local 3-broker cluster
  sftraffic chaos --external k1:9092,k2:9092,k3:9092 --kill-cmd 'ssh k{node} pkill -9 -f kafka.Kafka'"""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "chaos",
        help="Jepsen-style check: faults while producing and reading, then a verdict on loss, "
        "duplication, order, reads and ISRs",
        description="A Jepsen-style checker: faults (kill, pause, term, link cuts) while producers "
        "write and a reader reads, then a verdict on loss, duplication, order, reads and ISRs. "
        "Starts a local cluster unless --external is given.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--duration", type=float, default=60, help="seconds of faults and writes (default 60)")
    p.add_argument("--brokers", type=int, default=3, help="local cluster size (default 3)")
    p.add_argument("--partitions", type=int, default=6, help="partitions of the test topic (default 6)")
    p.add_argument("--replication-factor", type=int, default=3, help="capped at --brokers (default 3)")
    p.add_argument("--min-insync", type=int, default=2, help="min.insync.replicas (default 2)")
    p.add_argument("--producers", type=int, default=2, help="concurrent producers (default 2)")
    p.add_argument("--rate", type=float, default=200, help="messages/s per producer (default 200)")
    p.add_argument(
        "--acks", default="all", choices=["all", "1", "0", "-1"], help="producer acks (default all)"
    )
    p.add_argument("--no-idempotence", action="store_true", help="producers without enable.idempotence")
    p.add_argument(
        "--workload",
        default="produce",
        choices=["produce", "transactions"],
        help="produce: unique values, checked for loss, duplication, order (default); transactions: "
        "transactional producers (multi-partition transactions, some aborted) and read_committed "
        "readers, checked for aborted reads (G1a), torn transactions, lost commits, duplicates",
    )
    p.add_argument(
        "--isolation",
        default="read_committed",
        choices=["read_committed", "read_uncommitted"],
        help="the transactions workload's readers (read_uncommitted: a broken setup, shows G1a)",
    )
    p.add_argument(
        "--txn-records",
        type=int,
        default=12,
        help="records per transaction (transactions workload, default 12)",
    )
    p.add_argument("--seed", type=int, help="fixes the nemesis schedule (default: random, printed)")
    p.add_argument(
        "--nemesis",
        help=f"comma-separated faults among {','.join(KINDS)} (default: every one the target "
        "supports; partition needs root for network namespaces)",
    )
    p.add_argument(
        "--interval", default="5-10", metavar="MIN-MAX", help="seconds between faults (default 5-10)"
    )
    p.add_argument(
        "--max-gap", type=float, default=30, help="longest acceptable silence of a partition, s (default 30)"
    )
    p.add_argument(
        "--heal-timeout", type=float, default=120, help="seconds to wait for whole ISRs after healing"
    )
    p.add_argument(
        "--data-dir", help="local brokers' data and logs (default: a temporary directory, kept on failure)"
    )
    p.add_argument(
        "--override",
        "-o",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="local broker config (repeatable)",
    )
    p.add_argument("--json", metavar="PATH", help="write the verdict, figures and timeline as JSON")
    _add_remote(p)
    p.set_defaults(func=run)


def _add_remote(p: argparse.ArgumentParser) -> None:
    """The options of a run on an existing cluster: where it is, how to act on its brokers."""
    remote = p.add_argument_group("an existing cluster ({node} is replaced by the broker id)")
    external.add_external(remote, what=" (HOST:PORT,...; PLAINTEXT)")
    remote.add_argument("--nodes", help="broker ids to act on (default: every broker Metadata lists)")
    remote.add_argument("--kill-cmd", help="SIGKILL a broker, e.g. 'ssh b{node} pkill -9 -f kafka'")
    remote.add_argument("--term-cmd", help="stop a broker gracefully (SIGTERM)")
    remote.add_argument("--start-cmd", help="start a killed/stopped broker (default: its supervisor does)")
    remote.add_argument("--pause-cmd", help="SIGSTOP a broker")
    remote.add_argument("--resume-cmd", help="SIGCONT a paused broker")


def render(doc: dict[str, Any], console: Console) -> None:
    c = doc["config"]
    if c.get("workload") == "transactions":
        f = doc["figures"]
        what = (
            f"transactions ({f['committed']} committed, {f['aborted']} aborted, {f['unknown']} unknown), "
            f"readers {c['isolation']}"
        )
    else:
        what = f"acks={c['acks']}, idempotence {'on' if c['idempotence'] else 'off'}"
    table = Table(
        title=f"sftraffic chaos: seed {doc['seed']}, {c['brokers']} brokers, {what}, "
        f"{c['duration_s']:.0f} s, "
        f"{doc['figures']['faults']} faults ({','.join(c['nemesis'])})",
        title_justify="left",
    )
    table.add_column("check")
    table.add_column("result")
    table.add_column("figures")
    colours = {PASS: "green", FAIL: "bold red", INFO: "yellow"}
    for ch in doc["checks"]:
        table.add_row(ch["name"], f"[{colours[ch['status']]}]{ch['status']}[/]", ch["summary"])
    console.print(table)
    for ch in doc["checks"]:
        if ch["status"] == FAIL and ch["examples"]:
            console.print(f"[bold red]{ch['name']}[/] e.g. {json.dumps(ch['examples'][:3])}")
    verdict = "[bold green]PASS[/]" if doc["passed"] else "[bold red]FAIL[/]"
    console.print(f"verdict: {verdict}")


def run(args: argparse.Namespace) -> int:
    console = Console(highlight=False)
    try:
        r = Run(args, console)
    except SetupError as exc:
        console.print(f"sftraffic chaos: {exc}", soft_wrap=True)  # one line, however long
        return 2
    doc: dict[str, Any] | None = None
    try:
        doc = r.execute()
    except SetupError as exc:
        console.print(f"sftraffic chaos: {exc}", soft_wrap=True)  # one line, however long
        return 2
    finally:
        r.close(passed=doc is not None and doc["passed"])
    render(doc, console)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(doc, indent=2))
        console.print(f"JSON: {args.json}")
    return 0 if doc["passed"] else 1
