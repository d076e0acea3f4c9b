"""Shared CLI bits: --bootstrap, KEY=VALUE parsing, Kafka error → one line, required modules."""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import socket
from typing import Any

from framework.errors import StoreError

DEFAULT_BOOTSTRAP = os.environ.get("SFTRAFFIC_BOOTSTRAP", "127.0.0.1:9092")


def require_modules(*names: str) -> None:
    """Raise ModuleNotFoundError naming the first top-level module of ``names`` not installed.

    Nothing is imported (``find_spec`` only looks), so a command module can call this when it is
    imported: ``sftraffic`` then lists the command with a one-line "needs the extras" answer
    instead of failing later, and building the parser stays quick.
    """
    for name in names:
        if importlib.util.find_spec(name) is None:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


def add_bootstrap(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--bootstrap",
        "-b",
        default=DEFAULT_BOOTSTRAP,
        metavar="HOST:PORT",
        help=f"broker to talk to (default {DEFAULT_BOOTSTRAP}, or $SFTRAFFIC_BOOTSTRAP)",
    )


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
            return StoreError(f"no broker reachable ({text}); is it running? check --bootstrap")
        return StoreError(f"{err.name()}: {text}")
    return StoreError(str(exc))


def ensure_reachable(bootstrap: str, timeout: float = 3.0) -> None:
    """Fail fast with one line when no broker listens at ``bootstrap``."""
    last = ""
    for hp in bootstrap.split(","):
        host, _, port = hp.strip().rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
                return
        except (OSError, ValueError) as exc:
            last = getattr(exc, "strerror", None) or str(exc)
    raise StoreError(
        f"no broker reachable at {bootstrap} ({last}); is it running? "
        "start one with `sftraffic broker` or `sftraffic up`, or pass --bootstrap"
    )


def quiet_logger() -> Any:
    """A logger for librdkafka that drops its connection chatter (errors surface as exceptions)."""
    lg = logging.getLogger("sftraffic.librdkafka")
    lg.addHandler(logging.NullHandler())
    lg.propagate = False
    return lg
