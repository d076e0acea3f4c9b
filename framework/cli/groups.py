"""``sftraffic groups list|describe|delete|reset-offsets``: consumer groups and lag, like
``kafka-consumer-groups.sh``.

Talks only Kafka (confluent-kafka's AdminClient: ListGroups, DescribeGroups, OffsetFetch,
ListOffsets, DeleteGroups, OffsetCommit), so it works against any Kafka cluster.
``describe --members`` lists the members (member id, client id, host, assigned partitions)
instead of the offsets. ``delete`` refuses a group with live members (NON_EMPTY_GROUP), as
Kafka does. ``reset-offsets`` is a dry run unless ``--execute`` is given, and refuses a group
with live members (its consumers would overwrite the reset), as Kafka's tool does.

``-o json``: ``list``: ``{"groups": [{"group_id", "state", "type", "is_simple_consumer_group"}]}``;
``describe``: ``{"groups": [{"group_id", "state", "partition_assignor", "coordinator":
{"id", "host", "port"}, "members": [{"member_id", "group_instance_id", "client_id", "host",
"assignment": [{"topic", "partition"}]}], "offsets": [{"topic", "partition", "committed_offset",
"log_end_offset", "lag", "member_id"}], "total_lag"}]}`` (an uncommitted partition's
``committed_offset`` and ``lag`` are null). States are Kafka's: Stable, Empty,
PreparingRebalance, CompletingRebalance, Dead.

Share groups (KIP-932) are listed with type ``share`` and described as ``kafka-share-groups
--describe`` shows them: ``{"group_id", "type": "share", "state", "group_epoch",
"assignment_epoch", "partition_assignor", "coordinator", "members": [{"member_id",
"member_epoch", "client_id", "host", "subscribed_topics", "assignment"}], "offsets": [{"topic",
"partition", "start_offset", "lag"}], "total_lag"}``: a share group has no committed offsets,
its share-partition start offset is where unacknowledged records begin. confluent-kafka has no
share-group admin calls yet, so these go over the wire (ListGroups with type filter "share",
ShareGroupDescribe, DescribeShareGroupOffsets); ``delete`` deletes either kind.
"""

from __future__ import annotations

import argparse
import datetime as dt
from typing import Any

from framework.cli.common import kafka_error
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
from framework.client.share_admin import alter_share_group_offsets, describe_share_group, list_share_groups
from framework.errors import StoreError

EXAMPLES = """\
  sftraffic groups list
  sftraffic groups describe dashboard --members
  sftraffic groups describe dashboard -o json | jq .groups[0].total_lag
  sftraffic groups reset-offsets dashboard --topic traffic.speeds --to-earliest --execute
  sftraffic groups delete dashboard"""

# confluent-kafka's ConsumerGroupState names -> Kafka's (as kafka-consumer-groups shows them)
STATES = {
    "UNKNOWN": "Unknown",
    "PREPARING_REBALANCING": "PreparingRebalance",
    "COMPLETING_REBALANCING": "CompletingRebalance",
    "STABLE": "Stable",
    "DEAD": "Dead",
    "EMPTY": "Empty",
}


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    gsub = command_group(
        sub,
        "groups",
        "consumer and share groups: list, describe (lag, members), delete, reset offsets",
        "Consumer groups over the Kafka protocol (any Kafka cluster), as kafka-consumer-groups; "
        "share groups (KIP-932) are listed and described too, as kafka-share-groups.",
        EXAMPLES,
    )

    ls = command(gsub, "list", "list consumer and share groups", "sftraffic groups list -o json", output=True)
    ls.set_defaults(func=list_)

    d = command(
        gsub,
        "describe",
        "committed offsets and lag per partition, or the members",
        "sftraffic groups describe dashboard --members",
        output=True,
    )
    d.add_argument("groups", nargs="+", metavar="GROUP")
    d.add_argument(
        "--members", action="store_true", help="the members: id, client id, host, assigned partitions"
    )
    d.set_defaults(func=describe)

    rm = command(
        gsub, "delete", "delete groups that have no members", "sftraffic groups delete dashboard old-job"
    )
    rm.add_argument("groups", nargs="+", metavar="GROUP")
    rm.set_defaults(func=delete)

    r = command(
        gsub,
        "reset-offsets",
        "move a group's committed offsets (dry run unless --execute)",
        "sftraffic groups reset-offsets dashboard --topic traffic.speeds --to-datetime 2026-11-23T08:00:00 "
        "--execute",
    )
    r.add_argument("group")
    r.add_argument("--topic", "-t", action="append", required=True, help="topic (repeatable)")
    to = r.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true")
    to.add_argument("--to-latest", action="store_true")
    to.add_argument("--to-datetime", metavar="ISO8601", help="e.g. 2026-11-23T08:00:00 (local time) or ...Z")
    to.add_argument("--to-offset", type=int)
    to.add_argument("--shift-by", type=int, help="move every partition by N (negative: back)")
    r.add_argument("--execute", action="store_true", help="apply (default: only show the plan)")
    r.set_defaults(func=reset)


