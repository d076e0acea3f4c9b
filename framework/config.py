"""Every configuration key, declared once: name, type, default, validator, doc and scope.

Scopes:

* ``broker``: read at start from the TOML file (``--config``), ``SFTRAFFIC_*`` environment
  variables and command-line flags, in that order of increasing precedence.
* ``stream``: defaults shared by every topic of a stream (``sftraffic streams``).
* ``topic``: per-topic overrides (CreateTopics configs, AlterConfigs).

A topic-scoped key resolves topic override → stream value → broker default (its
``broker_name``, e.g. ``log.retention.ms`` for ``retention.ms``) → built-in default. CLI help,
``sftraffic config reference`` (docs/reference/configuration.md), DescribeConfigs and
validation all read this table.
"""

from __future__ import annotations

import builtins
import difflib
import os
import re
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from framework import properties
from framework.errors import ConfigError
from framework.kafka_broker_configs import BROKER_CONFIGS as KAFKA_BROKER_CONFIGS

LONG_MAX = 9223372036854775807
INT_MAX = 2147483647

BROKER = "broker"
STREAM = "stream"
TOPIC = "topic"
# a client-metrics subscription (KIP-714): a CLIENT_METRICS config resource, named by the operator
CLIENT_METRICS = "client_metrics"

# DescribeConfigs v3+ config types
TYPE_CODES = {"bool": 1, "string": 2, "int": 3, "long": 5, "double": 6, "list": 7, "password": 9}

# A key's value: what ConfigKey.parse returns for its type.
Value = bool | int | float | str | list[str]
# BrokerConfig's typed accessor -> the declared types it reads
ACCESSORS: dict[str, tuple[str, ...]] = {
    "int": ("int", "long"),
    "float": ("double",),
    "bool": ("bool",),
    "str": ("string",),
    "password": ("password",),
    "list": ("list",),
}
_ACCESSOR_OF = {t: name for name, types in ACCESSORS.items() for t in types}

Validator = Callable[[Any], "str | None"]


def at_least(lo: int | float) -> Validator:
    def check(v: Any) -> str | None:
        return None if v >= lo else f"must be >= {lo}"

    return check


def between(lo: int | float, hi: int | float) -> Validator:
    def check(v: Any) -> str | None:
        return None if lo <= v <= hi else f"must be between {lo} and {hi}"

    return check


def one_of(*choices: str) -> Validator:
    def check(v: Any) -> str | None:
        return None if v in choices else f"must be one of {', '.join(choices)}"

    return check


def list_of(*choices: str) -> Validator:
    def check(v: Any) -> str | None:
        bad = [x for x in v if x not in choices]
        if bad or not v:
            return f"must be a non-empty list of {', '.join(choices)}"
        return None

    return check


def throttled_replicas(v: Any) -> str | None:
    """Kafka's ThrottledReplicaListValidator: ``*`` alone, or PARTITION:BROKER pairs."""
    if v == ["*"] or all(_pair(x) for x in v):
        return None
    return "must be * or a list of PARTITION:BROKER pairs, e.g. 0:1,1:2"


def _pair(item: str) -> bool:
    part, colon, broker = item.partition(":")
    return bool(colon) and part.strip().isdigit() and broker.strip().isdigit()


@dataclass(frozen=True, slots=True)
class ConfigKey:
    name: str
    type: str  # int | long | double | bool | string | list | password
    default: Any
    doc: str
    scopes: frozenset[str]
    broker_name: str | None = None  # broker-level synonym of a topic key
    validator: Validator | None = None
    dynamic: bool = False  # may change on a running broker (topic/stream keys always can)
    # why sftraffic refuses any value but the default (the default is what the store does)
    unsupported: str | None = None

    def parse(self, raw: Any, source: str = "", name: str | None = None) -> Any:
        """Convert a string/TOML value to this key's type and validate it.

        ``name`` is the name the user wrote (a broker synonym such as ``log.retention.ms``),
        used in error messages; it defaults to the key's own name.
        """
        where = f" (from {source})" if source else ""
        shown = name or self.name
        try:
            value = _convert(self.type, raw)
        except _OutOfRange as exc:
            raise ConfigError(f"config {shown}={raw!r}{where}: {exc}") from None
        except (TypeError, ValueError):
            raise ConfigError(f"config {shown}={raw!r}{where}: expected {self.type}") from None
        if self.unsupported is not None and value != self.default:
            raise ConfigError(
                f"{shown}={self.render(value)} is not supported by sftraffic; {self.unsupported}{where}"
            )
        if self.validator is not None:
            problem = self.validator(value)
            if problem:
                raise ConfigError(f"config {shown}={raw!r}{where}: {problem}")
        return value

    def render(self, value: Any) -> str:
        """The string form Kafka clients see in DescribeConfigs."""
        if value is None:
            return ""
        if self.type == "bool":
            return "true" if value else "false"
        if self.type == "list":
            return ",".join(value)
        return str(value)


class _OutOfRange(ValueError):
    pass


def _convert(kind: str, raw: Any) -> Any:
    if kind in ("int", "long"):
        if isinstance(raw, bool):
            raise TypeError
        if isinstance(raw, int):
            n = raw
        elif isinstance(raw, float) and raw.is_integer():
            n = int(raw)
        else:
            n = int(str(raw).strip().replace("_", ""))
        hi = INT_MAX if kind == "int" else LONG_MAX
        if not -hi - 1 <= n <= hi:  # Kafka's INT is 32-bit, LONG 64-bit
            raise _OutOfRange(f"out of range for a {32 if kind == 'int' else 64}-bit {kind}")
        return n
    if kind == "double":
        return float(raw)
    if kind == "bool":
        if isinstance(raw, bool):
            return raw
        s = str(raw).strip().lower()
        if s in ("true", "1", "yes", "on"):
            return True
        if s in ("false", "0", "no", "off"):
            return False
        raise ValueError(raw)
    if kind == "list":
        if isinstance(raw, (list, tuple)):
            return [str(x).strip() for x in raw if str(x).strip()]
        return [x.strip() for x in str(raw).split(",") if x.strip()]
    if kind in ("string", "password"):
        if not isinstance(raw, (str, int, float)):
            raise TypeError
        return str(raw)
    raise AssertionError(kind)


_KEYS: dict[str, ConfigKey] = {}
_BY_BROKER_NAME: dict[str, ConfigKey] = {}


def define(
    name: str,
    type_: str,
    default: Any,
    doc: str,
    scopes: Iterable[str],
    *,
    broker_name: str | None = None,
    validator: Validator | None = None,
    dynamic: bool = False,
    unsupported: str | None = None,
) -> ConfigKey:
    key = ConfigKey(
        name, type_, default, doc, frozenset(scopes), broker_name, validator, dynamic, unsupported
    )
    assert name not in _KEYS, name
    _KEYS[name] = key
    if broker_name:
        _BY_BROKER_NAME[broker_name] = key
    return key


B, S, T = BROKER, STREAM, TOPIC
DAY_MS = 86_400_000

