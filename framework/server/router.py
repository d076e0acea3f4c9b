"""API key → handler, and the one place where errors become Kafka error codes.

Each module in ``framework.server.handlers`` serves one API: it exposes ``API_KEY``,
``handle(ctx, request)`` returning the response (or an awaitable of it, or None when no
response is due, as for acks=0), and ``error_response(request, code, message)`` used when the
handler raises a :class:`StoreError` for the request as a whole.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from framework.protocol.api import API_TABLE, ApiEntry
from framework.server import handlers


@dataclass(frozen=True, slots=True)
class Route:
    entry: ApiEntry
    handle: Callable[[Any, Any], Any]
    error_response: Callable[[Any, int, str], Any] | None
    min_version: int
    max_version: int


def _load() -> dict[int, Route]:
    routes: dict[int, Route] = {}
    for info in pkgutil.iter_modules(handlers.__path__):
        mod: ModuleType = importlib.import_module(f"{handlers.__name__}.{info.name}")
        key = getattr(mod, "API_KEY", None)
        if key is None:
            continue
        entry = API_TABLE[key]
        lo = getattr(mod, "MIN_VERSION", entry.min_version)
        hi = getattr(mod, "MAX_VERSION", entry.max_version)
        assert key not in routes, f"two handlers for API key {key}"
        routes[key] = Route(entry, mod.handle, getattr(mod, "error_response", None), lo, hi)
    return routes


ROUTES: dict[int, Route] = {}


def routes() -> dict[int, Route]:
    if not ROUTES:
        ROUTES.update(_load())
    return ROUTES


def supported_versions() -> list[tuple[int, int, int]]:
    """(api key, min, max) of every API this broker serves, for ApiVersions."""
    return sorted((k, r.min_version, r.max_version) for k, r in routes().items())
