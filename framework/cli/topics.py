"""``sftraffic topics create|list|describe|alter|delete``: topic admin over the Kafka protocol.

confluent-kafka's AdminClient (CreateTopics, Metadata, ListOffsets, DescribeConfigs,
CreatePartitions, IncrementalAlterConfigs, DeleteTopics), so the same commands work against
Apache Kafka. ``--ttl`` is a friendly spelling of ``retention.ms`` (e.g. ``180d``).

``describe -o json``: ``{"topics": [{"name", "topic_id", "is_internal", "partitions":
[{"partition", "leader", "replicas", "isr", "earliest_offset", "latest_offset"}], "configs":
[{"name", "value", "source", "is_sensitive", "is_read_only", "synonyms"}]}]}``; a config's
``source`` is one of :data:`framework.client.admin.SOURCE_NAMES` (``topic``, ``stream`` (set on
the topic's sftraffic stream), ``dynamic_broker``, ``static_broker``, ``default`` ...).
``list -o json``: ``{"topics": [{"name", "partitions", "replication_factor", "is_internal"}]}``.
"""

from __future__ import annotations

import argparse
from typing import Any

from rich.table import Table

from framework import config as cfg
from framework.cli.common import parse_kv
from framework.cli.output import (
    admin,
    command,
    command_group,
    connect,
    console,
    json_wanted,
    kafka_errors,
    print_json,
    table,
    warn,
)
from framework.client.admin import ConfigRow, config_rows
from framework.errors import StoreError

EXAMPLES = """\
  sftraffic topics create traffic.speeds --partitions 6 --ttl 180d
  sftraffic topics alter traffic.speeds --partitions 12 -c retention.ms=86400000
  sftraffic topics describe traffic.speeds -o json | jq '.topics[0].partitions | length'
  sftraffic topics list --command-config .sftraffic/secure/sftraffic-admin.properties   # after up --secure"""


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    tsub = command_group(
        sub,
        "topics",
        "create, list, describe, alter and delete topics",
        "Topics over the Kafka protocol (any Kafka cluster).",
        EXAMPLES,
    )

    c = command(
        tsub, "create", "create topics", "sftraffic topics create traffic.speeds --partitions 6 --ttl 180d"
    )
    c.add_argument("names", nargs="+", metavar="TOPIC", help="TOPIC or STREAM.TOPIC (a topic of that stream)")
    c.add_argument(
        "--partitions", "-p", type=int, default=-1, help="partition count (default: stream's or broker's)"
    )
    c.add_argument("--replication-factor", "-r", type=int, default=-1, help="replicas per partition")
    _config_flag(c)
    c.add_argument("--ttl", help="retention (time to live), e.g. 180d, 6h; same as -c retention.ms=...")
    c.add_argument("--if-not-exists", action="store_true", help="no error if the topic exists")
    c.set_defaults(func=create)

    ls = command(
        tsub, "list", "list topics", "sftraffic topics list -o json | jq -r '.topics[].name'", output=True
    )
    ls.add_argument(
        "--internal", action="store_true", help="include internal topics (__consumer_offsets ...)"
    )
    ls.set_defaults(func=list_)

    d = command(
        tsub,
        "describe",
        "partitions, offsets and configs of topics",
        "sftraffic topics describe traffic.speeds -o json",
        output=True,
    )
    d.add_argument("names", nargs="+", metavar="TOPIC")
    d.add_argument(
        "--all-configs",
        action="store_true",
        help="every config, defaults too (default: those set on the topic, its stream or the broker)",
    )
    d.set_defaults(func=describe)

    a = command(
        tsub,
        "alter",
        "add partitions to a topic or change its configs",
        "sftraffic topics alter traffic.speeds --partitions 12 -c retention.ms=86400000 "
        "--delete-config segment.ms",
    )
    a.add_argument("name", metavar="TOPIC")
    a.add_argument(
        "--partitions", "-p", type=int, help="the new partition count (more than now: CreatePartitions)"
    )
    _config_flag(a)
    a.add_argument("--ttl", help="retention, e.g. 7d; same as -c retention.ms=...")
    a.add_argument(
        "--delete-config",
        action="append",
        default=[],
        metavar="KEY",
        help="remove a topic config (back to its stream's or the broker's; repeatable)",
    )
    a.set_defaults(func=alter)

    rm = command(tsub, "delete", "delete topics and their data", "sftraffic topics delete traffic.speeds")
    rm.add_argument("names", nargs="+", metavar="TOPIC")
    rm.add_argument("--if-exists", action="store_true", help="no error if a topic does not exist")
    rm.set_defaults(func=delete)


