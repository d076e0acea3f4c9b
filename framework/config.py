"""Every configuration key, declared once: name, type, default, validator, doc and scope.

Scopes:

* ``broker``: read at start from the TOML file (``--config``), ``SFTRAFFIC_*`` environment
  variables and command-line flags, in that order of increasing precedence.
* ``stream``: defaults shared by every topic of a stream (``sftraffic streams``).
* ``topic``: per-topic overrides (CreateTopics configs, AlterConfigs).

A topic-scoped key resolves topic override → stream value → broker default (its
``broker_name``, e.g. ``log.retention.ms`` for ``retention.ms``) → built-in default. CLI help,
the README's configuration reference, DescribeConfigs and validation all read this table.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from framework.errors import ConfigError

LONG_MAX = 9223372036854775807
INT_MAX = 2147483647

BROKER = "broker"
STREAM = "stream"
TOPIC = "topic"

# DescribeConfigs v3+ config types
TYPE_CODES = {"bool": 1, "string": 2, "int": 3, "long": 5, "double": 6, "list": 7, "password": 9}

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
define("log.dirs", "string", "./data", "Directory holding this broker's logs and metadata.", [B])
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
    "Upper bound on partitions per topic (the seeds' limit).",
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

# ---- transactions (issue 19) --------------------------------------------------------------
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

# ---- authorization (issue 18) -------------------------------------------------------------
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
    "Forget an idempotent producer id unused for this long (the seeds' pidexpirysecs).",
    [B, S, T],
    validator=at_least(1),
)

# ---- schema validation (issue 20; Confluent Server's topic configs) -------------------------
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
    """Parse and validate a mapping of overrides for ``scope``; unknown names are errors."""
    out: dict[str, Any] = {}
    for name, raw in props.items():
        k = _KEYS.get(name)
        if k is None or scope not in k.scopes:
            where = f" in {source}" if source else ""
            known = (
                ""
                if scope == BROKER
                else f"; {scope} configs: {', '.join(sorted(x.name for x in keys(scope)))}"
            )
            raise ConfigError(f"unknown {scope} config {name!r}{where}{known}")
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


@dataclass
class BrokerConfig:
    """Resolved broker settings (a view over the declared keys)."""

    values: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)

    def __getitem__(self, name: str) -> Any:
        if name in self.values:
            return self.values[name]
        return key(name).default

    def get(self, name: str) -> Any:
        return self[name]

    def topic_default(self, topic_key: str) -> Any:
        """Broker-wide default of a topic key (its broker synonym if set)."""
        k = _KEYS[topic_key]
        if k.broker_name and k.broker_name in self.values:
            return self.values[k.broker_name]
        if topic_key in self.values:
            return self.values[topic_key]
        return k.default

    @property
    def node_id(self) -> int:
        return int(self["node.id"])

    @property
    def data_dir(self) -> Path:
        return Path(self["log.dirs"])

    @classmethod
    def load(
        cls,
        path: str | Path | None = None,
        overrides: Mapping[str, Any] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> BrokerConfig:
        """Merge file < environment < overrides, validating every key with a clear message."""
        cfg = cls()
        if path is not None:
            p = Path(path)
            try:
                with p.open("rb") as fh:
                    data = tomllib.load(fh)
            except FileNotFoundError:
                raise ConfigError(f"config file {p} does not exist") from None
            except tomllib.TOMLDecodeError as exc:
                raise ConfigError(f"config file {p} is not valid TOML: {exc}") from None
            cfg._apply(_flatten(data), str(p))
        env = os.environ if environ is None else environ
        by_env = {k.upper().replace(".", "_"): k for k in list(_KEYS) + list(_BY_BROKER_NAME)}
        env_vals: dict[str, Any] = {}
        for var, raw in env.items():
            if not var.startswith("SFTRAFFIC_"):
                continue
            name = by_env.get(var[len("SFTRAFFIC_") :])
            if name is None:
                continue  # other SFTRAFFIC_* variables belong to the apps
            env_vals[name] = raw
        for name, raw in env_vals.items():
            cfg._apply({name: raw}, f"environment SFTRAFFIC_{name.upper().replace('.', '_')}")
        if overrides:
            cfg._apply(dict(overrides), "command line")
        return cfg

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
                raise ConfigError(
                    f"unknown broker config {name!r} in {source} (see README 'Configuration reference')"
                )
            self.values[name] = k.parse(raw, source)
            self.sources[name] = source


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
