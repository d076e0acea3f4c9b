"""``sftraffic dashboard``: serve the live dashboard (default http://127.0.0.1:8050)."""

from __future__ import annotations

import argparse
import logging
import sys

from framework.cli.common import add_bootstrap, require_modules

require_modules("dash", "plotly", "pandas", "msgspec")


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("dashboard", help="serve the live traffic dashboard")
    add_bootstrap(p)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8050)
    p.add_argument("--lookback", default="3h", help="how far back to load data at start (e.g. 30m, 3h, 1d)")
    p.add_argument("--window", help="the Spark jobs' window, if not their default (e.g. '1 minute')")
    p.add_argument("--watermark", help="the Spark jobs' watermark, if not their default (e.g. '2 minutes')")
    p.add_argument(
        "--kafka-config",
        metavar="FILE",
        help="the Kafka clients' security settings (librdkafka's names, KEY=VALUE lines; default "
        "$SFTRAFFIC_KAFKA_CONFIG)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from dashboard.app import create_app
    from dashboard.data import DashboardData
    from dashboard.status import spark_interval_ms
    from framework.client.security import configure
    from framework.config import parse_duration_ms

    if args.kafka_config:
        configure(args.kafka_config)

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request (~5 % of the CPU)
    data = DashboardData(
        args.bootstrap,
        lookback_ms=parse_duration_ms(args.lookback),
        window_ms=spark_interval_ms(args.window) if args.window else None,
        watermark_ms=spark_interval_ms(args.watermark) if args.watermark else None,
    ).start()
    app = create_app(data)
    print(f"dashboard on http://{args.host}:{args.port}", file=sys.stderr, flush=True)
    try:
        app.run(host=args.host, port=args.port, debug=False)
    finally:
        data.stop()
    return 0
