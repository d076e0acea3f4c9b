"""The one connection option set every client command takes.

``-b/--bootstrap-server HOST:PORT`` (``--bootstrap`` kept as an alias), ``-X KEY=VALUE``
(librdkafka's names, repeatable) and ``--command-config FILE`` (Kafka's properties format;
``--kafka-config`` kept as an alias), defaulting to ``$SFTRAFFIC_BOOTSTRAP`` and
``$SFTRAFFIC_CLIENT_CONFIG``. A command that talks to two clusters (``mirror``) adds the set twice
with a prefix: ``--source-bootstrap-server``, ``--source-command-config``, ``--source-X``.

A command adds the set with :func:`add_connection` and reads it with :func:`connection`; an
application command whose Kafka clients are made in many places (and in child processes) calls
:func:`configure_process` instead, which also hands the security settings to every client of the
process (:mod:`framework.client.security`).
"""

from __future__ import annotations

import argparse
import sys

from framework.cli.common import parse_kv
from framework.client import security
from framework.client.connection import BOOTSTRAP_ENV, CONFIG_ENV, DEFAULT_BOOTSTRAP, Connection, resolve

_ALIASES = {"": ("--bootstrap",), "source": ("--source",), "target": ("--target",)}
_CONFIG_ALIASES = {"": ("--kafka-config",), "source": ("--source-config",), "target": ("--target-config",)}


def _dest(prefix: str, name: str) -> str:
    return f"{prefix}_{name}" if prefix else name


def _x_flag(prefix: str) -> str:
    return f"--{prefix}-X" if prefix else "-X"


def add_connection(p: argparse.ArgumentParser, prefix: str = "", what: str = "") -> None:
    """Add the connection options to ``p`` (``prefix``: ``source`` or ``target`` for a second
    cluster, whose options then start with ``--source-``; ``what`` names that cluster in help)."""
    dash = f"{prefix}-" if prefix else ""
    title = f"connection to the {what or prefix} cluster" if prefix else "connection"
    g = p.add_argument_group(title)
    if prefix:
        flags = [f"--{dash}bootstrap-server", *_ALIASES.get(prefix, ())]
        default_help = "required"
    else:
        flags = ["-b", "--bootstrap-server", *_ALIASES[""]]
        default_help = f"default ${BOOTSTRAP_ENV} or {DEFAULT_BOOTSTRAP}"
    g.add_argument(
        *flags,
        dest=_dest(prefix, "bootstrap"),
        metavar="HOST:PORT",
        help=f"broker(s) to bootstrap from, comma-separated ({default_help})",
    )
    g.add_argument(
        _x_flag(prefix),
        dest=_dest(prefix, "client_config"),
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a client setting in librdkafka's names, e.g. security.protocol=SASL_SSL (repeatable; "
        "wins over the file)",
    )
    g.add_argument(
        f"--{dash}command-config",
        *_CONFIG_ALIASES.get(prefix, ()),
        dest=_dest(prefix, "command_config"),
        metavar="FILE",
        help="client properties file in Kafka's format (as kafka-*.sh --command-config; Java or "
        f"librdkafka names){'' if prefix else f'; default ${CONFIG_ENV}'}",
    )


def connection(args: argparse.Namespace, prefix: str = "") -> Connection:
    """The connection the options of ``args`` give (warnings about the file go to stderr)."""
    conn = resolve(
        getattr(args, _dest(prefix, "bootstrap"), None),
        getattr(args, _dest(prefix, "command_config"), None),
        parse_kv(
            getattr(args, _dest(prefix, "client_config"), []), f"{'--' + prefix + '-' if prefix else '-'}X"
        ),
        use_environment=not prefix,
        what=f"--{prefix + '-' if prefix else ''}command-config",
    )
    for line in conn.warnings:
        print(f"sftraffic: warning: {line}", file=sys.stderr)
    return conn


def configure_process(args: argparse.Namespace) -> Connection:
    """:func:`connection`, and its security settings for every Kafka client of this process and
    of the processes it starts (the file through ``$SFTRAFFIC_CLIENT_CONFIG``, ``-X`` in-process)."""
    conn = connection(args)
    security.configure(getattr(args, "command_config", None), parse_kv(args.client_config, "-X"))
    return conn