def _state(state: Any) -> str:
    name = getattr(state, "name", str(state).split(".")[-1])
    return STATES.get(name, name.title())


def list_(args: argparse.Namespace) -> int:
    conn = connect(args)
    a = admin(conn)
    with kafka_errors():
        res = a.list_consumer_groups(request_timeout=15).result()
    rows = [
        {
            "group_id": g.group_id,
            "state": _state(g.state),
            "type": getattr(g.type, "name", "UNKNOWN").lower(),
            "is_simple_consumer_group": bool(g.is_simple_consumer_group),
        }
        for g in sorted(res.valid, key=lambda g: g.group_id)
    ]
    for e in res.errors:
        warn(args, f"a broker did not list its groups: {kafka_error(e).message}")
    shares, errors = list_share_groups(conn.bootstrap, conn.security())
    for err in errors:
        warn(args, f"a broker did not list its share groups: {err}")
    listed = {g["group_id"] for g in rows}
    rows += [
        {"group_id": g["group_id"], "state": g["state"], "type": "share", "is_simple_consumer_group": False}
        for g in shares
        if g["group_id"] not in listed
    ]
    rows.sort(key=lambda g: g["group_id"])
    if json_wanted(args):
        print_json({"groups": rows})
        return 2 if res.errors or errors else 0
    t = table("group", "state", "type")
    for g in rows:
        t.add_row(g["group_id"], g["state"], "simple" if g["is_simple_consumer_group"] else g["type"])
    console.print(t)
    return 2 if res.errors or errors else 0


def _offsets(a: Any, tps: list[Any], spec: Any) -> dict[tuple[str, int], int]:
    """ListOffsets of ``tps`` for one OffsetSpec, by (topic, partition)."""
    if not tps:
        return {}
    futures = a.list_offsets({tp: spec for tp in tps}, request_timeout=15)
    return {(tp.topic, tp.partition): f.result().offset for tp, f in futures.items()}


def committed_and_lag(a: Any, group: str) -> list[tuple[str, int, int, int, int | None]]:
    """(topic, partition, committed or -1, log end, lag or None) for every committed partition."""
    from confluent_kafka import ConsumerGroupTopicPartitions  # noqa: PLC0415
    from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]  # noqa: PLC0415

    res = a.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=15)[
        group
    ].result()
    tps = sorted(res.topic_partitions, key=lambda x: (x.topic, x.partition))
    ends = _offsets(a, tps, OffsetSpec.latest())  # type: ignore[no-untyped-call]
    rows = []
    for tp in tps:
        end = ends[(tp.topic, tp.partition)]
        lag = max(end - tp.offset, 0) if tp.offset >= 0 else None
        rows.append((tp.topic, tp.partition, tp.offset, end, lag))
    return rows


def describe_group(a: Any, d: Any) -> dict[str, Any]:
    """One group's description (as the module doc's JSON)."""
    owner: dict[tuple[str, int], str] = {}
    members = []
    for m in sorted(d.members, key=lambda m: m.member_id):
        parts = sorted(
            ((tp.topic, tp.partition) for tp in (m.assignment.topic_partitions if m.assignment else [])),
        )
        for tp in parts:
            owner[tp] = m.member_id
        members.append(
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "host": m.host,
                "assignment": [{"topic": t, "partition": p} for t, p in parts],
            }
        )
    offsets = [
        {
            "topic": topic,
            "partition": part,
            "committed_offset": off if off >= 0 else None,
            "log_end_offset": end,
            "lag": lag,
            "member_id": owner.get((topic, part)),
        }
        for topic, part, off, end, lag in committed_and_lag(a, d.group_id)
    ]
    c = d.coordinator
    return {
        "group_id": d.group_id,
        "state": _state(d.state),
        "partition_assignor": d.partition_assignor or None,
        "coordinator": {"id": c.id, "host": c.host, "port": c.port} if c is not None else None,
        "members": members,
        "offsets": offsets,
        "total_lag": sum(o["lag"] or 0 for o in offsets),
    }


