"""``sftraffic streams create|list|describe|alter|delete|grant|revoke``: stream policies and
permissions (sftraffic extension).

A stream groups topics named ``<stream>.<topic>`` and carries their shared defaults: TTL
(retention.ms), partitions, replication factor, timestamp type, producer-id expiry...

Its permissions (the seeds' produceperm, consumeperm, topicperm, adminperm) are Kafka ACLs on
the prefix ``<stream>.`` (:mod:`framework.security.stream_permissions`): ``grant`` creates them
with CreateAcls, ``revoke`` deletes them with DeleteAcls, ``describe`` lists who holds what
with DescribeAcls, so ``kafka-acls`` sees and edits the same rules. Every command takes the
client's security settings in librdkafka's names (``--command-config FILE``, ``-X KEY=VALUE``:
``security.protocol``, ``sasl.mechanism``, ``sasl.username``, ``sasl.password``,
``ssl.ca.location``).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from framework import config as cfg
from framework.cli.common import add_bootstrap, parse_kv
from framework.client.acls import create_acls
from framework.client.wire import WireClient, from_client_config
from framework.errors import StoreError
from framework.protocol.errors import ErrorCode
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

console = Console()
SOURCES = {0: "stream", 1: "broker", 2: "default"}


def add_connection(p: argparse.ArgumentParser) -> None:
    """--bootstrap and the client's security settings (librdkafka's names, as kafka tools' files)."""
    add_bootstrap(p)
    p.add_argument("--command-config", metavar="FILE", help="client properties (KEY=VALUE lines)")
    p.add_argument(
        "-X", dest="client_config", action="append", default=[], metavar="KEY=VALUE", help="client property"
    )


def client_config(args: argparse.Namespace) -> dict[str, str]:
    conf: dict[str, str] = {}
    if getattr(args, "command_config", None):
        lines = Path(args.command_config).read_text().splitlines()
        conf.update(parse_kv([ln for ln in lines if ln.strip() and not ln.lstrip().startswith("#")], "line"))
    conf.update(parse_kv(getattr(args, "client_config", []), "-X"))
    return conf


def connect(args: argparse.Namespace) -> WireClient:
    return from_client_config(args.bootstrap, client_config(args))


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("streams", help="stream policies shared by the topics of a stream")
    ssub = p.add_subparsers(dest="action", metavar="ACTION")
    ssub.required = True

    def policy_flags(q: argparse.ArgumentParser) -> None:
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

    c = ssub.add_parser("create", help="create a stream")
    c.add_argument("name")
    policy_flags(c)
    c.add_argument("--if-not-exists", action="store_true")
    add_connection(c)
    c.set_defaults(func=create)

    ls = ssub.add_parser("list", help="list streams")
    add_connection(ls)
    ls.set_defaults(func=list_)

    d = ssub.add_parser("describe", help="a stream's policy and topics")
    d.add_argument("names", nargs="+")
    add_connection(d)
    d.set_defaults(func=describe)

    a = ssub.add_parser("alter", help="change a stream's policy (applies to its topics)")
    a.add_argument("name")
    policy_flags(a)
    a.add_argument(
        "--delete-config", action="append", default=[], metavar="KEY", help="remove a stream config"
    )
    add_connection(a)
    a.set_defaults(func=alter)

    rm = ssub.add_parser("delete", help="delete an empty stream")
    rm.add_argument("name")
    add_connection(rm)
    rm.set_defaults(func=delete)

    for action, verb in (("grant", "give"), ("revoke", "take away")):
        g = ssub.add_parser(action, help=f"{verb} the seeds' stream permissions (ACLs on <stream>.)")
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
        add_connection(g)
        g.set_defaults(func=grant if action == "grant" else revoke)


_PERM_HELP = {
    "produce": "Write and Describe on the stream's topics",
    "consume": "Read and Describe on the stream's topics, Read on groups named <stream>.*",
    "topic-admin": "Create, Delete, Alter, DescribeConfigs, AlterConfigs on the stream's topics",
    "admin": "grant and revoke permissions on the stream (and alter or delete it)",
}


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


def call(args: argparse.Namespace, req: StreamAdminRequest) -> StreamAdminResponse:
    with connect(args) as client:
        if client.version_for(StreamAdminRequest.API_KEY) is None:
            raise StoreError(
                f"the broker at {args.bootstrap} has no streams (it is not sftraffic): create topics "
                "with their configs instead, e.g. `sftraffic topics create NAME --ttl 180d`"
            )
        return client.send(req, StreamAdminResponse)


def _check(resp: StreamAdminResponse, ok_codes: tuple[int, ...] = (0,)) -> int:
    rc = 0
    for s in resp.streams:
        if s.error_code not in ok_codes:
            console.print(f"[red]stream {s.name}[/red]: {s.error_message}")
            rc = 2
    return rc