# ---- broker ------------------------------------------------------------------------------
define(
    "node.id",
    "int",
    1,
    "This broker's id, unique in the cluster.",
    [B],
    validator=between(0, 1_000_000),
)
define(
    "listeners",
    "string",
    "127.0.0.1:9092",
    "Kafka listeners as NAME://HOST:PORT separated by commas, e.g. "
    "PLAINTEXT://127.0.0.1:9092,SASL_SSL://0.0.0.0:9093; a bare HOST:PORT is "
    "PLAINTEXT://HOST:PORT. The name is a security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, "
    "SASL_SSL) or is mapped to one by listener.security.protocol.map.",
    [B],
)
define(
    "advertised.listeners",
    "string",
    "",
    "NAME://HOST:PORT given to clients in Metadata for each listener (a client is given the "
    "addresses of the listener it connected to); default: the listener's own address "
    "(0.0.0.0 advertised as 127.0.0.1). A bare HOST:PORT is the first listener's.",
    [B],
)
define(
    "listener.security.protocol.map",
    "string",
    "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
    "NAME:PROTOCOL pairs giving the security protocol of each listener name, e.g. "
    "INTERNAL:SASL_SSL,EXTERNAL:SSL (a listener named after a protocol needs no entry).",
    [B],
)
define(
    "inter.broker.listener.name",
    "string",
    "",
    "The listener replica fetchers of other brokers connect to (it must exist on every "
    "broker); default: the first of listeners.",
    [B],
)
define(
    "sasl.enabled.mechanisms",
    "list",
    ["SCRAM-SHA-256", "SCRAM-SHA-512"],
    "SASL mechanisms offered on SASL_PLAINTEXT and SASL_SSL listeners: SCRAM-SHA-256, "
    "SCRAM-SHA-512, PLAIN (PLAIN checks the password against the user's SCRAM credentials; "
    "it sends the password itself, so use it over SASL_SSL).",
    [B],
    validator=list_of("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"),
)
define(
    "sasl.mechanism.inter.broker.protocol",
    "string",
    "SCRAM-SHA-256",
    "SASL mechanism replica fetchers use when inter.broker.listener.name is a SASL listener.",
    [B],
    validator=one_of("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"),
)
define(
    "sasl.inter.broker.username",
    "string",
    "",
    "User replica fetchers authenticate as on a SASL inter-broker listener (sftraffic's "
    "stand-in for the username of Kafka's inter-broker JAAS configuration).",
    [B],
)
define(
    "sasl.inter.broker.password",
    "password",
    "",
    "Password of sasl.inter.broker.username.",
    [B],
)
define(
    "connections.max.reauth.ms",
    "long",
    0,
    "Lifetime of a SASL session (KIP-368): SaslAuthenticate answers it as session_lifetime_ms, "
    "and a connection that has not re-authenticated when it ends is closed at its next "
    "request. 0: sessions do not expire.",
    [B],
    validator=at_least(0),
)
define(
    "connection.failed.authentication.delay.ms",
    "int",
    100,
    "A failed authentication is answered after this delay, then the connection is closed "
    "(slows down password guessing).",
    [B],
    validator=at_least(0),
)
define(
    "connections.authentication.timeout.ms",
    "int",
    10_000,
    "A connection to an SSL or SASL listener that has not finished its TLS handshake and SASL "
    "authentication within this long is closed (sftraffic's own; Kafka has no such bound).",
    [B],
    validator=between(100, 3_600_000),
)
define(
    "ssl.keystore.type",
    "string",
    "PEM",
    "Only PEM: the broker's certificate and key are PEM (ssl.keystore.location, or "
    "ssl.keystore.certificate.chain with ssl.keystore.key).",
    [B],
    unsupported="Python's ssl reads PEM only; convert a JKS/PKCS12 keystore with openssl",
)
define(
    "ssl.keystore.location",
    "string",
    "",
    "PEM file holding the broker's certificate chain and private key (SSL and SASL_SSL "
    "listeners; with mutual TLS, replica fetchers present it too).",
    [B],
)
define(
    "ssl.keystore.certificate.chain",
    "password",
    "",
    "The broker's certificate chain as PEM text (instead of ssl.keystore.location).",
    [B],
)
define(
    "ssl.keystore.key",
    "password",
    "",
    "The broker's private key as PEM text (with ssl.keystore.certificate.chain).",
    [B],
)
define(
    "ssl.key.password",
    "password",
    "",
    "Password of an encrypted private key.",
    [B],
)
define(
    "ssl.truststore.type",
    "string",
    "PEM",
    "Only PEM: trusted certificates are PEM (ssl.truststore.location or ssl.truststore.certificates).",
    [B],
    unsupported="Python's ssl reads PEM only; convert a JKS/PKCS12 truststore with openssl",
)
define(
    "ssl.truststore.location",
    "string",
    "",
    "PEM file of the CA certificates that client certificates (mutual TLS) and other brokers' "
    "certificates (replica fetchers) must chain to.",
    [B],
)
define(
    "ssl.truststore.certificates",
    "password",
    "",
    "Trusted CA certificates as PEM text (instead of ssl.truststore.location).",
    [B],
)
define(
    "ssl.client.auth",
    "string",
    "none",
    "Mutual TLS on SSL listeners: none, requested (a client certificate is verified when "
    "given) or required. The principal is the certificate's subject mapped by "
    "ssl.principal.mapping.rules; on SASL_SSL listeners SASL names the principal.",
    [B],
    validator=one_of("none", "requested", "required"),
)
define(
    "ssl.principal.mapping.rules",
    "string",
    "DEFAULT",
    "How a client certificate's subject (RFC 2253, e.g. CN=alice,OU=eng,O=acme) becomes a user "
    "name: rules tried in order, DEFAULT (the whole name) or RULE:pattern/replacement/[LU], "
    "e.g. RULE:^CN=(.*?),OU=.*$/$1/L,DEFAULT.",
    [B],
)
define(
    "ssl.endpoint.identification.algorithm",
    "string",
    "https",
    "https: replica fetchers check that the leader's certificate names the host they connect "
    "to; empty: they do not.",
    [B],
    validator=one_of("https", ""),
)
define(
    "max.connections",
    "int",
    INT_MAX,
    "Most client connections open at once, all listeners together; one more is closed at once.",
    [B],
    validator=at_least(1),
)
define(
    "max.connections.per.ip",
    "int",
    INT_MAX,
    "Most connections open at once from one IP address; one more is closed at once.",
    [B],
    validator=at_least(1),
)
define(
    "connections.max.idle.ms",
    "long",
    600_000,
    "Close connections that have sent no request for this long.",
    [B],
    validator=at_least(1000),
)
define(
    "quota.window.num",
    "int",
    11,
    "Number of samples kept to measure client quota rates (producer_byte_rate, "
    "consumer_byte_rate, request_percentage).",
    [B],
    validator=at_least(2),
)
define(
    "quota.window.size.seconds",
    "int",
    1,
    "Length of each client quota sample; a client's rate is measured over quota.window.num of them.",
    [B],
    validator=at_least(1),
)


def _one_dir(v: Any) -> str | None:
    if "," in v:
        return "must be one directory: a broker keeps one log dir here (Kafka's log.dirs may list several)"
    return None


