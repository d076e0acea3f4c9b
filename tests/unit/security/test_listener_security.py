"""The listeners' security read from the configuration (framework/security/listener_security.py):
TLS contexts only for the protocols a listener uses, the certificate principal rules, SASL and
connection limits."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import pytest
import trustme

from framework import config as cfg
from framework.errors import ConfigError
from framework.security.listener_security import ListenerSecurity
from framework.security.listeners import ListenerConfig


def lookup(user: str, mechanism: str) -> None:
    return None


def security(**kv: Any) -> ListenerSecurity:
    c = cfg.BrokerConfig.load(overrides=kv, environ={})
    return ListenerSecurity.from_config(c, ListenerConfig.from_config(c), lookup)


@pytest.fixture(scope="module")
def pems(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    d: Path = tmp_path_factory.mktemp("certs")
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(d / "ca.pem"))
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(d / "server.pem"))
    return {"ssl.keystore.location": str(d / "server.pem"), "ssl.truststore.location": str(d / "ca.pem")}


def test_a_plaintext_broker_needs_no_tls_and_reads_its_limits() -> None:
    s = security(
        listeners="127.0.0.1:9092",
        **{"max.connections": 50, "connections.max.idle.ms": 30_000, "connections.max.reauth.ms": 5_000},
    )
    assert s.ssl_context is None and s.sasl_ssl_context is None
    assert s.max_connections == 50 and s.idle_s == 30.0 and s.reauth_ms == 5_000
    assert s.credentials is lookup and s.inter_broker == "PLAINTEXT"
    assert len(s.secret) == 32 and s.secret != security(listeners="127.0.0.1:9092").secret


def test_ssl_and_sasl_ssl_listeners_get_their_own_contexts(pems: dict[str, str]) -> None:
    s = security(
        listeners="PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093,SASL_SSL://127.0.0.1:9094",
        **pems,
        **{"ssl.client.auth": "required", "sasl.enabled.mechanisms": "SCRAM-SHA-512"},
    )
    assert s.ssl_context is not None and s.ssl_context.verify_mode == ssl.CERT_REQUIRED
    # SASL_SSL authenticates with SASL: no client certificate asked (KIP-684)
    assert s.sasl_ssl_context is not None and s.sasl_ssl_context.verify_mode == ssl.CERT_NONE
    assert s.mechanisms == ("SCRAM-SHA-512",)


def test_an_ssl_listener_without_a_certificate_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"ssl\.keystore\.location"):
        security(listeners="SSL://127.0.0.1:9093")


def test_the_certificate_principal_rules_are_read() -> None:
    s = security(
        listeners="127.0.0.1:9092", **{"ssl.principal.mapping.rules": "RULE:^CN=(.*?),.*$/$1/L,DEFAULT"}
    )
    assert s.mapper.name("CN=Alice,O=sftraffic") == "alice"
