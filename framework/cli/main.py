"""``sftraffic``: one console script, one subcommand per part of the system.

Subcommands live in their own modules, each with ``add_parser(subparsers)`` registering a
parser whose ``func`` default runs it and returns the exit code. The store's own commands are
listed here; application commands are found through the ``sftraffic.commands`` entry-point
group (each entry point names an ``add_parser`` function), so the store never imports an
application. An application command whose module cannot be imported (its extras are not
installed; such a module may say what it needs with ``common.require_modules``) is still
listed, and running it prints one line naming what is missing and exits 2.
A StoreError or a refused connection becomes a one-line message and exit code 2, never a
traceback. The top-level help lists the commands in the groups of :data:`GROUPS`; a command no
group names is listed under "other".
"""

from __future__ import annotations

import argparse
import importlib
import sys
from importlib.metadata import EntryPoint, entry_points

from framework import __version__
from framework.errors import StoreError

COMMANDS = [
    "framework.cli.broker",
    "framework.cli.produce",
    "framework.cli.consume",
    "framework.cli.topics",
    "framework.cli.streams",
    "framework.cli.groups",
    "framework.cli.config_cmd",
    "framework.cli.configs",
    "framework.cli.acls",
    "framework.cli.users",
    "framework.cli.transactions",
    "framework.cli.cluster",
    "framework.cli.completion",
]
# where applications installed with the store register their subcommands
ENTRY_POINT_GROUP = "sftraffic.commands"


# the top-level help's groups, in order (a command of none of them is listed under "other")
GROUPS: dict[str, list[str]] = {
    "the store": ["broker", "produce", "consume", "topics", "streams", "groups"],
    "operate": [
        "cluster", "configs", "acls", "users", "transactions", "mirror", "registry",
        "registry-passwd", "console", "config",
    ],
    "the traffic demo": ["up", "sensors", "gateway", "pipeline", "dashboard"],
    "testing": ["bench", "load", "chaos"],
    "shell": ["completion"],
}  # fmt: skip

EPILOG = """\
The store alone, in four commands:
  sftraffic broker --node-id 1 --listen 127.0.0.1:9092 --data-dir /tmp/sftraffic &
  sftraffic topics create demo
  echo hello | sftraffic produce demo
  sftraffic consume demo --from-beginning -e

`sftraffic COMMAND --help` shows a command's options and an example."""


class _TopLevelParser(argparse.ArgumentParser):
    """Lists the subcommands in :data:`GROUPS` instead of argparse's one flat list."""

    def format_help(self) -> str:
        sub = next(a for a in self._actions if isinstance(a, argparse._SubParsersAction))
        helps = {a.dest: a.help or "" for a in sub._choices_actions}
        placed = {name for names in GROUPS.values() for name in names}
        groups = {**GROUPS, "other": sorted(n for n in helps if n not in placed)}
        lines = [self.format_usage().rstrip(), "", self.description or "", ""]
        width = max(map(len, helps)) + 2
        for title, names in groups.items():
            present = [n for n in names if n in helps]
            if present:
                lines.append(f"{title}:")
                lines += [f"  {n.ljust(width)}{helps[n]}" for n in present]
                lines.append("")
        lines += ["options:", "  -h, --help".ljust(width + 2) + "show this help and exit"]
        lines += ["  --version".ljust(width + 2) + "versions of sftraffic, the Kafka protocol, Python", ""]
        lines.append(self.epilog or "")
        return "\n".join(lines) + "\n"


def build_parser() -> argparse.ArgumentParser:
    parser = _TopLevelParser(
        prog="sftraffic",
        description="An IoT event store that speaks the Apache Kafka protocol, and the San Francisco "
        "traffic demo built on it.",
        epilog=EPILOG,
    )
    parser.add_argument("--version", action=_VersionAction)
    # the commands are plain parsers (the top-level one formats its help its own way)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=argparse.ArgumentParser)
    sub.required = True
    for name in COMMANDS:
        importlib.import_module(name).add_parser(sub)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        _add_application_command(sub, ep)
    return parser


class _VersionAction(argparse.Action):
    """``--version``: print :func:`version_text` and exit (computed only when asked)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kw: object) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS)

    def __call__(self, parser: argparse.ArgumentParser, *_args: object, **_kw: object) -> None:
        parser.exit(message=version_text() + "\n")


def version_text() -> str:
    """The package version, the Kafka APIs served and how the produce path is built."""
    from framework.protocol import record_walk  # noqa: PLC0415 (only for --version)
    from framework.protocol.api import API_TABLE  # noqa: PLC0415

    apis = sorted(API_TABLE.values(), key=lambda e: e.key)
    core = ", ".join(
        f"{e.name} v{e.min_version}-{e.max_version}"
        for e in apis
        if e.name in ("Produce", "Fetch", "Metadata")
    )
    walk = "compiled (mypyc)" if record_walk.COMPILED else "pure Python (no C compiler at install)"
    return (
        f"sftraffic {__version__}\n"
        f"Kafka protocol: {len(apis)} APIs, as Apache Kafka 4.x serves them ({core}, ...; "
        "`sftraffic cluster info` lists them)\n"
        f"record walk: {walk}\n"
        f"Python {sys.version.split()[0]}"
    )


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
    try:
        import argcomplete  # noqa: PLC0415 (only its completion hook: quick when not completing)
    except ImportError:  # pragma: no cover - a dependency, but completion is optional
        pass
    else:
        argcomplete.autocomplete(parser)
    args = parser.parse_args(argv)
    try:
        rc = args.func(args)
    except StoreError as exc:
        print(f"sftraffic {args.command}: {exc.message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except OSError as exc:  # a file that is missing or unreadable, a socket that failed
        where = f" {exc.filename}" if getattr(exc, "filename", None) else ""
        print(f"sftraffic {args.command}:{where} {exc.strerror or exc}", file=sys.stderr)
        return 2
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