define(
    "log.dirs",
    "string",
    "./data",
    "Directory holding this broker's logs and metadata.",
    [B],
    validator=_one_dir,
)
define(
    "cluster.id",
    "string",
    "",
    "Cluster id; generated and stored in the data dir on first start when empty.",
    [B],
)
define(
    "num.partitions",
    "int",
    1,
    "Partitions of an auto-created topic or a CreateTopics request asking for -1.",
    [B, S],
    validator=between(1, 4096),
)
define(
    "default.replication.factor",
    "int",
    1,
    "Replication factor when a request asks for -1.",
    [B, S],
    validator=between(1, 16),
)
define(
    "max.partitions.per.topic",
    "int",
    4096,
    "Upper bound on partitions per topic.",
    [B],
    validator=between(1, 100_000),
)
define(
    "auto.create.topics.enable",
    "bool",
    True,
    "Create unknown topics on Metadata requests that allow it.",
    [B],
)
define("delete.topic.enable", "bool", True, "Allow DeleteTopics.", [B])
define(
    "controller.quorum.voters",
    "list",
    [],
    "Metadata quorum (Raft) of a cluster as ID@HOST:PORT of each broker's controller endpoint, "
    "e.g. 1@127.0.0.1:19092,2@127.0.0.1:19093,3@127.0.0.1:19094; this node's entry is the "
    "address it binds. A broker whose node.id is not listed joins as a non-voting observer "
    "(binds no controller endpoint). Empty: a single node.",
    [B],
)
define(
    "controller.quorum.password",
    "password",
    "",
    "Shared secret of the metadata quorum (sftraffic's own): when set, the brokers' Raft "
    "connections authenticate each other with it and are encrypted (pysyncobj's password "
    "option); every broker of the cluster needs the same value.",
    [B],
)
define(
    "broker.session.timeout.ms",
    "int",
    3000,
    "A broker the controller has not heard from for this long is fenced: it leaves every ISR "
    "and its partitions get new leaders. Shorter than Kafka's 9000 so that a crashed leader's "
    "partitions fail over within 5 s; a broker stalled for longer (a long GC-like pause, "
    "CPU starvation) is fenced too and rejoins when it resumes.",
    [B],
    validator=between(500, 600_000),
)
define(
    "controlled.shutdown.enable",
    "bool",
    True,
    "A clustered broker told to stop (SIGTERM) first asks the controller to move every "
    "leadership it holds to an in-sync follower and leaves the ISRs, then stops.",
    [B],
)
define(
    "auto.leader.rebalance.enable",
    "bool",
    True,
    "The controller moves leadership back to each partition's preferred replica (the first "
    "of its assignment) when it is alive and in sync, as ElectLeaders(PREFERRED) does.",
    [B],
)
define(
    "leader.imbalance.check.interval.seconds",
    "long",
    300,
    "How often the controller checks for partitions not led by their preferred replica.",
    [B],
    validator=at_least(1),
)
define(
    "leader.imbalance.per.broker.percentage",
    "int",
    10,
    "The controller rebalances a broker's leaderships when more than this share of the "
    "partitions it prefers to lead are led by others.",
    [B],
    validator=between(0, 100),
)
define(
    "replica.lag.time.max.ms",
    "long",
    30_000,
    "A follower that has not caught up with the leader's log end for this long leaves the ISR.",
    [B],
    validator=at_least(100),
)
define(
    "replica.fetch.wait.max.ms",
    "int",
    500,
    "Longest a follower's fetch waits at the leader for new data.",
    [B],
    validator=between(0, 60_000),
)
define(
    "replica.fetch.max.bytes",
    "int",
    1_048_576,
    "Bytes a follower asks for per partition and fetch.",
    [B],
    validator=at_least(1024),
)
define(
    "replica.fetch.response.max.bytes",
    "int",
    10_485_760,
    "Bytes a follower asks for per fetch, all partitions together.",
    [B],
    validator=at_least(1024),
)
define(
    "leader.replication.throttled.rate",
    "long",
    LONG_MAX,
    "Bytes/s this broker, as a leader, serves to follower replicas that are not in sync, over "
    "the partitions its topics list in leader.replication.throttled.replicas (Kafka's "
    "replication throttle; set at run time with IncrementalAlterConfigs, e.g. by "
    "kafka-reassign-partitions --throttle).",
    [B],
    validator=at_least(0),
    dynamic=True,
)
define(
    "follower.replication.throttled.rate",
    "long",
    LONG_MAX,
    "Bytes/s this broker, as a follower not in sync, fetches of the partitions its topics list "
    "in follower.replication.throttled.replicas (set at run time like the leader's).",
    [B],
    validator=at_least(0),
    dynamic=True,
)
define(
    "replica.alter.log.dirs.io.max.bytes.per.second",
    "long",
    LONG_MAX,
    "Kafka's throttle of replica moves between a broker's log dirs (only deleting it is "
    "accepted, as kafka-reassign-partitions --verify does).",
    [B],
    dynamic=True,
    unsupported="a broker has one log dir here, so replicas never move between dirs",
)
define(
    "replica.fetch.backoff.ms",
    "int",
    1000,
    "Pause before a follower reconnects to a leader it could not reach.",
    [B],
    validator=between(0, 60_000),
)
define(
    "sasl.server.max.receive.size",
    "int",
    524_288,
    "Largest request frame a connection to a SASL listener may send before it has "
    "authenticated; bigger size prefixes close it before anything is allocated.",
    [B],
    validator=at_least(1024),
)
define(
    "queued.max.request.bytes",
    "long",
    -1,
    "Bytes of requests read but not yet answered that the broker holds, over all connections; "
    "past it a connection reads its next request only once memory is given back (one request "
    "is always taken while nothing is held). -1: unbounded, as in Kafka.",
    [B],
    validator=at_least(-1),
)
define(
    "socket.request.max.bytes",
    "int",
    104_857_600,
    "Largest request frame; bigger frames close the connection.",
    [B],
    validator=at_least(1024),
)
define(
    "log.retention.check.interval.ms",
    "long",
    300_000,
    "How often retention deletes expired segments.",
    [B],
    validator=at_least(1),
)
define(
    "log.flush.scheduler.interval.ms",
    "long",
    1000,
    "How often flush.ms is checked.",
    [B],
    validator=at_least(1),
)
define(
    "metrics.listen",
    "string",
    "",
    "HOST:PORT for the Prometheus /metrics endpoint; empty disables it.",
    [B],
)
define(
    "telemetry.max.bytes",
    "int",
    1_048_576,
    "The largest metrics payload (as sent, compressed) a client may push in one PushTelemetry "
    "request (KIP-714); a larger one is refused with TELEMETRY_TOO_LARGE.",
    [B],
    validator=at_least(1),
)
define(
    "log.level",
    "string",
    "INFO",
    "Log level of the broker process.",
    [B],
    validator=one_of("DEBUG", "INFO", "WARNING", "ERROR"),
)
define(
    "log.format",
    "string",
    "text",
    "Broker log format: text or json (one object per line).",
    [B],
    validator=one_of("text", "json"),
)
define(
    "offsets.topic.num.partitions",
    "int",
    50,
    "Partitions of __consumer_offsets.",
    [B],
    validator=between(1, 1000),
)
define(
    "offsets.retention.minutes",
    "long",
    10_080,
    "Committed offsets of empty groups expire after this long.",
    [B],
    validator=at_least(1),
)
define(
    "offsets.retention.check.interval.ms",
    "long",
    600_000,
    "How often expired offsets and groups are removed.",
    [B],
    validator=at_least(1),
)
define(
    "group.initial.rebalance.delay.ms",
    "int",
    3000,
    "Wait for more members before the first rebalance of an empty group.",
    [B],
    validator=at_least(0),
)
define(
    "group.min.session.timeout.ms",
    "int",
    6000,
    "Smallest session timeout a member may ask for.",
    [B],
    validator=at_least(1),
)
define(
    "group.max.session.timeout.ms",
    "int",
    1_800_000,
    "Largest session timeout a member may ask for.",
    [B],
    validator=at_least(1),
)
define("group.max.size", "int", INT_MAX, "Most members in one group.", [B], validator=at_least(1))
define(
    "group.consumer.session.timeout.ms",
    "int",
    45_000,
    "A member of a consumer group (group.protocol=consumer, KIP-848) silent this long is removed.",
    [B],
    validator=at_least(1),
)
define(
    "group.consumer.heartbeat.interval.ms",
    "int",
    5000,
    "How often members of a consumer group (KIP-848) heartbeat, told to them in every response.",
    [B],
    validator=at_least(1),
)
define(
    "group.consumer.max.size",
    "int",
    INT_MAX,
    "Most members in one consumer group (KIP-848).",
    [B],
    validator=at_least(1),
)
define(
    "group.consumer.assignors",
    "list",
    ["uniform", "range"],
    "Server-side assignors of consumer groups (KIP-848) members may ask for; the first is the "
    "default: uniform, range.",
    [B],
    validator=list_of("uniform", "range"),
)
define(
    "group.share.session.timeout.ms",
    "int",
    45_000,
    "A member of a share group (KIP-932) silent this long is removed.",
    [B],
    validator=at_least(1),
)
define(
    "group.share.heartbeat.interval.ms",
    "int",
    5000,
    "How often members of a share group heartbeat, told to them in every response.",
    [B],
    validator=at_least(1),
)
define("group.share.max.size", "int", 200, "Most members in one share group.", [B], validator=at_least(1))
define(
    "group.share.record.lock.duration.ms",
    "int",
    30_000,
    "How long a share-group member holds the records it acquired before they are handed out again.",
    [B],
    validator=at_least(1),
)
define(
    "group.share.delivery.count.limit",
    "int",
    5,
    "Deliveries of a record to share-group members before it is archived (no longer handed out).",
    [B],
    validator=at_least(1),
)
define(
    "group.share.partition.max.record.locks",
    "int",
    2000,
    "Most records of one partition a share group has in flight (acquired and not yet settled).",
    [B],
    validator=at_least(1),
)
define(
    "group.share.max.share.sessions",
    "int",
    2000,
    "Most share sessions (one per share-group member reading here) a broker keeps.",
    [B],
    validator=at_least(1),
)
define(
    "share.auto.offset.reset",
    "string",
    "latest",
    "Where a share group starts reading a partition it has not read before: latest or earliest "
    "(Kafka's group setting of this name; here one value for every share group).",
    [B],
    validator=one_of("latest", "earliest"),
)
define(
    "log.cleaner.backoff.ms",
    "long",
    15_000,
    "How often the log cleaner looks for compacted topics to clean.",
    [B],
    validator=at_least(1),
)
define(
    "producer.id.expiration.check.interval.ms",
    "long",
    600_000,
    "How often expired producer ids are removed.",
    [B],
    validator=at_least(1),
)
define(
    "producer.id.block.size",
    "int",
    1000,
    "Producer ids a broker reserves at a time.",
    [B],
    validator=at_least(1),
)

# ---- transactions --------------------------------------------------------------------------
define(
    "transaction.state.log.num.partitions",
    "int",
    50,
    "Partitions of __transaction_state (the transaction coordinators' log).",
    [B],
    validator=between(1, 1000),
)
define(
    "transaction.state.log.replication.factor",
    "int",
    3,
    "Replicas of each __transaction_state partition (at most the live brokers when created).",
    [B],
    validator=at_least(1),
)
define(
    "transaction.state.log.min.isr",
    "int",
    2,
    "min.insync.replicas of __transaction_state (at most its replication factor).",
    [B],
    validator=at_least(1),
)
define(
    "transaction.state.log.segment.bytes",
    "int",
    104_857_600,
    "Segment size of __transaction_state.",
    [B],
    validator=at_least(1024),
)
define(
    "transaction.max.timeout.ms",
    "int",
    900_000,
    "Largest transaction.timeout.ms a producer may ask for (else INVALID_TRANSACTION_TIMEOUT).",
    [B],
    validator=at_least(1),
)
define(
    "transactional.id.expiration.ms",
    "int",
    604_800_000,
    "Forget a transactional id with no transaction open and no request for this long.",
    [B],
    validator=at_least(1),
)
define(
    "transaction.abort.timed.out.transaction.cleanup.interval.ms",
    "int",
    10_000,
    "How often the coordinator aborts transactions open longer than their timeout.",
    [B],
    validator=at_least(1),
)
define(
    "transaction.remove.expired.transaction.cleanup.interval.ms",
    "int",
    3_600_000,
    "How often the coordinator removes expired transactional ids.",
    [B],
    validator=at_least(1),
)

# ---- authorization -------------------------------------------------------------------------
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
AUTHORIZER_CHOICES = (
    f"sftraffic has one authorizer, Kafka's {STANDARD_AUTHORIZER} (ACLs kept in the metadata "
    "quorum); give its class name exactly, or leave authorizer.class.name empty for none"
)


def _authorizer(v: Any) -> str | None:
    return None if v in ("", STANDARD_AUTHORIZER) else AUTHORIZER_CHOICES


define(
    "authorizer.class.name",
    "string",
    "",
    f"{STANDARD_AUTHORIZER} turns authorization on: every request is checked against the ACLs "
    "(CreateAcls/DescribeAcls/DeleteAcls, kafka-acls, sftraffic streams grant); empty: anyone "
    "who reaches a listener may do anything, and the ACL APIs answer SECURITY_DISABLED.",
    [B],
    validator=_authorizer,
)
define(
    "super.users",
    "string",
    "",
    "Principals allowed everything whatever the ACLs say, separated by semicolons (e.g. "
    "User:admin;User:broker). The principal of other brokers' replica fetchers "
    "(sasl.inter.broker.username, or User:ANONYMOUS on a PLAINTEXT inter-broker listener) "
    "belongs here, or needs ClusterAction on the cluster.",
    [B],
)
define(
    "allow.everyone.if.no.acl.found",
    "bool",
    False,
    "With an authorizer: allow an action on a resource that no ACL names at all (false: denied).",
    [B],
)

