"""Client security settings shared by every Kafka client of a process (librdkafka's names).

An application (the gateway, the fleet, the Spark jobs, the dashboard) makes Kafka clients in
many places; they all take their security settings from one properties file, named by
``$SFTRAFFIC_CLIENT_CONFIG`` (``$SFTRAFFIC_KAFKA_CONFIG`` is read when it is unset; Kafka's
properties format, librdkafka's or the Java client's names, as Kafka tools' ``--command-config``
files: :mod:`framework.client.connection`), plus overrides set in-process with :func:`configure`
(``-X KEY=VALUE`` on a command line). ``sftraffic up --secure`` writes one such file per
principal (mode 0600) and hands each part its own, so passwords never appear on a command line.

Only security settings are taken from the file (``security.protocol``, ``sasl.*``, ``ssl.*``):
a client's own tuning stays the caller's. :func:`secured` merges them into a librdkafka
config, :func:`wire_client` makes a :class:`~framework.client.wire.WireClient` with them.
Without the variable and overrides everything is PLAINTEXT, as before.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from framework import properties
from framework.client.connection import (
    CONFIG_ENV,
    LEGACY_CONFIG_ENV,
    Connection,
    is_security_key,
    translate_java,
)
from framework.client.wire import WireClient, from_client_config
from framework.errors import StoreError

ENV = CONFIG_ENV

_overrides: dict[str, str] = {}


def read_properties(path: str | Path) -> dict[str, str]:
    """The settings of a client properties file in librdkafka's names (Java ones translated)."""
    conf, _warnings = translate_java(properties.read(path, "client properties"), f"client properties {path}")
    return conf


def write_properties(path: str | Path, conf: Mapping[str, str]) -> Path:
    """Write ``conf`` as KEY=VALUE lines, readable by the owner only (it may hold a password)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.writelines(f"{k}={v}\n" for k, v in conf.items())
    os.chmod(p, 0o600)  # an existing file keeps its mode on open: make sure
    return p


def configure(path: str | Path | None = None, overrides: Mapping[str, str] | None = None) -> None:
    """Set this process's client security: ``path`` becomes ``$SFTRAFFIC_KAFKA_CONFIG`` (so child
    processes, such as Spark's Python workers, inherit it), ``overrides`` win over the file."""
    if path is not None:
        read_properties(path)  # a bad file fails here, in one line
        os.environ[ENV] = str(Path(path).resolve())
    _overrides.update(overrides or {})
    bad = [k for k in _overrides if not is_security_key(k)]
    if bad:
        raise StoreError(f"-X {bad[0]}: only security settings (security.protocol, sasl.*, ssl.*) here")


def client_security() -> dict[str, str]:
    """The security settings of this process's Kafka clients (empty: PLAINTEXT)."""
    path = os.environ.get(ENV) or os.environ.get(LEGACY_CONFIG_ENV)
    conf = {k: v for k, v in read_properties(path).items() if is_security_key(k)} if path else {}
    conf.update(_overrides)
    return conf


def secured(conf: dict[str, Any]) -> dict[str, Any]:
    """``conf`` with this process's security settings added (the caller's own keys win)."""
    return {**client_security(), **conf}


def wire_client(bootstrap: str, timeout: float = 10.0, client_id: str = "sftraffic-cli") -> WireClient:
    """A wire client speaking this process's security settings (not yet connected)."""
    c = from_client_config(bootstrap, client_security(), timeout)
    c.client_id = client_id
    return c


def check_credentials(bootstrap: str, timeout: float = 10.0) -> None:
    """Connect and authenticate once with this process's settings: a refused password (or an
    unreachable store) raises a one-line :class:`StoreError` before any client starts. Without
    TLS or SASL nothing is contacted."""
    conn = Connection(bootstrap, client_security())
    if conn.secured:
        conn.check(timeout)
