"""``sftraffic configs describe|alter``: dynamic configs of topics and brokers and client quotas,
as Kafka's ``kafka-configs.sh`` (over the Kafka protocol, so against any Kafka cluster).

The entity is one of ``--topic T``, ``--broker ID``, ``--broker-defaults`` (every broker's
dynamic default), ``--user U`` and/or ``--client ID`` (client quotas of that user, client id or
both; ``--user-defaults``, ``--client-defaults``: the ``<default>`` entity), or Kafka's spelling
``--entity-type topics|brokers|users|clients --entity-name NAME`` (``--entity-default``; users
or clients without a name: every such entity). Changes are given as kafka-configs takes them:
``--add-config k=v,k2=v2`` (a value holding commas in brackets: ``cleanup.policy=[compact,delete]``)
and ``--delete-config k,k2``.

Topic and broker configs go through DescribeConfigs and IncrementalAlterConfigs (confluent-kafka's
AdminClient; the broker defaults, resource name "", over the wire, which confluent-kafka
refuses); each is shown with its value and source (:data:`framework.client.admin.SOURCE_NAMES`:
``topic``, ``stream`` for a value a topic takes from its sftraffic stream, ``dynamic_broker``,
``dynamic_default_broker``, ``static_broker``, ``default``). ``describe`` shows what is set on
the entity itself (as kafka-configs: a topic's own configs (and its stream's), a broker's
dynamic ones, the dynamic defaults), ``--all`` every config. Client quotas go through
DescribeClientQuotas and AlterClientQuotas; a user's SCRAM credentials are shown with its quotas
and set with ``sftraffic users``.

``-o json``: topic and broker ``{"resource_type", "resource_name", "configs": [{"name", "value",
"source", "is_sensitive", "is_read_only", "synonyms": [{"name", "value", "source"}]}]}``;
quotas ``{"quotas": [{"entity": [{"entity_type", "entity_name"}], "values": [{"key", "value"}]}]}``
(``entity_name`` null: the default entity), with ``--user NAME`` also ``"scram_credentials":
[{"mechanism", "iterations"}]``.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from typing import Any

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
)
from framework.cli.topics import config_table
from framework.client import admin as wire_admin
from framework.client.admin import CLIENT_ID, RESOURCE_BROKER, USER, Entity
from framework.client.connection import Connection
from framework.errors import StoreError

EXAMPLES = """\
  sftraffic configs describe --topic traffic.speeds
  sftraffic configs alter --topic traffic.speeds --add-config retention.ms=86400000,segment.ms=3600000
  sftraffic configs alter --broker 1 --add-config leader.replication.throttled.rate=10485760
  sftraffic configs alter --user alice --add-config producer_byte_rate=1048576
  sftraffic configs describe --client-defaults -o json"""

DESCRIPTION = """\
Dynamic configs of topics and brokers, and client quotas, as kafka-configs.sh. The entity:
--topic T, --broker ID, --broker-defaults (every broker's dynamic defaults), --user U and/or
--client ID (client quotas; --user-defaults, --client-defaults: the <default> entity), or
kafka-configs' --entity-type topics|brokers|users|clients --entity-name NAME (--entity-default;
users or clients without a name: every one). describe shows each config's value and source
(topic, stream, dynamic_broker, dynamic_default_broker, static_broker, default); alter takes
--add-config k=v,k2=v2 (a value with commas in brackets: cleanup.policy=[compact,delete]) and
--delete-config k,k2. A user's SCRAM credentials: sftraffic users."""
ENTITY_TYPES = ("topics", "brokers", "users", "clients")  # kafka-configs' --entity-type
# what describe shows without --all, as kafka-configs: the values set on the entity itself (a
# topic's own, or its stream's; one broker's; the cluster-wide broker defaults)
SET_AT = {
    "topic": frozenset({"topic", "stream"}),
    "broker": frozenset({"dynamic_broker"}),
    "broker_defaults": frozenset({"dynamic_default_broker"}),
}


