"""Fakes of the broker's parts as handlers see them (framework.server.context), for unit tests.

Each fake implements the whole Protocol it stands for, and :func:`services` /
:func:`request_context` return the product's own types, so mypy (this module is in its
``files``) checks that the fakes fit and a handler under test finds every part a broker
gives it. Parts a test gives none of are the ``No*`` fakes: any use fails the test, naming the
part.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from framework import config as cfg
from framework.coordinator.consumer_groups import ConsumerGroupCoordinator
from framework.coordinator.groups import GroupCoordinator
from framework.coordinator.share_groups import ShareGroupCoordinator
from framework.errors import StoreError
from framework.metadata.admin import Proposal
from framework.metadata.cache import Node
from framework.metadata.quorum import PartitionState, QuorumStatus
from framework.metadata.store import StreamInfo, TopicInfo
from framework.protocol.error_codes import ErrorCode
from framework.protocol.frames import RequestHeader
from framework.replication.partition import Partition
from framework.replication.quota import ReplicationQuota
from framework.replication.replica_manager import PartitionLookups
from framework.security import quotas as client_quotas
from framework.security.authorizer import AclBinding, AclBindingFilter
from framework.security.principal import ANONYMOUS, KafkaPrincipal
from framework.security.quotas import ClientQuotas
from framework.security.scram import ScramCredential
from framework.server.authz import Authz
from framework.server.context import (
    BrokerServices,
    Forwarder,
    GroupDirectory,
    NodeDirectory,
    PartitionLookup,
    ProducerIdSource,
    RequestContext,
    SchemaSource,
    TopicAdmin,
    TransactionDirectory,
    TxnChannel,
)

NODE = 1


def _unwired(part: str) -> AssertionError:
    return AssertionError(f"the handler used the broker's {part}, which this test does not give")


class Replicas(PartitionLookups):
    """The replica manager's look-ups (:class:`PartitionLookups`) over given partitions."""

    def __init__(
        self,
        partitions: dict[str, list[Partition | None]] | None = None,
        *,
        node_id: int = NODE,
        log_dir: Path = Path("/nonexistent"),
    ) -> None:
        self.partitions = partitions if partitions is not None else {}
        self.node_id = node_id
        self.log_dir = log_dir
        self.leader_quota = ReplicationQuota("leader")

    @classmethod
    def of(cls, *parts: Partition, node_id: int = NODE, log_dir: Path = Path("/nonexistent")) -> Replicas:
        """The replicas ``parts``, each at its topic and index (no replica of the others)."""
        by_topic: dict[str, list[Partition | None]] = {}
        for p in parts:
            held = by_topic.setdefault(p.topic, [])
            held += [None] * (p.index + 1 - len(held))
            held[p.index] = p
        return cls(by_topic, node_id=node_id, log_dir=log_dir)


class OneNode:
    """The metadata cache of a single broker that knows no topic, stream, user or quota."""

    def __init__(self, node_id: int = NODE) -> None:
        self.node_id = node_id

    @property
    def cluster_id(self) -> str:
        return "test-cluster"

    @property
    def controller_id(self) -> int:
        return self.node_id

    @property
    def topics(self) -> dict[str, TopicInfo]:
        return {}

    @property
    def streams(self) -> dict[str, StreamInfo]:
        return {}

    def nodes(self, listener: str | None = None) -> list[Node]:
        return []

    def is_live(self, node_id: int) -> bool:
        return node_id == self.node_id

    def quorum_status(self) -> QuorumStatus | None:
        return None

    def topic_by_id(self, topic_id: bytes) -> TopicInfo | None:
        return None

    def partition_states(self, t: TopicInfo) -> list[PartitionState]:
        return []

    def topic_config_values(self, t: TopicInfo) -> dict[str, tuple[Any, str]]:
        return {}

    def broker_config_value(self, name: str) -> tuple[Any, str]:
        raise _unwired("dynamic broker configs")

    def stream_topics(self, name: str) -> list[str]:
        return []

    def scram_users(self) -> dict[str, dict[str, int]]:
        return {}

    def client_quotas(self) -> dict[client_quotas.Entity, dict[str, float]]:
        return {}

    def client_metrics(self) -> dict[str, dict[str, Any]]:
        return {}


