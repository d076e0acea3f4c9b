"""listeners / advertised.listeners / listener.security.protocol.map (framework/security/listeners.py)."""

from __future__ import annotations

import pytest

from framework import config as cfg
from framework.errors import ConfigError
from framework.security.listeners import Endpoint, ListenerConfig


def lc(**kv: str) -> ListenerConfig:
    return ListenerConfig.from_config(cfg.BrokerConfig.load(overrides=kv, environ={}))


def test_a_bare_host_port_is_plaintext() -> None:
    c = lc(listeners="127.0.0.1:9092")
    assert c.listeners == (Endpoint("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9092),)
    assert c.inter_broker == "PLAINTEXT" and not c.needs_ssl and not c.needs_sasl


def test_named_listeners_and_their_protocols() -> None:
    c = lc(
        listeners="PLAINTEXT://127.0.0.1:9092,SASL_SSL://0.0.0.0:9093,internal://:9094",
        **{
            "listener.security.protocol.map": "INTERNAL:SASL_PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "inter.broker.listener.name": "INTERNAL",
            "advertised.listeners": "SASL_SSL://kafka.example:19093",
        },
    )
    assert [(e.name, e.protocol, e.host, e.port) for e in c.listeners] == [
        ("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9092),
        ("SASL_SSL", "SASL_SSL", "0.0.0.0", 9093),
        ("INTERNAL", "SASL_PLAINTEXT", "", 9094),
    ]
    assert c.advertised_for("SASL_SSL") == Endpoint("SASL_SSL", "SASL_SSL", "kafka.example", 19093)
    assert c.advertised_for("INTERNAL").host == "127.0.0.1"
    assert c.inter_broker_endpoint.protocol == "SASL_PLAINTEXT"
    assert c.needs_ssl and c.needs_sasl
    assert str(c.listener("SASL_SSL")) == "SASL_SSL://0.0.0.0:9093"


def test_a_bare_advertised_address_is_the_first_listener() -> None:
    c = lc(listeners="127.0.0.1:0", **{"advertised.listeners": "10.0.0.1:9092"})
    assert c.advertised[0] == Endpoint("PLAINTEXT", "PLAINTEXT", "10.0.0.1", 9092)


@pytest.mark.parametrize(
    ("kv", "named"),
    [
        ({"listeners": "FOO://127.0.0.1:1"}, "listener.security.protocol.map"),
        ({"listeners": "PLAINTEXT://127.0.0.1:1,PLAINTEXT://127.0.0.1:2"}, "used twice"),
        ({"listeners": "PLAINTEXT://127.0.0.1:1,SSL://127.0.0.1:1"}, "same port"),
        ({"listeners": "nonsense"}, "NAME://HOST:PORT"),
        ({"listeners": "127.0.0.1:1", "inter.broker.listener.name": "SSL"}, "inter.broker.listener.name"),
        ({"listeners": "127.0.0.1:1", "advertised.listeners": "SSL://h:1"}, "advertised.listeners"),
        ({"listener.security.protocol.map": "A:KERBEROS"}, "listener.security.protocol.map"),
    ],
)
def test_mistakes_name_the_key(kv: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        lc(**kv)