def _config_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--config", "-c", action="append", default=[], metavar="KEY=VALUE", help="topic config (repeatable)"
    )


def _configs(args: argparse.Namespace) -> dict[str, str]:
    configs = parse_kv(args.config, "--config")
    if args.ttl:
        configs["retention.ms"] = str(cfg.parse_duration_ms(args.ttl))
    return configs


def create(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]  # noqa: PLC0415

    configs = _configs(args)
    a = admin(connect(args))
    with kafka_errors():
        new = [NewTopic(n, args.partitions, args.replication_factor, config=configs) for n in args.names]
        futures = a.create_topics(new, operation_timeout=30, request_timeout=40)
    rc = 0
    for name, fut in futures.items():
        try:
            with kafka_errors():
                fut.result()
            console.print(f"created topic [bold]{name}[/bold]")
        except StoreError as err:
            if args.if_not_exists and "TOPIC_ALREADY_EXISTS" in err.message:
                console.print(f"topic {name} already exists")
                continue
            warn(args, f"cannot create topic {name}: {err.message}")
            rc = 2
    return rc


def list_(args: argparse.Namespace) -> int:
    a = admin(connect(args))
    with kafka_errors():
        md = a.list_topics(timeout=15)
    rows = []
    for name in sorted(md.topics):
        internal = name.startswith("__")
        if internal and not args.internal:
            continue
        t = md.topics[name]
        rf = len(next(iter(t.partitions.values())).replicas) if t.partitions else 0
        rows.append(
            {"name": name, "partitions": len(t.partitions), "replication_factor": rf, "is_internal": internal}
        )
    if json_wanted(args):
        print_json({"topics": rows})
        return 0
    tbl = table("topic", "partitions", "replicas")
    for r in rows:
        tbl.add_row(r["name"], str(r["partitions"]), str(r["replication_factor"]))
    console.print(tbl)
    return 0


def describe_topics(a: Any, names: list[str], args: argparse.Namespace) -> tuple[list[dict[str, Any]], int]:
    """Each existing topic of ``names`` as a JSON-ready dict (see the module doc); the rc."""
    from confluent_kafka import TopicCollection, TopicPartition  # noqa: PLC0415
    from confluent_kafka.admin import ConfigResource, OffsetSpec  # type: ignore[attr-defined]  # noqa: PLC0415

    rc = 0
    found: list[Any] = []
    with kafka_errors():
        futures = a.describe_topics(TopicCollection(list(dict.fromkeys(names))), request_timeout=15)
    for name, fut in futures.items():
        try:
            with kafka_errors():
                found.append(fut.result())
        except StoreError as err:
            warn(args, f"topic {name}: {_missing(err.message)}")
            rc = 2
    if not found:
        return [], rc
    tps = [TopicPartition(t.name, p.id) for t in found for p in t.partitions]
    with kafka_errors():
        first, last = OffsetSpec.earliest(), OffsetSpec.latest()  # type: ignore[no-untyped-call]
        earliest = a.list_offsets({tp: first for tp in tps}, request_timeout=15)
        latest = a.list_offsets({tp: last for tp in tps}, request_timeout=15)
        lo = {(k.topic, k.partition): f.result().offset for k, f in earliest.items()}
        hi = {(k.topic, k.partition): f.result().offset for k, f in latest.items()}
        resources = [ConfigResource(ConfigResource.Type.TOPIC, t.name) for t in found]
        configs = {r.name: config_rows(f.result()) for r, f in a.describe_configs(resources).items()}
    out = []
    for t in found:
        parts = [
            {
                "partition": p.id,
                "leader": p.leader.id if p.leader is not None else -1,
                "replicas": [r.id for r in p.replicas],
                "isr": [r.id for r in p.isr],
                "earliest_offset": lo[(t.name, p.id)],
                "latest_offset": hi[(t.name, p.id)],
            }
            for p in sorted(t.partitions, key=lambda p: p.id)
        ]
        rows = [c for c in configs[t.name] if args.all_configs or c.source not in ("default", "unknown")]
        out.append(
            {
                "name": t.name,
                "topic_id": str(t.topic_id) if t.topic_id is not None else None,
                "is_internal": bool(t.is_internal),
                "partitions": parts,
                "configs": [c.to_json() for c in rows],
            }
        )
    return out, rc