@dataclass(frozen=True)
class Target:
    """What a configs command is about: a topic, a broker (``name`` "" for the defaults), or a
    client-quota entity (``names_given`` False: every entity of those types)."""

    kind: str  # "topic", "broker" or "quota"
    name: str = ""
    entity: Entity = ()
    names_given: bool = True

    def __str__(self) -> str:
        if self.kind == "topic":
            return f"topic {self.name}"
        if self.kind == "broker":
            return f"broker {self.name}" if self.name else "the broker defaults"
        if not self.names_given:
            return " and ".join(f"every {t}" for t, _ in self.entity)
        return ", ".join(f"{t} {n if n is not None else '<default>'}" for t, n in self.entity)


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    csub = command_group(
        sub,
        "configs",
        "dynamic configs of topics and brokers, client quotas (as kafka-configs)",
        DESCRIPTION,
        EXAMPLES,
    )
    d = command(
        csub,
        "describe",
        "show an entity's configs (value and source) or quotas",
        "sftraffic configs describe --topic traffic.speeds --all -o json",
        output=True,
    )
    _entity_flags(d)
    d.add_argument("--all", action="store_true", help="every config, defaults too (topics and brokers)")
    d.set_defaults(func=describe)

    a = command(
        csub,
        "alter",
        "set or delete an entity's configs or quotas",
        "sftraffic configs alter --topic traffic.speeds --add-config retention.ms=86400000 "
        "--delete-config segment.ms",
    )
    _entity_flags(a)
    a.add_argument(
        "--add-config",
        action="append",
        default=[],
        metavar="K=V[,K2=V2]",
        help="configs to set, comma-separated; a value with commas in brackets: k=[a,b] (repeatable)",
    )
    a.add_argument(
        "--delete-config",
        action="append",
        default=[],
        metavar="K[,K2]",
        help="configs to remove (repeatable)",
    )
    a.set_defaults(func=alter)


def _entity_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("entity (one of)")
    g.add_argument("--topic", metavar="TOPIC", help="a topic")
    g.add_argument("--broker", metavar="ID", help="a broker, by node id")
    g.add_argument("--broker-defaults", action="store_true", help="the dynamic defaults of every broker")
    g.add_argument("--user", metavar="USER", help="client quotas of a user (with --client: of that pair)")
    g.add_argument("--user-defaults", action="store_true", help="the default user's quotas")
    g.add_argument("--client", metavar="CLIENT_ID", help="client quotas of a client id")
    g.add_argument("--client-defaults", action="store_true", help="the default client id's quotas")
    g.add_argument("--entity-type", choices=ENTITY_TYPES, help="kafka-configs' spelling: the entity's type")
    g.add_argument("--entity-name", metavar="NAME", help="with --entity-type: its name")
    g.add_argument("--entity-default", action="store_true", help="with --entity-type: its default entity")


def target(args: argparse.Namespace) -> Target:
    """The one entity the flags of ``args`` name (a one-line error when none or a mix)."""
    if args.entity_type:
        if args.entity_name is not None and args.entity_default:
            raise StoreError("give --entity-name or --entity-default, not both")
        named = {
            "topics": "topic",
            "brokers": "broker",
            "users": "user",
            "clients": "client",
        }[args.entity_type]
        if getattr(args, named) is not None or getattr(args, f"{named}_defaults", False):
            raise StoreError(f"--entity-type {args.entity_type} and --{named}: give one of them")
        if args.entity_type == "topics":
            if not args.entity_name:
                raise StoreError("--entity-type topics needs --entity-name TOPIC")
            args.topic = args.entity_name
        elif args.entity_type == "brokers":
            if args.entity_default:
                args.broker_defaults = True
            elif args.entity_name:
                args.broker = args.entity_name
            else:
                raise StoreError("--entity-type brokers needs --entity-name ID or --entity-default")
        elif args.entity_name is None and not args.entity_default:  # users or clients: all of them
            t = USER if named == "user" else CLIENT_ID
            return Target("quota", entity=((t, None),), names_given=False)
        elif args.entity_default:
            setattr(args, f"{named}_defaults", True)
        else:
            setattr(args, named, args.entity_name)
    elif args.entity_name is not None or args.entity_default:
        raise StoreError("--entity-name and --entity-default go with --entity-type")
    chosen = [
        f
        for f in ("topic", "broker", "broker_defaults", "user", "user_defaults", "client", "client_defaults")
        if getattr(args, f) not in (None, False)
    ]
    if not chosen:
        raise StoreError("name the entity: --topic, --broker, --broker-defaults, --user or --client")
    quota = [f for f in chosen if f.startswith(("user", "client"))]
    if len(chosen) > 1 and (
        len(quota) != len(chosen) or {f.split("_")[0] for f in quota} != {"user", "client"}
    ):
        raise StoreError(
            f"one entity at a time (got {', '.join('--' + f.replace('_', '-') for f in chosen)}); "
            "only --user and --client go together"
        )
    if args.topic is not None:
        if not args.topic:
            raise StoreError("--topic: a topic name is needed")
        return Target("topic", args.topic)
    if args.broker is not None:
        if not args.broker.isdigit():
            raise StoreError(f"--broker {args.broker!r}: a broker's node id, e.g. 1")
        return Target("broker", args.broker)
    if args.broker_defaults:
        return Target("broker", "")
    entity: list[tuple[str, str | None]] = []
    if args.user is not None or args.user_defaults:
        entity.append((USER, None if args.user_defaults else args.user))
    if args.client is not None or args.client_defaults:
        entity.append((CLIENT_ID, None if args.client_defaults else args.client))
    return Target("quota", entity=tuple(entity))


