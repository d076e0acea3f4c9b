"""``sftraffic``: one console script, one subcommand per part of the system.

Subcommands live in their own modules, each with ``add_parser(subparsers)`` registering a
parser whose ``func`` default runs it and returns the exit code. The store's own commands are
listed here; application commands are found through the ``sftraffic.commands`` entry-point
group (each entry point names an ``add_parser`` function), so the store never imports an
application. An application command whose module cannot be imported (its extras are not
installed; such a module may say what it needs with ``common.require_modules``) is still
listed, and running it prints one line naming what is missing and exits 2.
A StoreError or a refused connection becomes a one-line message and exit code 2, never a
traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from importlib.metadata import EntryPoint, entry_points

from framework.errors import StoreError

COMMANDS = [
    "framework.cli.broker",
    "framework.cli.topics",
    "framework.cli.streams",
    "framework.cli.groups",
    "framework.cli.config_cmd",
    "framework.cli.users",
    "framework.cli.transactions",
    "framework.cli.cluster",
    "framework.cli.mirror",
]
# where applications installed with the store register their subcommands
ENTRY_POINT_GROUP = "sftraffic.commands"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sftraffic",
        description="IoT event store (Kafka protocol), and the application commands installed with it.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMANDS:
        importlib.import_module(name).add_parser(sub)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        _add_application_command(sub, ep)
    return parser


def _add_application_command(sub: argparse._SubParsersAction, ep: EntryPoint) -> None:  # type: ignore[type-arg]
    try:
        add_parser = ep.load()
    except ImportError as exc:  # app extras not installed: the store CLI still works
        missing = exc.name
        # no options of its own (not even --help): whatever follows gets the one-line answer
        p = sub.add_parser(
            ep.name,
            help=f"(needs the app extras: pip install 'sftraffic[app]'; missing {missing})",
            add_help=False,
            prefix_chars="\x00",
        )
        p.add_argument("args", nargs="*")
        p.set_defaults(func=lambda args, m=missing: _missing(m))
        return
    add_parser(sub)


def _missing(module: str | None) -> int:
    print(
        f"sftraffic: this command needs the application extras (missing {module}): "
        "pip install 'sftraffic[app]'",
        file=sys.stderr,
    )
    return 2


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        rc = args.func(args)
    except StoreError as exc:
        print(f"sftraffic {args.command}: {exc.message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except ConnectionError as exc:
        print(f"sftraffic {args.command}: {exc}", file=sys.stderr)
        return 2
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
