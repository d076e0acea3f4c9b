"""``sftraffic groups list|describe|reset-offsets``: consumer groups and lag, like kafka-consumer-groups.

Talks only Kafka (confluent-kafka's AdminClient), so it works against any Kafka cluster.
``reset-offsets`` is a dry run unless ``--execute`` is given, and refuses a group with live
members (its consumers would overwrite the reset), as Kafka's tool does.
"""

from __future__ import annotations

import argparse
import datetime as dt
from typing import Any

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient
from rich.console import Console
from rich.table import Table

from framework.cli.common import add_bootstrap, ensure_reachable, kafka_error, quiet_logger
from framework.errors import StoreError

console = Console()


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("groups", help="consumer groups: list, describe (lag), reset offsets")
    gsub = p.add_subparsers(dest="action", metavar="ACTION")
    gsub.required = True

    ls = gsub.add_parser("list", help="list consumer groups")
    add_bootstrap(ls)
    ls.set_defaults(func=list_)

    d = gsub.add_parser("describe", help="members, committed offsets and lag per partition")
    d.add_argument("groups", nargs="+")
    add_bootstrap(d)
    d.set_defaults(func=describe)

    r = gsub.add_parser("reset-offsets", help="move a group's committed offsets (dry run unless --execute)")
    r.add_argument("group")
    r.add_argument("--topic", "-t", action="append", required=True, help="topic (repeatable)")
    to = r.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true")
    to.add_argument("--to-latest", action="store_true")
    to.add_argument("--to-datetime", metavar="ISO8601", help="e.g. 2026-11-23T08:00:00 (local time) or ...Z")
    to.add_argument("--to-offset", type=int)
    to.add_argument("--shift-by", type=int, help="move every partition by N (negative: back)")
    r.add_argument("--execute", action="store_true", help="apply (default: only show the plan)")
    add_bootstrap(r)
    r.set_defaults(func=reset)


def _clients(bootstrap: str) -> tuple[Any, Any]:
    ensure_reachable(bootstrap)
    admin = AdminClient({"bootstrap.servers": bootstrap, "logger": quiet_logger()})
    cons = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "sftraffic-cli-lag",
            "enable.auto.commit": False,
            "logger": quiet_logger(),
        }
    )
    return admin, cons


def list_(args: argparse.Namespace) -> int:
    admin, cons = _clients(args.bootstrap)
    try:
        res = admin.list_consumer_groups(request_timeout=10).result()
    except Exception as exc:
        raise kafka_error(exc) from None
    finally:
        cons.close()
    t = Table("group", "state", "type")
    for g in sorted(res.valid, key=lambda g: g.group_id):
        t.add_row(
            g.group_id,
            str(g.state).split(".")[-1],
            "simple" if g.is_simple_consumer_group else "consumer",
        )
    console.print(t)
    return 0


def committed_and_lag(admin: Any, cons: Any, group: str) -> list[tuple[str, int, int, int, int | None]]:
    """(topic, partition, committed or -1, log end, lag or None) for every committed partition."""
    res = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result()
    rows = []
    for tp in sorted(res.topic_partitions, key=lambda x: (x.topic, x.partition)):
        _, end = cons.get_watermark_offsets(TopicPartition(tp.topic, tp.partition), timeout=10)
        lag = end - tp.offset if tp.offset >= 0 else None
        rows.append((tp.topic, tp.partition, tp.offset, end, lag))
    return rows


def describe(args: argparse.Namespace) -> int:
    admin, cons = _clients(args.bootstrap)
    rc = 0
    try:
        descs = admin.describe_consumer_groups(list(args.groups), request_timeout=10)
        for group in args.groups:
            try:
                d = descs[group].result()
            except Exception as exc:
                console.print(f"[red]group {group}[/red]: {kafka_error(exc).message}")
                rc = 2
                continue
            owner: dict[tuple[str, int], Any] = {}
            for m in d.members:
                for tp in m.assignment.topic_partitions if m.assignment else []:
                    owner[(tp.topic, tp.partition)] = m
            state = str(d.state).split(".")[-1]
            t = Table(
                "topic",
                "partition",
                "committed",
                "log end",
                "lag",
                "consumer",
                "host",
                "client",
                title=f"group {group} ({state}, {len(d.members)} member(s))",
            )
            total = 0
            for topic, part, off, end, lag in committed_and_lag(admin, cons, group):
                m = owner.get((topic, part))
                total += lag or 0
                t.add_row(
                    topic,
                    str(part),
                    str(off) if off >= 0 else "-",
                    str(end),
                    str(lag) if lag is not None else "-",
                    m.member_id if m else "-",
                    m.host if m else "-",
                    m.client_id if m else "-",
                )
            console.print(t)
            console.print(f"total lag: {total}")
    except StoreError:
        raise
    except Exception as exc:
        raise kafka_error(exc) from None
    finally:
        cons.close()
    return rc


def _timestamp_ms(text: str) -> int:
    try:
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise StoreError(f"--to-datetime {text!r}: use ISO 8601, e.g. 2026-11-23T08:00:00") from None
    if when.tzinfo is None:
        when = when.astimezone()
    return int(when.timestamp() * 1000)


def reset(args: argparse.Namespace) -> int:
    admin, cons = _clients(args.bootstrap)
    try:
        d = admin.describe_consumer_groups([args.group], request_timeout=10)[args.group].result()
        if d.members:
            raise StoreError(
                f"group {args.group} has {len(d.members)} active member(s); "
                "stop its consumers before resetting offsets"
            )
        md = admin.list_topics(timeout=10)
        committed = {(t, p): off for t, p, off, _, _ in committed_and_lag(admin, cons, args.group)}
        plan: list[tuple[str, int, int, int]] = []
        for topic in args.topic:
            tmd = md.topics.get(topic)
            if tmd is None or tmd.error is not None:
                raise StoreError(f"topic {topic} does not exist")
            for part in sorted(tmd.partitions):
                lo, hi = cons.get_watermark_offsets(TopicPartition(topic, part), timeout=10)
                cur = committed.get((topic, part), -1)
                if args.to_earliest:
                    new = lo
                elif args.to_latest:
                    new = hi
                elif args.to_offset is not None:
                    new = args.to_offset
                elif args.shift_by is not None:
                    new = (cur if cur >= 0 else lo) + args.shift_by
                else:
                    found = cons.offsets_for_times(
                        [TopicPartition(topic, part, _timestamp_ms(args.to_datetime))], timeout=10
                    )
                    new = found[0].offset if found[0].offset >= 0 else hi
                plan.append((topic, part, cur, min(max(new, lo), hi)))
        t = Table(
            "topic",
            "partition",
            "current",
            "new",
            title=f"reset {args.group}" + ("" if args.execute else " (dry run)"),
        )
        for topic, part, cur, new in plan:
            t.add_row(topic, str(part), str(cur) if cur >= 0 else "-", str(new))
        console.print(t)
        if args.execute:
            fut = admin.alter_consumer_group_offsets(
                [
                    ConsumerGroupTopicPartitions(
                        args.group,
                        [TopicPartition(topic, part, new) for topic, part, _, new in plan],
                    )
                ]
            )
            fut[args.group].result()
            console.print(f"offsets of group [bold]{args.group}[/bold] reset")
        else:
            console.print("nothing changed: add --execute to apply")
    except StoreError:
        raise
    except Exception as exc:
        raise kafka_error(exc) from None
    finally:
        cons.close()
    return 0
