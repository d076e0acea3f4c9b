"""Cluster metadata: streams, topics, partitions and their configuration.

State changes are expressed as commands (``create_topic``, ``delete_topic``, ``alter_topic``,
``create_stream`` ...) applied to an in-memory model and persisted after each change as one
JSON document (``<data dir>/__metadata/metadata.json``), written to a temporary file, fsynced
and renamed over the old one, so a crash leaves either the old or the new state, never a mix.

Streams and the name mapping: a stream is a named group of topics carrying shared defaults.
A topic named ``<stream>.<topic>`` (e.g. ``plant_a.temperatures``) created while stream
``<stream>`` exists belongs to it and inherits its configs unless the topic overrides them.
Stream names use ``[A-Za-z0-9_-]`` (no dot), so the first dot of a topic name separates them.

SCRAM credentials (``scram``: user → mechanism → salt, stored key, server key, iterations; never
a password) are metadata too: changed by ``plan_scram_credentials`` then ``apply``, so they
replicate through the quorum like topics.

ACLs (``acls``: Kafka's ACL bindings, in creation order) likewise: ``plan_create_acls`` /
``plan_delete_acls`` then ``apply``; every broker's authorizer reloads them when one applies.

Client quotas (``quotas``: entity → key → value, :mod:`framework.security.quotas`) likewise:
``plan_client_quotas`` then ``apply``; every broker's quota manager reloads them when one applies.

Dynamic broker configs (``broker_configs``: ``""`` for the cluster-wide default or a broker id
→ key → value; only keys declared ``dynamic`` in :mod:`framework.config`, e.g. the replication
throttles) likewise: ``plan_broker_configs`` then ``apply`` (IncrementalAlterConfigs on a
BROKER resource, as Kafka keeps them in its metadata log as ConfigRecords).

Client-metrics subscriptions (``client_metrics``: subscription name → ``metrics`` /
``interval.ms`` / ``match``, KIP-714's CLIENT_METRICS config resources) likewise:
``plan_client_metrics`` then ``apply``; every broker's client-metrics manager reloads them.

A partition's replica list changes during a reassignment: the quorum applies each
step (:meth:`set_replicas`), from the partition states it keeps beside this store.
"""

from __future__ import annotations

import base64
import json
import re
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from framework import config as cfg
from framework.clock import SYSTEM, Clock
from framework.errors import (
    ConfigError,
    DuplicateResource,
    InvalidPartitions,
    InvalidReplicaAssignment,
    InvalidReplicationFactor,
    InvalidRequest,
    InvalidTopic,
    PolicyViolation,
    ResourceNotFound,
    StoreError,
    TopicAlreadyExists,
    UnacceptableCredential,
    UnknownTopicOrPartition,
)
from framework.protocol.error_codes import ErrorCode
from framework.security import quotas as client_quotas
from framework.security.authorizer import AclBinding, AclBindingFilter, check_new
from framework.security.scram import ScramCredential, hash_of
from framework.storage.files import write_durably
from framework.storage.log_config import resolve

TOPIC_NAME = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
STREAM_NAME = re.compile(r"^[A-Za-z0-9_-]{1,200}$")
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


class UnknownStream(StoreError):
    code = ErrorCode.RESOURCE_NOT_FOUND


class StreamAlreadyExists(StoreError):
    code = ErrorCode.TOPIC_ALREADY_EXISTS


@dataclass
class StreamInfo:
    name: str
    configs: dict[str, Any] = field(default_factory=dict)
    created_ms: int = 0


@dataclass
class TopicInfo:
    name: str
    topic_id: str  # 32 hex digits
    assignments: list[list[int]]  # partition → replica broker ids (first = preferred leader)
    configs: dict[str, Any] = field(default_factory=dict)
    stream: str | None = None
    created_ms: int = 0
    internal: bool = False

    @property
    def partitions(self) -> int:
        return len(self.assignments)

    @property
    def replication_factor(self) -> int:
        return len(self.assignments[0]) if self.assignments else 0

    @property
    def id_bytes(self) -> bytes:
        return bytes.fromhex(self.topic_id)


def validate_topic_name(name: str) -> None:
    if not name or name in (".", ".."):
        raise InvalidTopic(f"topic name {name!r} is not allowed")
    if not TOPIC_NAME.match(name):
        raise InvalidTopic(f"topic name {name!r} is invalid: use at most 249 of [A-Za-z0-9._-]")