def describe(args: argparse.Namespace) -> int:
    conn = connect(args)
    a = admin(conn)
    rc = 0
    groups = []
    with kafka_errors():
        futures = a.describe_consumer_groups(list(dict.fromkeys(args.groups)), request_timeout=15)
    for group, fut in futures.items():
        try:
            with kafka_errors():
                d = fut.result()
                if _state(d.state) == "Dead":
                    share = describe_share_group(conn.bootstrap, conn.security(), group)
                    if share is None:
                        raise StoreError("does not exist")
                    groups.append(share)
                    continue
                groups.append(describe_group(a, d))
        except StoreError as err:
            warn(args, f"group {group}: {_missing(err.message)}")
            rc = 2
    if json_wanted(args):
        print_json({"groups": groups})
        return rc
    for g in groups:
        if g.get("type") == "share":
            _print_share(g, args.members)
            continue
        title = f"group {g['group_id']} ({g['state']}, {len(g['members'])} member(s))"
        if args.members and not g["members"]:
            console.print(f"group {g['group_id']} ({g['state']}) has no active members", highlight=False)
            continue
        if args.members:
            t = table("member id", "client id", "host", "#partitions", "assignment", title=title)
            for m in g["members"]:
                parts = ", ".join(f"{p['topic']}-{p['partition']}" for p in m["assignment"])
                t.add_row(m["member_id"], m["client_id"], m["host"], str(len(m["assignment"])), parts or "-")
            console.print(t)
            continue
        members = {m["member_id"]: m for m in g["members"]}
        t = table(
            "topic", "partition", "committed", "log end", "lag", "consumer", "host", "client", title=title
        )
        for o in g["offsets"]:
            m = members.get(o["member_id"] or "")
            t.add_row(
                o["topic"],
                str(o["partition"]),
                "-" if o["committed_offset"] is None else str(o["committed_offset"]),
                str(o["log_end_offset"]),
                "-" if o["lag"] is None else str(o["lag"]),
                m["member_id"] if m else "-",
                m["host"] if m else "-",
                m["client_id"] if m else "-",
            )
        console.print(t)
        console.print(f"total lag: {g['total_lag']}")
    return rc


def _print_share(g: dict[str, Any], members: bool) -> None:
    """A share group as kafka-share-groups --describe: the members, or each partition's
    share-partition start offset and lag."""
    title = f"share group {g['group_id']} ({g['state']}, {len(g['members'])} member(s))"
    if members and not g["members"]:
        console.print(f"share group {g['group_id']} ({g['state']}) has no active members", highlight=False)
        return
    if members:
        t = table("member id", "client id", "host", "epoch", "assignment", title=title)
        for m in g["members"]:
            parts = ", ".join(f"{p['topic']}-{p['partition']}" for p in m["assignment"])
            t.add_row(m["member_id"], m["client_id"], m["host"], str(m["member_epoch"]), parts or "-")
    else:
        t = table("topic", "partition", "start offset", "lag", title=title)
        for o in g["offsets"]:
            t.add_row(
                o["topic"],
                str(o["partition"]),
                "-" if o["start_offset"] is None else str(o["start_offset"]),
                "-" if o["lag"] is None else str(o["lag"]),
            )
    console.print(t)
    if not members:
        console.print(f"total lag: {g['total_lag']}")


def _missing(message: str) -> str:
    return "does not exist" if "GROUP_ID_NOT_FOUND" in message else message


def delete(args: argparse.Namespace) -> int:
    a = admin(connect(args))
    rc = 0
    with kafka_errors():
        futures = a.delete_consumer_groups(list(dict.fromkeys(args.groups)), request_timeout=15)
    for group, fut in futures.items():
        try:
            with kafka_errors():
                fut.result()
            console.print(f"deleted group [bold]{group}[/bold]")
        except StoreError as err:
            msg = _missing(err.message)
            if "NON_EMPTY_GROUP" in msg:
                msg = "it has active members; stop its consumers first"
            warn(args, f"cannot delete group {group}: {msg}")
            rc = 2
    return rc


