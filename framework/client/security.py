"""Client security settings shared by every Kafka client of a process (librdkafka's names).

An application (the gateway, the fleet, the Spark jobs, the dashboard) makes Kafka clients in
many places; they all take their security settings from one properties file, named by
``$SFTRAFFIC_KAFKA_CONFIG`` (KEY=VALUE lines in librdkafka's names, ``#`` comments, as Kafka
tools' ``--command-config`` files), plus overrides set in-process with :func:`configure`
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

from framework.client.wire import BrokerUnavailable, WireClient, from_client_config
from framework.errors import StoreError

ENV = "SFTRAFFIC_KAFKA_CONFIG"

_overrides: dict[str, str] = {}


def read_properties(path: str | Path) -> dict[str, str]:
    """KEY=VALUE lines (blank lines and ``#`` comments skipped); one-line errors."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise StoreError(f"client properties {p}: {exc.strerror or exc}") from None
    out: dict[str, str] = {}
    for n, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        k, sep, v = s.partition("=")
        if not sep or not k.strip():
            raise StoreError(f"client properties {p}, line {n}: expected KEY=VALUE")
        out[k.strip()] = v.strip()
    return out


def write_properties(path: str | Path, conf: Mapping[str, str]) -> Path:
    """Write ``conf`` as KEY=VALUE lines, readable by the owner only (it may hold a password)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.writelines(f"{k}={v}\n" for k, v in conf.items())
    os.chmod(p, 0o600)  # an existing file keeps its mode on open: make sure
    return p


def is_security_key(key: str) -> bool:
    """``security.protocol``, ``sasl.*`` or ``ssl.*``: what this module passes on."""
    return key == "security.protocol" or key.startswith(("sasl.", "ssl."))


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
    path = os.environ.get(ENV)
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
    unreachable store) raises a one-line :class:`StoreError` before any client starts."""
    conf = client_security()
    if not conf.get("security.protocol", "PLAINTEXT").upper().startswith(("SASL", "SSL")):
        return
    user = conf.get("sasl.username", "")
    try:
        with wire_client(bootstrap, timeout):
            pass
    except BrokerUnavailable:
        raise
    except StoreError as exc:
        who = f" as {user!r}" if user else ""
        raise StoreError(f"the store at {bootstrap} refused to authenticate{who}: {exc.message}") from None
    except OSError as exc:  # TLS: a certificate the CA does not vouch for, a plaintext port ...
        raise StoreError(f"no TLS session with the store at {bootstrap}: {exc}") from None
