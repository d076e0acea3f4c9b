"""What a handler sees: the request header, the peer, and the broker's parts as narrow interfaces.

Handlers never see the broker. Each part is reached through a Protocol naming only what
handlers use of it, so a handler test can hand in a small fake (see
tests/unit/server/handlers/) and the parts can change behind it:

* ``partitions``: the replica manager (partition look-ups that raise the StoreError whose
  Kafka code answers a request: unknown topic or partition, not the leader);
* ``cluster``: the metadata cache (brokers, controller, topics, partition states, configs);
* ``admin``: metadata changes, each returning a :class:`Proposal` to await;
* ``groups``: the group service (which broker coordinates a group; the coordinator itself);
* ``producer_ids``: the producer-id allocator;
* ``transactions``: the transaction service (which broker coordinates a transactional id; the
  coordinator itself) and ``txn_channel``, how this broker asks a remote coordinator (KIP-890
  verification) and writes markers to remote leaders (None: not wired, as in handler tests);
* ``forwarder``: requests passed on to another broker (DescribeQuorum to the Raft leader);
* ``schemas``: the schema ids the registry's ``_schemas`` topic holds, for topics with
  ``confluent.key/value.schema.validation`` (None: not wired; such topics then refuse);
* ``authz``: the authorizer and its per-connection decision caches (None when off), asked
  through :mod:`framework.server.authz`.

A handler answers with its API's response, or :data:`NO_RESPONSE` where Kafka sends none
(Produce with acks=0); the signature is in :mod:`framework.server.router`.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Protocol, TypeVar

from framework import config as cfg
from framework.clock import SYSTEM, Clock
from framework.coordinator.consumer_groups import ConsumerGroupCoordinator
from framework.coordinator.groups import GroupCoordinator
from framework.coordinator.share_groups import ShareGroupCoordinator, SharePartitionManager
from framework.coordinator.transactions import TP, TransactionCoordinator
from framework.errors import StoreError
from framework.metadata.admin import Proposal
from framework.metadata.cache import Node
from framework.metadata.quorum import PartitionState, QuorumStatus
from framework.metadata.store import StreamInfo, TopicInfo
from framework.protocol.error_codes import ErrorCode
from framework.protocol.frames import RequestHeader
from framework.protocol.records import SchemaCheck
from framework.replication.partition import Partition
from framework.replication.quota import ReplicationQuota
from framework.security import quotas as client_quotas
from framework.security.authorizer import AclBinding, AclBindingFilter
from framework.security.principal import ANONYMOUS, KafkaPrincipal
from framework.security.quotas import ClientQuotas
from framework.security.sasl import SaslServerSession
from framework.security.scram import ScramCredential
from framework.server.authz import Authz
from framework.server.client_metrics import ClientMetrics

T = TypeVar("T")


class NoResponse(enum.Enum):
    """The answer of a request Kafka does not answer (Produce with acks=0): nothing is sent."""

    NO_RESPONSE = "no response"


NO_RESPONSE: Final = NoResponse.NO_RESPONSE


class PartitionLookup(Protocol):
    @property
    def leader_quota(self) -> ReplicationQuota:
        """The leader side's replication throttle (Fetch)."""

    def topic_partitions(self, topic: str) -> list[Partition | None] | None: ...

    def replica(self, topic: str, index: int) -> Partition: ...

    def leader(self, topic: str, index: int) -> Partition: ...

    def all_partitions(self) -> list[Partition]: ...

    @property
    def log_dir(self) -> Path: ...


class NodeDirectory(Protocol):
    @property
    def node_id(self) -> int: ...

    @property
    def cluster_id(self) -> str: ...

    @property
    def controller_id(self) -> int: ...

    @property
    def topics(self) -> dict[str, TopicInfo]: ...

    @property
    def streams(self) -> dict[str, StreamInfo]: ...

    def nodes(self, listener: str | None = None) -> list[Node]: ...

    def is_live(self, node_id: int) -> bool: ...

    def quorum_status(self) -> QuorumStatus | None: ...

    def topic_by_id(self, topic_id: bytes) -> TopicInfo | None: ...

    def partition_states(self, t: TopicInfo) -> list[PartitionState]: ...

    def topic_config_values(self, t: TopicInfo) -> dict[str, tuple[Any, str]]: ...

    def broker_config_value(self, name: str) -> tuple[Any, str]: ...

    def stream_topics(self, name: str) -> list[str]: ...

    def scram_users(self) -> dict[str, dict[str, int]]: ...

    def client_quotas(self) -> dict[client_quotas.Entity, dict[str, float]]: ...

    def client_metrics(self) -> dict[str, dict[str, Any]]: ...


