"""Named listeners and their security protocols, as Kafka configures them.

* ``listeners``: ``NAME://HOST:PORT`` entries separated by commas, e.g.
  ``PLAINTEXT://127.0.0.1:9092,SASL_SSL://0.0.0.0:9093``; a bare ``HOST:PORT`` is
  ``PLAINTEXT://HOST:PORT`` (so ``--listen 127.0.0.1:9092`` keeps working). An empty host
  binds every interface, as in Kafka.
* ``listener.security.protocol.map``: ``NAME:PROTOCOL`` pairs for listener names that are not
  protocol names themselves (``INTERNAL:SASL_SSL``); a name without an entry must be one of
  PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL.
* ``advertised.listeners``: what Metadata gives clients, per listener name (default: the
  listener's own address; ``0.0.0.0`` is not advertisable and becomes ``127.0.0.1``). A
  bare ``HOST:PORT`` advertises the first listener.
* ``inter.broker.listener.name``: the listener replica fetchers connect to (default: the first).

Pure parsing and checks; :class:`framework.errors.ConfigError` names the key at fault.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from framework import config as cfg
from framework.errors import ConfigError

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


@dataclass(frozen=True, slots=True)
class Endpoint:
    name: str
    protocol: str
    host: str
    port: int

    @property
    def uses_ssl(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


def _split(entry: str, key: str) -> tuple[str | None, str, int]:
    text = entry.strip()
    name: str | None = None
    if "://" in text:
        name, _, text = text.partition("://")
        name = name.strip().upper()
        if not name or not all(c.isalnum() or c in "_-" for c in name):
            raise ConfigError(f"{key}: listener name in {entry!r} must be letters, digits, _ or -")
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise ConfigError(
            f"{key}: {entry!r} must look like NAME://HOST:PORT or HOST:PORT, e.g. PLAINTEXT://127.0.0.1:9092"
        )
    p = int(port)
    if not 0 <= p <= 65535:
        raise ConfigError(f"{key}: port {p} of {entry!r} is out of range")
    return name, host.strip("[]"), p


def parse_protocol_map(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        name, sep, proto = item.strip().partition(":")
        name, proto = name.strip().upper(), proto.strip().upper()
        if not sep or not name or proto not in PROTOCOLS:
            raise ConfigError(
                f"listener.security.protocol.map: {item.strip()!r} must be NAME:PROTOCOL with "
                f"PROTOCOL one of {', '.join(PROTOCOLS)}"
            )
        out[name] = proto
    return out


def parse_listeners(text: str, protocol_map: dict[str, str], key: str = "listeners") -> list[Endpoint]:
    eps: list[Endpoint] = []
    for entry in text.split(","):
        if not entry.strip():
            continue
        name, host, port = _split(entry, key)
        name = name or "PLAINTEXT"
        proto = protocol_map.get(name) or (name if name in PROTOCOLS else None)
        if proto is None:
            raise ConfigError(
                f"{key}: listener {name} has no security protocol: add {name}:PROTOCOL to "
                "listener.security.protocol.map"
            )
        if any(e.name == name for e in eps):
            raise ConfigError(f"{key}: listener name {name} is used twice")
        eps.append(Endpoint(name, proto, host, port))
    if not eps:
        raise ConfigError(f"{key}: at least one listener is needed, e.g. PLAINTEXT://127.0.0.1:9092")
    return eps


@dataclass(frozen=True, slots=True)
class ListenerConfig:
    """The broker's listeners, what it advertises for each, and which one brokers use."""

    listeners: tuple[Endpoint, ...]
    advertised: tuple[Endpoint, ...]
    inter_broker: str

    @classmethod
    def from_config(cls, config: cfg.BrokerConfig) -> ListenerConfig:
        pmap = parse_protocol_map(config.str("listener.security.protocol.map"))
        listeners = parse_listeners(config.str("listeners"), pmap)
        ports = [e.port for e in listeners if e.port != 0]
        if len(ports) != len(set(ports)):
            raise ConfigError("listeners: two listeners on the same port")
        adv_text = config.str("advertised.listeners").strip()
        advertised = {e.name: _advertisable(e) for e in listeners}
        if adv_text:
            for entry in adv_text.split(","):
                if not entry.strip():
                    continue
                name, host, port = _split(entry, "advertised.listeners")
                name = name or listeners[0].name
                own = next((e for e in listeners if e.name == name), None)
                if own is None:
                    raise ConfigError(
                        f"advertised.listeners: {name} is not a listener (listeners: "
                        f"{', '.join(e.name for e in listeners)})"
                    )
                advertised[name] = replace(own, host=host or own.host, port=port)
        inter = config.str("inter.broker.listener.name").strip().upper() or listeners[0].name
        if not any(e.name == inter for e in listeners):
            raise ConfigError(
                f"inter.broker.listener.name: {inter} is not a listener (listeners: "
                f"{', '.join(e.name for e in listeners)})"
            )
        return cls(tuple(listeners), tuple(advertised[e.name] for e in listeners), inter)

    def listener(self, name: str) -> Endpoint:
        return next(e for e in self.listeners if e.name == name)

    def advertised_for(self, name: str) -> Endpoint:
        return next(e for e in self.advertised if e.name == name)

    @property
    def inter_broker_endpoint(self) -> Endpoint:
        return self.listener(self.inter_broker)

    @property
    def needs_ssl(self) -> bool:
        return any(e.uses_ssl for e in self.listeners)

    @property
    def needs_sasl(self) -> bool:
        return any(e.uses_sasl for e in self.listeners)


def _advertisable(e: Endpoint) -> Endpoint:
    if e.host in ("", "0.0.0.0", "::"):
        return replace(e, host="127.0.0.1")
    return e
