"""TLS and SASL of this broker's connections to the others (Kafka's inter-broker client settings).

Replica fetchers, the transaction marker channel and forwarded requests connect to the other
brokers' inter-broker listener (``inter.broker.listener.name``), so that listener's protocol
decides: SSL and SASL_SSL need a client TLS context (the truststore checks the other broker's
certificate, and the broker's own certificate goes along where a listener requires one);
SASL_PLAINTEXT and SASL_SSL need a SASL login, ``sasl.inter.broker.username`` and
``sasl.inter.broker.password`` with ``sasl.mechanism.inter.broker.protocol``: a SCRAM user of
the cluster, required in a cluster (a single node never connects to another broker).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from framework import config as cfg
from framework.errors import ConfigError
from framework.security import tls
from framework.security.listeners import ListenerConfig
from framework.security.sasl import SaslLogin


@dataclass(frozen=True, slots=True)
class InterBrokerSecurity:
    tls: ssl.SSLContext | None = None  # the inter-broker listener is SSL or SASL_SSL
    sasl: SaslLogin | None = None  # the inter-broker listener is SASL_PLAINTEXT or SASL_SSL

    @classmethod
    def from_config(
        cls, c: cfg.BrokerConfig, listeners: ListenerConfig, clustered: bool
    ) -> InterBrokerSecurity:
        ep = listeners.inter_broker_endpoint
        context = tls.client_context(c) if ep.uses_ssl else None
        login = None
        if ep.uses_sasl:
            user = c.str("sasl.inter.broker.username")
            if clustered and not user:
                raise ConfigError(
                    f"inter.broker.listener.name {ep.name} is {ep.protocol}: set "
                    "sasl.inter.broker.username and sasl.inter.broker.password (a SCRAM user of the cluster)"
                )
            login = SaslLogin(
                c.str("sasl.mechanism.inter.broker.protocol"), user, c.password("sasl.inter.broker.password")
            )
        return cls(context, login)
