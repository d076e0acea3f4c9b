"""``sftraffic dashboard``: serve the live dashboard (default http://127.0.0.1:8050).

The store: ``-b/--bootstrap-server``, ``--command-config FILE`` and ``-X KEY=VALUE`` as every
client command (:mod:`framework.cli.connection`). A missing settings file or a refused password
stops it at start with one line; a store that does not answer yet does not (the page shows it
as down until it answers).
"""

from __future__ import annotations

import argparse
import logging
import sys

from framework.cli.common import require_modules
from framework.cli.connection import add_connection, configure_process
from framework.client.wire import BrokerUnavailable

require_modules("dash", "plotly", "pandas", "msgspec")


EPILOG = """\
example (the last hour of the store at 127.0.0.1:9092 on http://127.0.0.1:8050):
  sftraffic dashboard -b 127.0.0.1:9092 --lookback 1h"""


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "dashboard",
        help="serve the live traffic dashboard",
        description="The live traffic dashboard: the Spark jobs' results, alerts and the sensors' "
        "latest readings, read from the store.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_connection(p)
    p.add_argument("--host", default="127.0.0.1", help="HTTP address to serve on (127.0.0.1)")
    p.add_argument("--port", type=int, default=8050, help="HTTP port (8050)")
    p.add_argument("--lookback", default="3h", help="how far back to load data at start (e.g. 30m, 3h, 1d)")
    p.add_argument("--window", help="the Spark jobs' window, if not their default (e.g. '1 minute')")
    p.add_argument("--watermark", help="the Spark jobs' watermark, if not their default (e.g. '2 minutes')")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from dashboard.app import create_app
    from dashboard.data import DashboardData
    from dashboard.status import spark_interval_ms
    from framework.config import parse_duration_ms

    conn = configure_process(args)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    try:
        conn.check()  # a refused password: one line before the server starts
    except BrokerUnavailable as exc:  # the health banner says so until it answers
        logging.getLogger("sftraffic.dashboard").warning("%s", exc.message)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request (~5 % of the CPU)
    data = DashboardData(
        conn.bootstrap,
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
