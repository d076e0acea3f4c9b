"""``sftraffic streams create|list|describe|alter|delete|grant|revoke``: stream policies and
permissions (sftraffic extension).

A stream groups topics named ``<stream>.<topic>`` and carries their shared defaults: TTL
(retention.ms), partitions, replication factor, timestamp type, producer-id expiry...

Its permissions (MapR's produceperm, consumeperm, topicperm, adminperm) are Kafka ACLs on
the prefix ``<stream>.`` (:mod:`framework.security.stream_permissions`): ``grant`` creates them
with CreateAcls, ``revoke`` deletes them with DeleteAcls, ``describe`` lists who holds what
with DescribeAcls, so ``kafka-acls`` (and ``sftraffic acls``) sees and edits the same rules.
Every command takes the shared connection options (:mod:`framework.cli.connection`:
``-b/--bootstrap-server``, ``--command-config FILE``, ``-X KEY=VALUE``) and talks StreamAdmin,
sftraffic's own API, over :class:`~framework.client.wire.WireClient`.

``-o json``: ``{"streams": [{"name", "created_ms", "topics", "configs": [{"name", "value",
"source"}]}]}`` (``source``: stream, broker or default); ``describe`` adds ``"permissions":
[{"permission", "principal", "host"}]`` and ``"other_acls"`` under the stream's prefix
(``permissions`` null when the broker has no authorizer or the ACLs may not be seen).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from framework import config as cfg
from framework.cli.common import parse_kv
from framework.cli.output import (
    command,
    command_group,
    connect,
    console,
    json_wanted,
    print_json,
    table,
    warn,
)
from framework.client.acls import create_acls, principal_of
from framework.client.connection import Connection
from framework.errors import StoreError
from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.delete_acls import DeleteAclsFilter, DeleteAclsRequest, DeleteAclsResponse
from framework.protocol.messages.describe_acls import DescribeAclsRequest, DescribeAclsResponse
from framework.protocol.messages.stream_admin import (
    ALTER,
    CREATE,
    DELETE,
    DESCRIBE,
    StreamAdminRequest,
    StreamAdminResponse,
    StreamConfig,
)
from framework.security.authorizer import AclBinding, AclOperation, PatternType, Permission, ResourceType
from framework.security.stream_permissions import PERMISSIONS, SEEDS_NAMES, bindings, holders, to_revoke

SOURCES = {0: "stream", 1: "broker", 2: "default"}
EXAMPLES = """\
  sftraffic streams create traffic --ttl 180d --partitions 6
  sftraffic streams describe traffic -o json
  sftraffic streams grant traffic alice --consume
  sftraffic streams alter traffic --ttl 30d"""


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    ssub = command_group(
        sub,
        "streams",
        "stream policies shared by the topics of a stream",
        "Streams (sftraffic's extension): topics named <stream>.<topic> sharing a policy.",
        EXAMPLES,
    )

    c = command(
        ssub, "create", "create a stream", "sftraffic streams create traffic --ttl 180d --partitions 6"
    )
    c.add_argument("name")
    _policy_flags(c)
    c.add_argument("--if-not-exists", action="store_true")
    c.set_defaults(func=create)

    ls = command(
        ssub, "list", "list streams", "sftraffic streams list -o json | jq -r '.streams[].name'", output=True
    )
    ls.set_defaults(func=list_)

    d = command(
        ssub,
        "describe",
        "a stream's policy, topics and permissions",
        "sftraffic streams describe traffic -o json",
        output=True,
    )
    d.add_argument("names", nargs="+")
    d.set_defaults(func=describe)

    a = command(
        ssub,
        "alter",
        "change a stream's policy (applies to its topics)",
        "sftraffic streams alter traffic --ttl 30d --delete-config segment.ms",
    )
    a.add_argument("name")
    _policy_flags(a)
    a.add_argument(
        "--delete-config", action="append", default=[], metavar="KEY", help="remove a stream config"
    )
    a.set_defaults(func=alter)

    rm = command(ssub, "delete", "delete an empty stream", "sftraffic streams delete traffic")
    rm.add_argument("name")
    rm.set_defaults(func=delete)

    _add_permission_commands(ssub)


_PERM_HELP = {
    "produce": "Write and Describe on the stream's topics",
    "consume": "Read and Describe on the stream's topics, Read on groups named <stream>.*",
    "topic-admin": "Create, Delete, Alter, DescribeConfigs, AlterConfigs on the stream's topics",
    "admin": "grant and revoke permissions on the stream (and alter or delete it)",
}


def _policy_flags(q: argparse.ArgumentParser) -> None:
    """The policy options of ``create`` and ``alter``."""
    q.add_argument("--ttl", help="time to live of messages, e.g. 180d (retention.ms)")
    q.add_argument("--partitions", type=int, help="default partitions of new topics (num.partitions)")
    q.add_argument("--replication-factor", type=int, help="default replicas (default.replication.factor)")
    q.add_argument(
        "--timestamp-type",
        choices=["CreateTime", "LogAppendTime"],
        help="message.timestamp.type",
    )
    q.add_argument(
        "--pid-expiry",
        help="forget idle producer ids after, e.g. 7d (producer.id.expiration.ms)",
    )
    q.add_argument(
        "--config",
        "-c",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any stream config",
    )


def _add_permission_commands(ssub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """``grant`` and ``revoke``: one flag per stream permission."""
    for action, verb in (("grant", "give"), ("revoke", "take away")):
        g = command(
            ssub,
            action,
            f"{verb} stream permissions: produce, consume, topic-admin, admin (ACLs on <stream>.)",
            f"sftraffic streams {action} traffic alice --produce --consume",
        )
        g.add_argument("name", help="stream")
        g.add_argument("user", help="user name or principal (alice, User:alice, User:* for everyone)")
        for perm in PERMISSIONS:
            g.add_argument(
                f"--{perm}",
                dest=perm.replace("-", "_"),
                action="store_true",
                help=f"{SEEDS_NAMES[perm]}: {_PERM_HELP[perm]}",
            )
        g.add_argument("--host", default="*", help="client IP address the permission is for (default: any)")
        g.set_defaults(func=grant if action == "grant" else revoke)


def policy(args: argparse.Namespace) -> dict[str, str]:
    out = parse_kv(args.config)
    if args.ttl:
        out["retention.ms"] = str(cfg.parse_duration_ms(args.ttl))
    if args.partitions is not None:
        out["num.partitions"] = str(args.partitions)
    if args.replication_factor is not None:
        out["default.replication.factor"] = str(args.replication_factor)
    if args.timestamp_type:
        out["message.timestamp.type"] = args.timestamp_type
    if args.pid_expiry:
        out["producer.id.expiration.ms"] = str(cfg.parse_duration_ms(args.pid_expiry))
    return out


def call(conn: Connection, req: StreamAdminRequest) -> StreamAdminResponse:
    with conn.wire() as client:
        if client.version_for(StreamAdminRequest.API_KEY) is None:
            raise StoreError(
                f"the broker at {conn.bootstrap} has no streams (it is not sftraffic): create topics "
                "with their configs instead, e.g. `sftraffic topics create NAME --ttl 180d`"
            )
        return client.send(req, StreamAdminResponse)


def _check(args: argparse.Namespace, resp: StreamAdminResponse, ok_codes: tuple[int, ...] = (0,)) -> int:
    rc = 0
    for s in resp.streams:
        if s.error_code not in ok_codes:
            warn(args, f"stream {s.name}: {s.error_message}")
            rc = 2
    return rc


def create(args: argparse.Namespace) -> int:
    req = StreamAdminRequest(
        operation=CREATE,
        names=[args.name],
        configs=[StreamConfig(k, v) for k, v in policy(args).items()],
    )
    resp = call(connect(args), req)
    if args.if_not_exists and resp.streams and resp.streams[0].error_code == ErrorCode.TOPIC_ALREADY_EXISTS:
        console.print(f"stream {args.name} already exists")
        return 0
    rc = _check(args, resp)
    if rc == 0:
        console.print(f"created stream [bold]{args.name}[/bold]")
    return rc


def _stream_json(s: Any) -> dict[str, Any]:
    return {
        "name": s.name,
        "created_ms": s.created_ms,
        "topics": list(s.topics),
        "configs": [
            {"name": c.name, "value": c.value, "source": SOURCES.get(c.source, "unknown")} for c in s.configs
        ],
    }


def list_(args: argparse.Namespace) -> int:
    resp = call(connect(args), StreamAdminRequest(operation=DESCRIBE))
    if json_wanted(args):
        print_json({"streams": [_stream_json(s) for s in resp.streams]})
        return 0
    tbl = table("stream", "topics", "ttl", "partitions", "created")
    for s in resp.streams:
        vals = {c.name: c.value for c in s.configs}
        ttl = vals.get("retention.ms") or "?"
        created = time.strftime("%Y-%m-%d %H:%M", time.localtime(s.created_ms / 1000))
        tbl.add_row(s.name, str(len(s.topics)), _ms(ttl), vals.get("num.partitions", "?") or "?", created)
    console.print(tbl)
    return 0


def _ms(v: str) -> str:
    try:
        ms = int(v)
    except ValueError:
        return v
    if ms < 0:
        return "forever"
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms >= size and ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def describe(args: argparse.Namespace) -> int:
    conn = connect(args)
    resp = call(conn, StreamAdminRequest(operation=DESCRIBE, names=list(args.names)))
    rc = _check(args, resp)
    found = [s for s in resp.streams if not s.error_code]
    acls, why = _acls_or_reason(conn) if found else ([], None)
    docs = []
    for s in found:
        doc = _stream_json(s)
        if acls is not None:
            who, others = holders(s.name, acls)
            doc["permissions"] = [
                {"permission": perm, "principal": h.principal, "host": h.host}
                for perm in PERMISSIONS
                for h in who
                if perm in h.permissions
            ]
            doc["other_acls"] = [str(b) for b in others]
        else:
            doc["permissions"] = None  # not known: no authorizer, or not allowed to see the ACLs
        docs.append(doc)
    if json_wanted(args):
        print_json({"streams": docs})
        return rc
    for doc in docs:
        name = doc["name"]
        t = table("config", "value", "source", title=f"stream {name} ({len(doc['topics'])} topics)")
        for c in doc["configs"]:
            t.add_row(c["name"], c["value"] or "", c["source"])
        console.print(t)
        if doc["topics"]:
            console.print("topics: " + ", ".join(doc["topics"]))
        if doc["permissions"] is None:
            console.print(f"permissions: {why}")
            continue
        pt = table("permission", "principal", "host", title=f"stream {name} permissions (ACLs on {name}.)")
        for perm in doc["permissions"]:
            pt.add_row(
                f"{perm['permission']} ({SEEDS_NAMES[perm['permission']]})", perm["principal"], perm["host"]
            )
        console.print(pt)
        for b in doc["other_acls"]:
            console.print(f"  other ACL: {b}")
    return rc


# -- permissions (ACLs on <stream>.) ---------------------------------------------------------------
def _acls(conn: Connection) -> list[AclBinding]:
    """Every ACL the user may see (DescribeAcls with a match-all filter)."""
    with conn.wire() as client:
        resp = client.send(
            DescribeAclsRequest(
                resource_type_filter=ResourceType.ANY,
                pattern_type_filter=PatternType.ANY,
                operation=AclOperation.ANY,
                permission_type=Permission.ANY,
            ),
            DescribeAclsResponse,
        )
    if resp.error_code:
        raise StoreError(resp.error_message or ErrorCode(resp.error_code).name, ErrorCode(resp.error_code))
    return [
        AclBinding.of(
            r.resource_type,
            r.resource_name,
            r.pattern_type,
            a.principal,
            a.host,
            a.operation,
            a.permission_type,
        )
        for r in resp.resources
        for a in r.acls
    ]


def _acls_or_reason(conn: Connection) -> tuple[list[AclBinding] | None, str | None]:
    try:
        return _acls(conn), None
    except StoreError as exc:
        if exc.code == ErrorCode.SECURITY_DISABLED:
            return None, "none enforced (the broker has no authorizer.class.name)"
        return None, f"not shown ({exc.message})"


def _chosen(args: argparse.Namespace) -> list[str]:
    perms = [p for p in PERMISSIONS if getattr(args, p.replace("-", "_"))]
    if not perms:
        raise StoreError("name at least one of --produce, --consume, --topic-admin, --admin")
    return perms


def grant(args: argparse.Namespace) -> int:
    perms = _chosen(args)
    principal = principal_of(args.user)
    try:
        new = [b for p in perms for b in bindings(args.name, p, principal, args.host)]
    except ValueError as exc:
        raise StoreError(str(exc)) from None
    conn = connect(args)
    with conn.wire() as client:
        failed = create_acls(client, new)
    if any(code == ErrorCode.SECURITY_DISABLED for _, code, _m in failed):
        raise StoreError(
            f"the broker at {conn.bootstrap} has no authorizer (authorizer.class.name is empty): "
            "nothing is enforced, so there is nothing to grant"
        )
    for b, code, message in failed:
        warn(args, f"{b}: {ErrorCode(code).name}: {message or ''}")
    if failed:
        return 2
    console.print(f"granted {', '.join(perms)} on stream [bold]{args.name}[/bold] to {principal}")
    return 0


def revoke(args: argparse.Namespace) -> int:
    perms = _chosen(args)
    principal = principal_of(args.user)
    conn = connect(args)
    acls = _acls(conn)
    gone: list[AclBinding] = []
    for p in perms:
        gone += [b for b in to_revoke(args.name, p, principal, args.host, acls) if b not in gone]
        acls = [b for b in acls if b not in gone]
    filters = [
        DeleteAclsFilter(
            resource_type_filter=b.resource_type,
            resource_name_filter=b.name,
            pattern_type_filter=b.pattern_type,
            principal_filter=b.principal,
            host_filter=b.host,
            operation=b.operation,
            permission_type=b.permission,
        )
        for b in gone
    ]
    with conn.wire() as client:
        resp = client.send(DeleteAclsRequest(filters=filters), DeleteAclsResponse)
    rc = 0
    for b, r in zip(gone, resp.filter_results, strict=True):
        if r.error_code:
            warn(args, f"{b}: {ErrorCode(r.error_code).name}: {r.error_message or ''}")
            rc = 2
    if rc == 0:
        console.print(f"revoked {', '.join(perms)} on stream [bold]{args.name}[/bold] from {principal}")
    return rc


def alter(args: argparse.Namespace) -> int:
    configs = [StreamConfig(k, v) for k, v in policy(args).items()] + [
        StreamConfig(k, None) for k in args.delete_config
    ]
    resp = call(connect(args), StreamAdminRequest(operation=ALTER, names=[args.name], configs=configs))
    rc = _check(args, resp)
    if rc == 0:
        console.print(f"altered stream [bold]{args.name}[/bold]")
    return rc


def delete(args: argparse.Namespace) -> int:
    resp = call(connect(args), StreamAdminRequest(operation=DELETE, names=[args.name]))
    rc = _check(args, resp)
    if rc == 0:
        console.print(f"deleted stream [bold]{args.name}[/bold]")
    return rc
