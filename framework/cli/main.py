"""``sftraffic``: one console script, one subcommand per part of the system.

Subcommands live in their own modules, each with ``add_parser(subparsers)`` registering a
parser whose ``func`` default runs it and returns the exit code. A StoreError or a refused
connection becomes a one-line message and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from framework.errors import StoreError

COMMANDS = [
    "framework.cli.broker",
    "framework.cli.topics",
    "framework.cli.streams",
    "framework.cli.groups",
    "framework.cli.up",
    "framework.cli.config_cmd",
]
OPTIONAL_COMMANDS: list[str] = []


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sftraffic",
        description="IoT event store (Kafka protocol) and San Francisco traffic-monitoring demo.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMANDS + OPTIONAL_COMMANDS:
        mod = importlib.import_module(name)
        mod.add_parser(sub)
    return parser


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
