"""framework/client/connection.py: one bootstrap address and one set of client settings."""

from pathlib import Path

import pytest

from framework.client import connection
from framework.errors import ConfigError, StoreError

JAAS = (
    "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
    '    username="alice" password="p=a\\\\"ss";\n'
)


def test_precedence_flag_then_x_then_file_then_environment(tmp_path: Path) -> None:
    f = tmp_path / "client.properties"
    f.write_text("bootstrap.servers=file:1\nsecurity.protocol=SASL_SSL\n")
    env = {"SFTRAFFIC_BOOTSTRAP": "env:1", "SFTRAFFIC_CLIENT_CONFIG": str(f)}
    assert connection.resolve(environ={}).bootstrap == "127.0.0.1:9092"
    assert connection.resolve(environ={"SFTRAFFIC_BOOTSTRAP": "env:1"}).bootstrap == "env:1"
    assert connection.resolve(environ=env).bootstrap == "file:1"
    assert connection.resolve(None, None, {"bootstrap.servers": "x:1"}, env).bootstrap == "x:1"
    c = connection.resolve("flag:1", None, {"bootstrap.servers": "x:1"}, env)
    assert c.bootstrap == "flag:1"
    assert c.config == {"security.protocol": "SASL_SSL"}  # bootstrap.servers is not a setting
    assert c.client_config(group_id="g") == {
        "bootstrap.servers": "flag:1",
        "security.protocol": "SASL_SSL",
        "group.id": "g",
    }
    # a second cluster (mirror's target) reads neither variable
    assert connection.resolve(None, None, None, env, use_environment=False).bootstrap == "127.0.0.1:9092"


def test_a_file_for_kafkas_java_tools_is_translated(tmp_path: Path) -> None:
    f = tmp_path / "admin.properties"
    f.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        + JAAS
        + "ssl.truststore.type=PEM\nssl.truststore.location=/etc/ca.pem\n"
        "ssl.endpoint.identification.algorithm=\n"
        "default.api.timeout.ms=5000\n"
    )
    c = connection.resolve("h:1", str(f), environ={})
    assert c.config == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": 'p=a"ss',
        "ssl.ca.location": "/etc/ca.pem",
        "ssl.endpoint.identification.algorithm": "none",
    }
    # a Java-only setting is said to be ignored, never dropped silently
    assert c.warnings == (
        f"--command-config {f}: default.api.timeout.ms is a Java client setting with no "
        "librdkafka equivalent; ignored",
    )


@pytest.mark.parametrize(
    ("x", "message"),
    [
        ({"linger.mss": "5"}, "-X linger.mss: not a client setting"),
    ],
)
def test_an_unknown_x_key_is_an_error(x: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        connection.resolve("h:1", None, x, environ={})


@pytest.mark.parametrize("address", ["nohostport", "h:", ":9092", "h:port"])
def test_a_bad_address_is_an_error(address: str) -> None:
    with pytest.raises(ConfigError, match="expected HOST:PORT"):
        connection.resolve(address, environ={})


def test_missing_file_and_unreachable_broker_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"--command-config .*nope.properties: No such file"):
        connection.resolve("h:1", str(tmp_path / "nope.properties"), environ={})
    with pytest.raises(StoreError, match=r"no broker reachable at 127.0.0.1:1 "):
        connection.resolve("127.0.0.1:1", environ={}).check(timeout=1)