# ---- topic (and stream, and broker default via broker_name) -------------------------------
TS = [T, S]
define(
    "cleanup.policy",
    "list",
    ["delete"],
    "delete: drop old segments; compact: keep the latest value per key.",
    TS,
    broker_name="log.cleanup.policy",
    validator=list_of("delete", "compact"),
)
define(
    "compression.type",
    "string",
    "producer",
    "Only 'producer' (keep the producer's codec): batches are stored as sent; other values are refused.",
    TS,
    broker_name="compression.type.broker",
    unsupported="batches are stored exactly as the producer compressed them, so only producer is accepted",
)
define(
    "delete.retention.ms",
    "long",
    DAY_MS,
    "How long tombstones survive compaction.",
    TS,
    broker_name="log.cleaner.delete.retention.ms",
    validator=at_least(0),
)
define(
    "file.delete.delay.ms",
    "long",
    0,
    "Only 0: segments are deleted at once (a reader holding one keeps its open file); other "
    "values are refused.",
    TS,
    broker_name="log.segment.delete.delay.ms",
    unsupported="segments are deleted at once (a reader holding one keeps its open file), so only 0 "
    "is accepted",
)
define(
    "flush.messages",
    "long",
    LONG_MAX,
    "fsync after this many messages (1 = every batch). Default: leave it to the OS.",
    TS,
    broker_name="log.flush.interval.messages",
    validator=at_least(1),
)
define(
    "flush.ms",
    "long",
    LONG_MAX,
    "fsync data older than this many ms. Default: leave it to the OS.",
    TS,
    broker_name="log.flush.interval.ms",
    validator=at_least(0),
)
define(
    "index.interval.bytes",
    "int",
    4096,
    "Bytes between entries of the sparse offset and time indexes.",
    TS,
    broker_name="log.index.interval.bytes",
    validator=at_least(0),
)
define(
    "max.message.bytes",
    "int",
    1_048_588,
    "Largest record batch accepted.",
    TS,
    broker_name="message.max.bytes",
    validator=at_least(0),
)
define(
    "message.timestamp.type",
    "string",
    "CreateTime",
    "CreateTime (event time, from the producer) or LogAppendTime (broker clock).",
    TS,
    broker_name="log.message.timestamp.type",
    validator=one_of("CreateTime", "LogAppendTime"),
)
define(
    "message.timestamp.before.max.ms",
    "long",
    LONG_MAX,
    "Reject batches whose max timestamp is older than this.",
    TS,
    broker_name="log.message.timestamp.before.max.ms",
    validator=at_least(0),
)
define(
    "message.timestamp.after.max.ms",
    "long",
    LONG_MAX,
    "Reject batches whose max timestamp is further in the future than this.",
    TS,
    broker_name="log.message.timestamp.after.max.ms",
    validator=at_least(0),
)
define(
    "min.cleanable.dirty.ratio",
    "double",
    0.5,
    "Compaction starts when this share of the log is uncleaned.",
    TS,
    broker_name="log.cleaner.min.cleanable.ratio",
    validator=between(0.0, 1.0),
)
define(
    "min.compaction.lag.ms",
    "long",
    0,
    "Records younger than this are not compacted.",
    TS,
    broker_name="log.cleaner.min.compaction.lag.ms",
    validator=at_least(0),
)
define(
    "max.compaction.lag.ms",
    "long",
    LONG_MAX,
    "Records older than this are compacted even below the dirty ratio.",
    TS,
    broker_name="log.cleaner.max.compaction.lag.ms",
    validator=at_least(1),
)
define(
    "min.insync.replicas",
    "int",
    1,
    "Replicas that must have a batch before acks=all succeeds.",
    TS,
    broker_name="min.insync.replicas",
    validator=at_least(1),
)
define(
    "retention.bytes",
    "long",
    -1,
    "Keep at most this many bytes per partition (-1: no limit).",
    TS,
    broker_name="log.retention.bytes",
    validator=at_least(-1),
)
define(
    "retention.ms",
    "long",
    7 * DAY_MS,
    "Time to live: delete segments whose newest record is older (-1: forever).",
    TS,
    broker_name="log.retention.ms",
    validator=at_least(-1),
)
define(
    "segment.bytes",
    "int",
    1_073_741_824,
    "Roll a new segment at this size.",
    TS,
    broker_name="log.segment.bytes",
    validator=at_least(1024),
)
define(
    "segment.ms",
    "long",
    7 * DAY_MS,
    "Roll a new segment when the active one is this old.",
    TS,
    broker_name="log.roll.ms",
    validator=at_least(1),
)
define(
    "segment.index.bytes",
    "int",
    10_485_760,
    "Largest offset index (8 bytes an entry) or time index (12 bytes an entry) of a segment; a "
    "full index rolls a new segment.",
    TS,
    broker_name="log.index.size.max.bytes",
    validator=at_least(8),
)
define(
    "segment.jitter.ms",
    "long",
    0,
    "Roll each segment up to this many ms (drawn at random per segment) before segment.ms, so "
    "partitions do not all roll at once.",
    TS,
    broker_name="log.roll.jitter.ms",
    validator=at_least(0),
)
define(
    "unclean.leader.election.enable",
    "bool",
    False,
    "Allow an out-of-sync replica to lead (may lose data).",
    TS,
    broker_name="unclean.leader.election.enable",
)
define(
    "producer.id.expiration.ms",
    "long",
    7 * DAY_MS,
    "Forget an idempotent producer id unused for this long (the MapR Event Store's pidexpirysecs).",
    [B, S, T],
    validator=at_least(1),
)

# ---- schema validation (Confluent Server's topic configs) ------------------------------------
TOPIC_NAME_STRATEGY = "io.confluent.kafka.serializers.subject.TopicNameStrategy"
for _side in ("key", "value"):
    define(
        f"confluent.{_side}.schema.validation",
        "bool",
        False,
        f"true: the broker refuses a produced batch (INVALID_RECORD, per record) holding a "
        f"non-null {_side} that does not start with magic byte 0 and the 4-byte id of a schema "
        f"registered under the topic's subject (TOPIC-{_side}) in the schema registry's "
        "_schemas topic on this store (deleted versions do not count). As Confluent Server; "
        "a stream's value applies to its topics.",
        TS,
    )
    define(
        f"confluent.{_side}.subject.name.strategy",
        "string",
        TOPIC_NAME_STRATEGY,
        f"How confluent.{_side}.schema.validation names the subject: only {TOPIC_NAME_STRATEGY} "
        f"(TOPIC-{_side}); other strategies are refused.",
        TS,
        unsupported="only TopicNameStrategy (subject TOPIC-key / TOPIC-value) is implemented; "
        "RecordNameStrategy and TopicRecordNameStrategy are refused",
    )

define(
    "leader.replication.throttled.replicas",
    "list",
    [],
    "Replicas throttled on the leader side: PARTITION:BROKER pairs (e.g. 0:1,1:2), or * for "
    "every replica of the topic; the broker named serves them at most "
    "leader.replication.throttled.rate while the follower is out of sync.",
    [T],
    validator=throttled_replicas,
)
define(
    "follower.replication.throttled.replicas",
    "list",
    [],
    "Replicas throttled on the follower side: PARTITION:BROKER pairs, or *; the broker named "
    "fetches them at most follower.replication.throttled.rate while it is out of sync.",
    [T],
    validator=throttled_replicas,
)

# ---- client-metrics subscriptions (KIP-714) -------------------------------------------------
# Kafka's ClientMetricsConfigs: the configs of a CLIENT_METRICS resource (kafka-client-metrics.sh)
CLIENT_MATCH_SELECTORS = (
    "client_instance_id",
    "client_id",
    "client_software_name",
    "client_software_version",
    "client_source_address",
    "client_source_port",
)


def client_match(v: Any) -> str | None:
    """Kafka's ClientMetricsConfigs.parseMatchingPatterns: SELECTOR=REGEX items."""
    for item in v:
        parts = item.split("=")
        if len(parts) != 2 or parts[0].strip() not in CLIENT_MATCH_SELECTORS:
            return f"{item!r} must be SELECTOR=REGEX with a selector of {', '.join(CLIENT_MATCH_SELECTORS)}"
        try:
            re.compile(parts[1].strip())
        except re.error as exc:
            return f"{item!r}: not a regular expression ({exc})"
    return None


define(
    "metrics",
    "list",
    [],
    "Prefixes of the metric names clients matching this subscription push (e.g. "
    "org.apache.kafka.producer.), or * for every metric; empty: none.",
    [CLIENT_METRICS],
)
define(
    "interval.ms",
    "int",
    300_000,
    "How often matching clients push their metrics; a client matching several subscriptions "
    "pushes at the shortest of their intervals.",
    [CLIENT_METRICS],
    validator=between(100, 3_600_000),
)
define(
    "match",
    "list",
    [],
    "Which clients the subscription applies to: SELECTOR=REGEX items, all of which must match "
    "the whole value, with selectors " + ", ".join(CLIENT_MATCH_SELECTORS) + "; empty: every client.",
    [CLIENT_METRICS],
    validator=client_match,
)

# ---- stream-only ------------------------------------------------------------------------
# num.partitions and default.replication.factor above also apply per stream.


def key(name: str) -> ConfigKey:
    k = _KEYS.get(name) or _BY_BROKER_NAME.get(name)
    if k is None:
        raise ConfigError(f"unknown config {name!r}")
    return k


def keys(scope: str | None = None) -> list[ConfigKey]:
    return [k for k in _KEYS.values() if scope is None or scope in k.scopes]


