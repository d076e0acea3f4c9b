"""How a client of the store connects: one bootstrap address and one set of client settings.

Every command that is a client of a Kafka-API cluster resolves its connection here, from (in
increasing precedence) ``$SFTRAFFIC_BOOTSTRAP`` / ``$SFTRAFFIC_CLIENT_CONFIG``, a properties file
(``--command-config``), ``-X KEY=VALUE`` settings and the bootstrap flag. Settings are kept in
librdkafka's names, which confluent-kafka takes as they are and :class:`WireClient` reads for
security.

The file may be written for Kafka's own tools: the Java client's security names are translated
(:func:`translate_java`): ``sasl.jaas.config`` becomes ``sasl.username``/``sasl.password``, a PEM
trust store ``ssl.ca.location``, an empty ``ssl.endpoint.identification.algorithm`` ``none``.
A Java-only setting with no librdkafka equivalent is reported (``warnings``), never dropped
silently; a ``-X`` key librdkafka does not know is an error (:func:`check_names`).
"""

from __future__ import annotations

import logging
import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from framework import properties
from framework.client.wire import BrokerUnavailable, WireClient, from_client_config
from framework.errors import ConfigError, StoreError

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
BOOTSTRAP_ENV = "SFTRAFFIC_BOOTSTRAP"
CONFIG_ENV = "SFTRAFFIC_CLIENT_CONFIG"
# the name the applications' processes were handed their security file by before
LEGACY_CONFIG_ENV = "SFTRAFFIC_KAFKA_CONFIG"

# Java client settings with nothing to do in librdkafka, taken without a word
_JAVA_HARMLESS = frozenset({"ssl.truststore.type", "ssl.keystore.type", "ssl.truststore.password"})
_JAAS_MODULES = {
    "org.apache.kafka.common.security.plain.PlainLoginModule": "PLAIN",
    "org.apache.kafka.common.security.scram.ScramLoginModule": "SCRAM",
}
_JAAS = re.compile(
    r"^\s*(?P<module>[\w.$]+)\s+(?:required|requisite|sufficient|optional)(?P<opts>.*?);?\s*$", re.S
)
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|(\S+?))(?=\s|;|$)')


_SILENT = logging.getLogger("sftraffic.config-check")
_SILENT.addHandler(logging.NullHandler())
_SILENT.propagate = False


def is_security_key(key: str) -> bool:
    """``security.protocol``, ``sasl.*`` or ``ssl.*``."""
    return key == "security.protocol" or key.startswith(("sasl.", "ssl."))


