"""``sftraffic gateway``: run one MQTT → store edge gateway until Ctrl-C.

Security, both sides optional: towards Mosquitto a username (``--mqtt-username`` or
``$SFTRAFFIC_MQTT_USERNAME``) and its password (``--mqtt-password-file`` or
``$SFTRAFFIC_MQTT_PASSWORD``), TLS with ``--mqtt-ca FILE`` (or ``--mqtt-tls``: the system's CAs);
towards the store the connection options of every client command (:mod:`framework.cli.connection`):
``-b/--bootstrap-server``, a properties file ``--command-config FILE`` (``--kafka-config`` kept as
an alias; default ``$SFTRAFFIC_CLIENT_CONFIG``) and ``-X KEY=VALUE`` (``security.protocol=SASL_SSL``,
``sasl.mechanism``, ``sasl.username``, ``sasl.password``, ``ssl.ca.location``), handed to the
confluent-kafka producer. Credentials are checked once at start: a refused password on either
side stops the gateway with one line (exit code 2); a store that does not answer yet does not
(the messages are parked on disk until it does).
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import signal
import sys
from typing import TYPE_CHECKING, Any

from framework.cli.common import add_registry, require_modules
from framework.cli.connection import add_connection, configure_process
from framework.client.wire import BrokerUnavailable
from framework.errors import StoreError

require_modules("msgspec", "gmqtt")  # validation and MQTT

if TYPE_CHECKING:
    from sensors.gateway import GatewayConfig, GatewayStats


EPILOG = """\
example (subscribe to Mosquitto, forward to the store; a second gateway shares the load):
  sftraffic gateway -b 127.0.0.1:9092 --mqtt 127.0.0.1:1883 --id gw-1 --command-config gw.properties"""


class _IgnoredMqttClient(argparse.Action):
    """``--mqtt-client``, deprecated: the gateway has one implementation (gmqtt); one warning line."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option: Any = None
    ) -> None:
        print(
            f"{parser.prog}: warning: {option} is deprecated and ignored: the gateway runs on gmqtt "
            "(the threaded paho-mqtt gateway was removed)",
            file=sys.stderr,
        )


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "gateway",
        help="MQTT edge gateway: devices -> store (no message lost)",
        description="One MQTT edge gateway: takes the devices' messages from Mosquitto (a shared "
        "subscription) and produces them to the store, parking them on disk while it is down.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_connection(p)
    p.add_argument("--mqtt", default="127.0.0.1:1883", metavar="HOST:PORT", help="Mosquitto to subscribe to")
    p.add_argument("--id", default="gw-1", help="gateway id (also its MQTT client id and queue name)")
    p.add_argument("--group", default="sftraffic-gateways", help="shared-subscription group of the gateways")
    p.add_argument(
        "--queue-dir", default=".sftraffic/gateway-queue", help="on-disk buffer while the store is down"
    )
    p.add_argument("--queue-max-bytes", type=int, default=1 << 30)
    p.add_argument(
        "--mqtt-version",
        choices=("3.1.1", "5"),
        default="3.1.1",
        help="MQTT version towards Mosquitto (5 adds a session expiry)",
    )
    p.add_argument(
        "--mqtt-client",
        choices=("gmqtt", "paho"),
        action=_IgnoredMqttClient,
        help="deprecated, ignored: the gateway runs on gmqtt (one warning line on stderr)",
    )
    p.add_argument(
        "--mqtt-username",
        default=os.environ.get("SFTRAFFIC_MQTT_USERNAME"),
        help="MQTT user (default $SFTRAFFIC_MQTT_USERNAME; none: anonymous)",
    )
    p.add_argument(
        "--mqtt-password-file",
        metavar="FILE",
        help="file holding the MQTT password (default: $SFTRAFFIC_MQTT_PASSWORD)",
    )
    p.add_argument("--mqtt-ca", metavar="FILE", help="TLS towards Mosquitto, trusting this CA (PEM)")
    p.add_argument("--mqtt-tls", action="store_true", help="TLS towards Mosquitto with the system's CAs")
    p.add_argument(
        "--format",
        choices=["json", "avro"],
        default="json",
        help="what goes to the store: the devices' JSON, or Avro (Confluent's wire format, --registry)",
    )
    add_registry(p)
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=run)


