"""``sftraffic registry``: the schema registry (Confluent's REST API) over ``_schemas`` on the store.

Needs the ``registry`` extras (aiohttp, avro); without them the command is listed and answers
with one line naming the missing module (see ``framework.cli.main``).

``--auth-file`` lets in only the users of a Karapace-format file, each to what its permissions
allow (:mod:`registry.auth`); ``sftraffic registry-passwd`` prints such a user entry,
as ``karapace_mkpasswd`` does. ``--tls-cert``/``--tls-key`` serve HTTPS. The store: the
connection options of every client command (:mod:`framework.cli.connection`):
``-b/--bootstrap-server``, ``--command-config FILE`` (default ``$SFTRAFFIC_CLIENT_CONFIG``) and
``-X KEY=VALUE``, any client setting in librdkafka's names, for all the registry's Kafka clients
(they are made in this process only, from one configuration).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import signal
import ssl
import sys

from framework.cli.common import quiet_logger, require_modules
from framework.cli.connection import add_connection, connection
from framework.errors import StoreError
from registry.auth import ALGORITHMS, user_entry

require_modules("aiohttp", "avro")

log = logging.getLogger("sftraffic.registry")


EPILOG = """\
example (HTTP Basic users from a Karapace-format file, schemas in _schemas on the store):
  sftraffic registry -b 127.0.0.1:9092 --listen 127.0.0.1:8081 --auth-file registry-auth.json"""

USER_ENTRY_EPILOG = """\
example (the entry for alice, the password read from standard input):
  echo 's3cret' | sftraffic registry-passwd -u alice - >> users.json"""


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "registry",
        help="schema registry speaking Confluent's REST API, schemas kept in the _schemas topic",
        description="A schema registry speaking Confluent Schema Registry's REST API; the schemas are "
        "kept in a compacted topic of the store, and one of several instances is elected writer.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_connection(p)
    p.add_argument("--listen", default="127.0.0.1:8081", metavar="HOST:PORT", help="HTTP address (8081)")
    p.add_argument(
        "--advertised-url", metavar="URL", help="the URL other instances forward writes to (http://LISTEN)"
    )
    p.add_argument("--topic", default="_schemas", help="the compacted topic holding the schemas (_schemas)")
    p.add_argument("--group", default="schema-registry", help="the consumer group electing the leader")
    p.add_argument("--replication-factor", type=int, help="of the topic when created (min(3, brokers))")
    p.add_argument(
        "--no-leader-eligibility", action="store_true", help="never lead: always forward writes to the leader"
    )
    p.add_argument(
        "--auth-file",
        metavar="FILE",
        help="users and permissions (Karapace's registry_authfile JSON): HTTP Basic auth required",
    )
    p.add_argument("--tls-cert", metavar="FILE", help="serve HTTPS with this certificate (PEM, chain)")
    p.add_argument("--tls-key", metavar="FILE", help="the private key of --tls-cert (PEM)")
    p.add_argument(
        "--tls-ca", metavar="FILE", help="CA certificates trusted when forwarding writes to an https leader"
    )
    p.set_defaults(func=run)

    pw = sub.add_parser(
        "registry-passwd",
        help="print a user entry for a registry --auth-file (as Karapace's karapace_mkpasswd)",
        description="Print one user entry (salted hash) for a registry --auth-file, as Karapace's "
        "karapace_mkpasswd does.",
        epilog=USER_ENTRY_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    pw.add_argument("-u", "--user", required=True, help="the user name")
    pw.add_argument("-a", "--algorithm", default="sha512", choices=ALGORITHMS, help="hash (sha512)")
    pw.add_argument("password", help="the password; - reads it from the first line of standard input")
    pw.add_argument("salt", nargs="?", help="the salt (random when not given)")
    pw.set_defaults(func=passwd)


def passwd(args: argparse.Namespace) -> int:
    from_stdin = args.password == "-"  # noqa: S105 (the "read it from stdin" marker)
    password = sys.stdin.readline().rstrip("\n") if from_stdin else args.password
    if not password:
        raise StoreError("registry-passwd: an empty password")
    print(json.dumps(user_entry(args.user, password, args.algorithm, args.salt), indent=4))
    return 0


def tls_contexts(args: argparse.Namespace) -> tuple[ssl.SSLContext | None, ssl.SSLContext | None]:
    """(the server's context or None for plain HTTP, the forwarding client's or None), checked
    here so that a bad file is one line at start."""
    if bool(args.tls_cert) != bool(args.tls_key):
        raise StoreError("--tls-cert and --tls-key go together")
    server = client = None
    try:
        if args.tls_cert:
            server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            server.load_cert_chain(args.tls_cert, args.tls_key)
        if args.tls_ca:
            client = ssl.create_default_context(cafile=args.tls_ca)
    except (OSError, ssl.SSLError) as exc:
        raise StoreError(f"registry TLS: {exc}") from None
    return server, client


def run(args: argparse.Namespace) -> int:
    # imported here: building the parser must not need the extras
    from aiohttp import web  # noqa: PLC0415

    from registry.app import make_app  # noqa: PLC0415
    from registry.auth import AuthFile, AuthFileError  # noqa: PLC0415
    from registry.election import Election  # noqa: PLC0415
    from registry.store import KafkaStore  # noqa: PLC0415

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    server_tls, forward_tls = tls_contexts(args)
    try:
        auth = AuthFile(args.auth_file) if args.auth_file else None
    except AuthFileError as exc:
        raise StoreError(str(exc)) from None
    conn = connection(args)
    conn.check()  # unreachable, a refused password: one line before anything starts
    host, _, port = args.listen.rpartition(":")
    url = args.advertised_url or f"{'https' if server_tls else 'http'}://{host}:{port}"
    client = {**conn.config, "logger": quiet_logger()}
    store = KafkaStore(conn.bootstrap, args.topic, client, args.replication_factor)
    election = Election(conn.bootstrap, args.topic, args.group, url, client, not args.no_leader_eligibility)

    async def serve() -> None:
        await asyncio.to_thread(store.start)
        election.start()
        runner = web.AppRunner(make_app(store, election, auth, forward_tls), access_log=None)
        await runner.setup()
        await web.TCPSite(runner, host or "127.0.0.1", int(port), ssl_context=server_tls).start()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        with store.lock:
            count = len(store.state.schemas)
        # what start-up made (modules, clients, the schemas read) is never garbage: out of the
        # collector's sight, a full collection does not walk it (a pause of milliseconds,
        # felt by the requests in flight)
        gc.collect()
        gc.freeze()
        who = f", {len(auth.users)} users may log in" if auth is not None else ""
        print(f"registry listening on {url} ({count} schemas read from {args.topic}{who})", flush=True)
        await stop.wait()
        await runner.cleanup()
        await asyncio.to_thread(election.close)
        await asyncio.to_thread(store.close)

    try:
        import uvloop  # noqa: PLC0415 (a dependency of the store, absent on Windows)
    except ImportError:  # pragma: no cover
        asyncio.run(serve())
    else:
        uvloop.run(serve())
    return 0
