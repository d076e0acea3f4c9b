"""``sftraffic gateway``: run one MQTT → store edge gateway until Ctrl-C.

Security, both sides optional: towards Mosquitto a username (``--mqtt-username`` or
``$SFTRAFFIC_MQTT_USERNAME``) and its password (``--mqtt-password-file`` or
``$SFTRAFFIC_MQTT_PASSWORD``), TLS with ``--mqtt-ca FILE`` (or ``--mqtt-tls``: the system's CAs);
towards the store librdkafka's settings from ``--kafka-config FILE`` (or
``$SFTRAFFIC_KAFKA_CONFIG``) and ``-X KEY=VALUE`` (``security.protocol=SASL_SSL``,
``sasl.mechanism``, ``sasl.username``, ``sasl.password``, ``ssl.ca.location``), handed to the
confluent-kafka producer as they are. Credentials are checked once at start: a refused password
on either side stops the gateway with one line (exit code 2).
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import logging
import os
import signal
import sys
import threading
from typing import TYPE_CHECKING

from framework.cli.common import add_bootstrap, add_registry, parse_kv, require_modules
from framework.client.wire import BrokerUnavailable
from framework.errors import StoreError

require_modules("msgspec", "paho")  # validation and MQTT (gmqtt is optional: see run)

if TYPE_CHECKING:
    from sensors.gateway import GatewayConfig, GatewayStats


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("gateway", help="MQTT edge gateway: devices -> store (no message lost)")
    add_bootstrap(p)
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
        help="MQTT version towards Mosquitto (5 adds a session expiry; 3.1.1 is faster with paho)",
    )
    p.add_argument(
        "--mqtt-client",
        choices=("gmqtt", "paho"),
        default="gmqtt",
        help="gmqtt: asyncio gateway (default, several times faster); paho: the threaded paho-mqtt one",
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
        "--kafka-config",
        metavar="FILE",
        help="the store client's security settings, KEY=VALUE lines in librdkafka's names "
        "(security.protocol, sasl.*, ssl.ca.location; default $SFTRAFFIC_KAFKA_CONFIG)",
    )
    p.add_argument(
        "-X",
        dest="kafka_overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="one security setting of the store client (wins over --kafka-config)",
    )
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


def _config(args: argparse.Namespace) -> GatewayConfig:
    from sensors.gateway import GatewayConfig

    host, _, port = args.mqtt.rpartition(":")
    if not host or not port.isdigit():
        raise StoreError(f"--mqtt {args.mqtt!r}: expected HOST:PORT")
    if args.mqtt_ca and not os.path.isfile(args.mqtt_ca):
        raise StoreError(f"--mqtt-ca {args.mqtt_ca}: no such file")
    return GatewayConfig(
        bootstrap=args.bootstrap,
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
    from framework.client.security import check_credentials, configure
    from sensors.gateway import MqttRefused

    cfg = _config(args)
    configure(args.kafka_config, parse_kv(args.kafka_overrides, "-X"))
    try:
        check_credentials(cfg.bootstrap)
    except BrokerUnavailable as exc:  # messages are parked on disk until it answers
        logging.getLogger("sftraffic.gateway").warning("%s", exc.message)
    try:
        return _run(args, cfg)
    except MqttRefused as exc:
        raise StoreError(str(exc)) from None


def _run(args: argparse.Namespace, cfg: GatewayConfig) -> int:
    if args.mqtt_client == "paho":
        return _run_paho(args, cfg)
    if importlib.util.find_spec("gmqtt") is None:
        logging.getLogger("sftraffic.gateway").warning(
            "gmqtt is not installed (pip install 'sftraffic[app]'): using the slower paho-mqtt gateway"
        )
        return _run_paho(args, cfg)
    return _run_async(args, cfg)


def _ready(args: argparse.Namespace) -> None:
    print(f"gateway {args.id} ready", file=sys.stderr, flush=True)


def _run_async(args: argparse.Namespace, cfg: GatewayConfig) -> int:
    import asyncio

    from sensors.gateway_async import AsyncGateway, serve

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

        def on_report(gw: AsyncGateway) -> None:
            report(gw.stats, gw.degraded, every)

        await serve(cfg, stop, lambda gw: _ready(args), every, on_report)

    try:
        import uvloop
    except ImportError:
        asyncio.run(main())
    else:
        uvloop.run(main())
    return 0


def _run_paho(args: argparse.Namespace, cfg: GatewayConfig) -> int:
    from sensors.gateway import Gateway

    gw = Gateway(cfg)
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    gw.start()
    _ready(args)
    report = _Reporter(args.quiet)
    while not stop.wait(5.0):
        report(gw.stats, gw.degraded.is_set(), 5.0)
    gw.stop()
    return 0
