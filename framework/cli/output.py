"""What the store's admin commands share: a subcommand with a one-line help and an example, the
connection (the shared option set, checked before a client starts), ``-o table|json``, and
confluent-kafka's exceptions as one line.

``-o json`` writes one JSON document to stdout (indented; field names in snake_case, Kafka's
names: ``partition``, ``leader``, ``isr``, ``config_source`` ...), and nothing else goes to
stdout then, so ``sftraffic topics list -o json | jq -r '.topics[].name'`` works; a per-item
failure (one of three topics does not exist) is a line on stderr and exit code 2, the others
are still in the document. Tables (rich) are the default.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.table import Table

from framework.cli.common import kafka_error, quiet_logger
from framework.cli.connection import add_connection, connection
from framework.client.connection import Connection
from framework.errors import StoreError

__all__ = [
    "add_output",
    "admin",
    "command",
    "command_group",
    "connect",
    "console",
    "json_wanted",
    "kafka_errors",
    "print_json",
    "table",
    "warn",
]

console = Console()


def table(*headers: str, title: str | None = None) -> Table:
    """A rich table whose long cells (member ids, addresses) fold onto more lines instead of
    being cut off."""
    t = Table(title=title)
    for h in headers:
        t.add_column(h, overflow="fold")
    return t


def command_group(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    name: str,
    help: str,
    description: str,
    examples: str,
) -> argparse._SubParsersAction:  # type: ignore[type-arg]
    """A command of subcommands (``topics``, ``acls`` ...): its one-line ``help``, a
    ``description``, ``examples`` (indented lines) as its epilog; returns the action to add its
    subcommands to, one of which must be given."""
    p: argparse.ArgumentParser = sub.add_parser(
        name,
        help=help,
        description=description,
        epilog=f"examples:\n{examples}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions: argparse._SubParsersAction = p.add_subparsers(dest="action", metavar="ACTION")  # type: ignore[type-arg]
    actions.required = True
    return actions


def command(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    name: str,
    help: str,
    example: str,
    *,
    description: str | None = None,
    connect: bool = True,
    output: bool = False,
) -> argparse.ArgumentParser:
    """A subcommand parser with its one-line ``help``, an ``example`` (one or more lines) as its
    epilog, the connection options (``connect``) and ``-o table|json`` (``output``)."""
    lines = "\n".join(f"  {line}" for line in example.splitlines())
    p: argparse.ArgumentParser = sub.add_parser(
        name,
        help=help,
        description=description or (help[:1].upper() + help[1:] + "."),
        epilog=f"example:\n{lines}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    if output:
        add_output(p)
    if connect:
        add_connection(p)
    return p


def add_output(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-o",
        "--output",
        choices=("table", "json"),
        default="table",
        help="table (default) or json: one document on stdout, for jq",
    )


def json_wanted(args: argparse.Namespace) -> bool:
    return getattr(args, "output", "table") == "json"


def print_json(doc: Any) -> None:
    sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    sys.stdout.flush()


def warn(args: argparse.Namespace, message: str) -> None:
    """One line on stderr, as main() prints a failed command's error."""
    print(f"sftraffic {args.command}: {message}", file=sys.stderr)


def connect(args: argparse.Namespace) -> Connection:
    """The connection of ``args``, checked (:meth:`Connection.check`): unreachable, refused
    credentials, a bad file, or plaintext to a listener that wants TLS or SASL are one line and
    exit 2 before any client starts."""
    conn = connection(args)
    conn.check()
    return conn


def admin(conn: Connection) -> Any:
    """confluent-kafka's AdminClient on ``conn``."""
    from confluent_kafka.admin import AdminClient  # noqa: PLC0415 (not for --help)

    return AdminClient(conn.client_config(logger=quiet_logger()))


@contextmanager
def kafka_errors() -> Iterator[None]:
    """confluent-kafka's exceptions (a call's, a future's) as one-line StoreErrors."""
    from confluent_kafka import KafkaException  # noqa: PLC0415

    try:
        yield
    except StoreError:
        raise
    except KafkaException as exc:
        raise kafka_error(exc) from None
    except concurrent.futures.TimeoutError:
        raise StoreError("no answer from the cluster in time") from None
    except ValueError as exc:  # confluent-kafka's checks of an argument (a name, a type)
        raise StoreError(str(exc)) from None
