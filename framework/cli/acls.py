"""``sftraffic acls list|add|remove``: ACLs as Kafka's ``kafka-acls.sh`` manages them, over
DescribeAcls, CreateAcls and DeleteAcls (confluent-kafka's AdminClient), so against any Kafka
cluster with an authorizer.

Resources: ``--topic T``, ``--group G``, ``--transactional-id ID`` (each repeatable, ``*`` for
every one) and ``--cluster``, with ``--resource-pattern-type literal|prefixed`` (``list`` and
``remove`` also take ``any`` and ``match``: every pattern that applies to the name). Entries:
``--allow-principal User:alice`` / ``--deny-principal`` (a bare name is ``User:NAME``), from
``--allow-host`` / ``--deny-host`` (``--host`` sets both; default ``*``), for ``--operation
Read`` (repeatable, Kafka's names; default All), or the ``--producer`` / ``--consumer``
shortcuts (Write, Describe, Create on the topics and Write, Describe on the transactional ids;
Read, Describe on the topics and Read on the groups).

As kafka-acls, ``add`` and ``remove`` take pattern type LITERAL unless told; unlike it,
``list`` takes ANY (every pattern of the named resources, every ACL without one), and
``remove`` without ``--operation`` removes every operation of the principals named, and without
a principal every ACL of the resources (only with ``--force``; kafka-acls asks at the terminal).

``list -o json``: ``{"acls": [{"resource_type", "resource_name", "pattern_type", "principal",
"host", "operation", "permission_type"}]}`` with Kafka's names (TOPIC, PREFIXED, READ, ALLOW).
"""

from __future__ import annotations

import argparse
from typing import Any

from rich.table import Table

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
from framework.client.acls import (
    OPERATION_NAMES,
    from_confluent,
    parse_operation,
    parse_pattern_type,
    principal_of,
    to_confluent,
    to_confluent_filter,
    to_json,
)
from framework.client.connection import Connection
from framework.errors import StoreError
from framework.security.authorizer import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    PatternType,
    Permission,
    ResourceType,
)

Op, R = AclOperation, ResourceType
CONCRETE = (PatternType.LITERAL, PatternType.PREFIXED)
FILTERS = (PatternType.ANY, PatternType.MATCH, *CONCRETE)
DESCRIPTION = """\
ACLs as kafka-acls.sh manages them (DescribeAcls, CreateAcls, DeleteAcls). Resources: --topic,
--group, --transactional-id (repeatable, * for every one), --cluster, matched as
--resource-pattern-type literal (default for add and remove) or prefixed; list and remove also
take any (list's default) and match (every ACL that applies to the name). Entries:
--allow-principal / --deny-principal User:NAME from --allow-host / --deny-host (default *) for
--operation (Kafka's names, default All), or --producer / --consumer."""
EXAMPLES = """\
  sftraffic acls add --allow-principal User:alice --operation Read --operation Describe --topic traffic. \\
      --resource-pattern-type prefixed
  sftraffic acls add --allow-principal User:bob --consumer --topic traffic.speeds --group dash
  sftraffic acls list --topic traffic.speeds --resource-pattern-type match -o json
  sftraffic acls remove --allow-principal User:alice --topic traffic. --resource-pattern-type prefixed"""


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    asub = command_group(sub, "acls", "list, add and remove ACLs (as kafka-acls)", DESCRIPTION, EXAMPLES)

    ls = command(
        asub,
        "list",
        "the ACLs of resources (of every resource without one)",
        "sftraffic acls list --topic traffic.speeds --resource-pattern-type match",
        output=True,
    )
    _resources(ls, "any", FILTERS)
    ls.add_argument("--principal", action="append", default=[], help="only this principal's (repeatable)")
    ls.set_defaults(func=list_)

    a = command(
        asub,
        "add",
        "add ACLs",
        "sftraffic acls add --allow-principal User:alice --operation Read --topic traffic.speeds",
    )
    _resources(a, "literal", CONCRETE)
    _entries(a)
    a.add_argument("--producer", action="store_true", help="a producer's ACLs (Write, Describe, Create)")
    a.add_argument(
        "--consumer", action="store_true", help="a consumer's ACLs (Read, Describe; Read on --group)"
    )
    a.set_defaults(func=add)

    rm = command(
        asub,
        "remove",
        "remove ACLs",
        "sftraffic acls remove --allow-principal User:alice --operation Read --topic traffic.speeds",
    )
    _resources(rm, "literal", FILTERS)
    _entries(rm)
    rm.add_argument("--force", action="store_true", help="needed to remove every ACL of the resources")
    rm.set_defaults(func=remove)


