"""TLS and SASL of the connections to other brokers, from the inter-broker listener's protocol
(framework/replication/inter_broker_security.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trustme

from framework import config as cfg
from framework.errors import ConfigError
from framework.replication.inter_broker_security import InterBrokerSecurity
from framework.security.listeners import ListenerConfig


def inter_broker(clustered: bool = True, **kv: Any) -> InterBrokerSecurity:
    c = cfg.BrokerConfig.load(overrides=kv, environ={})
    return InterBrokerSecurity.from_config(c, ListenerConfig.from_config(c), clustered)


def test_a_plaintext_inter_broker_listener_needs_nothing() -> None:
    assert inter_broker(listeners="127.0.0.1:9092") == InterBrokerSecurity(None, None)


def test_sasl_logs_in_as_the_configured_scram_user() -> None:
    s = inter_broker(
        listeners="SASL_PLAINTEXT://127.0.0.1:9092",
        **{
            "sasl.inter.broker.username": "broker",
            "sasl.inter.broker.password": "secret",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        },
    )
    assert s.tls is None and s.sasl is not None
    assert (s.sasl.mechanism, s.sasl.username, s.sasl.password) == ("SCRAM-SHA-512", "broker", "secret")


def test_a_cluster_without_an_inter_broker_user_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"sasl\.inter\.broker\.username"):
        inter_broker(listeners="SASL_PLAINTEXT://127.0.0.1:9092")
    assert inter_broker(False, listeners="SASL_PLAINTEXT://127.0.0.1:9092").sasl is not None  # one node


def test_ssl_checks_the_other_brokers_certificate(tmp_path: Path) -> None:
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    s = inter_broker(
        listeners="SSL://127.0.0.1:9093",
        **{"ssl.truststore.location": str(tmp_path / "ca.pem"), "ssl.endpoint.identification.algorithm": ""},
    )
    assert s.tls is not None and s.sasl is None
    assert not s.tls.check_hostname  # ssl.endpoint.identification.algorithm empty