def validate_stream_name(name: str) -> None:
    if not STREAM_NAME.match(name or ""):
        raise InvalidRequest(f"stream name {name!r} is invalid: use 1-200 of [A-Za-z0-9_-] (no dot)")


Listener = Callable[[str, str], None]  # (event, topic or stream name)
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Change(Generic[T]):
    """A checked metadata command (Kafka's ControllerResult): what to apply, and its outcome.

    ``op`` None means nothing to apply (``validate_only``). Planning has no side effects; the
    change takes effect when :meth:`MetadataStore.apply` runs it, here (single node) or on
    every node once the quorum commits it (cluster).
    """

    op: str | None
    arg: dict[str, Any]
    result: T


class MetadataStore:
    """Streams and topics of one broker (single-node) — the state machine a cluster replicates."""

    def __init__(self, data_dir: Path, broker: cfg.BrokerConfig, clock: Clock = SYSTEM) -> None:
        self.dir = data_dir / "__metadata"
        self.path = self.dir / "metadata.json"
        self.broker = broker
        self.clock = clock  # creation times of topics and streams (set by the plan)
        self.cluster_id = ""
        self.topics: dict[str, TopicInfo] = {}
        self.topics_by_id: dict[bytes, TopicInfo] = {}
        self.streams: dict[str, StreamInfo] = {}
        # user -> mechanism -> ScramCredential.to_json() (salted and hashed, never a password)
        self.scram: dict[str, dict[str, dict[str, Any]]] = {}
        # ACL bindings in creation order (a dict as an ordered set)
        self.acls: dict[AclBinding, None] = {}
        # client quotas: entity ((type, name or None), ...) -> quota key -> value
        self.quotas: dict[client_quotas.Entity, dict[str, float]] = {}
        # dynamic broker configs: "" (cluster default) or a broker id -> key -> value
        self.broker_configs: dict[str, dict[str, Any]] = {}
        # client-metrics subscriptions: name -> key -> value (lists as lists)
        self.client_metrics: dict[str, dict[str, Any]] = {}
        self.listeners: list[Listener] = []
        self._lock = threading.Lock()
        # cluster mode: changes are applied by the Raft quorum, on every node, in log order,
        # through :meth:`apply`; the journal is the state and nothing is written to metadata.json
        self.persist = True

    # -- persistence -----------------------------------------------------------------------
    def load(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            # valid JSON of the wrong shape (hand edits, another program) is damage too
            try:
                doc = json.loads(self.path.read_text())
                cluster_id = str(doc.get("cluster_id", ""))
                streams = [StreamInfo(**s) for s in doc.get("streams", [])]
                topics = [TopicInfo(**t) for t in doc.get("topics", [])]
                by_id = {t.id_bytes: t for t in topics}
                scram = _scram_from(doc)
                acls = _acls_from(doc)
                quotas = _quotas_from(doc)
                broker_configs = _broker_configs_from(doc)
                client_metrics = _client_metrics_from(doc)
            except (OSError, ValueError, TypeError, AttributeError, KeyError) as exc:
                raise StoreError(
                    f"cannot read {self.path}: {exc}; restore it from a backup or move the data "
                    "dir away to start empty"
                ) from None
            self.cluster_id = cluster_id
            self.streams.update((st.name, st) for st in streams)
            self.topics.update((ti.name, ti) for ti in topics)
            self.topics_by_id.update(by_id)
            self.scram = scram
            self.acls = acls
            self.quotas = quotas
            self.broker_configs = broker_configs
            self.client_metrics = client_metrics
        if not self.cluster_id:
            self.cluster_id = self.broker.str("cluster.id") or new_cluster_id()
            self._persist()

    def snapshot(self) -> dict[str, Any]:
        """The whole state as plain data (the metadata.json document; the quorum's snapshots)."""
        return {
            "version": 1,
            "cluster_id": self.cluster_id,
            "streams": [asdict(s) for s in self.streams.values()],
            "topics": [asdict(t) for t in self.topics.values()],
            "scram": {u: dict(m) for u, m in sorted(self.scram.items())},
            "acls": [b.to_json() for b in self.acls],
            "quotas": [
                {"entity": [list(c) for c in e], "values": dict(v)}
                for e, v in sorted(self.quotas.items(), key=str)
            ],
            "broker_configs": {r: dict(c) for r, c in sorted(self.broker_configs.items())},
            "client_metrics": {n: dict(c) for n, c in sorted(self.client_metrics.items())},
        }

    def restore(self, doc: dict[str, Any]) -> None:
        """Replace the whole state with a snapshot's (a lagging cluster member catching up)."""
        streams = [StreamInfo(**st) for st in doc.get("streams", [])]
        topics = [TopicInfo(**t) for t in doc.get("topics", [])]
        scram = _scram_from(doc)
        acls = _acls_from(doc)
        quotas = _quotas_from(doc)
        broker_configs = _broker_configs_from(doc)
        client_metrics = _client_metrics_from(doc)
        with self._lock:
            self.cluster_id = str(doc.get("cluster_id", ""))
            self.streams = {st.name: st for st in streams}
            self.topics = {t.name: t for t in topics}
            self.topics_by_id = {t.id_bytes: t for t in topics}
            self.scram = scram
            self.acls = acls
            self.quotas = quotas
            self.broker_configs = broker_configs
            self.client_metrics = client_metrics
            self._persist()
        self._notify("restored", "")

    def bootstrap_credentials(self) -> dict[str, dict[str, dict[str, Any]]]:
        """SCRAM credentials ``sftraffic users add --data-dir`` wrote into metadata.json before a
        cluster broker's first start (a cluster keeps its metadata in the quorum, not there)."""
        try:
            doc = json.loads(self.path.read_text())
            return _scram_from(doc)
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            raise StoreError(f"cannot read {self.path}: {exc}") from None

    def forget_bootstrap_credentials(self) -> None:
        """Drop them from metadata.json once the quorum has them (they are proposed once)."""
        doc = json.loads(self.path.read_text())
        doc.pop("scram", None)
        write_durably(self.path, json.dumps(doc, indent=1, sort_keys=True).encode())

    def _persist(self) -> None:
        if not self.persist:
            return
        write_durably(self.path, json.dumps(self.snapshot(), indent=1, sort_keys=True).encode())

    def _notify(self, event: str, name: str) -> None:
        for fn in list(self.listeners):
            fn(event, name)

    # -- queries ---------------------------------------------------------------------------
    def stream_of(self, topic_name: str) -> StreamInfo | None:
        head, dot, _ = topic_name.partition(".")
        if not dot:
            return None
        return self.streams.get(head)

    def topic(self, name: str) -> TopicInfo:
        t = self.topics.get(name)
        if t is None:
            raise UnknownTopicOrPartition(f"topic {name!r} does not exist")
        return t

    def topic_config_values(self, t: TopicInfo) -> dict[str, tuple[Any, str]]:
        stream = self.streams.get(t.stream) if t.stream else None
        return resolve(t.configs, stream.configs if stream else {}, self.broker)

    def credential(self, user: str, mechanism: str) -> ScramCredential | None:
        """The user's SCRAM credential for ``mechanism`` (None: no such user or mechanism)."""
        doc = self.scram.get(user, {}).get(mechanism)
        return None if doc is None else ScramCredential.from_json(mechanism, doc)

    def stream_default(self, stream: StreamInfo | None, name: str) -> int:
        """An int key for a new topic (num.partitions, default.replication.factor): the
        stream's value (validated when the stream was created), else the broker's."""
        if stream is not None and name in stream.configs:
            value: int = stream.configs[name]
            return value
        return self.broker.int(name)

    # -- plans: check a command against the current state, without side effects -------------
    def plan_create_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, Any] | None = None,
        assignments: list[list[int]] | None = None,
        *,
        brokers: list[int] | None = None,
        validate_only: bool = False,
        internal: bool = False,
    ) -> Change[TopicInfo]:
        validate_topic_name(name)
        if name in self.topics:
            raise TopicAlreadyExists(f"topic {name!r} already exists")
        if name.startswith("__") and not internal and name in INTERNAL_TOPICS:
            raise PolicyViolation(f"{name} is an internal topic")
        collide = name.replace(".", "_")
        for other in self.topics:
            if other != name and other.replace(".", "_") == collide:
                raise InvalidTopic(
                    f"topic {name!r} collides with {other!r} ('.' and '_' are the same in metrics)"
                )
        stream = self.stream_of(name)
        overrides = cfg.validate(dict(configs or {}), cfg.TOPIC, f"topic {name}")
        brokers = brokers or [self.broker.node_id]
        max_parts = self.broker.int("max.partitions.per.topic")
        if assignments:
            if num_partitions not in (-1, len(assignments)) or replication_factor != -1:
                raise InvalidRequest("give either assignments or partitions/replication factor")
            for a in assignments:
                if not a or len(set(a)) != len(a) or any(b not in brokers for b in a):
                    raise InvalidRequest(f"invalid replica assignment {a} (brokers: {brokers})")
            if len({len(a) for a in assignments}) != 1:
                raise InvalidReplicationFactor("all partitions need the same replica count")
            assign = [list(a) for a in assignments]
        else:
            n = num_partitions if num_partitions != -1 else self.stream_default(stream, "num.partitions")
            rf = (
                replication_factor
                if replication_factor != -1
                else self.stream_default(stream, "default.replication.factor")
            )
            if n < 1 or n > max_parts:
                raise InvalidPartitions(f"number of partitions must be between 1 and {max_parts}, got {n}")
            if rf < 1 or rf > len(brokers):
                raise InvalidReplicationFactor(
                    f"replication factor {rf} is larger than the {len(brokers)} available broker(s)"
                    if rf > len(brokers)
                    else f"replication factor must be >= 1, got {rf}"
                )
            assign = [[brokers[(p + r) % len(brokers)] for r in range(rf)] for p in range(n)]
        if len(assign) > max_parts:
            raise InvalidPartitions(f"at most {max_parts} partitions per topic")
        t = TopicInfo(
            name=name,
            topic_id=uuid.uuid4().hex,
            assignments=assign,
            configs=overrides,
            stream=stream.name if stream else None,
            created_ms=self.clock.wall_ms(),
            internal=internal,
        )
        if validate_only:
            return Change(None, {}, t)
        return Change("create_topic", asdict(t), t)

    def plan_delete_topic(self, name: str) -> Change[TopicInfo]:
        t = self.topic(name)
        return Change("delete_topic", {"name": name, "topic_id": t.topic_id}, t)

    def plan_create_partitions(
        self,
        name: str,
        count: int,
        assignments: list[list[int]] | None,
        brokers: list[int],
        validate_only: bool = False,
    ) -> Change[TopicInfo]:
        t = self.topic(name)
        max_parts = self.broker.int("max.partitions.per.topic")
        if count <= t.partitions:
            raise InvalidPartitions(f"topic {name} already has {t.partitions} partitions; it can only grow")
        if count > max_parts:
            raise InvalidPartitions(f"at most {max_parts} partitions per topic")
        rf = t.replication_factor
        for a in assignments or []:
            if not a or len(set(a)) != len(a) or any(b not in brokers for b in a):
                raise InvalidReplicaAssignment(f"invalid replica assignment {a} (brokers: {brokers})")
            if len(a) != rf:
                raise InvalidReplicationFactor(
                    f"assignment {a} has {len(a)} replicas; topic {name} has replication factor {rf}"
                )
        if not assignments and rf > len(brokers):
            raise InvalidReplicationFactor(
                f"replication factor {rf} is larger than the {len(brokers)} available broker(s)"
            )
        new = assignments or [
            [brokers[(p + r) % len(brokers)] for r in range(rf)] for p in range(t.partitions, count)
        ]
        if len(new) != count - t.partitions:
            raise InvalidReplicaAssignment(
                f"{count - t.partitions} partition(s) added but {len(new)} assignment(s) given"
            )
        if validate_only:
            return Change(None, {}, t)
        return Change(
            "create_partitions",
            {"name": name, "topic_id": t.topic_id, "from": t.partitions, "new": [list(a) for a in new]},
            t,
        )

    def plan_alter_topic(
        self,
        name: str,
        set_: Mapping[str, Any],
        delete: list[str] | None = None,
        replace: bool = False,
        validate_only: bool = False,
    ) -> Change[TopicInfo]:
        t = self.topic(name)
        parsed = cfg.validate(dict(set_), cfg.TOPIC, f"topic {name}")
        topic_keys = {k.name for k in cfg.keys(cfg.TOPIC)}
        for k in delete or []:
            if k not in topic_keys:  # a broker synonym (log.retention.ms) is not a topic config
                raise ConfigError(f"unknown topic config {k!r}")
        new = {} if replace else dict(t.configs)
        new.update(parsed)
        for k in delete or []:
            new.pop(k, None)
        if validate_only:
            return Change(None, {}, t)
        return Change("topic_configs", {"name": name, "topic_id": t.topic_id, "configs": new}, t)

    def plan_create_stream(
        self, name: str, configs: Mapping[str, Any], validate_only: bool = False
    ) -> Change[StreamInfo]:
        validate_stream_name(name)
        if name in self.streams:
            raise StreamAlreadyExists(f"stream {name!r} already exists")
        parsed = cfg.validate(dict(configs), cfg.STREAM, f"stream {name}")
        s = StreamInfo(name, parsed, self.clock.wall_ms())
        if validate_only:
            return Change(None, {}, s)
        return Change("create_stream", asdict(s), s)

    def plan_alter_stream(
        self,
        name: str,
        set_: Mapping[str, Any],
        delete: list[str] | None = None,
        validate_only: bool = False,
    ) -> Change[StreamInfo]:
        s = self.streams.get(name)
        if s is None:
            raise UnknownStream(f"stream {name!r} does not exist")
        parsed = cfg.validate(dict(set_), cfg.STREAM, f"stream {name}")
        new = dict(s.configs)
        new.update(parsed)
        for k in delete or []:
            new.pop(k, None)
        if validate_only:
            return Change(None, {}, s)
        return Change("stream_configs", {"name": name, "configs": new}, s)

    def plan_delete_stream(self, name: str) -> Change[StreamInfo]:
        s = self.streams.get(name)
        if s is None:
            raise UnknownStream(f"stream {name!r} does not exist")
        members = [t.name for t in self.topics.values() if t.stream == name]
        if members:
            raise PolicyViolation(
                f"stream {name!r} still has {len(members)} topic(s) ({', '.join(members[:5])}); "
                "delete them first"
            )
        return Change("delete_stream", {"name": name}, s)

    def plan_scram_credentials(
        self, user: str, upsert: list[ScramCredential], delete: list[str]
    ) -> Change[str]:
        """Set and delete one user's SCRAM credentials (AlterUserScramCredentials, ``users``).

        Kafka's checks: a non-empty user name, a mechanism named at most once per user, known
        mechanisms, and a deletion only of a credential that exists (RESOURCE_NOT_FOUND).
        """
        if not user:
            raise UnacceptableCredential("the user name must not be empty")
        named = [c.mechanism for c in upsert] + list(delete)
        if len(set(named)) != len(named):
            raise DuplicateResource(f"user {user!r}: a mechanism is altered twice in one request")
        for m in named:
            hash_of(m)  # UNSUPPORTED_SASL_MECHANISM
        have = self.scram.get(user, {})
        for m in delete:
            if m not in have:
                raise ResourceNotFound(f"user {user!r} has no {m} credential")
        return Change(
            "scram_credentials",
            {"name": user, "set": {c.mechanism: c.to_json() for c in upsert}, "delete": list(delete)},
            user,
        )

    def plan_create_acls(self, bindings: list[AclBinding]) -> Change[list[StoreError | None]]:
        """Create ACLs (CreateAcls): each checked as Kafka does (its error, or None); the valid
        ones not already there are added. Creating an existing ACL succeeds and changes nothing."""
        results: list[StoreError | None] = []
        new: dict[AclBinding, None] = {}
        for b in bindings:
            try:
                check_new(b)
            except StoreError as exc:
                results.append(exc)
                continue
            results.append(None)
            if b not in self.acls:
                new[b] = None
        if not new:
            return Change(None, {}, results)
        return Change("create_acls", {"name": "acls", "add": [b.to_json() for b in new]}, results)

    def plan_delete_acls(
        self, filters: list[AclBindingFilter], may_delete: Callable[[AclBinding], bool] | None = None
    ) -> Change[list[list[AclBinding] | StoreError]]:
        """Delete the ACLs each filter matches now (DeleteAcls): per filter, what it deletes, or
        why the filter is refused. ACLs created meanwhile (in a cluster) are left alone, and so
        are those ``may_delete`` refuses (a stream admin deletes under their streams only)."""
        results: list[list[AclBinding] | StoreError] = []
        gone: dict[AclBinding, None] = {}
        for f in filters:
            try:
                f.check()
            except StoreError as exc:
                results.append(exc)
                continue
            matched = [b for b in self.acls if f.matches(b) and (may_delete is None or may_delete(b))]
            results.append(matched)
            gone.update(dict.fromkeys(matched))
        if not gone:
            return Change(None, {}, results)
        return Change("delete_acls", {"name": "acls", "remove": [b.to_json() for b in gone]}, results)

    def plan_client_quotas(
        self, alterations: list[tuple[client_quotas.Entity, dict[str, float | None]]]
    ) -> Change[None]:
        """Set (a value) and remove (None) client quota keys of some entities
        (AlterClientQuotas), each already checked with :func:`client_quotas.check_value`; an
        entity left without keys is gone. Removing a key that is not set changes nothing."""
        ops = []
        for ent, changes in alterations:
            have = self.quotas.get(ent, {})
            if any(have.get(k) != v for k, v in changes.items()):
                ops.append({"entity": [list(c) for c in ent], "ops": dict(changes)})
        if not ops:
            return Change(None, {}, None)
        return Change("client_quotas", {"name": "quotas", "alter": ops}, None)

    def plan_broker_configs(
        self, resource: str, set_: Mapping[str, Any], delete: list[str], validate_only: bool = False
    ) -> Change[str]:
        """Set and delete dynamic broker configs of one broker (``resource`` its id) or of the
        cluster default (``""``), as IncrementalAlterConfigs on a BROKER resource. Only keys
        declared dynamic may change at run time; deleting a key that is not set changes nothing."""
        if resource and not resource.isdigit():
            raise InvalidRequest(f"broker resource {resource!r} is not a broker id")
        for name in [*set_, *delete]:
            k = cfg.lookup(name)
            if k is None or (cfg.BROKER not in k.scopes and k.broker_name != name):
                raise ConfigError(f"unknown broker config {name!r}")
            if not k.dynamic:
                raise ConfigError(
                    f"{name} cannot be changed at run time: edit the broker's TOML file (or "
                    "SFTRAFFIC_* variables) and restart it"
                )
        where = f"broker {resource or 'default'}"
        parsed = {name: cfg.key(name).parse(raw, where) for name, raw in set_.items()}
        new = dict(self.broker_configs.get(resource, {}))
        new.update(parsed)
        for name in delete:
            new.pop(name, None)
        if validate_only or new == self.broker_configs.get(resource, {}):
            return Change(None, {}, resource)
        return Change("broker_configs", {"name": resource, "configs": new}, resource)

    def plan_client_metrics(
        self, name: str, set_: Mapping[str, Any], delete: list[str], validate_only: bool = False
    ) -> Change[str]:
        """Set and delete configs of the client-metrics subscription ``name`` (IncrementalAlterConfigs
        on a CLIENT_METRICS resource), validated as Kafka's ClientMetricsConfigs; a subscription
        left without configs is gone."""
        if not name:
            raise InvalidRequest("a client-metrics subscription needs a name")
        known = {k.name for k in cfg.keys(cfg.CLIENT_METRICS)}
        for key in [*set_, *delete]:
            if key not in known:  # Kafka: INVALID_REQUEST (a bad value: INVALID_CONFIG)
                raise InvalidRequest(
                    f"unknown client metrics config {key!r}: known are {', '.join(sorted(known))}"
                )
        parsed = cfg.validate(set_, cfg.CLIENT_METRICS, f"client metrics {name}")
        have = self.client_metrics.get(name, {})
        new = {**have, **parsed}
        for key in delete:
            new.pop(key, None)
        if validate_only or new == have:
            return Change(None, {}, name)
        return Change("client_metrics", {"name": name, "configs": new}, name)

    def dynamic_broker_value(self, node_id: int, name: str) -> tuple[Any, str]:
        """A broker key's value on broker ``node_id`` and where it comes from: its own dynamic
        config ("dynamic_broker"), the cluster default ("dynamic_default"), its file ("broker"),
        or the built-in default ("default")."""
        own = self.broker_configs.get(str(node_id), {})
        if name in own:
            return own[name], "dynamic_broker"
        default = self.broker_configs.get("", {})
        if name in default:
            return default[name], "dynamic_default"
        return self.broker.value(name), "broker" if name in self.broker.values else "default"

    # -- apply: the same on every node ---------------------------------------------------------
    def commit_here(self, change: Change[T]) -> T:
        """Apply a planned change on this node at once (a single node, tools and tests)."""
        if change.op is not None:
            problem = self.apply(change.op, change.arg)
            if problem is not None:  # planned just before on this thread: only a bug gets here
                raise problem
            name = str(change.arg["name"])
            if change.op == "create_topic":
                return self.topics.get(name, change.result)  # type: ignore[return-value]
            if change.op == "create_stream":
                return self.streams.get(name, change.result)  # type: ignore[return-value]
        return change.result

    # one-step forms of the plans above, for a single node (plan, then apply here)
    def create_topic(self, *args: Any, **kwargs: Any) -> TopicInfo:
        return self.commit_here(self.plan_create_topic(*args, **kwargs))

    def delete_topic(self, name: str) -> TopicInfo:
        return self.commit_here(self.plan_delete_topic(name))

    def create_partitions(self, *args: Any, **kwargs: Any) -> TopicInfo:
        return self.commit_here(self.plan_create_partitions(*args, **kwargs))

    def alter_topic(self, *args: Any, **kwargs: Any) -> TopicInfo:
        return self.commit_here(self.plan_alter_topic(*args, **kwargs))

    def create_stream(self, *args: Any, **kwargs: Any) -> StreamInfo:
        return self.commit_here(self.plan_create_stream(*args, **kwargs))

    def alter_stream(self, *args: Any, **kwargs: Any) -> StreamInfo:
        return self.commit_here(self.plan_alter_stream(*args, **kwargs))

    def delete_stream(self, name: str) -> StreamInfo:
        return self.commit_here(self.plan_delete_stream(name))

    def scram_credentials(self, user: str, upsert: list[ScramCredential], delete: list[str]) -> str:
        return self.commit_here(self.plan_scram_credentials(user, upsert, delete))

    def create_acls(self, bindings: list[AclBinding]) -> list[StoreError | None]:
        return self.commit_here(self.plan_create_acls(bindings))

    def delete_acls(self, filters: list[AclBindingFilter]) -> list[list[AclBinding] | StoreError]:
        return self.commit_here(self.plan_delete_acls(filters))

    def client_quotas(self, alterations: list[tuple[client_quotas.Entity, dict[str, float | None]]]) -> None:
        return self.commit_here(self.plan_client_quotas(alterations))

    def apply(self, op: str, arg: dict[str, Any]) -> StoreError | None:
        """Apply one committed change, deterministically; returns why it no longer applies.

        In a cluster a change is checked on the node that proposed it and applied later, on
        every node, in log order: another change may have come first (the topic was created
        by someone else, or deleted), so each change is checked again here.
        """
        name = str(arg["name"])
        with self._lock:
            if op == "create_topic":
                if name in self.topics:
                    if self.topics[name].topic_id == arg["topic_id"]:
                        return None  # the same change again (a retried proposal): done already
                    return TopicAlreadyExists(f"topic {name!r} already exists")
                t = TopicInfo(**arg)
                self.topics[name] = t
                self.topics_by_id[t.id_bytes] = t
                event = "topic_created"
            elif op in ("delete_topic", "create_partitions", "topic_configs"):
                t_or_none = self.topics.get(name)
                if t_or_none is None or t_or_none.topic_id != arg["topic_id"]:
                    return UnknownTopicOrPartition(f"topic {name!r} does not exist")
                t = t_or_none
                if op == "delete_topic":
                    del self.topics[name]
                    self.topics_by_id.pop(t.id_bytes, None)
                    event = "topic_deleted"
                elif op == "create_partitions":
                    if t.partitions != arg["from"]:
                        return InvalidPartitions(f"topic {name!r} now has {t.partitions} partitions")
                    t.assignments = t.assignments + [list(a) for a in arg["new"]]
                    event = "partitions_created"
                else:
                    t.configs = dict(arg["configs"])
                    event = "topic_altered"
            elif op == "create_stream":
                if name in self.streams:
                    return StreamAlreadyExists(f"stream {name!r} already exists")
                self.streams[name] = StreamInfo(**arg)
                # topics already named <stream>.* join the stream
                for other in self.topics.values():
                    if other.stream is None and other.name.startswith(name + "."):
                        other.stream = name
                event = "stream_changed"
            elif op in ("stream_configs", "delete_stream"):
                s = self.streams.get(name)
                if s is None:
                    return UnknownStream(f"stream {name!r} does not exist")
                if op == "delete_stream":
                    if any(t.stream == name for t in self.topics.values()):
                        return PolicyViolation(f"stream {name!r} still has topics; delete them first")
                    del self.streams[name]
                else:
                    s.configs = dict(arg["configs"])
                event = "stream_changed"
            elif op in _SECURITY_AND_CONFIG_OPS:
                event = self._apply_security(op, arg)
            else:
                return InvalidRequest(f"unknown metadata change {op!r}")
            self._persist()
        self._notify(event, name)
        return None

    def _apply_security(self, op: str, arg: dict[str, Any]) -> str:
        """SCRAM credentials, ACLs, client quotas, dynamic broker configs and client-metrics
        subscriptions; the event to notify."""
        if op == "client_metrics":
            if arg["configs"]:
                self.client_metrics[str(arg["name"])] = dict(arg["configs"])
            else:
                self.client_metrics.pop(str(arg["name"]), None)
            return "client_metrics_changed"
        if op == "broker_configs":
            if arg["configs"]:
                self.broker_configs[str(arg["name"])] = dict(arg["configs"])
            else:
                self.broker_configs.pop(str(arg["name"]), None)
            return "broker_configs_changed"
        if op == "scram_credentials":
            self._apply_scram(str(arg["name"]), arg["set"], arg["delete"])
            return "scram_changed"
        if op == "client_quotas":
            self._apply_quotas(arg["alter"])
            return "quotas_changed"
        self._apply_acls(arg.get("add", []), arg.get("remove", []))
        return "acls_changed"

    def _apply_scram(self, user: str, set_: dict[str, Any], delete: list[str]) -> None:
        creds = dict(self.scram.get(user, {}))
        creds.update(set_)
        for m in delete:
            creds.pop(m, None)
        if creds:
            self.scram[user] = creds
        else:
            self.scram.pop(user, None)

    def _apply_acls(self, add: list[Any], remove: list[Any]) -> None:
        # adding an ACL that is there already, or removing one that is gone, changes nothing
        self.acls.update(dict.fromkeys(AclBinding.from_json(b) for b in add))
        for doc in remove:
            self.acls.pop(AclBinding.from_json(doc), None)

    def _apply_quotas(self, alter: list[dict[str, Any]]) -> None:
        for a in alter:
            ent = _entity_from(a["entity"])
            values = dict(self.quotas.get(ent, {}))
            for key, value in a["ops"].items():
                if value is None:
                    values.pop(key, None)
                else:
                    values[key] = float(value)
            if values:
                self.quotas[ent] = values
            else:
                self.quotas.pop(ent, None)

    def set_replicas(self, name: str, index: int, replicas: list[int]) -> None:
        """Set one partition's replica list: a reassignment's step, applied by the quorum in log
        order on every node (it checked the topic and partition exist)."""
        with self._lock:
            t = self.topics[name]
            assignments = [list(a) for a in t.assignments]
            assignments[index] = list(replicas)
            t.assignments = assignments
            self._persist()
        self._notify("partition_reassigned", name)

    def stream_topics(self, name: str) -> list[str]:
        return sorted(t.name for t in self.topics.values() if t.stream == name)