def _missing(message: str) -> str:
    return "does not exist" if "UNKNOWN_TOPIC" in message else message


def describe(args: argparse.Namespace) -> int:
    a = admin(connect(args))
    topics, rc = describe_topics(a, list(args.names), args)
    if json_wanted(args):
        print_json({"topics": topics})
        return rc
    for t in topics:
        tbl = table(
            "partition", "leader", "replicas", "isr", "earliest", "latest", title=f"topic {t['name']}"
        )
        for p in t["partitions"]:
            tbl.add_row(
                str(p["partition"]),
                str(p["leader"]),
                ",".join(map(str, p["replicas"])),
                ",".join(map(str, p["isr"])),
                str(p["earliest_offset"]),
                str(p["latest_offset"]),
            )
        console.print(tbl)
        console.print(config_table(t["configs"], f"{t['name']} configs"))
    return rc


def config_table(configs: list[dict[str, Any]], title: str) -> Table:
    """Configs (as :meth:`ConfigRow.to_json` gives them) as a table: name, value, source."""
    ct = table("config", "value", "source", title=title)
    for c in configs:
        value = "(sensitive)" if c["is_sensitive"] else ("" if c["value"] is None else str(c["value"]))
        ct.add_row(c["name"], value, c["source"])
    return ct


def alter(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import (  # type: ignore[attr-defined]  # noqa: PLC0415
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewPartitions,
    )

    configs = _configs(args)
    if args.partitions is None and not configs and not args.delete_config:
        raise StoreError("nothing to alter: give --partitions N, -c KEY=VALUE or --delete-config KEY")
    both = sorted(set(configs) & set(args.delete_config))
    if both:
        raise StoreError(f"{both[0]}: both set (-c) and deleted (--delete-config)")
    a = admin(connect(args))
    name = args.name
    with kafka_errors():
        if configs or args.delete_config:
            entries = [
                ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()
            ]
            entries += [
                ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE)
                for k in args.delete_config
            ]
            res = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=entries)
            for fut in a.incremental_alter_configs([res], request_timeout=30).values():
                fut.result()
            changed = [f"{k}={v}" for k, v in configs.items()] + [f"-{k}" for k in args.delete_config]
            console.print(f"topic [bold]{name}[/bold]: {', '.join(changed)}", highlight=False)
        if args.partitions is not None:
            for fut in a.create_partitions(
                [NewPartitions(name, args.partitions)], operation_timeout=30, request_timeout=40
            ).values():
                fut.result()
            console.print(f"topic [bold]{name}[/bold]: {args.partitions} partitions", highlight=False)
    return 0


def delete(args: argparse.Namespace) -> int:
    a = admin(connect(args))
    with kafka_errors():
        futures = a.delete_topics(list(args.names), operation_timeout=30, request_timeout=40)
    rc = 0
    for name, fut in futures.items():
        try:
            with kafka_errors():
                fut.result()
            console.print(f"deleted topic [bold]{name}[/bold]")
        except StoreError as err:
            if args.if_exists and "UNKNOWN_TOPIC" in err.message:
                continue
            warn(args, f"cannot delete topic {name}: {_missing(err.message)}")
            rc = 2
    return rc


__all__ = ["ConfigRow", "add_parser", "config_table", "describe_topics"]