def lookup(name: str) -> ConfigKey | None:
    return _KEYS.get(name) or _BY_BROKER_NAME.get(name)


def validate(props: Mapping[str, Any], scope: str, source: str = "") -> dict[str, Any]:
    """Parse and validate a mapping of overrides for ``scope``; unknown names are errors that
    name the nearest known key."""
    out: dict[str, Any] = {}
    for name, raw in props.items():
        k = _KEYS.get(name)
        if k is None or scope not in k.scopes:
            where = f" in {source}" if source else ""
            names = sorted(x.name for x in keys(scope))
            near = nearest(name, broker_names() if scope == BROKER else names)
            hint = f"; did you mean {near}?" if near else ""
            known = "" if scope == BROKER else f"; {scope} configs: {', '.join(names)}"
            raise ConfigError(f"unknown {scope} config {name!r}{where}{hint}{known}")
        out[name] = k.parse(raw, source)
    return out


def _flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        name = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(_flatten(v, name + "."))
        else:
            out[name] = v
    return out


REFERENCE = "see `sftraffic config reference`"


def nearest(name: str, candidates: Iterable[str]) -> str | None:
    """The candidate closest to ``name`` (a mistyped key), or None when none is close."""
    found = difflib.get_close_matches(name, sorted(set(candidates)), n=1, cutoff=0.8)
    return found[0] if found else None


# ---- environment variables -----------------------------------------------------------------
ENV_PREFIX = "SFTRAFFIC_"


@dataclass(frozen=True, slots=True)
class EnvironmentVariable:
    """An ``SFTRAFFIC_*`` variable that is not a broker setting: who reads it, and what for."""

    name: str
    read_by: str
    doc: str


# Every SFTRAFFIC_* variable the applications, the CLI's client commands, the deployment files and
# the test and build tooling read. The broker takes SFTRAFFIC_<KEY> for each of its keys (dots
# and dashes as underscores: SFTRAFFIC_LOG_RETENTION_MS) and warns at start of any other
# SFTRAFFIC_* variable not listed here. The docs' environment-variable reference reads this table.
ENVIRONMENT_VARIABLES: tuple[EnvironmentVariable, ...] = (
    EnvironmentVariable(
        "SFTRAFFIC_BOOTSTRAP",
        "client commands, applications",
        "Kafka bootstrap servers (HOST:PORT,...) when -b/--bootstrap-server is not given (default "
        "127.0.0.1:9092).",
    ),
    EnvironmentVariable(
        "SFTRAFFIC_CLIENT_CONFIG",
        "client commands, applications",
        "Kafka client properties file (security settings, Java or librdkafka names) when "
        "--command-config is not given; handed on to the processes a command starts.",
    ),
    EnvironmentVariable(
        "SFTRAFFIC_KAFKA_CONFIG",
        "client commands, applications",
        "The old name of SFTRAFFIC_CLIENT_CONFIG, still read.",
    ),
    EnvironmentVariable(
        "SFTRAFFIC_REGISTRY",
        "registry commands, pipelines, sftraffic up",
        "Schema registry URL, http[s]://[USER:PASSWORD@]HOST:PORT (default http://127.0.0.1:8081).",
    ),
    EnvironmentVariable(
        "SFTRAFFIC_MQTT_USERNAME", "sftraffic gateway", "MQTT user when --mqtt-username is not given."
    ),
    EnvironmentVariable(
        "SFTRAFFIC_MQTT_PASSWORD",
        "sftraffic gateway",
        "MQTT password when --mqtt-password-file is not given.",
    ),
    EnvironmentVariable(
        "SFTRAFFIC_SPARK_MASTER",
        "pipelines (Spark)",
        "Spark master URL of the pipeline's session (default local[*]; spark://HOST:7077, k8s://...).",
    ),
    EnvironmentVariable(
        "SFTRAFFIC_SPARK_CONF",
        "pipelines (Spark)",
        "Extra Spark settings of the pipeline's session, KEY=VALUE separated by commas.",
    ),
    EnvironmentVariable(
        "SFTRAFFIC_PIPELINE_KILL_BEFORE_COMMIT",
        "pipelines (tests)",
        "Fault injection: the pipeline kills itself before the first commit of the named query.",
    ),
    EnvironmentVariable(
        "SFTRAFFIC_FAUST_APP", "pipelines (faust)", "Application id of the faust pipeline (sftraffic-faust)."
    ),
    EnvironmentVariable(
        "SFTRAFFIC_FAUST_GUARANTEE",
        "pipelines (faust)",
        "Processing guarantee of the faust pipeline: exactly_once (default) or at_least_once.",
    ),
    EnvironmentVariable(
        "SFTRAFFIC_FAUST_PARTITIONS", "pipelines (faust)", "Partitions of the faust pipeline's topics (4)."
    ),
    EnvironmentVariable(
        "SFTRAFFIC_FAUST_SESSION_TIMEOUT",
        "pipelines (faust)",
        "Consumer session timeout of the faust pipeline, in seconds (10).",
    ),
    EnvironmentVariable(
        "SFTRAFFIC_TRAFFIC_TOPIC", "pipelines (faust)", "Topic the faust pipeline reads traffic events from."
    ),
    EnvironmentVariable(
        "SFTRAFFIC_CONGESTION_KMH",
        "pipelines (faust)",
        "Speed below which the faust pipeline reports congestion, in km/h (20).",
    ),
    EnvironmentVariable(
        "SFTRAFFIC_SENSORS", "deploy/compose", "Sensors the compose stack's simulator runs (2000)."
    ),
    EnvironmentVariable(
        "SFTRAFFIC_MQTT_DEVICES", "deploy/compose", "MQTT devices the compose stack simulates (500)."
    ),
    EnvironmentVariable("SFTRAFFIC_IMAGE", "deploy/compose", "Container image of the compose stack."),
    EnvironmentVariable(
        "SFTRAFFIC_MQTT", "load tests (locust)", "Mosquitto HOST:PORT of the load tests (127.0.0.1:1883)."
    ),
    EnvironmentVariable(
        "SFTRAFFIC_DASHBOARD",
        "load tests (locust)",
        "Dashboard URL of the load tests (http://127.0.0.1:8050).",
    ),
    EnvironmentVariable("SFTRAFFIC_LOAD_USERS", "load tests (locust)", "Peak users of the load shape (50)."),
    EnvironmentVariable(
        "SFTRAFFIC_LOAD_DURATION", "load tests (locust)", "Seconds the load shape runs (60)."
    ),
    EnvironmentVariable(
        "SFTRAFFIC_LOAD_RATE",
        "load tests (locust)",
        "Messages per second per device or producer user (5).",
    ),
    EnvironmentVariable(
        "SFTRAFFIC_LOAD_QOS", "load tests (locust)", "MQTT QoS of the device users, 0 or 1 (1)."
    ),
    EnvironmentVariable(
        "SFTRAFFIC_LOAD_DRAIN",
        "load tests (locust)",
        "Seconds to wait at the end for every message to be consumed (60).",
    ),
    EnvironmentVariable(
        "SFTRAFFIC_LOAD_SUMMARY", "load tests (locust)", "Where to write the load test's JSON summary."
    ),
    EnvironmentVariable(
        "SFTRAFFIC_TEST_BOOTSTRAP",
        "tests",
        "Run the broker-facing tests against this cluster (e.g. Apache Kafka) instead of brokers they start.",
    ),
    EnvironmentVariable("SFTRAFFIC_TEST_WORKERS", "./run test", "pytest-xdist workers of ./run test (2)."),
    EnvironmentVariable("SFTRAFFIC_SLOW", "tests", "1: run the tests marked slow (as --runslow)."),
    EnvironmentVariable(
        "SFTRAFFIC_ARTIFACTS", "tests", "Where tests leave logs and reports (artifacts/ at the top)."
    ),
    EnvironmentVariable(
        "SFTRAFFIC_SOAK_SECONDS", "soak tests", "How long the broker soak test runs, in seconds (600)."
    ),
    EnvironmentVariable(
        "SFTRAFFIC_SOAK_RATE", "soak tests", "Messages per second of the broker soak test (3000)."
    ),
    EnvironmentVariable(
        "SFTRAFFIC_CHAOS_SEED", "soak tests", "Seed of the chaos soak test (random when unset)."
    ),
    EnvironmentVariable(
        "SFTRAFFIC_CHAOS_SECONDS", "soak tests", "How long the chaos soak test runs, in seconds (600)."
    ),
    EnvironmentVariable(
        "SFTRAFFIC_CHAOS_TXN_SECONDS",
        "soak tests",
        "How long the chaos soak test's transactions workload runs, in seconds (300).",
    ),
    EnvironmentVariable(
        "SFTRAFFIC_PURE_PYTHON",
        "installation (setup.py)",
        "1: install the record walker as plain Python instead of compiling it (no C compiler).",
    ),
    EnvironmentVariable("SFTRAFFIC_VENV", "./run", "The virtualenv ./run uses (.venv at the top)."),
    EnvironmentVariable(
        "SFTRAFFIC_MAVEN_CACHE",
        "./run kafka, Spark's Kafka connector",
        "Where Apache Kafka's and Spark's jars from Maven Central are kept (.cache/maven).",
    ),
)
_APP_VARIABLES = frozenset(v.name for v in ENVIRONMENT_VARIABLES)