def _timestamp_ms(text: str) -> int:
    try:
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise StoreError(f"--to-datetime {text!r}: use ISO 8601, e.g. 2026-11-23T08:00:00") from None
    if when.tzinfo is None:
        when = when.astimezone()
    return int(when.timestamp() * 1000)


def _plan(
    args: argparse.Namespace, a: Any, committed: dict[tuple[str, int], int], when: int | None
) -> list[tuple[str, int, int, int]]:
    """(topic, partition, current or -1, new) for every partition of ``--topic``, the new
    offset clamped to the partition's [earliest, latest]."""
    from confluent_kafka import TopicPartition  # noqa: PLC0415
    from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]  # noqa: PLC0415

    md = a.list_topics(timeout=15)
    tps = []
    for topic in args.topic:
        tmd = md.topics.get(topic)
        if tmd is None or tmd.error is not None:
            raise StoreError(f"topic {topic} does not exist")
        tps += [TopicPartition(topic, part) for part in sorted(tmd.partitions)]
    lo = _offsets(a, tps, OffsetSpec.earliest())  # type: ignore[no-untyped-call]
    hi = _offsets(a, tps, OffsetSpec.latest())  # type: ignore[no-untyped-call]
    at = _offsets(a, tps, OffsetSpec.for_timestamp(when)) if when is not None else {}
    plan: list[tuple[str, int, int, int]] = []
    for tp in tps:
        key = (tp.topic, tp.partition)
        cur = committed.get(key, -1)
        if args.to_earliest:
            new = lo[key]
        elif args.to_latest:
            new = hi[key]
        elif args.to_offset is not None:
            new = args.to_offset
        elif args.shift_by is not None:
            new = (cur if cur >= 0 else lo[key]) + args.shift_by
        else:
            new = at[key] if at[key] >= 0 else hi[key]
        plan.append((tp.topic, tp.partition, cur, min(max(new, lo[key]), hi[key])))
    return plan


def reset(args: argparse.Namespace) -> int:
    """Reset a consumer group's committed offsets, or a share group's start offsets
    (AlterShareGroupOffsets); either must have no members."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition  # noqa: PLC0415

    when = _timestamp_ms(args.to_datetime) if args.to_datetime else None
    conn = connect(args)
    a = admin(conn)
    with kafka_errors():
        d = a.describe_consumer_groups([args.group], request_timeout=15)[args.group].result()
        share = (
            describe_share_group(conn.bootstrap, conn.security(), args.group)
            if _state(d.state) == "Dead"
            else None
        )
        members = share["members"] if share is not None else d.members
        if members:
            raise StoreError(
                f"group {args.group} has {len(members)} active member(s); "
                "stop its consumers before resetting offsets"
            )
        if share is not None:
            committed = {
                (o["topic"], o["partition"]): o["start_offset"]
                for o in share["offsets"]
                if o["start_offset"] is not None
            }
        else:
            committed = {(t, p): off for t, p, off, _, _ in committed_and_lag(a, args.group)}
        plan = _plan(args, a, committed, when)
        t = table(
            "topic",
            "partition",
            "current",
            "new",
            title=f"reset {args.group}" + ("" if args.execute else " (dry run)"),
        )
        for topic, part, cur, new in plan:
            t.add_row(topic, str(part), str(cur) if cur >= 0 else "-", str(new))
        console.print(t)
        if not args.execute:
            console.print("nothing changed: add --execute to apply")
        elif share is not None:
            offsets = {(topic, part): new for topic, part, _, new in plan}
            alter_share_group_offsets(conn.bootstrap, conn.security(), args.group, offsets)
            console.print(f"start offsets of share group [bold]{args.group}[/bold] reset")
        else:
            new_offsets = [TopicPartition(topic, part, new) for topic, part, _, new in plan]
            fut = a.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(args.group, new_offsets)])
            fut[args.group].result()
            console.print(f"offsets of group [bold]{args.group}[/bold] reset")
    return 0
