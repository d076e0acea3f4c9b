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
# application parts (need the app extras; the store runs without them)
OPTIONAL_COMMANDS: dict[str, str] = {
    "sensors.cli": "sensors",
    "sensors.gateway_cli": "gateway",
    "pipelines.jobs": "pipeline",
    "dashboard.cli": "dashboard",
    "load.load_cli": "load",
    "load.bench_cli": "bench",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sftraffic",
        description="IoT event store (Kafka protocol) and San Francisco traffic-monitoring demo.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMANDS:
        importlib.import_module(name).add_parser(sub)
    for name, command in OPTIONAL_COMMANDS.items():
        try:
            mod = importlib.import_module(name)
        except ImportError as exc:  # app extras not installed: the store CLI still works
            missing = exc.name
            p = sub.add_parser(
                command,
                help=f"(needs the app extras: pip install 'sftraffic[app]'; missing {missing})",
            )
            p.set_defaults(func=lambda args, m=missing: _missing(m))
            continue
        mod.add_parser(sub)
    return parser


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