def env_name(key_name: str) -> str:
    """The ``SFTRAFFIC_*`` variable of a broker key: ``log.retention.ms`` → SFTRAFFIC_LOG_RETENTION_MS."""
    return ENV_PREFIX + key_name.upper().replace(".", "_").replace("-", "_")


# ---- Apache Kafka's broker settings --------------------------------------------------------
# A key of Kafka's server.properties is, here: one of ours (most are: same name, same meaning);
# a KafkaAlias (another spelling of one of ours, e.g. log.retention.hours); judged with the
# other sources (process.roles, controller.listener.names, controller.quorum.bootstrap.servers,
# offsets.topic.replication.factor); or a setting sftraffic does not implement: a warning
# naming why, or an error when it asks for what the broker cannot do. Apache Kafka itself only
# logs settings it does not know; a key neither Kafka nor sftraffic knows is an error here,
# naming the nearest known key, since a mistyped key would otherwise be silently ignored.


@dataclass(frozen=True, slots=True)
class KafkaAlias:
    """A Kafka setting spelled differently here: its value, converted, becomes ``target``'s."""

    name: str
    target: str
    type: str
    convert: Callable[[Any], Any]  # None: the value sets nothing (Kafka's "unset", broker.id=-1)
    # keys that win when one source gives both (Kafka's order: log.retention.ms > .minutes > .hours)
    above: tuple[str, ...] = ()
    agree: bool = False  # one source giving both with different values is an error, as in Kafka


def _hours(v: int) -> int:
    return -1 if v < 0 else v * 3_600_000


def _minutes(v: int) -> int:
    return -1 if v < 0 else v * 60_000


KAFKA_ALIASES: dict[str, KafkaAlias] = {
    a.name: a
    for a in (
        KafkaAlias(
            "log.retention.hours",
            "log.retention.ms",
            "int",
            _hours,
            ("log.retention.ms", "log.retention.minutes"),
        ),
        KafkaAlias("log.retention.minutes", "log.retention.ms", "int", _minutes, ("log.retention.ms",)),
        KafkaAlias("log.roll.hours", "log.roll.ms", "int", _hours, ("log.roll.ms",)),
        KafkaAlias("log.roll.jitter.hours", "log.roll.jitter.ms", "int", _hours, ("log.roll.jitter.ms",)),
        KafkaAlias("log.dir", "log.dirs", "string", lambda v: v, ("log.dirs",)),
        KafkaAlias("broker.id", "node.id", "int", lambda v: None if v == -1 else v, ("node.id",), True),
        KafkaAlias(
            "security.inter.broker.protocol",
            "inter.broker.listener.name",
            "string",
            lambda v: v.strip().upper() or None,
            ("inter.broker.listener.name",),
            True,
        ),
        # the broker-wide default of the topic key compression.type (Kafka gives both one name)
        KafkaAlias(
            "compression.type", "compression.type.broker", "string", lambda v: v, ("compression.type.broker",)
        ),
    )
}

# judged once every source is read: they depend on other keys (the voters, the listeners)
_DEFERRED = (
    "process.roles",
    "controller.listener.names",
    "controller.quorum.bootstrap.servers",
    "offsets.topic.replication.factor",
)


@dataclass(frozen=True, slots=True)
class KafkaSetting:
    """A Kafka broker setting sftraffic has no key for, and what the broker makes of it."""

    reason: str
    accepts: tuple[str, ...] = ()  # values meaning what the broker does anyway: taken silently
    refuse: bool = False  # any other value is an error (the broker cannot honour it), not a warning


_ONE_LOOP = "the broker runs one event loop (asyncio) for every connection and request"
_OS_BUFFERS = "sockets keep the operating system's buffer sizes"
_PEM = "keystores and truststores are PEM files (ssl.key.password decrypts an encrypted key)"
_SASL = "the broker's SASL mechanisms are SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN (sasl.enabled.mechanisms)"
_TIERED = "tiered storage is not implemented: every segment stays in log.dirs"

KAFKA_SETTINGS: dict[str, KafkaSetting] = {
    "num.network.threads": KafkaSetting(_ONE_LOOP),
    "num.io.threads": KafkaSetting(_ONE_LOOP),
    "background.threads": KafkaSetting("background work runs on the broker's one event loop"),
    "num.recovery.threads.per.data.dir": KafkaSetting("logs are recovered one at a time, as they are opened"),
    "num.replica.fetchers": KafkaSetting("a broker runs one replica fetcher per leader broker it follows"),
    "socket.send.buffer.bytes": KafkaSetting(_OS_BUFFERS, accepts=("-1",)),
    "socket.receive.buffer.bytes": KafkaSetting(_OS_BUFFERS, accepts=("-1",)),
    "replica.socket.receive.buffer.bytes": KafkaSetting(_OS_BUFFERS, accepts=("-1",)),
    "socket.listen.backlog.size": KafkaSetting("listeners keep asyncio's listen backlog (100)"),
    "queued.max.requests": KafkaSetting(
        "requests waiting to be answered are bounded in bytes (queued.max.request.bytes), not in number"
    ),
    "metric.reporters": KafkaSetting(
        "sftraffic has no JMX: its metrics are served in Prometheus's format at metrics.listen", accepts=("",)
    ),
    "sasl.jaas.config": KafkaSetting(
        "users are SCRAM credentials kept in the metadata (sftraffic users, kafka-configs "
        "--add-config SCRAM-SHA-256=...), and replica fetchers log in with "
        "sasl.inter.broker.username and sasl.inter.broker.password"
    ),
    "ssl.keystore.password": KafkaSetting(_PEM),
    "ssl.truststore.password": KafkaSetting(_PEM),
    "ssl.enabled.protocols": KafkaSetting(
        "TLS 1.2 and 1.3 are enabled (Python's ssl, TLS 1.2 at least)",
        accepts=("TLSv1.2,TLSv1.3", "TLSv1.3,TLSv1.2"),
        refuse=True,
    ),
    "ssl.protocol": KafkaSetting(
        "TLS 1.2 and 1.3 are enabled (Python's ssl, TLS 1.2 at least)", accepts=("TLSv1.3", "TLSv1.2", "TLS")
    ),
    "ssl.cipher.suites": KafkaSetting("cipher suites are OpenSSL's defaults", accepts=("",), refuse=True),
    "remote.log.storage.system.enable": KafkaSetting(_TIERED, accepts=("false",), refuse=True),
    "log.cleaner.enable": KafkaSetting(
        "the log cleaner always runs: topics with cleanup.policy=compact are compacted", accepts=("true",)
    ),
    "log.preallocate": KafkaSetting("segment files are not preallocated", accepts=("false",)),
    "unstable.api.versions.enable": KafkaSetting(
        "the broker offers only the API versions it implements", accepts=("false",)
    ),
    "unstable.feature.versions.enable": KafkaSetting(
        "the broker offers only the feature versions it implements", accepts=("false",)
    ),
    "transaction.two.phase.commit.enable": KafkaSetting(
        "two-phase commit of transactions (KIP-939) is not implemented", accepts=("false",), refuse=True
    ),
    "broker.rack": KafkaSetting("replicas are placed without regard to racks"),
    "metadata.log.dir": KafkaSetting("the metadata is kept in log.dirs (__metadata)"),
}

# reasons shared by every Kafka setting of a family (tried after KAFKA_SETTINGS; only for names
# Kafka knows, so that a mistyped key of the family is still an error)
KAFKA_FAMILIES: tuple[tuple[str, KafkaSetting], ...] = (
    (
        "share.coordinator.",
        KafkaSetting("sftraffic has no share groups (KIP-932), so no __share_group_state topic"),
    ),
    (
        "group.share.",
        KafkaSetting(
            "share groups (KIP-932) take the session timeout, heartbeat interval, max size, record "
            "lock duration, delivery count limit, record locks per partition and share sessions"
        ),
    ),
    ("group.streams.", KafkaSetting("sftraffic has no streams groups (KIP-1071)")),
    (
        "group.consumer.",
        KafkaSetting(
            "consumer groups (KIP-848) take only the session timeout, heartbeat interval, max size "
            "and assignors; the assignment is computed at once on every group epoch"
        ),
    ),
    ("remote.log.", KafkaSetting(_TIERED)),
    ("log.local.retention.", KafkaSetting(_TIERED)),
    ("sasl.kerberos.", KafkaSetting(_SASL)),
    ("sasl.oauthbearer.", KafkaSetting(_SASL)),
    ("sasl.login.", KafkaSetting(_SASL)),
    ("delegation.token.", KafkaSetting("delegation tokens are not implemented")),
    (
        "controller.quorum.",
        KafkaSetting("the metadata quorum's timings are sftraffic's own (pysyncobj's Raft)"),
    ),
    ("metadata.", KafkaSetting("the metadata log is sftraffic's own (log.dirs/__metadata)")),
    ("log.cleaner.", KafkaSetting("the log cleaner cleans one log at a time, in a worker thread")),
)

# refused whatever the value, known to Kafka 4.3 or not
KAFKA_REFUSED_FAMILIES: tuple[tuple[str, str], ...] = (
    (
        "listener.name.",
        "settings per listener are not: the broker-wide setting (the name without "
        "listener.name.<LISTENER>.) applies to every listener",
    ),
    (
        "zookeeper.",
        "ZooKeeper is gone since Kafka 4.0; sftraffic nodes keep their metadata themselves "
        "(a cluster: controller.quorum.voters)",
    ),
)