@dataclass(frozen=True)
class Connection:
    """Where a client connects and with which settings (librdkafka's names)."""

    bootstrap: str
    config: Mapping[str, str] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    def client_config(self, **extra: Any) -> dict[str, Any]:
        """A confluent-kafka configuration: ``bootstrap.servers``, the settings, then ``extra``
        (keys with dots are spelt with underscores in ``extra``: ``group_id`` is ``group.id``)."""
        conf: dict[str, Any] = {"bootstrap.servers": self.bootstrap, **self.config}
        conf.update({k.replace("_", "."): v for k, v in extra.items()})
        return conf

    def security(self) -> dict[str, str]:
        return {k: v for k, v in self.config.items() if is_security_key(k)}

    @property
    def secured(self) -> bool:
        return self.config.get("security.protocol", "PLAINTEXT").upper() != "PLAINTEXT"

    def wire(self, timeout: float = 10.0, client_id: str = "sftraffic-cli") -> WireClient:
        """A wire client to the first bootstrap broker with these security settings (not yet
        connected: use it as a context manager)."""
        c = from_client_config(self.bootstrap, self.security(), timeout)
        c.client_id = client_id
        return c

    def check(self, timeout: float = 5.0) -> None:
        """Fail in one line, before any client starts, when no bootstrap broker answers, the first
        one refuses these credentials, or it wants TLS or SASL from a plaintext client (librdkafka
        would retry each until a time-out, then name a transport failure)."""
        ensure_reachable(self.bootstrap, timeout)
        if self.secured:
            self._check_credentials(timeout)
        else:
            self._check_plaintext(timeout)

    def _check_credentials(self, timeout: float) -> None:
        user = self.config.get("sasl.username", "")
        try:
            with self.wire(timeout):
                pass
        except BrokerUnavailable:
            raise
        except StoreError as exc:
            who = f" as {user!r}" if user else ""
            raise StoreError(
                f"the store at {self.bootstrap} refused to authenticate{who}: {exc.message}"
            ) from None
        except OSError as exc:  # TLS: a certificate the CA does not vouch for, a plaintext port
            raise StoreError(f"no TLS session with the store at {self.bootstrap}: {exc}") from None

    def _check_plaintext(self, timeout: float) -> None:
        """One Metadata request in plaintext, as a client's first: a TLS listener, or one that
        wants SASL first, closes the connection instead of answering (ApiVersions is answered
        before authentication, so it proves nothing)."""
        from framework.protocol.messages.metadata import MetadataRequest, MetadataResponse  # noqa: PLC0415

        try:
            with self.wire(timeout) as w:
                w.send(MetadataRequest(topics=[]), MetadataResponse)
        except (BrokerUnavailable, OSError) as exc:
            why = exc.message if isinstance(exc, StoreError) else str(exc)
            raise StoreError(
                f"the broker at {self.bootstrap} does not answer plaintext requests ({why}): its "
                "listener wants TLS or SASL; give the client settings with --command-config FILE "
                "(after `sftraffic up --secure`: .sftraffic/secure/sftraffic-admin.properties) or "
                "-X security.protocol=..."
            ) from None


def resolve(
    bootstrap: str | None = None,
    command_config: str | None = None,
    overrides: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    use_environment: bool = True,
    what: str = "--command-config",
) -> Connection:
    """The connection that flags, a file and the environment give, in that order of precedence.

    ``bootstrap`` (the flag) wins over ``-X bootstrap.servers``, which wins over the file's
    ``bootstrap.servers``, then ``$SFTRAFFIC_BOOTSTRAP``, then 127.0.0.1:9092. The file defaults
    to ``$SFTRAFFIC_CLIENT_CONFIG``. ``use_environment=False`` ignores both variables (the second
    cluster of a mirror).
    """
    env = os.environ if environ is None else environ
    path = command_config
    source = what
    if path is None and use_environment:
        path = env.get(CONFIG_ENV) or env.get(LEGACY_CONFIG_ENV) or None
        source = f"${CONFIG_ENV}" if env.get(CONFIG_ENV) else f"${LEGACY_CONFIG_ENV}"
    conf: dict[str, str] = {}
    warnings: list[str] = []
    if path:
        raw = properties.read(path, source)
        conf, warnings = translate_java(raw, f"{source} {path}")
    extra = dict(overrides or {})
    check_names(extra, "-X")
    conf.update(extra)
    address = (
        bootstrap
        or conf.get("bootstrap.servers")
        or (env.get(BOOTSTRAP_ENV) if use_environment else None)
        or DEFAULT_BOOTSTRAP
    )
    conf.pop("bootstrap.servers", None)
    check_address(address)
    return Connection(address, conf, tuple(warnings))


