"""``sftraffic topics create|list|describe|delete``: topic admin through the Kafka protocol.

Uses confluent-kafka's AdminClient, so the same commands work against Apache Kafka or
Redpanda. ``--ttl`` is a friendly spelling of ``retention.ms`` (e.g. ``180d``).
"""

from __future__ import annotations

import argparse
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    ConfigResource,
    NewTopic,
)
from rich.console import Console
from rich.table import Table

from framework import config as cfg
from framework.cli.common import (
    add_bootstrap,
    ensure_reachable,
    kafka_error,
    parse_kv,
    quiet_logger,
)
from framework.errors import StoreError

console = Console()


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("topics", help="create, list, describe and delete topics")
    tsub = p.add_subparsers(dest="action", metavar="ACTION")
    tsub.required = True

    c = tsub.add_parser("create", help="create topics")
    c.add_argument("names", nargs="+", metavar="TOPIC", help="TOPIC or STREAM.TOPIC (a topic of that stream)")
    c.add_argument(
        "--partitions",
        "-p",
        type=int,
        default=-1,
        help="partition count (default: stream's or broker's)",
    )
    c.add_argument("--replication-factor", "-r", type=int, default=-1, help="replicas per partition")
    c.add_argument(
        "--config",
        "-c",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="topic config (repeatable)",
    )
    c.add_argument("--ttl", help="retention (time to live), e.g. 180d, 6h; same as -c retention.ms=...")
    c.add_argument("--if-not-exists", action="store_true", help="no error if the topic exists")
    add_bootstrap(c)
    c.set_defaults(func=create)

    ls = tsub.add_parser("list", help="list topics")
    ls.add_argument("--internal", action="store_true", help="include internal topics")
    add_bootstrap(ls)
    ls.set_defaults(func=list_)

    d = tsub.add_parser("describe", help="partitions, offsets and configs of topics")
    d.add_argument("names", nargs="+", metavar="TOPIC")
    add_bootstrap(d)
    d.set_defaults(func=describe)

    rm = tsub.add_parser("delete", help="delete topics and their data")
    rm.add_argument("names", nargs="+", metavar="TOPIC")
    rm.add_argument("--if-exists", action="store_true")
    add_bootstrap(rm)
    rm.set_defaults(func=delete)


def _admin(bootstrap: str) -> Any:
    ensure_reachable(bootstrap)
    a = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000, "logger": quiet_logger()})
    try:
        a.list_topics(timeout=10)
    except Exception as exc:
        raise kafka_error(exc) from None
    return a


def create(args: argparse.Namespace) -> int:
    configs = parse_kv(args.config)
    if args.ttl:
        configs["retention.ms"] = str(cfg.parse_duration_ms(args.ttl))
    a = _admin(args.bootstrap)
    futures = a.create_topics(
        [
            NewTopic(
                n,
                num_partitions=args.partitions,
                replication_factor=args.replication_factor,
                config=configs,
            )
            for n in args.names
        ],
        operation_timeout=30,
    )
    rc = 0
    for name, fut in futures.items():
        try:
            fut.result()
            console.print(f"created topic [bold]{name}[/bold]")
        except Exception as exc:
            err = kafka_error(exc)
            if args.if_not_exists and "TOPIC_ALREADY_EXISTS" in err.message:
                console.print(f"topic {name} already exists")
                continue
            console.print(f"[red]cannot create {name}[/red]: {err.message}")
            rc = 2
    return rc


def list_(args: argparse.Namespace) -> int:
    a = _admin(args.bootstrap)
    md = a.list_topics(timeout=10)
    table = Table("topic", "partitions", "replicas")
    for name in sorted(md.topics):
        if name.startswith("__") and not args.internal:
            continue
        t = md.topics[name]
        rf = len(next(iter(t.partitions.values())).replicas) if t.partitions else 0
        table.add_row(name, str(len(t.partitions)), str(rf))
    console.print(table)
    return 0


def describe(args: argparse.Namespace) -> int:
    a = _admin(args.bootstrap)
    md = a.list_topics(timeout=10)
    c = Consumer(
        {
            "bootstrap.servers": args.bootstrap,
            "group.id": "sftraffic-cli",
            "enable.auto.commit": False,
            "logger": quiet_logger(),
        }
    )
    rc = 0
    try:
        for name in args.names:
            t = md.topics.get(name)
            if t is None or t.error is not None:
                console.print(f"[red]topic {name} does not exist[/red]")
                rc = 2
                continue
            table = Table(
                "partition",
                "leader",
                "replicas",
                "isr",
                "earliest",
                "latest",
                title=f"topic {name}",
            )
            for pid in sorted(t.partitions):
                p = t.partitions[pid]
                lo, hi = c.get_watermark_offsets(TopicPartition(name, pid), timeout=10)
                table.add_row(
                    str(pid),
                    str(p.leader),
                    ",".join(map(str, p.replicas)),
                    ",".join(map(str, p.isrs)),
                    str(lo),
                    str(hi),
                )
            console.print(table)
            fut = a.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, name)])
            for res in fut.values():
                entries = res.result()
                ct = Table("config", "value", "source", title=f"{name} configs")
                for k in sorted(entries):
                    e = entries[k]
                    src = {1: "topic", 3: "stream", 4: "broker", 5: "default"}.get(
                        int(e.source), str(e.source)
                    )
                    ct.add_row(k, str(e.value), src)
                console.print(ct)
    except StoreError:
        raise
    except Exception as exc:
        raise kafka_error(exc) from None
    finally:
        c.close()
    return rc


def delete(args: argparse.Namespace) -> int:
    a = _admin(args.bootstrap)
    futures = a.delete_topics(list(args.names), operation_timeout=30)
    rc = 0
    for name, fut in futures.items():
        try:
            fut.result()
            console.print(f"deleted topic [bold]{name}[/bold]")
        except Exception as exc:
            err = kafka_error(exc)
            if args.if_exists and "UNKNOWN_TOPIC" in err.message:
                continue
            console.print(f"[red]cannot delete {name}[/red]: {err.message}")
            rc = 2
    return rc
