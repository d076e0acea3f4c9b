"""``sftraffic registry``: the schema registry (Confluent's REST API) over ``_schemas`` on the store.

Needs the ``registry`` extras (aiohttp, avro); without them the command is listed and answers
with one line naming the missing module (see ``framework.cli.main``).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import signal

from framework.cli.common import add_bootstrap, ensure_reachable, parse_kv, quiet_logger, require_modules

require_modules("aiohttp", "avro")

log = logging.getLogger("sftraffic.registry")


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "registry", help="schema registry speaking Confluent's REST API, schemas kept in the _schemas topic"
    )
    add_bootstrap(p)
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
        "-X",
        dest="client",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Kafka client setting in librdkafka's names (security.protocol, sasl.*, ssl.*)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # imported here: building the parser must not need the extras
    from aiohttp import web  # noqa: PLC0415

    from framework.registry.app import make_app  # noqa: PLC0415
    from framework.registry.election import Election  # noqa: PLC0415
    from framework.registry.store import KafkaStore  # noqa: PLC0415

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    ensure_reachable(args.bootstrap)
    host, _, port = args.listen.rpartition(":")
    url = args.advertised_url or f"http://{host}:{port}"
    client = {"logger": quiet_logger(), **parse_kv(args.client, "-X")}
    store = KafkaStore(args.bootstrap, args.topic, client, args.replication_factor)
    election = Election(args.bootstrap, args.topic, args.group, url, client, not args.no_leader_eligibility)

    async def serve() -> None:
        await asyncio.to_thread(store.start)
        election.start()
        runner = web.AppRunner(make_app(store, election), access_log=None)
        await runner.setup()
        await web.TCPSite(runner, host or "127.0.0.1", int(port)).start()
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
        print(f"registry listening on {url} ({count} schemas read from {args.topic})", flush=True)
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
