"""``sftraffic broker``: run one event-store node."""

from __future__ import annotations

import argparse
import re
import socket

from framework import config as cfg
from framework.errors import ConfigError


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "broker",
        help="run one event-store node (Kafka protocol)",
        description="Run one event-store node. Settings come from --config (TOML, or Apache Kafka's "
        "server.properties), SFTRAFFIC_* environment variables and these flags, in increasing "
        "precedence; Kafka's key names are taken in each (see `sftraffic config reference`).",
    )
    ident = p.add_mutually_exclusive_group()
    ident.add_argument("--node-id", type=int, help="this broker's id (node.id)")
    ident.add_argument(
        "--node-id-from-hostname",
        action="store_true",
        help="node.id is the number ending this host's name: sftraffic-broker-2 is node 2 (a "
        "Kubernetes StatefulSet's pod ordinal), so every broker can share one command line",
    )
    p.add_argument(
        "--listen",
        metavar="HOST:PORT",
        help="one PLAINTEXT Kafka listener (listeners), e.g. 127.0.0.1:9092; several named ones with "
        "-o listeners=PLAINTEXT://127.0.0.1:9092,SASL_SSL://0.0.0.0:9093",
    )
    p.add_argument("--advertise", metavar="HOST:PORT", help="address given to clients (advertised.listeners)")
    p.add_argument("--data-dir", help="directory for logs and metadata (log.dirs)")
    p.add_argument(
        "--config",
        metavar="FILE",
        help="broker settings: a .toml file, or a .properties file in Apache Kafka's server.properties "
        "format (another name is read as whichever it parses as); Kafka settings sftraffic does "
        "not implement are warned of at start (see `sftraffic config reference`)",
    )
    p.add_argument("--metrics", metavar="HOST:PORT", help="serve Prometheus /metrics here (metrics.listen)")
    p.add_argument(
        "--voters",
        metavar="ID@HOST:PORT,...",
        help="run as a cluster member: the voters' controller (Raft) endpoints "
        "(controller.quorum.voters), e.g. 1@127.0.0.1:19092,2@127.0.0.1:19093,3@127.0.0.1:19094; "
        "a broker whose --node-id is not listed joins as a non-voting observer",
    )
    p.add_argument(
        "--override",
        "-o",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set any broker config key, e.g. -o log.retention.ms=60000 (repeatable; wins over the "
        "flags above)",
    )
    p.set_defaults(func=run)


def load_config(args: argparse.Namespace) -> cfg.BrokerConfig:
    """Flags, then ``-o KEY=VALUE`` over them (``-o listeners=...`` names several listeners
    where ``--listen`` gives one)."""
    overrides: dict[str, object] = {}
    if args.node_id is not None:
        overrides["node.id"] = args.node_id
    elif getattr(args, "node_id_from_hostname", False):
        overrides["node.id"] = node_id_from_hostname(socket.gethostname())
    if args.listen:
        overrides["listeners"] = args.listen
    if args.advertise:
        overrides["advertised.listeners"] = args.advertise
    if args.data_dir:
        overrides["log.dirs"] = args.data_dir
    if args.metrics:
        overrides["metrics.listen"] = args.metrics
    if args.voters:
        overrides["controller.quorum.voters"] = args.voters
    for item in args.override:
        k, sep, v = item.partition("=")
        if not sep:
            raise ConfigError(f"--override {item!r}: expected KEY=VALUE")
        overrides[k.strip()] = v.strip()
    return cfg.BrokerConfig.load(args.config, overrides)


def node_id_from_hostname(hostname: str) -> int:
    """The number ending the first label of ``hostname`` (``broker-3.example.org`` is 3)."""
    label = hostname.split(".", 1)[0]
    m = re.search(r"(\d+)$", label)
    if m is None:
        raise ConfigError(
            f"--node-id-from-hostname: host name {hostname!r} does not end with a number "
            "(e.g. sftraffic-broker-1)"
        )
    return int(m.group(1))


def run(args: argparse.Namespace) -> int:
    # imported here: the broker's modules take a third of a second to load, which every other
    # command (and shell completion) would otherwise pay for
    from framework.server.run import run as run_broker  # noqa: PLC0415

    return run_broker(load_config(args))