_ITEMS = re.compile(r",(?=[^\]]*(?:\[|$))")  # the commas outside [...], as kafka-configs splits


def parse_add_config(texts: list[str]) -> dict[str, str]:
    """kafka-configs' ``--add-config`` (each ``k=v,k2=[a,b]``) as keys and values."""
    out: dict[str, str] = {}
    for text in texts:
        for item in _ITEMS.split(text):
            if not item.strip():
                continue
            k, sep, v = item.partition("=")
            if not sep or not k.strip():
                raise StoreError(f"--add-config {item!r}: expected KEY=VALUE")
            v = v.strip()
            if v.startswith("[") and v.endswith("]"):
                v = v[1:-1]
            out[k.strip()] = v
    return out


def parse_delete_config(texts: list[str]) -> list[str]:
    keys = [k.strip() for text in texts for k in text.split(",")]
    if any(not k for k in keys):
        raise StoreError(f"--delete-config {','.join(texts)!r}: expected KEY[,KEY...]")
    return list(dict.fromkeys(keys))


def quota_values(configs: dict[str, str]) -> dict[str, float]:
    out = {}
    for k, v in configs.items():
        if k.upper().startswith("SCRAM-"):
            raise StoreError(f"{k}: SCRAM credentials are set with `sftraffic users add USER --password -`")
        try:
            out[k] = float(v)
        except ValueError:
            raise StoreError(f"--add-config {k}={v}: a quota is a number") from None
    return out


# -- describe ----------------------------------------------------------------------------------
def describe(args: argparse.Namespace) -> int:
    t = target(args)
    conn = connect(args)
    doc = _describe_quotas(conn, t) if t.kind == "quota" else _describe_configs(conn, t, args.all)
    if json_wanted(args):
        print_json(doc)
        return 0
    if t.kind == "quota":
        _print_quotas(t, doc)
        return 0
    configs = doc["configs"]
    if not configs:
        console.print(f"no dynamic configs on {t} (--all shows every config)", highlight=False)
    else:
        console.print(config_table(configs, f"configs of {t}"))
    return 0


def _describe_configs(conn: Connection, t: Target, every: bool) -> dict[str, Any]:
    shown = SET_AT[t.kind if t.kind != "broker" or t.name else "broker_defaults"]
    rows = _rows(conn, t)
    return {
        "resource_type": t.kind,
        "resource_name": t.name,
        "configs": [r.to_json() for r in rows if every or r.source in shown],
    }


def _rows(conn: Connection, t: Target) -> list[wire_admin.ConfigRow]:
    if t.kind == "broker" and not t.name:
        with conn.wire() as w:
            return wire_admin.describe_configs(w, RESOURCE_BROKER, "")
    from confluent_kafka.admin import ConfigResource  # type: ignore[attr-defined]  # noqa: PLC0415

    kind = ConfigResource.Type.TOPIC if t.kind == "topic" else ConfigResource.Type.BROKER
    res = ConfigResource(kind, t.name)
    a = admin(conn)
    try:
        with kafka_errors():
            return wire_admin.config_rows(a.describe_configs([res], request_timeout=15)[res].result())
    except StoreError as err:
        raise StoreError(f"{t}: {_plain(err.message)}") from None


