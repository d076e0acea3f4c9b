"""``sftraffic users add|delete|list``: SCRAM users, in a data dir or through a broker.

* ``--data-dir DIR``: before the broker's first start (or while it is stopped), like
  ``kafka-storage format --add-scram``: the credential (salt, stored key, server key,
  iterations; never the password) is written into the data dir's metadata. A cluster broker
  proposes the credentials it finds there to the metadata quorum when it joins, once.
* ``--bootstrap HOST:PORT``: a running broker (ours or Apache Kafka) through
  AlterUserScramCredentials / DescribeUserScramCredentials, with confluent-kafka's AdminClient;
  ``--command-config FILE`` and ``-X KEY=VALUE`` give the client's security settings in
  librdkafka's names (``security.protocol``, ``sasl.mechanism``, ``sasl.username``,
  ``sasl.password``, ``ssl.ca.location`` ...).
"""

from __future__ import annotations

import argparse
import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from framework import config as cfg
from framework.cli.common import add_bootstrap, ensure_reachable, kafka_error, parse_kv, quiet_logger
from framework.errors import StoreError
from framework.metadata.store import MetadataStore
from framework.security import scram

MECHANISMS = list(scram.HASHES)


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("users", help="SCRAM users: add, delete, list")
    usub = p.add_subparsers(dest="action", metavar="ACTION")
    usub.required = True

    a = usub.add_parser("add", help="add a user or change its password")
    a.add_argument("name", help="user name")
    a.add_argument("--password", required=True, help="the user's password (stored salted and hashed)")
    a.add_argument(
        "--mechanism",
        action="append",
        choices=MECHANISMS,
        help="SCRAM mechanism (repeatable; default SCRAM-SHA-256)",
    )
    a.add_argument(
        "--iterations",
        type=int,
        default=scram.DEFAULT_ITERATIONS,
        help=f"PBKDF2 iterations ({scram.MIN_ITERATIONS}-{scram.MAX_ITERATIONS})",
    )
    _where(a)
    a.set_defaults(func=add)

    d = usub.add_parser("delete", help="delete a user's credentials")
    d.add_argument("name", help="user name")
    d.add_argument(
        "--mechanism", action="append", choices=MECHANISMS, help="only this mechanism (repeatable)"
    )
    _where(d)
    d.set_defaults(func=delete)

    ls = usub.add_parser("list", help="list users and their mechanisms")
    _where(ls)
    ls.set_defaults(func=list_users)


def _where(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-dir", help="the broker's data dir (log.dirs), broker stopped")
    add_bootstrap(p)
    p.add_argument("--command-config", metavar="FILE", help="client properties (KEY=VALUE lines)")
    p.add_argument(
        "-X", dest="client_config", action="append", default=[], metavar="KEY=VALUE", help="client property"
    )


# -- data dir ----------------------------------------------------------------------------------
@contextmanager
def _stopped_store(data_dir: str) -> Iterator[MetadataStore]:
    d = Path(data_dir)
    d.mkdir(parents=True, exist_ok=True)
    fd = os.open(d / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StoreError(
                f"a broker is running on {d}: use --bootstrap to change users of a running broker"
            ) from None
        store = MetadataStore(d, cfg.BrokerConfig.load(overrides={"log.dirs": str(d)}, environ={}))
        store.load()
        yield store
    finally:
        os.close(fd)


def _mechanisms(args: argparse.Namespace) -> list[str]:
    return list(dict.fromkeys(args.mechanism or ["SCRAM-SHA-256"]))


def add(args: argparse.Namespace) -> int:
    mechs = _mechanisms(args)
    creds = [scram.from_password(m, args.password, args.iterations) for m in mechs]
    if args.data_dir:
        with _stopped_store(args.data_dir) as store:
            store.scram_credentials(args.name, creds, [])
    else:
        _alter(args, upsert=mechs)
    print(f"user {args.name}: {', '.join(mechs)} set")
    return 0


def delete(args: argparse.Namespace) -> int:
    if args.data_dir:
        with _stopped_store(args.data_dir) as store:
            have = list(store.scram.get(args.name, {}))
            mechs = args.mechanism or have
            if not have:
                raise StoreError(f"no user {args.name!r} in {args.data_dir}")
            store.scram_credentials(args.name, [], mechs)
    else:
        mechs = args.mechanism or list(_describe(args).get(args.name, {}))
        if not mechs:
            raise StoreError(f"no user {args.name!r}")
        _alter(args, delete=mechs)
    print(f"user {args.name}: {', '.join(mechs)} deleted")
    return 0


def list_users(args: argparse.Namespace) -> int:
    if args.data_dir:
        with _stopped_store(args.data_dir) as store:
            users = {u: {m: int(c["iterations"]) for m, c in ms.items()} for u, ms in store.scram.items()}
    else:
        users = _describe(args)
    for user in sorted(users):
        mechs = ", ".join(f"{m} (iterations {i})" for m, i in sorted(users[user].items()))
        print(f"{user}\t{mechs}")
    return 0


# -- through a broker ----------------------------------------------------------------------------
def _client_config(args: argparse.Namespace) -> dict[str, Any]:
    conf: dict[str, Any] = {"bootstrap.servers": args.bootstrap, "logger": quiet_logger()}
    if args.command_config:
        lines = Path(args.command_config).read_text().splitlines()
        conf.update(parse_kv([ln for ln in lines if ln.strip() and not ln.lstrip().startswith("#")], "line"))
    conf.update(parse_kv(args.client_config, "-X"))
    return conf


def _admin(args: argparse.Namespace) -> Any:
    from confluent_kafka.admin import AdminClient  # noqa: PLC0415 (only with --bootstrap)

    ensure_reachable(args.bootstrap)
    return AdminClient(_client_config(args))


def _describe(args: argparse.Namespace) -> dict[str, dict[str, int]]:
    admin = _admin(args)
    try:
        found = admin.describe_user_scram_credentials(request_timeout=15).result(20)
    except Exception as exc:
        raise kafka_error(exc) from None
    return {
        user: {c.mechanism.name.replace("_", "-"): c.iterations for c in d.scram_credential_infos}
        for user, d in found.items()
    }


def _alter(
    args: argparse.Namespace, upsert: list[str] | None = None, delete: list[str] | None = None
) -> None:
    from confluent_kafka.admin import (  # type: ignore[attr-defined]  # noqa: PLC0415
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    def mech(name: str) -> Any:
        return ScramMechanism[name.replace("-", "_")]

    alterations: list[Any] = [
        UserScramCredentialUpsertion(
            args.name, ScramCredentialInfo(mech(m), args.iterations), args.password.encode()
        )
        for m in upsert or []
    ]
    alterations += [UserScramCredentialDeletion(args.name, mech(m)) for m in delete or []]
    admin = _admin(args)
    try:
        for fut in admin.alter_user_scram_credentials(alterations, request_timeout=15).values():
            fut.result(20)
    except Exception as exc:
        raise kafka_error(exc) from None
