"""framework/client/security.py: the client security settings of a process (librdkafka's names)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from framework.client import security
from framework.errors import StoreError


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> None:
    # set, then delete: monkeypatch records the variable's absence and so restores it after the
    # test, also when security.configure() set it (a bare delenv of an absent variable records
    # nothing, and the later tests of the worker then spoke TLS to plaintext brokers)
    monkeypatch.setenv(security.ENV, "unset")
    monkeypatch.delenv(security.ENV)
    monkeypatch.setattr(security, "_overrides", {})


def test_only_security_settings_are_taken_from_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    f = tmp_path / "c.properties"
    f.write_text(
        "# a comment\n\nsecurity.protocol=SASL_SSL\nsasl.mechanism = SCRAM-SHA-256\n"
        "sasl.username=gw\nsasl.password=a=b\nssl.ca.location=/ca.pem\nlinger.ms=100\n"
    )
    monkeypatch.setenv(security.ENV, str(f))
    assert security.client_security() == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "gw",
        "sasl.password": "a=b",
        "ssl.ca.location": "/ca.pem",
    }
    # the caller's own keys win; without the variable nothing is added (PLAINTEXT)
    assert security.secured({"sasl.username": "me", "bootstrap.servers": "x"})["sasl.username"] == "me"
    monkeypatch.delenv(security.ENV)
    assert security.secured({"bootstrap.servers": "x"}) == {"bootstrap.servers": "x"}


def test_configure_sets_the_variable_and_overrides(tmp_path: Path) -> None:
    f = security.write_properties(tmp_path / "p", {"security.protocol": "SSL"})
    assert oct(f.stat().st_mode & 0o777) == "0o600"
    security.configure(f, {"ssl.ca.location": "/x.pem"})
    assert os.environ[security.ENV] == str(f.resolve())
    assert security.client_security() == {"security.protocol": "SSL", "ssl.ca.location": "/x.pem"}
    with pytest.raises(StoreError, match=r"-X linger.ms: only security settings"):
        security.configure(None, {"linger.ms": "5"})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (None, "No such file"),
        ("sasl.password=\\u12x4\n", r"line 1: malformed \\uxxxx escape"),
        ("ssl.truststore.location=/ca.jks\n", "ssl.truststore.type=JKS cannot be read here"),
        ("sasl.jaas.config=com.example.Login required;\n", "only Kafka's PlainLoginModule"),
    ],
)
def test_bad_files_are_one_line_errors(tmp_path: Path, text: str | None, message: str) -> None:
    f = tmp_path / "bad.properties"
    if text is not None:
        f.write_text(text)
    with pytest.raises(StoreError, match=message):
        security.configure(f)
    assert security.ENV not in os.environ


def test_no_check_without_authentication_nor_tls() -> None:
    security.check_credentials("127.0.0.1:1")  # PLAINTEXT: nothing to check, nothing contacted
