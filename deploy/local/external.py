"""``--external HOST:PORT``: a command that otherwise starts its own store (``up``, ``bench``,
``chaos``) uses this running Kafka cluster instead, and starts nothing of a store.

In these commands ``--bootstrap`` (and ``-b`` in ``bench``) meant this before every client
command took ``-b/--bootstrap-server`` as "the cluster to talk to"; it stays a deprecated alias
of ``--external`` (one warning line on stderr when used). Where a command can reach a secured
cluster (``up``), that cluster's client settings come with it, as for every client command:
``--command-config FILE`` (Kafka's properties format, Java or librdkafka names; default
``$SFTRAFFIC_CLIENT_CONFIG``) and ``-X KEY=VALUE`` (security settings in librdkafka's names).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from framework.cli.common import parse_kv
from framework.client.connection import (
    CONFIG_ENV,
    Connection,
    check_address,
    ensure_reachable,
    is_security_key,
    resolve,
)
from framework.client.wire import BrokerUnavailable
from framework.errors import StoreError

FLAG = "--external"


class _DeprecatedAlias(argparse.Action):
    """``--bootstrap`` where it means ``--external``: the same value, and one warning line."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option: Any = None
    ) -> None:
        print(
            f"{parser.prog}: warning: {option} is deprecated here, use {FLAG} {values} (the running "
            "cluster to use instead of starting a store)",
            file=sys.stderr,
        )
        setattr(namespace, self.dest, values)


def add_external(
    p: argparse.ArgumentParser | argparse._ArgumentGroup,
    *,
    secured: bool = False,
    aliases: Sequence[str] = ("--bootstrap",),
    what: str = "",
) -> None:
    """Add ``--external`` (and its deprecated ``aliases``) to ``p``; ``secured``: also
    ``--command-config`` and ``-X`` for that cluster's security. ``what`` ends the help line."""
    p.add_argument(
        FLAG,
        dest="external",
        metavar="HOST:PORT",
        help=f"use this running Kafka cluster (any Kafka implementation) and start no store{what}",
    )
    p.add_argument(
        *aliases,
        dest="external",
        action=_DeprecatedAlias,
        metavar="HOST:PORT",
        help=f"deprecated alias of {FLAG} (one warning line on stderr)",
    )
    if not secured:
        return
    p.add_argument(
        "--command-config",
        metavar="FILE",
        help=f"with {FLAG}: that cluster's client properties in Kafka's format (as kafka-*.sh "
        f"--command-config; Java or librdkafka names; default ${CONFIG_ENV}); their security "
        "settings go to every part",
    )
    p.add_argument(
        "-X",
        dest="client_config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"with {FLAG}: one security setting in librdkafka's names, e.g. security.protocol=SASL_SSL "
        "(repeatable; wins over the file)",
    )


def external_connection(args: argparse.Namespace) -> Connection | None:
    """The ``--external`` cluster's connection, or None when the command is to start its own
    store (then ``--command-config``/``-X``, which describe that cluster, are refused)."""
    overrides = parse_kv(getattr(args, "client_config", None) or [], "-X")
    path = getattr(args, "command_config", None)
    if not args.external:
        if path or overrides:
            raise StoreError(
                f"--command-config and -X are the {FLAG} cluster's settings: give {FLAG} HOST:PORT "
                "too (a store started here is configured by the command itself)"
            )
        return None
    check_address(args.external, FLAG)
    if not hasattr(args, "command_config"):  # the command's clients speak PLAINTEXT only
        return Connection(args.external)
    bad = [k for k in overrides if not is_security_key(k)]
    if bad:
        raise StoreError(f"-X {bad[0]}: only security settings (security.protocol, sasl.*, ssl.*) here")
    conn = resolve(args.external, path, overrides, what="--command-config")
    for line in conn.warnings:
        print(f"sftraffic: warning: {line}", file=sys.stderr)
    return conn


def check(conn: Connection, timeout: float = 5.0) -> None:
    """One line, before anything starts, when the cluster does not answer or refuses the
    credentials."""
    try:
        ensure_reachable(conn.bootstrap, timeout)
    except BrokerUnavailable:
        raise StoreError(
            f"{FLAG} {conn.bootstrap}: no broker reachable there; is the cluster running?"
        ) from None
    conn.check(timeout)