class NoAdmin:
    """No metadata changes."""

    def create_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, Any] | None = None,
        assignments: list[list[int]] | None = None,
        validate_only: bool = False,
        internal: bool = False,
    ) -> Proposal[TopicInfo]:
        raise _unwired("admin")

    def delete_topic(self, name: str) -> Proposal[TopicInfo]:
        raise _unwired("admin")

    def create_partitions(
        self, name: str, count: int, assignments: list[list[int]] | None, validate_only: bool = False
    ) -> Proposal[TopicInfo]:
        raise _unwired("admin")

    def alter_topic(
        self,
        name: str,
        set_: Mapping[str, Any],
        delete: list[str] | None = None,
        replace: bool = False,
        validate_only: bool = False,
    ) -> Proposal[TopicInfo]:
        raise _unwired("admin")

    def create_stream(
        self, name: str, configs: Mapping[str, Any], validate_only: bool = False
    ) -> Proposal[StreamInfo]:
        raise _unwired("admin")

    def alter_stream(
        self, name: str, set_: Mapping[str, Any], delete: list[str] | None = None, validate_only: bool = False
    ) -> Proposal[StreamInfo]:
        raise _unwired("admin")

    def delete_stream(self, name: str) -> Proposal[StreamInfo]:
        raise _unwired("admin")

    def elect_leader(self, topic: str, index: int, election_type: int) -> ErrorCode | asyncio.Future[Any]:
        raise _unwired("admin")

    def alter_reassignment(
        self, topic: str, index: int, target: list[int] | None, allow_rf_change: bool = True
    ) -> tuple[ErrorCode, str | None] | asyncio.Future[Any]:
        raise _unwired("admin")

    def reassignments(self) -> dict[tuple[str, int], tuple[list[int], list[int], list[int]]]:
        raise _unwired("admin")

    def unregister_broker(self, broker_id: int) -> tuple[ErrorCode, str | None] | asyncio.Future[Any]:
        raise _unwired("admin")

    def alter_broker_configs(
        self, resource: str, set_: Mapping[str, Any], delete: list[str], validate_only: bool = False
    ) -> Proposal[str]:
        raise _unwired("admin")

    def alter_scram_credentials(
        self, user: str, upsert: list[ScramCredential], delete: list[str]
    ) -> Proposal[str]:
        raise _unwired("admin")

    def create_acls(self, bindings: list[AclBinding]) -> Proposal[list[StoreError | None]]:
        raise _unwired("admin")

    def alter_client_quotas(
        self, alterations: list[tuple[client_quotas.Entity, dict[str, float | None]]]
    ) -> Proposal[None]:
        raise _unwired("admin")

    def alter_client_metrics(
        self, name: str, set_: Mapping[str, Any], delete: list[str], validate_only: bool = False
    ) -> Proposal[str]:
        raise _unwired("admin")

    def delete_acls(
        self, filters: list[AclBindingFilter], may_delete: Callable[[AclBinding], bool] | None = None
    ) -> Proposal[list[list[AclBinding] | StoreError]]:
        raise _unwired("admin")


class NoGroups:
    """No group coordinator."""

    @property
    def coordinator(self) -> GroupCoordinator:
        raise _unwired("group coordinator")

    @property
    def consumer(self) -> ConsumerGroupCoordinator:
        raise _unwired("group coordinator")

    @property
    def share(self) -> ShareGroupCoordinator:
        raise _unwired("group coordinator")

    def coordinator_node(self, group_id: str, listener: str | None = None) -> Node | None:
        raise _unwired("group coordinator")

    def coordinator_error(self, group_id: str) -> ErrorCode:
        raise _unwired("group coordinator")

    def check_coordinator(self, group_id: str) -> None:
        raise _unwired("group coordinator")


class NoProducerIds:
    """No producer-id allocator."""

    def next_id(self) -> int:
        raise _unwired("producer-id allocator")


def services(
    *,
    partitions: PartitionLookup | None = None,
    cluster: NodeDirectory | None = None,
    admin: TopicAdmin | None = None,
    groups: GroupDirectory | None = None,
    producer_ids: ProducerIdSource | None = None,
    config: cfg.BrokerConfig | None = None,
    authz: Authz | None = None,
    quotas: ClientQuotas | None = None,
    transactions: TransactionDirectory | None = None,
    txn_channel: TxnChannel | None = None,
    forwarder: Forwarder | None = None,
    schemas: SchemaSource | None = None,
) -> BrokerServices:
    """What a broker gives its handlers: the parts given, a single node's empty ones (or a
    ``No*`` fake) for the rest, and no authorizer or quotas unless given."""
    return BrokerServices(
        config=config or cfg.BrokerConfig.load(overrides={"node.id": NODE}, environ={}),
        partitions=partitions or Replicas(),
        cluster=cluster or OneNode(),
        admin=admin or NoAdmin(),
        groups=groups or NoGroups(),
        producer_ids=producer_ids or NoProducerIds(),
        stopping=asyncio.Event(),
        authz=authz,
        quotas=quotas,
        transactions=transactions,
        txn_channel=txn_channel,
        forwarder=forwarder,
        schemas=schemas,
    )


def request_context(
    svc: BrokerServices,
    api_key: int,
    version: int,
    *,
    principal: KafkaPrincipal = ANONYMOUS,
    client_id: str = "test",
) -> RequestContext:
    """The context of one request from a test client."""
    return RequestContext(
        svc, RequestHeader(api_key, version, 1, client_id), "127.0.0.1:1", principal=principal
    )


__all__ = [
    "NODE",
    "NoAdmin",
    "NoGroups",
    "NoProducerIds",
    "OneNode",
    "Replicas",
    "request_context",
    "services",
]