_SECURITY_AND_CONFIG_OPS = frozenset(
    ("scram_credentials", "create_acls", "delete_acls", "client_quotas", "broker_configs", "client_metrics")
)


def _scram_from(doc: dict[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    scram = doc.get("scram", {})
    if not isinstance(scram, dict):
        raise ValueError("scram is not an object")
    return {str(u): {str(m): dict(c) for m, c in ms.items()} for u, ms in scram.items()}


def _acls_from(doc: dict[str, Any]) -> dict[AclBinding, None]:
    return dict.fromkeys(AclBinding.from_json(b) for b in doc.get("acls", []))


def _entity_from(doc: list[Any]) -> client_quotas.Entity:
    return tuple(sorted((str(t), None if n is None else str(n)) for t, n in doc))


def _quotas_from(doc: dict[str, Any]) -> dict[client_quotas.Entity, dict[str, float]]:
    return {
        _entity_from(q["entity"]): {str(k): float(v) for k, v in q["values"].items()}
        for q in doc.get("quotas", [])
    }


def _broker_configs_from(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    configs = doc.get("broker_configs", {})
    if not isinstance(configs, dict):
        raise ValueError("broker_configs is not an object")
    return {str(r): dict(c) for r, c in configs.items()}


def _client_metrics_from(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    subs = doc.get("client_metrics", {})
    if not isinstance(subs, dict):
        raise ValueError("client_metrics is not an object")
    return {str(n): dict(c) for n, c in subs.items()}


def new_cluster_id() -> str:
    """A random cluster id, as Kafka makes them (22 characters of URL-safe base64)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