def _plain(message: str) -> str:
    return "does not exist" if "UNKNOWN_TOPIC" in message else message


def _describe_quotas(conn: Connection, t: Target) -> dict[str, Any]:
    with conn.wire() as w:
        found = wire_admin.client_quotas(w, t.entity, t.names_given)
    doc: dict[str, Any] = {
        "quotas": [
            {
                "entity": [{"entity_type": et, "entity_name": n} for et, n in entity],
                "values": [{"key": k, "value": v} for k, v in sorted(values.items())],
            }
            for entity, values in sorted(found.items(), key=lambda e: [(et, n or "") for et, n in e[0]])
        ]
    }
    user = dict(t.entity).get(USER)
    if t.names_given and len(t.entity) == 1 and user is not None:
        doc["scram_credentials"] = _scram(conn, user)
    return doc


def _scram(conn: Connection, user: str) -> list[dict[str, Any]]:
    """The user's SCRAM mechanisms (none when the broker has no such user)."""
    a = admin(conn)
    try:
        with kafka_errors():
            infos = (
                a.describe_user_scram_credentials([user], request_timeout=15)[user]
                .result()
                .scram_credential_infos
            )
    except StoreError as err:
        if "RESOURCE_NOT_FOUND" in err.message or "not found" in err.message.lower():
            return []
        raise
    return [{"mechanism": c.mechanism.name.replace("_", "-"), "iterations": c.iterations} for c in infos]


def _print_quotas(t: Target, doc: dict[str, Any]) -> None:
    tbl = table("entity", "quota", "value", title=f"client quotas of {t}")
    for q in doc["quotas"]:
        who = ", ".join(
            f"{e['entity_type']}={e['entity_name'] if e['entity_name'] is not None else '<default>'}"
            for e in q["entity"]
        )
        for v in q["values"]:
            tbl.add_row(who, v["key"], _number(v["value"]))
    if doc["quotas"]:
        console.print(tbl)
    else:
        console.print(f"no client quotas for {t}", highlight=False)
    if "scram_credentials" in doc:
        creds = ", ".join(
            f"{c['mechanism']} (iterations {c['iterations']})" for c in doc["scram_credentials"]
        )
        console.print(f"SCRAM credentials: {creds or 'none'}", highlight=False)


def _number(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else str(v)


# -- alter -------------------------------------------------------------------------------------
def alter(args: argparse.Namespace) -> int:
    t = target(args)
    if t.kind == "quota" and not t.names_given:
        raise StoreError("alter one entity: give --entity-name NAME or --entity-default")
    set_ = parse_add_config(args.add_config)
    delete = parse_delete_config(args.delete_config)
    if not set_ and not delete:
        raise StoreError("nothing to alter: give --add-config K=V or --delete-config K")
    both = sorted(set(set_) & set(delete))
    if both:
        raise StoreError(f"{both[0]}: both added and deleted")
    conn = connect(args)
    if t.kind == "quota":
        values = quota_values(set_)
        with conn.wire() as w:
            wire_admin.alter_client_quotas(w, t.entity, values, delete)
    elif t.kind == "broker" and not t.name:
        with conn.wire() as w:
            wire_admin.alter_configs(w, RESOURCE_BROKER, "", set_, delete)
    else:
        _alter_with_admin(conn, t, set_, delete)
    console.print(f"Completed updating config for {t}.", highlight=False)
    return 0


def _alter_with_admin(conn: Connection, t: Target, set_: dict[str, str], delete: list[str]) -> None:
    from confluent_kafka.admin import (  # type: ignore[attr-defined]  # noqa: PLC0415
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
    )

    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in set_.items()]
    entries += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in delete]
    kind = ConfigResource.Type.TOPIC if t.kind == "topic" else ConfigResource.Type.BROKER
    res = ConfigResource(kind, t.name, incremental_configs=entries)
    a = admin(conn)
    try:
        with kafka_errors():
            for fut in a.incremental_alter_configs([res], request_timeout=30).values():
                fut.result()
    except StoreError as err:
        raise StoreError(f"{t}: {_plain(err.message)}") from None
