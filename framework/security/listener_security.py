"""What a broker's listeners need to authenticate connections and protect themselves.

:class:`ListenerSecurity` is read from the configuration once, at start (:meth:`from_config`):

* TLS: the server context of the SSL listeners (asking for client certificates as
  ``ssl.client.auth`` says) and of the SASL_SSL ones (asking for none), built by
  :mod:`framework.security.tls` only when a listener of that protocol exists;
* the principal of a client certificate: ``ssl.principal.mapping.rules``;
* SASL: ``sasl.enabled.mechanisms``, the SCRAM credential lookup (the metadata store's),
  ``connections.max.reauth.ms`` and ``connections.authentication.timeout.ms``, and the
  process's secret the decoy credentials of unknown users are derived from (random at each
  start, it never leaves the process);
* the connection limits: ``max.connections`` (the inter-broker listener is exempt, as in
  Kafka), ``max.connections.per.ip`` and ``connections.max.idle.ms``.

The defaults are a PLAINTEXT-only broker's. Frozen: the listener reads it from any connection.
"""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass, field

from framework import config as cfg
from framework.clock import SYSTEM, Clock
from framework.security import tls
from framework.security.listeners import ListenerConfig
from framework.security.sasl import CredentialLookup, SaslServerSession
from framework.security.ssl_principal import PrincipalMapper

INT_MAX = 2147483647


def _no_credentials(user: str, mechanism: str) -> None:
    return None


@dataclass(frozen=True, slots=True)
class ListenerSecurity:
    ssl_context: ssl.SSLContext | None = None  # SSL listeners (ssl.client.auth)
    sasl_ssl_context: ssl.SSLContext | None = None  # SASL_SSL listeners (no client certificate asked)
    mapper: PrincipalMapper = field(default_factory=PrincipalMapper)
    credentials: CredentialLookup = _no_credentials
    mechanisms: tuple[str, ...] = ("SCRAM-SHA-256", "SCRAM-SHA-512")
    secret: bytes = b""
    reauth_ms: int = 0
    auth_timeout_s: float = 10.0
    max_connections: int = INT_MAX
    max_connections_per_ip: int = INT_MAX
    idle_s: float = 600.0
    inter_broker: str = "PLAINTEXT"  # exempt from max.connections
    clock: Clock = SYSTEM  # SASL sessions' expiry

    @classmethod
    def from_config(
        cls,
        c: cfg.BrokerConfig,
        listeners: ListenerConfig,
        credentials: CredentialLookup,
        clock: Clock = SYSTEM,
    ) -> ListenerSecurity:
        protocols = {e.protocol for e in listeners.listeners}
        return cls(
            ssl_context=tls.server_context(c) if "SSL" in protocols else None,
            sasl_ssl_context=tls.server_context(c, False) if "SASL_SSL" in protocols else None,
            mapper=PrincipalMapper(c.str("ssl.principal.mapping.rules")),
            credentials=credentials,
            mechanisms=tuple(c.list("sasl.enabled.mechanisms")),
            secret=os.urandom(32),
            reauth_ms=c.int("connections.max.reauth.ms"),
            auth_timeout_s=c.int("connections.authentication.timeout.ms") / 1000,
            max_connections=c.int("max.connections"),
            max_connections_per_ip=c.int("max.connections.per.ip"),
            idle_s=c.int("connections.max.idle.ms") / 1000,
            inter_broker=listeners.inter_broker,
            clock=clock,
        )

    def sasl_session(self) -> SaslServerSession:
        """The SASL state of a new connection on a SASL listener."""
        return SaslServerSession(self.mechanisms, self.credentials, self.secret, self.reauth_ms, self.clock)
