"""``sftraffic gateway``: run one MQTT → store edge gateway until Ctrl-C."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import time

from framework.cli.common import add_bootstrap


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
        help="MQTT version towards Mosquitto (3.1.1 forwards ~3x faster with paho; 5 adds session expiry)",
    )
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from sensors.gateway import Gateway, GatewayConfig

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    host, _, port = args.mqtt.rpartition(":")
    gw = Gateway(
        GatewayConfig(
            bootstrap=args.bootstrap,
            mqtt_version=5 if args.mqtt_version == "5" else 311,
            mqtt_host=host,
            mqtt_port=int(port),
            gateway_id=args.id,
            share_group=args.group,
            queue_dir=args.queue_dir,
            queue_max_bytes=args.queue_max_bytes,
        )
    )
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    gw.start()
    print(f"gateway {args.id} ready", file=sys.stderr, flush=True)
    last = 0
    while not stop.wait(5.0):
        s = gw.stats
        if not args.quiet:
            rate = (s.forwarded - last) / 5
            last = s.forwarded
            logging.getLogger("sftraffic.gateway").info(
                "received %d forwarded %d (%.0f/s) dead-letter %d parked %d drained %d%s",
                s.received,
                s.forwarded,
                rate,
                s.dead_lettered,
                s.queued,
                s.drained,
                " [store down: parking]" if gw.degraded.is_set() else "",
            )
    gw.stop()
    time.sleep(0)
    return 0