def create(args: argparse.Namespace) -> int:
    req = StreamAdminRequest(
        operation=CREATE,
        names=[args.name],
        configs=[StreamConfig(k, v) for k, v in policy(args).items()],
    )
    resp = call(args, req)
    if args.if_not_exists and resp.streams and resp.streams[0].error_code == ErrorCode.TOPIC_ALREADY_EXISTS:
        console.print(f"stream {args.name} already exists")
        return 0
    rc = _check(resp)
    if rc == 0:
        console.print(f"created stream [bold]{args.name}[/bold]")
    return rc


def list_(args: argparse.Namespace) -> int:
    resp = call(args, StreamAdminRequest(operation=DESCRIBE))
    table = Table("stream", "topics", "ttl", "partitions", "created")
    for s in resp.streams:
        vals = {c.name: c.value for c in s.configs}
        ttl = vals.get("retention.ms") or "?"
        created = time.strftime("%Y-%m-%d %H:%M", time.localtime(s.created_ms / 1000))
        table.add_row(s.name, str(len(s.topics)), _ms(ttl), vals.get("num.partitions", "?") or "?", created)
    console.print(table)
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
    resp = call(args, StreamAdminRequest(operation=DESCRIBE, names=list(args.names)))
    rc = _check(resp)
    for s in resp.streams:
        if s.error_code:
            continue
        t = Table("config", "value", "source", title=f"stream {s.name} ({len(s.topics)} topics)")
        for c in s.configs:
            t.add_row(c.name, c.value or "", SOURCES.get(c.source, "?"))
        console.print(t)
        if s.topics:
            console.print("topics: " + ", ".join(s.topics))
        _print_permissions(args, s.name)
    return rc


# -- permissions (ACLs on <stream>.) ---------------------------------------------------------------
def principal_of(user: str) -> str:
    return user if ":" in user else f"User:{user}"


def _acls(args: argparse.Namespace) -> list[AclBinding]:
    """Every ACL the user may see (DescribeAcls with a match-all filter)."""
    with connect(args) as client:
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


def _print_permissions(args: argparse.Namespace, stream: str) -> None:
    try:
        acls = _acls(args)
    except StoreError as exc:
        if exc.code == ErrorCode.SECURITY_DISABLED:
            console.print("permissions: none enforced (the broker has no authorizer.class.name)")
        else:
            console.print(f"permissions: not shown ({exc.message})")
        return
    who, others = holders(stream, acls)
    t = Table("permission", "principal", "host", title=f"stream {stream} permissions (ACLs on {stream}.)")
    for perm in PERMISSIONS:
        for h in who:
            if perm in h.permissions:
                t.add_row(f"{perm} ({SEEDS_NAMES[perm]})", h.principal, h.host)
    console.print(t)
    for b in others:
        console.print(f"  other ACL: {b}")


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
    with connect(args) as client:
        failed = create_acls(client, new)
    if any(code == ErrorCode.SECURITY_DISABLED for _, code, _m in failed):
        raise StoreError(
            f"the broker at {args.bootstrap} has no authorizer (authorizer.class.name is empty): "
            "nothing is enforced, so there is nothing to grant"
        )
    for b, code, message in failed:
        console.print(f"[red]{b}[/red]: {ErrorCode(code).name}: {message or ''}")
    if failed:
        return 2
    console.print(f"granted {', '.join(perms)} on stream [bold]{args.name}[/bold] to {principal}")
    return 0


def revoke(args: argparse.Namespace) -> int:
    perms = _chosen(args)
    principal = principal_of(args.user)
    acls = _acls(args)
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
    with connect(args) as client:
        resp = client.send(DeleteAclsRequest(filters=filters), DeleteAclsResponse)
    rc = 0
    for b, r in zip(gone, resp.filter_results, strict=True):
        if r.error_code:
            console.print(f"[red]{b}[/red]: {ErrorCode(r.error_code).name}: {r.error_message or ''}")
            rc = 2
    if rc == 0:
        console.print(f"revoked {', '.join(perms)} on stream [bold]{args.name}[/bold] from {principal}")
    return rc


def alter(args: argparse.Namespace) -> int:
    configs = [StreamConfig(k, v) for k, v in policy(args).items()] + [
        StreamConfig(k, None) for k in args.delete_config
    ]
    resp = call(args, StreamAdminRequest(operation=ALTER, names=[args.name], configs=configs))
    rc = _check(resp)
    if rc == 0:
        console.print(f"altered stream [bold]{args.name}[/bold]")
    return rc


def delete(args: argparse.Namespace) -> int:
    resp = call(args, StreamAdminRequest(operation=DELETE, names=[args.name]))
    rc = _check(resp)
    if rc == 0:
        console.print(f"deleted stream [bold]{args.name}[/bold]")
    return rc
