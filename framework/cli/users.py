"""``sftraffic users add|delete|list``: SCRAM users, in a data dir or through a broker.

* ``--data-dir DIR``: before the broker's first start (or while it is stopped), like
  ``kafka-storage format --add-scram``: the credential (salt, stored key, server key,
  iterations; never the password) is written into the data dir's metadata. A cluster broker
  proposes the credentials it finds there to the metadata quorum when it joins, once.
* otherwise a running broker (ours or Apache Kafka) through AlterUserScramCredentials /
  DescribeUserScramCredentials, with confluent-kafka's AdminClient, reached with the shared
  connection options (``-b/--bootstrap-server``, ``--command-config FILE``, ``-X KEY=VALUE``).

The password is read from stdin (``--password -``: one line; at a terminal, asked for without
echo) or a file (``--password-file FILE``, its first line); ``--password P`` works too, but a
command line shows in ``ps`` and the shell's history.

``list -o json``: ``{"users": [{"user", "credential_infos": [{"mechanism", "iterations"}]}]}``.
"""

from __future__ import annotations

import argparse
import fcntl
import getpass
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from framework import config as cfg
from framework.cli.connection import add_connection
from framework.cli.output import (
    add_output,
    admin,
    command,
    command_group,
    connect,
    json_wanted,
    kafka_errors,
    print_json,
)
from framework.errors import StoreError
from framework.metadata.store import MetadataStore
from framework.security import scram

MECHANISMS = list(scram.HASHES)
FROM_STDIN = "-"  # --password -: read it from stdin


EXAMPLES = """\
  sftraffic users add alice --password - < alice.password
  sftraffic users add alice --password-file alice.password --mechanism SCRAM-SHA-512
  sftraffic users add alice --password - --data-dir /var/lib/sftraffic/broker-1   # broker stopped
  sftraffic users list -o json"""


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    usub = command_group(
        sub,
        "users",
        "SCRAM users: add, delete, list",
        "SCRAM users, through a running broker or in a stopped broker's data dir.",
        EXAMPLES,
    )

    a = command(
        usub,
        "add",
        "add a user or change its password",
        "printf '%s\\n' \"$PASSWORD\" | sftraffic users add alice --password -",
        connect=False,
    )
    a.add_argument("name", help="user name")
    pw = a.add_mutually_exclusive_group(required=True)
    pw.add_argument(
        "--password",
        metavar="PASSWORD|-",
        help="the user's password (stored salted and hashed); - reads one line from stdin. A password "
        "given here shows in `ps` and the shell's history: prefer - or --password-file",
    )
    pw.add_argument("--password-file", metavar="FILE", help="read the password from FILE (its first line)")
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

    d = command(usub, "delete", "delete a user's credentials", "sftraffic users delete alice", connect=False)
    d.add_argument("name", help="user name")
    d.add_argument(
        "--mechanism", action="append", choices=MECHANISMS, help="only this mechanism (repeatable)"
    )
    _where(d)
    d.set_defaults(func=delete)

    ls = command(
        usub, "list", "list users and their mechanisms", "sftraffic users list -o json", connect=False
    )
    add_output(ls)
    _where(ls)
    ls.set_defaults(func=list_users)


def _where(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-dir", help="the broker's data dir (log.dirs), broker stopped")
    add_connection(p)


def read_password(args: argparse.Namespace) -> str:
    """The password of ``--password`` (``-``: one line of stdin) or ``--password-file``."""
    if args.password_file is not None:
        try:
            with open(args.password_file, encoding="utf-8") as f:
                text = f.readline()
        except OSError as exc:
            raise StoreError(f"--password-file {args.password_file}: {exc.strerror or exc}") from None
        where = f"--password-file {args.password_file}"
    elif args.password == FROM_STDIN:
        tty = sys.stdin.isatty()
        text = getpass.getpass(f"password for {args.name}: ") if tty else sys.stdin.readline()
        where = "--password - (stdin)"
    else:
        return str(args.password)
    password = text.rstrip("\r\n")
    if not password:
        raise StoreError(f"{where}: no password (an empty line)")
    return password


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
    args.password = read_password(args)
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
    if json_wanted(args):
        print_json(
            {
                "users": [
                    {
                        "user": u,
                        "credential_infos": [
                            {"mechanism": m, "iterations": i} for m, i in sorted(users[u].items())
                        ],
                    }
                    for u in sorted(users)
                ]
            }
        )
        return 0
    for user in sorted(users):
        mechs = ", ".join(f"{m} (iterations {i})" for m, i in sorted(users[user].items()))
        print(f"{user}\t{mechs}")
    return 0


# -- through a broker ----------------------------------------------------------------------------
def _describe(args: argparse.Namespace) -> dict[str, dict[str, int]]:
    a = admin(connect(args))
    with kafka_errors():
        found = a.describe_user_scram_credentials(request_timeout=15).result(20)
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
    a = admin(connect(args))
    with kafka_errors():
        for alteration in alterations:  # Kafka alters a user once per request (DUPLICATE_RESOURCE)
            for fut in a.alter_user_scram_credentials([alteration], request_timeout=15).values():
                fut.result(20)