# Kafka settings naming Java classes besides those of ConfigDef type CLASS
_PLUGIN_LISTS = frozenset(
    {"metric.reporters", "kafka.metrics.reporters", "config.providers", "security.providers"}
)
_GENERIC = KafkaSetting("sftraffic does not implement this Apache Kafka setting")


def kafka_setting(name: str) -> KafkaSetting | None:
    """How the broker treats Kafka broker setting ``name`` it has no key of its own for; None:
    not a Kafka 4.3 setting (an alias or one of ours is not looked up here)."""
    if name in KAFKA_SETTINGS:
        return KAFKA_SETTINGS[name]
    if name not in KAFKA_BROKER_CONFIGS:
        return None
    return next((s for prefix, s in KAFKA_FAMILIES if name.startswith(prefix)), _GENERIC)


def _text(raw: Any) -> str:
    """A TOML or properties value as Kafka would write it in server.properties."""
    if isinstance(raw, bool):
        return "true" if raw else "false"
    if isinstance(raw, (list, tuple)):
        return ",".join(str(x).strip() for x in raw)
    return str(raw).strip()


def _same(a: str, b: str) -> bool:
    def norm(s: str) -> str:
        return ",".join(x.strip() for x in s.split(",")).lower()

    return norm(a) == norm(b)


def broker_names() -> set[str]:
    """Every name a broker source may hold: ours, broker synonyms, Kafka's aliases and settings."""
    names = {k.name for k in keys(BROKER)} | set(_BY_BROKER_NAME) | set(KAFKA_ALIASES) | set(_DEFERRED)
    return names | set(KAFKA_BROKER_CONFIGS)


def _unknown(name: str, source: str) -> ConfigError:
    k = _KEYS.get(name)
    if k is not None and k.broker_name:  # a topic key: its broker-wide default has another name
        hint = (
            f"; did you mean {k.broker_name}? ({name} is a topic config, {k.broker_name} its broker default)"
        )
    elif k is not None:
        hint = f" ({name} is a {'/'.join(sorted(k.scopes))} config, not a broker one)"
    else:
        near = nearest(name, broker_names())
        hint = f"; did you mean {near}?" if near else ""
    return ConfigError(f"unknown broker config {name!r} in {source}{hint} ({REFERENCE})")


def _refused(name: str, value: str, why: str, source: str) -> ConfigError:
    shown = f"{name}={value}" if value else name
    return ConfigError(f"{shown} is not supported by sftraffic; {why} (from {source})")


# ---- reading a --config file ---------------------------------------------------------------
_PROPERTY_LINE = re.compile(r"\s*[A-Za-z0-9_.\-]+(\s*[=:]|\s+\S|\s*$)")  # key=value, key: value, key value


def read_config_file(path: str | Path) -> dict[str, Any]:
    """The settings of a broker ``--config`` file, flat (``log.retention.ms``, not tables).

    ``.properties``: Java properties (Apache Kafka's server.properties); ``.toml``: TOML; any
    other name: TOML if it parses as TOML, else properties if every line is ``key=value``,
    ``key: value`` or ``key value``, else a one-line ConfigError naming both formats.
    """
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"config file {p} does not exist")
    suffix = p.suffix.lower()
    if suffix == ".properties":
        return properties.read(p, "config file")
    raw = p.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")
    try:
        return _flatten(tomllib.loads(text))
    except tomllib.TOMLDecodeError as exc:
        toml_error = exc
    like_properties = _looks_like_properties(text)
    if suffix == ".toml":
        hint = " (Kafka's server.properties format? name the file .properties)" if like_properties else ""
        raise ConfigError(f"config file {p} is not valid TOML: {toml_error}{hint}")
    if like_properties:
        return properties.parse(text, f"config file {p}")
    raise ConfigError(
        f"config file {p} is neither TOML ({toml_error}) nor Java properties (Kafka's server.properties "
        "format): name it .toml or .properties"
    )


def _looks_like_properties(text: str) -> bool:
    seen = False
    continued = False
    for line in text.splitlines():
        stripped = line.strip()
        if continued:
            continued = stripped.endswith("\\")
            continue
        if not stripped or stripped[0] in "#!":
            continue
        if not _PROPERTY_LINE.match(line):
            return False
        seen = True
        continued = stripped.endswith("\\")
    return seen


class TypedReads:
    """Typed reads of resolved settings (``values``: key -> parsed value, defaults omitted).

    Each accessor checks the key's declared type: a key read with the wrong one is a TypeError
    (and tests/unit/test_config.py checks every call site in the store against the table), so a
    call site gets an ``int``, ``bool``, ``str`` or ``list[str]`` and never re-casts it. The
    accessors are named after the types they return; their annotations say ``builtins.`` for
    that reason.
    """

    values: dict[builtins.str, Any]

    def int(self, name: builtins.str) -> builtins.int:
        """An ``int`` or ``long`` key."""
        v = self._read(name, "int")
        if isinstance(v, builtins.int) and not isinstance(v, builtins.bool):
            return v
        raise _mistyped(name, v)

    def float(self, name: builtins.str) -> builtins.float:
        """A ``double`` key."""
        v = self._read(name, "float")
        if isinstance(v, builtins.float):
            return v
        raise _mistyped(name, v)

    def bool(self, name: builtins.str) -> builtins.bool:
        """A ``bool`` key."""
        v = self._read(name, "bool")
        if isinstance(v, builtins.bool):
            return v
        raise _mistyped(name, v)

    def str(self, name: builtins.str) -> builtins.str:
        """A ``string`` key."""
        v = self._read(name, "str")
        if isinstance(v, builtins.str):
            return v
        raise _mistyped(name, v)

    def password(self, name: builtins.str) -> builtins.str:
        """A ``password`` key (never logged or described in clear)."""
        v = self._read(name, "password")
        if isinstance(v, builtins.str):
            return v
        raise _mistyped(name, v)

    def list(self, name: builtins.str) -> builtins.list[builtins.str]:
        """A ``list`` key."""
        v = self._read(name, "list")
        if isinstance(v, builtins.list):
            return v
        raise _mistyped(name, v)

    def value(self, name: builtins.str) -> Value:
        """Any key's value, for code that handles every type alike (rendering, DescribeConfigs);
        code that uses a value reads it with its typed accessor."""
        k = key(name)
        v: Value = self.values.get(name, k.default)
        return v

    def _read(self, name: builtins.str, accessor: builtins.str) -> Value:
        k = key(name)
        if k.type not in ACCESSORS[accessor]:
            right = _ACCESSOR_OF[k.type]
            raise TypeError(f"config {name} is declared {k.type}: read it with config.{right}()")
        return self.value(name)

    def topic_default(self, topic_key: builtins.str) -> Value:
        """Broker-wide default of a topic key (its broker synonym if set)."""
        k = _KEYS[topic_key]
        v: Value
        if k.broker_name and k.broker_name in self.values:
            v = self.values[k.broker_name]
        elif topic_key in self.values:
            v = self.values[topic_key]
        else:
            v = k.default
        return v