class TopicAdmin(Protocol):
    def create_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, Any] | None = None,
        assignments: list[list[int]] | None = None,
        validate_only: bool = False,
        internal: bool = False,
    ) -> Proposal[TopicInfo]: ...

    def delete_topic(self, name: str) -> Proposal[TopicInfo]: ...

    def create_partitions(
        self, name: str, count: int, assignments: list[list[int]] | None, validate_only: bool = False
    ) -> Proposal[TopicInfo]: ...

    def alter_topic(
        self,
        name: str,
        set_: Mapping[str, Any],
        delete: list[str] | None = None,
        replace: bool = False,
        validate_only: bool = False,
    ) -> Proposal[TopicInfo]: ...

    def create_stream(
        self, name: str, configs: Mapping[str, Any], validate_only: bool = False
    ) -> Proposal[StreamInfo]: ...

    def alter_stream(
        self, name: str, set_: Mapping[str, Any], delete: list[str] | None = None, validate_only: bool = False
    ) -> Proposal[StreamInfo]: ...

    def delete_stream(self, name: str) -> Proposal[StreamInfo]: ...

    def elect_leader(self, topic: str, index: int, election_type: int) -> ErrorCode | asyncio.Future[Any]: ...

    def alter_reassignment(
        self, topic: str, index: int, target: list[int] | None, allow_rf_change: bool = True
    ) -> tuple[ErrorCode, str | None] | asyncio.Future[Any]: ...

    def reassignments(self) -> dict[tuple[str, int], tuple[list[int], list[int], list[int]]]: ...

    def unregister_broker(self, broker_id: int) -> tuple[ErrorCode, str | None] | asyncio.Future[Any]: ...

    def alter_broker_configs(
        self, resource: str, set_: Mapping[str, Any], delete: list[str], validate_only: bool = False
    ) -> Proposal[str]: ...

    def alter_scram_credentials(
        self, user: str, upsert: list[ScramCredential], delete: list[str]
    ) -> Proposal[str]: ...

    def alter_client_metrics(
        self, name: str, set_: Mapping[str, Any], delete: list[str], validate_only: bool = False
    ) -> Proposal[str]: ...

    def create_acls(self, bindings: list[AclBinding]) -> Proposal[list[StoreError | None]]: ...

    def alter_client_quotas(
        self, alterations: list[tuple[client_quotas.Entity, dict[str, float | None]]]
    ) -> Proposal[None]: ...

    def delete_acls(
        self, filters: list[AclBindingFilter], may_delete: Callable[[AclBinding], bool] | None = None
    ) -> Proposal[list[list[AclBinding] | StoreError]]: ...


class GroupDirectory(Protocol):
    @property
    def coordinator(self) -> GroupCoordinator: ...

    @property
    def consumer(self) -> ConsumerGroupCoordinator: ...

    @property
    def share(self) -> ShareGroupCoordinator: ...

    def coordinator_node(self, group_id: str, listener: str | None = None) -> Node | None: ...

    def coordinator_error(self, group_id: str) -> ErrorCode: ...

    def check_coordinator(self, group_id: str) -> None: ...


class ProducerIdSource(Protocol):
    def next_id(self) -> int: ...


class TransactionDirectory(Protocol):
    @property
    def coordinator(self) -> TransactionCoordinator: ...

    def coordinator_node(self, transactional_id: str, listener: str | None = None) -> Node | None: ...

    def coordinator_error(self, transactional_id: str) -> ErrorCode: ...


class Forwarder(Protocol):
    def forward(
        self, node_id: int, req: Any, version: int, response_cls: type[T], timeout: float
    ) -> Awaitable[T]: ...


class TxnChannel(Protocol):
    def verify(
        self, node_id: int, transactional_id: str, producer_id: int, epoch: int, tps: list[TP]
    ) -> Awaitable[dict[TP, int]]: ...


class SchemaSource(Protocol):
    def check(self, topic: str, key: bool, value: bool) -> SchemaCheck: ...

    def refresh(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class BrokerServices:
    """The parts handlers may use, built once by the broker."""

    config: cfg.BrokerConfig
    partitions: PartitionLookup
    cluster: NodeDirectory
    admin: TopicAdmin
    groups: GroupDirectory
    producer_ids: ProducerIdSource
    stopping: asyncio.Event
    authz: Authz | None = None  # the authorizer (authorizer.class.name), None: everything allowed
    quotas: ClientQuotas | None = None  # client quotas (the listener records and throttles)
    transactions: TransactionDirectory | None = None  # the transaction coordinator
    txn_channel: TxnChannel | None = None  # requests to other brokers' coordinators / leaders
    forwarder: Forwarder | None = None  # requests only another broker can answer (DescribeQuorum)
    schemas: SchemaSource | None = None  # schema ids of the registry's _schemas topic
    clock: Clock = SYSTEM  # the broker's: what handlers stamp (LogAppendTime, markers)
    client_metrics: ClientMetrics | None = None  # KIP-714 subscriptions and pushed metrics
    shares: SharePartitionManager | None = None  # KIP-932: the share partitions led here


@dataclass(slots=True)
class ClientSoftware:
    """The client software name and version a connection's ApiVersions (v3+, KIP-511) named;
    "unknown" until then, as Kafka's ClientInformation. One per connection, shared by its requests."""

    name: str = "unknown"
    version: str = "unknown"


@dataclass(slots=True)
class RequestContext:
    services: BrokerServices
    header: RequestHeader
    peer: str
    # who the connection authenticated as, and on which named listener
    principal: KafkaPrincipal = ANONYMOUS
    listener: str = "PLAINTEXT"
    # the connection's SASL state on a SASL listener (SaslHandshake/SaslAuthenticate), else None
    sasl: SaslServerSession | None = None
    # what the connection's ApiVersions said the client is (client-metrics subscriptions match it)
    software: ClientSoftware = field(default_factory=ClientSoftware)

    @property
    def version(self) -> int:
        return self.header.api_version

    @property
    def config(self) -> cfg.BrokerConfig:
        return self.services.config

    @property
    def partitions(self) -> PartitionLookup:
        return self.services.partitions

    @property
    def cluster(self) -> NodeDirectory:
        return self.services.cluster

    @property
    def admin(self) -> TopicAdmin:
        return self.services.admin

    @property
    def groups(self) -> GroupDirectory:
        return self.services.groups

    @property
    def node_id(self) -> int:
        return self.services.cluster.node_id
