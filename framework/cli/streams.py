"""``sftraffic streams create|list|describe|alter|delete``: stream policies (sftraffic extension).

A stream groups topics named ``<stream>.<topic>`` and carries their shared defaults: TTL
(retention.ms), partitions, replication factor, timestamp type, producer-id expiry...
"""

from __future__ import annotations

import argparse
import time

from rich.console import Console
from rich.table import Table

from framework import config as cfg
from framework.cli.common import add_bootstrap, parse_kv
from framework.client.wire import WireClient
from framework.errors import StoreError
from framework.protocol.errors import ErrorCode
from framework.protocol.messages.stream_admin import (
    ALTER,
    CREATE,
    DELETE,
    DESCRIBE,
    StreamAdminRequest,
    StreamAdminResponse,
    StreamConfig,
)

console = Console()
SOURCES = {0: "stream", 1: "broker", 2: "default"}


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
    add_bootstrap(c)
    c.set_defaults(func=create)

    ls = ssub.add_parser("list", help="list streams")
    add_bootstrap(ls)
    ls.set_defaults(func=list_)

    d = ssub.add_parser("describe", help="a stream's policy and topics")
    d.add_argument("names", nargs="+")
    add_bootstrap(d)
    d.set_defaults(func=describe)

    a = ssub.add_parser("alter", help="change a stream's policy (applies to its topics)")
    a.add_argument("name")
    policy_flags(a)
    a.add_argument(
        "--delete-config", action="append", default=[], metavar="KEY", help="remove a stream config"
    )
    add_bootstrap(a)
    a.set_defaults(func=alter)

    rm = ssub.add_parser("delete", help="delete an empty stream")
    rm.add_argument("name")
    add_bootstrap(rm)
    rm.set_defaults(func=delete)


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


def call(bootstrap: str, req: StreamAdminRequest) -> StreamAdminResponse:
    with WireClient(bootstrap) as client:
        if client.version_for(StreamAdminRequest.API_KEY) is None:
            raise StoreError(
                f"the broker at {bootstrap} has no streams (it is not sftraffic): create topics "
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
    resp = call(args.bootstrap, req)
    if args.if_not_exists and resp.streams and resp.streams[0].error_code == ErrorCode.TOPIC_ALREADY_EXISTS:
        console.print(f"stream {args.name} already exists")
        return 0
    rc = _check(resp)
    if rc == 0:
        console.print(f"created stream [bold]{args.name}[/bold]")
    return rc


def list_(args: argparse.Namespace) -> int:
    resp = call(args.bootstrap, StreamAdminRequest(operation=DESCRIBE))
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
    resp = call(args.bootstrap, StreamAdminRequest(operation=DESCRIBE, names=list(args.names)))
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
    return rc


def alter(args: argparse.Namespace) -> int:
    configs = [StreamConfig(k, v) for k, v in policy(args).items()] + [
        StreamConfig(k, None) for k in args.delete_config
    ]
    resp = call(args.bootstrap, StreamAdminRequest(operation=ALTER, names=[args.name], configs=configs))
    rc = _check(resp)
    if rc == 0:
        console.print(f"altered stream [bold]{args.name}[/bold]")
    return rc


def delete(args: argparse.Namespace) -> int:
    resp = call(args.bootstrap, StreamAdminRequest(operation=DELETE, names=[args.name]))
    rc = _check(resp)
    if rc == 0:
        console.print(f"deleted stream [bold]{args.name}[/bold]")
    return rc
