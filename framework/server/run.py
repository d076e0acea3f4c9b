"""Run one broker process until SIGINT/SIGTERM, then stop cleanly."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
import time

from framework import config as cfg
from framework.errors import StoreError
from framework.protocol import record_walk
from framework.server.broker import Broker
from framework.server.lifecycle import SHUTDOWN_S

try:
    import uvloop
except ImportError:  # optional: not built for every platform
    uvloop = None  # type: ignore[assignment]


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return json.dumps(doc)


def setup_logging(level: str, fmt: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)


async def serve(config: cfg.BrokerConfig, ready: asyncio.Event | None = None) -> int:
    """Run a broker until SIGINT/SIGTERM; returns the exit code (0 clean, 1 forced).

    The first signal starts a clean stop bounded by ``SHUTDOWN_S``; a second signal, or the
    bound, forces it (logs flushed and checkpointed, nothing else waited for).
    """
    broker = Broker(config)
    log = logging.getLogger("sftraffic.broker")
    if record_walk.COMPILED:  # before the "listening on" line that tells a supervisor it is up
        log.info("produce validation: record walk compiled (mypyc)")
    else:
        log.warning(
            "produce validation: record walk in pure Python, ~25x the CPU per record (not built "
            "at install: no C compiler, or SFTRAFFIC_PURE_PYTHON=1)"
        )
    await broker.start()
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()

    def on_signal() -> None:
        if not stop.is_set():
            stop.set()
            return
        broker.force_stop("second signal")
        logging.shutdown()
        os._exit(1)

    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, on_signal)
        except (NotImplementedError, RuntimeError):
            pass
    if ready is not None:
        ready.set()
    await stop.wait()
    try:
        async with asyncio.timeout(SHUTDOWN_S):
            await broker.stop()
    except TimeoutError:
        broker.force_stop(f"not stopped within {SHUTDOWN_S:.0f} s")
        return 1
    return 0


def run(config: cfg.BrokerConfig) -> int:
    setup_logging(config.str("log.level"), config.str("log.format"))
    for line in config.warnings:  # settings that change nothing here, one line each
        logging.getLogger("sftraffic.config").warning("%s", line)
    try:
        if uvloop is not None:
            return int(uvloop.run(serve(config)))
        return asyncio.run(serve(config))
    except StoreError as exc:
        logging.getLogger("sftraffic.broker").error("%s", exc.message)
        print(f"sftraffic broker: {exc.message}", file=sys.stderr)
        return 2