@dataclass
class BrokerConfig(TypedReads):
    """Resolved broker settings (a view over the declared keys).

    ``warnings``: one line each for what the sources held that changes nothing here (a Kafka
    setting sftraffic does not implement, an ``SFTRAFFIC_*`` variable nobody reads); the broker
    logs them at start.
    """

    values: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def node_id(self) -> int:
        return self.int("node.id")

    @property
    def data_dir(self) -> Path:
        return Path(self.str("log.dirs"))

    @classmethod
    def load(
        cls,
        path: str | Path | None = None,
        overrides: Mapping[str, Any] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> BrokerConfig:
        """Merge file < environment < overrides, validating every key with a clear message.

        The file is TOML or Java properties (:func:`read_config_file`); keys may be Apache
        Kafka's (:data:`KAFKA_ALIASES`, :func:`kafka_setting`) in every source.
        """
        cfg = cls()
        deferred: dict[str, tuple[Any, str]] = {}
        if path is not None:
            where = str(path)
            cfg._apply_source([(k, v, where) for k, v in read_config_file(path).items()], deferred)
        env = os.environ if environ is None else environ
        cfg._apply_source(cfg._environment(env), deferred)
        if overrides:
            cfg._apply_source([(k, v, "command line") for k, v in overrides.items()], deferred)
        cfg._judge_deferred(deferred)
        return cfg

    def _environment(self, env: Mapping[str, str]) -> list[tuple[str, Any, str]]:
        """SFTRAFFIC_<KEY> variables as settings; a warning for any other SFTRAFFIC_* variable
        that is not one of :data:`ENVIRONMENT_VARIABLES`."""
        known = broker_names()
        names = {env_name(n): n for n in list(_KEYS) + sorted(known)}
        suffixes = [v[len(ENV_PREFIX) :] for v in {env_name(n) for n in known} | _APP_VARIABLES]
        out: list[tuple[str, Any, str]] = []
        for var, raw in sorted(env.items()):
            if not var.startswith(ENV_PREFIX) or var in _APP_VARIABLES:
                continue
            name = names.get(var)
            if name is not None:
                out.append((name, raw, f"environment {var}"))
                continue
            near = nearest(var[len(ENV_PREFIX) :], suffixes)
            hint = f"; did you mean {ENV_PREFIX}{near}?" if near else f" ({REFERENCE})"
            self.warnings.append(f"{var} is not a setting{hint}")
        return out

    def _apply_source(self, items: list[tuple[str, Any, str]], deferred: dict[str, tuple[Any, str]]) -> None:
        """The settings of one source (the file, the environment or the command line)."""
        given = {name for name, _, _ in items}
        aliased: list[tuple[KafkaAlias, Any, str]] = []
        for name, raw, source in items:
            if name in KAFKA_ALIASES:
                aliased.append((KAFKA_ALIASES[name], raw, source))
            elif name in _DEFERRED:
                deferred[name] = (raw, source)
            else:
                self._apply({name: raw}, source)
        for alias, raw, source in aliased:
            self._apply_alias(alias, raw, source, given)

    def _apply(self, flat: Mapping[str, Any], source: str) -> None:
        for name, raw in flat.items():
            k = _KEYS.get(name)
            if k is not None and BROKER not in k.scopes:
                k = None
            if k is None:
                k = _BY_BROKER_NAME.get(name)
                if k is not None:
                    self.values[name] = k.parse(raw, source, name)
                    self.sources[name] = source
                    continue
                self._kafka_only(name, raw, source)
                continue
            self.values[name] = k.parse(raw, source)
            self.sources[name] = source

    def _apply_alias(self, alias: KafkaAlias, raw: Any, source: str, given: set[str]) -> None:
        where = f" (from {source})"
        try:
            value = alias.convert(_convert(alias.type, raw))
        except (TypeError, ValueError):
            raise ConfigError(f"config {alias.name}={raw!r}{where}: expected {alias.type}") from None
        if value is None:
            return
        target = key(alias.target)
        parsed = target.parse(value, source, alias.name)
        winner = next((n for n in alias.above if n in given), None)
        if winner is not None:
            same = _same(target.render(self.value(alias.target)), target.render(parsed))
            if alias.agree and winner == alias.target and not same:
                raise ConfigError(
                    f"{alias.name}={_text(raw)} and {alias.target}={target.render(self.value(alias.target))} "
                    f"differ{where}: give {alias.target} alone"
                )
            return  # Kafka takes the other one
        self.values[alias.target] = parsed
        self.sources[alias.target] = source

    def _kafka_only(self, name: str, raw: Any, source: str) -> None:
        """A name that is none of our keys: a Kafka setting we warn of or refuse, else an error."""
        value = _text(raw)
        for prefix, why in KAFKA_REFUSED_FAMILIES:
            if name.startswith(prefix):
                raise _refused(name, "", why, source)
        setting = kafka_setting(name)
        if setting is None:
            raise _unknown(name, source)
        if any(_same(value, ok) for ok in setting.accepts):
            return
        if setting.refuse:
            raise _refused(name, value, setting.reason, source)
        kind, default = KAFKA_BROKER_CONFIGS.get(name, ("", None))
        if kind == "class" or name in _PLUGIN_LISTS:
            if value and not _same(value, default or ""):
                raise _refused(
                    name, value, "it names Java classes, and sftraffic runs no Kafka plugins", source
                )
            if setting is _GENERIC:
                return  # no plugin, or Kafka's own default one: what the broker does anyway
        self._warn(f"{name} has no effect: {setting.reason} ({source})")

    def _warn(self, line: str) -> None:
        if line not in self.warnings:
            self.warnings.append(line)

    def _judge_deferred(self, deferred: dict[str, tuple[Any, str]]) -> None:
        """The Kafka settings that depend on other keys, once every source is read: KRaft's
        roles and controller listeners against controller.quorum.voters, and the offsets
        topic's replication factor against the number of voters."""
        voters = [v.strip() for v in self.list("controller.quorum.voters")]
        voter_ids = {v.partition("@")[0].strip(): v.partition("@")[2].strip() for v in voters}
        node = str(self.node_id)
        if "process.roles" in deferred:
            self._judge_roles(*deferred["process.roles"], voter_ids, node)
        closed: list[tuple[str, str]] = []  # controller listeners not opened, with their source
        if "controller.listener.names" in deferred:
            raw, source = deferred["controller.listener.names"]
            names = {n.upper() for n in _convert("list", raw)}
            closed = [(e, source) for e in self._drop_listeners(names)]
        if "controller.quorum.bootstrap.servers" in deferred:
            raw, source = deferred["controller.quorum.bootstrap.servers"]
            servers = _convert("list", raw)
            shown = ",".join(servers)
            if voters:
                self._warn(
                    f"controller.quorum.bootstrap.servers has no effect: the quorum is "
                    f"controller.quorum.voters ({source})"
                )
            elif len(servers) > 1:
                raise _refused(
                    "controller.quorum.bootstrap.servers",
                    shown,
                    "the metadata quorum has a fixed set of voters: give controller.quorum.voters="
                    "ID@HOST:PORT,... (every controller's node.id and address) instead",
                    source,
                )
            elif servers:
                self._warn(
                    f"controller.quorum.bootstrap.servers={shown}: this node is the only controller, so "
                    "it runs as a single node, whose metadata needs no quorum (a cluster: "
                    f"controller.quorum.voters=ID@HOST:PORT,...) ({source})"
                )
        for endpoint, source in closed:
            if not voters:
                self._warn(
                    f"controller.listener.names: {endpoint} is not opened: a single node serves no "
                    f"metadata quorum ({source})"
                )
            elif node in voter_ids and _port(endpoint) != _port(voter_ids[node]):
                self._warn(
                    f"controller.listener.names: {endpoint} is not opened: the metadata quorum listens "
                    f"on node {node}'s controller.quorum.voters address {voter_ids[node]} ({source})"
                )
        if "offsets.topic.replication.factor" in deferred:
            raw, source = deferred["offsets.topic.replication.factor"]
            try:
                rf = _convert("int", raw)
            except (TypeError, ValueError):
                raise ConfigError(
                    f"config offsets.topic.replication.factor={raw!r} (from {source}): expected int"
                ) from None
            here = min(3, len(voters)) if voters else 1
            if rf != here:
                self._warn(
                    f"offsets.topic.replication.factor has no effect: __consumer_offsets gets "
                    f"min(3, voters) replicas, {here} here ({source})"
                )

    def _judge_roles(self, raw: Any, source: str, voter_ids: dict[str, str], node: str) -> None:
        roles = {r.lower() for r in _convert("list", raw)}
        shown = ",".join(sorted(roles))
        if not roles or roles - {"broker", "controller"}:
            raise ConfigError(
                f"config process.roles={_text(raw)!r} (from {source}): must be broker,controller or broker"
            )
        if roles == {"controller"}:
            raise _refused(
                "process.roles",
                shown,
                "every sftraffic node serves clients: a controller is process.roles=broker,controller",
                source,
            )
        if roles == {"broker"} and not voter_ids:
            raise _refused(
                "process.roles",
                shown,
                "a broker-only node follows the controllers of controller.quorum.voters, and none "
                "are given (a single node is process.roles=broker,controller)",
                source,
            )
        if roles == {"broker"} and node in voter_ids:
            raise _refused(
                "process.roles",
                shown,
                f"node {node} is in controller.quorum.voters, so it is a controller too: "
                "process.roles=broker,controller",
                source,
            )
        if "controller" in roles and voter_ids and node not in voter_ids:
            raise _refused(
                "process.roles",
                shown,
                f"node {node} is not in controller.quorum.voters (a non-voting broker is "
                "process.roles=broker)",
                source,
            )

    def _drop_listeners(self, names: set[str]) -> list[str]:
        """Remove the listeners named ``names`` (Kafka's controller listeners: here the metadata
        quorum has its own endpoint, controller.quorum.voters) from listeners and
        advertised.listeners; returns the listeners removed."""
        dropped: list[str] = []
        for key_name in ("listeners", "advertised.listeners"):
            entries = [e.strip() for e in self.str(key_name).split(",") if e.strip()]
            kept = [e for e in entries if not ("://" in e and e.partition("://")[0].strip().upper() in names)]
            if len(kept) != len(entries):
                self.values[key_name] = ",".join(kept)
                if key_name == "listeners":
                    dropped += [e for e in entries if e not in kept]
        return dropped


def _mistyped(name: str, value: object) -> TypeError:
    return TypeError(f"config {name} holds {value!r}, not a {key(name).type}")


def _port(address: str) -> str:
    return address.rpartition(":")[2].strip()


def parse_duration_ms(text: str) -> int:
    """'180d', '6h', '30s', '500ms', '2w' or a plain number of ms."""
    s = text.strip().lower()
    units = {
        "ms": 1,
        "s": 1000,
        "m": 60_000,
        "h": 3_600_000,
        "d": DAY_MS,
        "w": 7 * DAY_MS,
        "mo": 30 * DAY_MS,
        "y": 365 * DAY_MS,
    }
    try:
        for suffix in sorted(units, key=len, reverse=True):
            num = s[: -len(suffix)].strip()
            if s.endswith(suffix) and num.replace(".", "", 1).isdigit():
                return int(float(num) * units[suffix])
        return int(s)
    except (ValueError, OverflowError):  # e.g. '²s' passes isdigit() but not float()
        raise ConfigError(f"cannot read duration {text!r}: use e.g. 500ms, 30s, 6h, 180d") from None


def parse_size(text: str) -> int:
    s = text.strip().lower().removesuffix("b")
    mult = {"k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
    try:
        if s and s[-1] in mult:
            return int(float(s[:-1]) * mult[s[-1]])
        return int(s)
    except (ValueError, OverflowError):  # 'junk', 'infk', 'nank' ...
        raise ConfigError(f"cannot read size {text!r}: use e.g. 512k, 100m, 1g") from None