def _resources(p: argparse.ArgumentParser, default: str, allowed: tuple[PatternType, ...]) -> None:
    g = p.add_argument_group("resources")
    g.add_argument(
        "--topic", action="append", default=[], metavar="TOPIC", help="a topic (repeatable; * any)"
    )
    g.add_argument(
        "--group", action="append", default=[], metavar="GROUP", help="a consumer group (repeatable)"
    )
    g.add_argument(
        "--transactional-id",
        action="append",
        default=[],
        metavar="ID",
        help="a transactional id (repeatable)",
    )
    g.add_argument("--cluster", action="store_true", help="the cluster (kafka-cluster)")
    g.add_argument(
        "--resource-pattern-type",
        default=default,
        metavar="|".join(t.name.lower() for t in allowed),
        help=f"how the names match (default {default})",
    )


def _entries(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("entries")
    g.add_argument(
        "--allow-principal",
        action="append",
        default=[],
        metavar="User:NAME",
        help="allowed (a bare NAME is User:NAME)",
    )
    g.add_argument("--deny-principal", action="append", default=[], metavar="User:NAME", help="denied")
    g.add_argument("--allow-host", action="append", default=[], metavar="IP", help="allowed from (default *)")
    g.add_argument("--deny-host", action="append", default=[], metavar="IP", help="denied from (default *)")
    g.add_argument(
        "--host", action="append", default=[], metavar="IP", help="both --allow-host and --deny-host"
    )
    g.add_argument(
        "--operation",
        action="append",
        default=[],
        metavar="OP",
        help=f"{', '.join(OPERATION_NAMES.values())} (repeatable)",
    )


def resources(args: argparse.Namespace) -> list[tuple[ResourceType, str]]:
    out = [(R.TOPIC, t) for t in args.topic] + [(R.GROUP, g) for g in args.group]
    out += [(R.TRANSACTIONAL_ID, t) for t in args.transactional_id]
    if args.cluster:
        out.append((R.CLUSTER, CLUSTER_NAME))
    for kind, name in out:
        if not name:
            raise StoreError(f"--{kind.name.lower().replace('_', '-')}: a name is needed")
    return out


def _principals(args: argparse.Namespace) -> list[tuple[Permission, str, list[str]]]:
    """(permission, principal, hosts) of every entry the flags give."""
    allow_hosts = args.allow_host or args.host or ["*"]
    deny_hosts = args.deny_host or args.host or ["*"]
    out = [(Permission.ALLOW, principal_of(p), allow_hosts) for p in args.allow_principal]
    return out + [(Permission.DENY, principal_of(p), deny_hosts) for p in args.deny_principal]


def _operations(args: argparse.Namespace, kind: ResourceType, default: AclOperation) -> list[AclOperation]:
    if getattr(args, "producer", False) or getattr(args, "consumer", False):
        ops: list[AclOperation] = []
        if args.producer:
            ops += {
                R.TOPIC: [Op.WRITE, Op.DESCRIBE, Op.CREATE],
                R.TRANSACTIONAL_ID: [Op.WRITE, Op.DESCRIBE],
            }.get(kind, [])
        if args.consumer:
            ops += {R.TOPIC: [Op.READ, Op.DESCRIBE], R.GROUP: [Op.READ]}.get(kind, [])
        return list(dict.fromkeys(ops))
    return list(dict.fromkeys(parse_operation(o, kind) for o in args.operation)) or [default]


def to_add(args: argparse.Namespace) -> list[AclBinding]:
    """The ACLs ``acls add`` creates (pure: the flags only)."""
    pattern = parse_pattern_type(args.resource_pattern_type, CONCRETE)
    res = resources(args)
    if not res:
        raise StoreError("name a resource: --topic, --group, --transactional-id or --cluster")
    entries = _principals(args)
    if not entries:
        raise StoreError("name a principal: --allow-principal User:NAME or --deny-principal User:NAME")
    if (args.producer or args.consumer) and args.operation:
        raise StoreError("--producer and --consumer choose the operations: no --operation with them")
    if args.consumer and not args.group:
        raise StoreError("--consumer needs --group GROUP (a consumer reads through its group)")
    if (args.producer or args.consumer) and args.cluster:
        raise StoreError(
            "--producer and --consumer grant on topics, groups and transactional ids, not --cluster"
        )
    out = []
    for kind, name in res:
        for op in _operations(args, kind, Op.ALL):
            for perm, principal, hosts in entries:
                out += [AclBinding(kind, name, pattern, principal, h, op, perm) for h in hosts]
    return list(dict.fromkeys(out))


def to_remove(args: argparse.Namespace) -> list[AclBindingFilter]:
    """The filters ``acls remove`` deletes with (pure: the flags only)."""
    pattern = parse_pattern_type(args.resource_pattern_type, FILTERS)
    res = resources(args)
    if not res:
        raise StoreError("name a resource: --topic, --group, --transactional-id or --cluster")
    entries = _principals(args)
    if not entries and not args.force:
        raise StoreError("no principal given: this removes every ACL of the resources; add --force to do so")
    out = []
    for kind, name in res:
        ops = list(dict.fromkeys(parse_operation(o, kind) for o in args.operation)) or [Op.ANY]
        for op in ops:
            if not entries:
                out.append(AclBindingFilter(kind, name, pattern, None, None, op, Permission.ANY))
            for perm, principal, hosts in entries:
                hs: list[str | None] = (
                    list(hosts) if (args.host or args.allow_host or args.deny_host) else [None]
                )
                out += [AclBindingFilter(kind, name, pattern, principal, h, op, perm) for h in hs]
    return list(dict.fromkeys(out))


def to_list(args: argparse.Namespace) -> list[AclBindingFilter]:
    pattern = parse_pattern_type(args.resource_pattern_type, FILTERS)
    principals: list[str | None] = [principal_of(p) for p in args.principal] or [None]
    res: list[tuple[ResourceType, str | None]] = list(resources(args)) or [(R.ANY, None)]
    return [
        AclBindingFilter(kind, name, pattern if name is not None else PatternType.ANY, p)
        for kind, name in res
        for p in principals
    ]


def _authorizer_errors(exc: StoreError) -> StoreError:
    if "SECURITY_DISABLED" in exc.message:
        return StoreError(
            "the cluster has no authorizer (authorizer.class.name is not set): it keeps no ACLs"
        )
    return exc


def _sorted(acls: list[AclBinding]) -> list[AclBinding]:
    key = [
        (b.resource_type, b.name, b.pattern_type, b.principal, b.host, b.operation, b.permission)
        for b in acls
    ]
    return [b for _, b in sorted(zip(key, acls, strict=True), key=lambda kb: kb[0])]


def _table(acls: list[AclBinding], title: str) -> Table:
    t = table("resource", "pattern", "principal", "host", "operation", "permission", title=title)
    for b in acls:
        t.add_row(
            f"{b.resource_type.name}:{b.name}",
            b.pattern_type.name,
            b.principal,
            b.host,
            OPERATION_NAMES.get(b.operation, b.operation.name),
            b.permission.name,
        )
    return t


def _refuse_without_authorizer(conn: Connection) -> None:
    """librdkafka drops DescribeAcls' top-level error (SECURITY_DISABLED answers as "no ACLs"):
    when it found none, ask once more over the wire to tell "none" from "no authorizer"."""
    from framework.protocol.error_codes import ErrorCode  # noqa: PLC0415
    from framework.protocol.messages.describe_acls import (  # noqa: PLC0415
        DescribeAclsRequest,
        DescribeAclsResponse,
    )

    any_ = 1  # ResourceType/PatternType/AclOperation/AclPermissionType ANY
    with conn.wire() as w:
        r = w.send(
            DescribeAclsRequest(
                resource_type_filter=any_, pattern_type_filter=any_, operation=any_, permission_type=any_
            ),
            DescribeAclsResponse,
        )
    if r.error_code == ErrorCode.SECURITY_DISABLED:
        raise _authorizer_errors(StoreError("SECURITY_DISABLED"))


def list_(args: argparse.Namespace) -> int:
    filters = to_list(args)
    conn = connect(args)
    a = admin(conn)
    found: list[AclBinding] = []
    try:
        with kafka_errors():
            for f in filters:
                found += [
                    from_confluent(b)
                    for b in a.describe_acls(to_confluent_filter(f), request_timeout=15).result()
                ]
    except StoreError as exc:
        raise _authorizer_errors(exc) from None
    acls = _sorted(list(dict.fromkeys(found)))
    if not acls:
        _refuse_without_authorizer(conn)
    if json_wanted(args):
        print_json({"acls": [to_json(b) for b in acls]})
    elif acls:
        console.print(_table(acls, "ACLs"))
    else:
        console.print("no ACLs match")
    return 0


def add(args: argparse.Namespace) -> int:
    new = to_add(args)
    a = admin(connect(args))
    rc = 0
    made: list[AclBinding] = []
    with kafka_errors():
        futures: dict[Any, Any] = a.create_acls([to_confluent(b) for b in new], request_timeout=15)
    for cb, fut in futures.items():
        b = from_confluent(cb)
        try:
            with kafka_errors():
                fut.result()
            made.append(b)
        except StoreError as exc:
            err = _authorizer_errors(exc)
            if err is not exc:
                raise err from None
            warn(args, f"cannot add {b}: {exc.message}")
            rc = 2
    if made:
        console.print(_table(_sorted(made), "added"))
    return rc


def remove(args: argparse.Namespace) -> int:
    filters = to_remove(args)
    a = admin(connect(args))
    gone: list[AclBinding] = []
    try:
        with kafka_errors():
            futures = a.delete_acls([to_confluent_filter(f) for f in filters], request_timeout=15)
            for fut in futures.values():
                gone += [from_confluent(b) for b in fut.result()]
    except StoreError as exc:
        raise _authorizer_errors(exc) from None
    gone = _sorted(list(dict.fromkeys(gone)))
    if gone:
        console.print(_table(gone, "removed"))
    else:
        console.print("no ACLs matched: nothing removed")
    return 0