def translate_java(raw: Mapping[str, str], source: str) -> tuple[dict[str, str], list[str]]:
    """Settings written for the Java client in librdkafka's names, and a warning per Java-only
    setting that has no equivalent (librdkafka's own names pass through unchanged)."""
    out: dict[str, str] = {}
    warnings: list[str] = []
    for key, value in raw.items():
        if key == "sasl.jaas.config":
            out.update(_jaas(value, source))
        elif key == "ssl.truststore.location":
            kind = raw.get("ssl.truststore.type", "JKS").upper()
            if kind != "PEM":
                raise ConfigError(
                    f"{source}: ssl.truststore.type={kind} cannot be read here; give the CA "
                    "certificate as PEM (ssl.truststore.type=PEM, or ssl.ca.location=FILE)"
                )
            out["ssl.ca.location"] = value
        elif key == "ssl.truststore.certificates":
            out["ssl.ca.pem"] = value
        elif key == "ssl.keystore.location":
            kind = raw.get("ssl.keystore.type", "JKS").upper()
            if kind == "PEM":  # one file holding the key and its certificate chain
                out["ssl.certificate.location"] = out["ssl.key.location"] = value
            elif kind == "PKCS12":
                out["ssl.keystore.location"] = value
            else:
                raise ConfigError(
                    f"{source}: ssl.keystore.type={kind} cannot be read here; use PKCS12 or PEM "
                    "(ssl.certificate.location and ssl.key.location)"
                )
        elif key == "ssl.keystore.certificate.chain":
            out["ssl.certificate.pem"] = value
        elif key == "ssl.keystore.key":
            out["ssl.key.pem"] = value
        elif key == "ssl.endpoint.identification.algorithm":
            out[key] = value or "none"
        elif key in _JAVA_HARMLESS:
            continue
        else:
            out[key] = value
    unknown = unknown_names(out)
    for key in unknown:
        warnings.append(f"{source}: {key} is a Java client setting with no librdkafka equivalent; ignored")
        out.pop(key)
    return out, warnings


def _jaas(value: str, source: str) -> dict[str, str]:
    m = _JAAS.match(value)
    mechanism = _JAAS_MODULES.get(m.group("module")) if m else None
    if m is None or mechanism is None:
        raise ConfigError(
            f"{source}: sasl.jaas.config: only Kafka's PlainLoginModule and ScramLoginModule with "
            'username="..." password="..." can be read here'
        )
    opts = {k: (q if q else bare).replace('\\"', '"') for k, q, bare in _JAAS_OPTION.findall(m.group("opts"))}
    if "username" not in opts or "password" not in opts:
        raise ConfigError(f'{source}: sasl.jaas.config needs username="..." and password="..."')
    return {"sasl.username": opts["username"], "sasl.password": opts["password"]}


def unknown_names(conf: Mapping[str, str]) -> list[str]:
    """The keys of ``conf`` that librdkafka does not know (asked of librdkafka itself)."""
    from confluent_kafka import KafkaException, Producer  # noqa: PLC0415 (only when asked)

    unknown: list[str] = []
    probe = dict(conf)
    while probe:
        try:
            # nothing listens on port 1 and nothing is polled: no connection, no log line
            Producer({**probe, "bootstrap.servers": "127.0.0.1:1", "logger": _SILENT})
            break
        except KafkaException as exc:
            text = str(exc.args[0].str() if exc.args and hasattr(exc.args[0], "str") else exc)
            m = re.search(r'No such configuration property: "([^"]+)"', text)
            if m is None or m.group(1) not in probe:
                break  # a bad value: the client that uses it reports it
            unknown.append(m.group(1))
            probe.pop(m.group(1))
    return unknown


def check_names(conf: Mapping[str, str], what: str) -> None:
    """A key librdkafka does not know is a one-line error naming it."""
    for key in unknown_names(conf):
        raise ConfigError(
            f"{what} {key}: not a client setting (librdkafka's names, see its CONFIGURATION.md)"
        )


def check_address(text: str, what: str = "--bootstrap-server") -> None:
    for hp in text.split(","):
        host, sep, port = hp.strip().rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ConfigError(f"{what} {text!r}: expected HOST:PORT[,HOST:PORT...]")


def ensure_reachable(bootstrap: str, timeout: float = 3.0) -> None:
    """Fail fast with one line when no broker listens at any address of ``bootstrap``."""
    last = ""
    for hp in bootstrap.split(","):
        host, _, port = hp.strip().rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
                return
        except (OSError, ValueError) as exc:
            last = getattr(exc, "strerror", None) or str(exc)
    raise BrokerUnavailable(
        f"no broker reachable at {bootstrap} ({last}); is it running? start one with "
        "`sftraffic broker` or `sftraffic up`, or pass -b/--bootstrap-server"
    )
