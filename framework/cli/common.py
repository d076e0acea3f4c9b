"""Shared CLI bits: --registry, KEY=VALUE parsing, Kafka error → one line, required modules.

The connection options every client command takes are in :mod:`framework.cli.connection`.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
from typing import Any

from framework.errors import StoreError


def require_modules(*names: str) -> None:
    """Raise ModuleNotFoundError naming the first top-level module of ``names`` not installed.

    Nothing is imported (``find_spec`` only looks), so a command module can call this when it is
    imported: ``sftraffic`` then lists the command with a one-line "needs the extras" answer
    instead of failing later, and building the parser stays quick.
    """
    for name in names:
        if importlib.util.find_spec(name) is None:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


def add_registry(p: argparse.ArgumentParser) -> None:
    """--registry: the schema registry of ``--format avro`` ($SFTRAFFIC_REGISTRY)."""
    p.add_argument(
        "--registry",
        default=os.environ.get("SFTRAFFIC_REGISTRY", "http://127.0.0.1:8081"),
        metavar="URL",
        help="schema registry for --format avro ($SFTRAFFIC_REGISTRY, http://127.0.0.1:8081)",
    )


def parse_kv(items: list[str], what: str = "--config") -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or []:
        k, sep, v = item.partition("=")
        if not sep or not k.strip():
            raise StoreError(f"{what} {item!r}: expected KEY=VALUE")
        out[k.strip()] = v.strip()
    return out


def kafka_error(exc: BaseException) -> StoreError:
    """Turn a confluent-kafka exception into a one-line StoreError."""
    err: Any = exc.args[0] if exc.args else None
    if hasattr(err, "str") and hasattr(err, "name"):
        text = err.str()
        if err.name() in ("_TRANSPORT", "_TIMED_OUT", "_ALL_BROKERS_DOWN"):
            return StoreError(f"no broker reachable ({text}); is it running? check -b/--bootstrap-server")
        return StoreError(f"{err.name()}: {text}")
    return StoreError(str(exc))


def quiet_logger() -> Any:
    """A logger for librdkafka that drops its connection chatter (errors surface as exceptions)."""
    lg = logging.getLogger("sftraffic.librdkafka")
    lg.addHandler(logging.NullHandler())
    lg.propagate = False
    return lg