def _mqtt_password(args: argparse.Namespace) -> str | None:
    if args.mqtt_password_file:
        try:
            with open(args.mqtt_password_file) as f:
                return f.read().strip()
        except OSError as exc:
            raise StoreError(f"--mqtt-password-file {args.mqtt_password_file}: {exc.strerror}") from None
    return os.environ.get("SFTRAFFIC_MQTT_PASSWORD")


def _config(args: argparse.Namespace, bootstrap: str) -> GatewayConfig:
    from sensors.gateway import GatewayConfig

    host, _, port = args.mqtt.rpartition(":")
    if not host or not port.isdigit():
        raise StoreError(f"--mqtt {args.mqtt!r}: expected HOST:PORT")
    if args.mqtt_ca and not os.path.isfile(args.mqtt_ca):
        raise StoreError(f"--mqtt-ca {args.mqtt_ca}: no such file")
    return GatewayConfig(
        bootstrap=bootstrap,
        mqtt_version=5 if args.mqtt_version == "5" else 311,
        mqtt_host=host,
        mqtt_port=int(port),
        gateway_id=args.id,
        share_group=args.group,
        queue_dir=args.queue_dir,
        queue_max_bytes=args.queue_max_bytes,
        mqtt_username=args.mqtt_username,
        mqtt_password=_mqtt_password(args),
        mqtt_ca=args.mqtt_ca,
        mqtt_tls=args.mqtt_tls,
        value_format=args.format,
        registry_url=args.registry,
    )


class _Reporter:
    """The periodic status line (unless --quiet)."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.last = 0

    def __call__(self, s: GatewayStats, degraded: bool, every: float) -> None:
        if self.quiet:
            return
        rate = (s.forwarded - self.last) / every
        self.last = s.forwarded
        logging.getLogger("sftraffic.gateway").info(
            "received %d forwarded %d (%.0f/s) dead-letter %d parked %d drained %d%s",
            s.received,
            s.forwarded,
            rate,
            s.dead_lettered,
            s.queued,
            s.drained,
            " [store down: parking]" if degraded else "",
        )


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    from sensors.gateway import MqttRefused

    conn = configure_process(args)
    cfg = _config(args, conn.bootstrap)
    try:
        conn.check()
    except BrokerUnavailable as exc:  # messages are parked on disk until it answers
        logging.getLogger("sftraffic.gateway").warning("%s", exc.message)
    try:
        return _run(args, cfg)
    except MqttRefused as exc:
        raise StoreError(str(exc)) from None


def _ready(args: argparse.Namespace) -> None:
    print(f"gateway {args.id} ready", file=sys.stderr, flush=True)


def _run(args: argparse.Namespace, cfg: GatewayConfig) -> int:
    import asyncio

    from sensors.gateway import Gateway, serve

    report = _Reporter(args.quiet)
    every = 5.0
    # Forwarding allocates a few short-lived objects per message, none in reference cycles: run
    # the cyclic GC less often (-15% CPU per message), and never over the start-up objects.
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        # gmqtt's reconnect futures, cancelled when a refused start ends the loop, are not errors
        loop.set_exception_handler(
            lambda lp, ctx: (
                None
                if isinstance(ctx.get("exception"), asyncio.CancelledError)
                else lp.default_exception_handler(ctx)
            )
        )
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)

        def on_report(gw: Gateway) -> None:
            report(gw.stats, gw.degraded, every)

        await serve(cfg, stop, lambda gw: _ready(args), every, on_report)

    try:
        import uvloop
    except ImportError:
        asyncio.run(main())
    else:
        uvloop.run(main())
    return 0
