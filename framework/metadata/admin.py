"""Metadata changes asked for by clients (create/delete/alter topics and streams, ACLs).

Each command is planned against this broker's view (:class:`MetadataStore` ``plan_*``: checks
only, no side effects), then committed: applied here at once on a single node, or proposed to
the metadata quorum in a cluster, where it takes effect on every broker once committed. The
caller gets a :class:`Proposal`: the planned outcome, and a future that tells whether the
change was applied (``None`` when it already was, or when there was nothing to apply).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from framework import config as cfg
from framework.errors import StoreError
from framework.metadata.cache import MetadataCache
from framework.metadata.store import Change, MetadataStore, StreamInfo, TopicInfo
from framework.protocol.error_codes import ErrorCode
from framework.security import quotas as client_quotas
from framework.security.authorizer import AclBinding, AclBindingFilter
from framework.security.scram import ScramCredential

T = TypeVar("T")

# resolves to None once applied on this broker, or to the StoreError that kept it from applying
Committed = asyncio.Future[StoreError | None]


@dataclass(frozen=True, slots=True)
class Proposal(Generic[T]):
    result: T
    committed: Committed | None = None  # None: applied already (or nothing to apply)

    def detach(self) -> None:
        """Nobody waits for the outcome (e.g. a topic auto-created by Metadata)."""
        if self.committed is not None:
            self.committed.add_done_callback(lambda f: f.cancelled() or f.exception())


PREFERRED, UNCLEAN = 0, 1  # ElectLeaders election types
ANY_EPOCH = -1  # an election asked for by a client applies to the partition as it then is


class TopicDeletionDisabled(StoreError):
    code = ErrorCode.TOPIC_DELETION_DISABLED


class MetadataAdmin:
    def __init__(self, store: MetadataStore, cache: MetadataCache, config: cfg.BrokerConfig) -> None:
        self.store = store
        self.cache = cache
        self.config = config

    def _commit(self, change: Change[T]) -> Proposal[T]:
        quorum = self.cache.quorum
        if quorum is None or change.op is None:
            return Proposal(self.store.commit_here(change))
        return Proposal(change.result, quorum.submit_metadata(change.op, change.arg))

    # -- topics ----------------------------------------------------------------------------
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
        return self._commit(
            self.store.plan_create_topic(
                name,
                num_partitions,
                replication_factor,
                configs,
                assignments,
                brokers=self.cache.broker_ids(),
                validate_only=validate_only,
                internal=internal,
            )
        )

    def delete_topic(self, name: str) -> Proposal[TopicInfo]:
        if not self.config.bool("delete.topic.enable"):
            raise TopicDeletionDisabled("topic deletion is disabled (delete.topic.enable=false)")
        return self._commit(self.store.plan_delete_topic(name))

    def create_partitions(
        self, name: str, count: int, assignments: list[list[int]] | None, validate_only: bool = False
    ) -> Proposal[TopicInfo]:
        return self._commit(
            self.store.plan_create_partitions(
                name, count, assignments, self.cache.broker_ids(), validate_only
            )
        )

    def alter_topic(
        self,
        name: str,
        set_: Mapping[str, Any],
        delete: list[str] | None = None,
        replace: bool = False,
        validate_only: bool = False,
    ) -> Proposal[TopicInfo]:
        return self._commit(self.store.plan_alter_topic(name, set_, delete, replace, validate_only))

    # -- streams ---------------------------------------------------------------------------
    def create_stream(
        self, name: str, configs: Mapping[str, Any], validate_only: bool = False
    ) -> Proposal[StreamInfo]:
        return self._commit(self.store.plan_create_stream(name, configs, validate_only))

    def alter_stream(
        self, name: str, set_: Mapping[str, Any], delete: list[str] | None = None, validate_only: bool = False
    ) -> Proposal[StreamInfo]:
        return self._commit(self.store.plan_alter_stream(name, set_, delete, validate_only))

    def delete_stream(self, name: str) -> Proposal[StreamInfo]:
        return self._commit(self.store.plan_delete_stream(name))

    # -- SCRAM credentials (AlterUserScramCredentials) ------------------------------------------
    def alter_scram_credentials(
        self, user: str, upsert: list[ScramCredential], delete: list[str]
    ) -> Proposal[str]:
        return self._commit(self.store.plan_scram_credentials(user, upsert, delete))

    # -- client quotas (AlterClientQuotas) --------------------------------------------------------
    def alter_client_quotas(
        self, alterations: list[tuple[client_quotas.Entity, dict[str, float | None]]]
    ) -> Proposal[None]:
        return self._commit(self.store.plan_client_quotas(alterations))

    # -- ACLs (CreateAcls, DeleteAcls) -----------------------------------------------------------
    def create_acls(self, bindings: list[AclBinding]) -> Proposal[list[StoreError | None]]:
        return self._commit(self.store.plan_create_acls(bindings))

    def delete_acls(
        self, filters: list[AclBindingFilter], may_delete: Callable[[AclBinding], bool] | None = None
    ) -> Proposal[list[list[AclBinding] | StoreError]]:
        return self._commit(self.store.plan_delete_acls(filters, may_delete))

    # -- dynamic broker configs (IncrementalAlterConfigs on a BROKER resource) --------------------
    def alter_broker_configs(
        self, resource: str, set_: Mapping[str, Any], delete: list[str], validate_only: bool = False
    ) -> Proposal[str]:
        return self._commit(self.store.plan_broker_configs(resource, set_, delete, validate_only))

    # -- client-metrics subscriptions (IncrementalAlterConfigs on a CLIENT_METRICS resource) ------
    def alter_client_metrics(
        self, name: str, set_: Mapping[str, Any], delete: list[str], validate_only: bool = False
    ) -> Proposal[str]:
        return self._commit(self.store.plan_client_metrics(name, set_, delete, validate_only))

    # -- partition reassignments (AlterPartitionReassignments) ---------------------------------
    def unregister_broker(self, broker_id: int) -> tuple[ErrorCode, str | None] | asyncio.Future[Any]:
        """Remove a broker's registration (UnregisterBroker): a future of the quorum's answer
        ((code, message)), checked where it is applied. A single node has nothing to remove."""
        quorum = self.cache.quorum
        if quorum is not None:
            return quorum.propose("unregister_broker", broker_id)
        if broker_id == self.cache.node_id:
            return ErrorCode.INVALID_REQUEST, "a single-node broker cannot unregister itself"
        return ErrorCode.BROKER_ID_NOT_REGISTERED, f"broker {broker_id} is not registered"

    def alter_reassignment(
        self, topic: str, index: int, target: list[int] | None, allow_rf_change: bool = True
    ) -> tuple[ErrorCode, str | None] | asyncio.Future[Any]:
        """Start, change or (``target`` None) cancel a partition's reassignment: an error code
        and message at once, or a future of the quorum's answer ((code, message)), checked where
        it is applied, in log order. A single node holds every replica: the only valid target is
        itself, and nothing is ever in progress."""
        quorum = self.cache.quorum
        if quorum is not None:  # checked in log order (a topic just created may not be here yet)
            return quorum.propose("alter_reassignment", topic, index, target, allow_rf_change)
        t = self.cache.topics.get(topic)
        if t is None or not 0 <= index < t.partitions:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unable to find partition {topic}:{index}"
        if target is None:
            return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None
        if not target or any(b != self.cache.node_id for b in target):
            unknown = next((b for b in target if b != self.cache.node_id), None)
            why = (
                "is empty"
                if unknown is None
                else f"includes broker {unknown}, but no such broker is registered"
            )
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"the manual partition assignment {why}"
        if len(target) > 1:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, (
                f"the manual partition assignment includes the broker {target[0]} more than once"
            )
        return ErrorCode.NONE, None

    def reassignments(self) -> dict[tuple[str, int], tuple[list[int], list[int], list[int]]]:
        """(topic, partition) -> (replicas, adding, removing) of every ongoing reassignment."""
        quorum = self.cache.quorum
        return {} if quorum is None else quorum.reassignments()

    # -- leader elections (ElectLeaders) ------------------------------------------------------
    def elect_leader(self, topic: str, index: int, election_type: int) -> ErrorCode | asyncio.Future[Any]:
        """Elect a partition's preferred replica (or, unclean, any live replica when no in-sync
        one is alive): an error code at once, or a future of the quorum's answer (an error code).

        Whether the election can happen is decided where the change is applied, in log order
        (this broker's view may lag the quorum's by a change or two); a single node leads every
        partition: there is never an election to hold.
        """
        t = self.cache.topics.get(topic)
        if t is None or not 0 <= index < t.partitions:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if election_type not in (PREFERRED, UNCLEAN):
            return ErrorCode.INVALID_REQUEST
        quorum = self.cache.quorum
        if quorum is None:
            return ErrorCode.ELECTION_NOT_NEEDED
        if election_type == PREFERRED:
            candidate = t.assignments[index][0]
        else:
            candidate = next((r for r in t.assignments[index] if quorum.unfenced(r)), -1)
            if candidate == -1:
                return ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
        return quorum.propose("elect_leader", topic, index, ANY_EPOCH, candidate, election_type == UNCLEAN)
