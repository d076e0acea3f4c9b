"""The routing table: API key → the handler that serves it, every API listed here.

Each module of :mod:`framework.server.handlers` serves one API with two functions, the same
for every API:

* ``async def handle(ctx: RequestContext, request: XRequest) -> XResponse``, the answer.
  Produce answers ``ProduceResponse | NoResponse``: :data:`~framework.server.context.NO_RESPONSE`
  when acks=0, where Kafka sends nothing back;
* ``def error_response(request: XRequest, code: int, message: str) -> XResponse``, the answer
  when ``handle`` raised for the request as a whole (:mod:`framework.server.errors` names the
  code).

:func:`routes` pairs them with the API's entry in :data:`~framework.protocol.api.API_TABLE`, and
the versions served: the entry's, unless the table narrows them. ApiVersions advertises exactly
these (:func:`supported_versions`), and a unit test holds table, handlers and ApiVersions equal.

How the listener runs a handler: eagerly. It starts ``handle`` in its own callback and, when the
coroutine returns without suspending (a produce with acks 0 or 1, a fetch with data, metadata),
answers at once, with no Task and no trip through the event loop; a handler that suspends (a
fetch long-poll, acks=all, a group join, a change the metadata quorum must commit) is driven on
from there by a Task. Until its first suspension a handler runs outside any Task, so what it
calls before then must not need one: ``asyncio.timeout``, ``TaskGroup`` (and, from Python 3.12,
``asyncio.wait_for``) do. Wait with ``asyncio.wait(..., timeout=...)``, or start the work as a
Task of its own and await that (as the inter-broker channels do).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Generic, TypeVar

from framework.protocol.api import API_TABLE, ApiEntry
from framework.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from framework.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest
from framework.protocol.messages.alter_client_quotas import AlterClientQuotasRequest
from framework.protocol.messages.alter_configs import AlterConfigsRequest
from framework.protocol.messages.alter_partition_reassignments import AlterPartitionReassignmentsRequest
from framework.protocol.messages.alter_share_group_offsets import AlterShareGroupOffsetsRequest
from framework.protocol.messages.alter_user_scram_credentials import AlterUserScramCredentialsRequest
from framework.protocol.messages.api_versions import ApiVersionsRequest
from framework.protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest
from framework.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from framework.protocol.messages.create_acls import CreateAclsRequest
from framework.protocol.messages.create_partitions import CreatePartitionsRequest
from framework.protocol.messages.create_topics import CreateTopicsRequest
from framework.protocol.messages.delete_acls import DeleteAclsRequest
from framework.protocol.messages.delete_groups import DeleteGroupsRequest
from framework.protocol.messages.delete_records import DeleteRecordsRequest
from framework.protocol.messages.delete_share_group_offsets import DeleteShareGroupOffsetsRequest
from framework.protocol.messages.delete_topics import DeleteTopicsRequest
from framework.protocol.messages.describe_acls import DescribeAclsRequest
from framework.protocol.messages.describe_client_quotas import DescribeClientQuotasRequest
from framework.protocol.messages.describe_cluster import DescribeClusterRequest
from framework.protocol.messages.describe_configs import DescribeConfigsRequest
from framework.protocol.messages.describe_groups import DescribeGroupsRequest
from framework.protocol.messages.describe_log_dirs import DescribeLogDirsRequest
from framework.protocol.messages.describe_producers import DescribeProducersRequest
from framework.protocol.messages.describe_quorum import DescribeQuorumRequest
from framework.protocol.messages.describe_share_group_offsets import DescribeShareGroupOffsetsRequest
from framework.protocol.messages.describe_topic_partitions import DescribeTopicPartitionsRequest
from framework.protocol.messages.describe_transactions import DescribeTransactionsRequest
from framework.protocol.messages.describe_user_scram_credentials import DescribeUserScramCredentialsRequest
from framework.protocol.messages.elect_leaders import ElectLeadersRequest
from framework.protocol.messages.end_txn import EndTxnRequest
from framework.protocol.messages.fetch import FetchRequest
from framework.protocol.messages.find_coordinator import FindCoordinatorRequest
from framework.protocol.messages.get_telemetry_subscriptions import GetTelemetrySubscriptionsRequest
from framework.protocol.messages.heartbeat import HeartbeatRequest
from framework.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from framework.protocol.messages.init_producer_id import InitProducerIdRequest
from framework.protocol.messages.join_group import JoinGroupRequest
from framework.protocol.messages.leave_group import LeaveGroupRequest
from framework.protocol.messages.list_config_resources import ListConfigResourcesRequest
from framework.protocol.messages.list_groups import ListGroupsRequest
from framework.protocol.messages.list_offsets import ListOffsetsRequest
from framework.protocol.messages.list_partition_reassignments import ListPartitionReassignmentsRequest
from framework.protocol.messages.list_transactions import ListTransactionsRequest
from framework.protocol.messages.metadata import MetadataRequest
from framework.protocol.messages.offset_commit import OffsetCommitRequest
from framework.protocol.messages.offset_delete import OffsetDeleteRequest
from framework.protocol.messages.offset_fetch import OffsetFetchRequest
from framework.protocol.messages.offset_for_leader_epoch import OffsetForLeaderEpochRequest
from framework.protocol.messages.produce import ProduceRequest
from framework.protocol.messages.push_telemetry import PushTelemetryRequest
from framework.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from framework.protocol.messages.sasl_handshake import SaslHandshakeRequest
from framework.protocol.messages.share_acknowledge import ShareAcknowledgeRequest
from framework.protocol.messages.share_fetch import ShareFetchRequest
from framework.protocol.messages.share_group_describe import ShareGroupDescribeRequest
from framework.protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest
from framework.protocol.messages.stream_admin import StreamAdminRequest
from framework.protocol.messages.sync_group import SyncGroupRequest
from framework.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest
from framework.protocol.messages.unregister_broker import UnregisterBrokerRequest
from framework.protocol.messages.write_txn_markers import WriteTxnMarkersRequest
from framework.server.context import RequestContext
from framework.server.handlers import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    alter_client_quotas,
    alter_configs,
    alter_partition_reassignments,
    alter_share_group_offsets,
    alter_user_scram_credentials,
    api_versions,
    consumer_group_describe,
    consumer_group_heartbeat,
    create_acls,
    create_partitions,
    create_topics,
    delete_acls,
    delete_groups,
    delete_records,
    delete_share_group_offsets,
    delete_topics,
    describe_acls,
    describe_client_quotas,
    describe_cluster,
    describe_configs,
    describe_groups,
    describe_log_dirs,
    describe_producers,
    describe_quorum,
    describe_share_group_offsets,
    describe_topic_partitions,
    describe_transactions,
    describe_user_scram_credentials,
    elect_leaders,
    end_txn,
    fetch,
    find_coordinator,
    get_telemetry_subscriptions,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leave_group,
    list_config_resources,
    list_groups,
    list_offsets,
    list_partition_reassignments,
    list_transactions,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    produce,
    push_telemetry,
    sasl_authenticate,
    sasl_handshake,
    share_acknowledge,
    share_fetch,
    share_group_describe,
    share_group_heartbeat,
    stream_admin,
    sync_group,
    txn_offset_commit,
    unregister_broker,
    write_txn_markers,
)

Req = TypeVar("Req")
Resp = TypeVar("Resp")


@dataclass(frozen=True, slots=True)
class Route(Generic[Req, Resp]):
    """One API: its entry, its handler's two functions, and the versions this broker serves."""

    entry: ApiEntry
    handle: Callable[[RequestContext, Req], Coroutine[Any, Any, Resp]]
    error_response: Callable[[Req, int, str], Resp]
    min_version: int
    max_version: int
    throttle_field: bool  # the response has throttle_time_ms, which the listener sets (quotas)


def _route(
    request: type[Req],
    handle: Callable[[RequestContext, Req], Coroutine[Any, Any, Resp]],
    error_response: Callable[[Req, int, str], Resp],
    *,
    min_version: int | None = None,
) -> Route[Req, Resp]:
    entry = API_TABLE[request.API_KEY]  # type: ignore[attr-defined]
    lo = entry.min_version if min_version is None else min_version
    throttles = "throttle_time_ms" in entry.response.SPECS  # type: ignore[attr-defined]
    return Route(entry, handle, error_response, lo, entry.max_version, throttles)


@functools.cache
def routes() -> Mapping[int, Route[Any, Any]]:
    """API key → route, for every API this broker serves.

    Built on first use rather than at import: ApiVersions, one of the handlers listed, answers
    from this table.
    """
    table: dict[int, Route[Any, Any]] = {}
    for r in (
        _route(ProduceRequest, produce.handle, produce.error_response),
        _route(FetchRequest, fetch.handle, fetch.error_response),
        _route(ListOffsetsRequest, list_offsets.handle, list_offsets.error_response),
        _route(MetadataRequest, metadata.handle, metadata.error_response),
        _route(OffsetCommitRequest, offset_commit.handle, offset_commit.error_response),
        _route(OffsetFetchRequest, offset_fetch.handle, offset_fetch.error_response),
        _route(FindCoordinatorRequest, find_coordinator.handle, find_coordinator.error_response),
        _route(JoinGroupRequest, join_group.handle, join_group.error_response),
        _route(HeartbeatRequest, heartbeat.handle, heartbeat.error_response),
        _route(LeaveGroupRequest, leave_group.handle, leave_group.error_response),
        _route(SyncGroupRequest, sync_group.handle, sync_group.error_response),
        _route(DescribeGroupsRequest, describe_groups.handle, describe_groups.error_response),
        _route(ListGroupsRequest, list_groups.handle, list_groups.error_response),
        # v1 only: Kafka 4 removed v0, whose tokens followed without Kafka framing
        _route(SaslHandshakeRequest, sasl_handshake.handle, sasl_handshake.error_response, min_version=1),
        _route(ApiVersionsRequest, api_versions.handle, api_versions.error_response),
        _route(CreateTopicsRequest, create_topics.handle, create_topics.error_response),
        _route(DeleteTopicsRequest, delete_topics.handle, delete_topics.error_response),
        _route(DeleteRecordsRequest, delete_records.handle, delete_records.error_response),
        _route(InitProducerIdRequest, init_producer_id.handle, init_producer_id.error_response),
        _route(
            OffsetForLeaderEpochRequest,
            offset_for_leader_epoch.handle,
            offset_for_leader_epoch.error_response,
        ),
        _route(AddPartitionsToTxnRequest, add_partitions_to_txn.handle, add_partitions_to_txn.error_response),
        _route(AddOffsetsToTxnRequest, add_offsets_to_txn.handle, add_offsets_to_txn.error_response),
        _route(EndTxnRequest, end_txn.handle, end_txn.error_response),
        _route(WriteTxnMarkersRequest, write_txn_markers.handle, write_txn_markers.error_response),
        _route(TxnOffsetCommitRequest, txn_offset_commit.handle, txn_offset_commit.error_response),
        _route(DescribeAclsRequest, describe_acls.handle, describe_acls.error_response),
        _route(CreateAclsRequest, create_acls.handle, create_acls.error_response),
        _route(DeleteAclsRequest, delete_acls.handle, delete_acls.error_response),
        _route(DescribeConfigsRequest, describe_configs.handle, describe_configs.error_response),
        _route(AlterConfigsRequest, alter_configs.handle, alter_configs.error_response),
        _route(DescribeLogDirsRequest, describe_log_dirs.handle, describe_log_dirs.error_response),
        _route(SaslAuthenticateRequest, sasl_authenticate.handle, sasl_authenticate.error_response),
        _route(CreatePartitionsRequest, create_partitions.handle, create_partitions.error_response),
        _route(DeleteGroupsRequest, delete_groups.handle, delete_groups.error_response),
        _route(ElectLeadersRequest, elect_leaders.handle, elect_leaders.error_response),
        _route(
            IncrementalAlterConfigsRequest,
            incremental_alter_configs.handle,
            incremental_alter_configs.error_response,
        ),
        _route(
            AlterPartitionReassignmentsRequest,
            alter_partition_reassignments.handle,
            alter_partition_reassignments.error_response,
        ),
        _route(
            ListPartitionReassignmentsRequest,
            list_partition_reassignments.handle,
            list_partition_reassignments.error_response,
        ),
        _route(OffsetDeleteRequest, offset_delete.handle, offset_delete.error_response),
        _route(
            DescribeClientQuotasRequest, describe_client_quotas.handle, describe_client_quotas.error_response
        ),
        _route(AlterClientQuotasRequest, alter_client_quotas.handle, alter_client_quotas.error_response),
        _route(
            DescribeUserScramCredentialsRequest,
            describe_user_scram_credentials.handle,
            describe_user_scram_credentials.error_response,
        ),
        _route(
            AlterUserScramCredentialsRequest,
            alter_user_scram_credentials.handle,
            alter_user_scram_credentials.error_response,
        ),
        _route(DescribeQuorumRequest, describe_quorum.handle, describe_quorum.error_response),
        _route(DescribeClusterRequest, describe_cluster.handle, describe_cluster.error_response),
        _route(DescribeProducersRequest, describe_producers.handle, describe_producers.error_response),
        _route(UnregisterBrokerRequest, unregister_broker.handle, unregister_broker.error_response),
        _route(
            DescribeTransactionsRequest, describe_transactions.handle, describe_transactions.error_response
        ),
        _route(ListTransactionsRequest, list_transactions.handle, list_transactions.error_response),
        _route(
            DescribeTopicPartitionsRequest,
            describe_topic_partitions.handle,
            describe_topic_partitions.error_response,
        ),
        _route(
            GetTelemetrySubscriptionsRequest,
            get_telemetry_subscriptions.handle,
            get_telemetry_subscriptions.error_response,
        ),
        _route(PushTelemetryRequest, push_telemetry.handle, push_telemetry.error_response),
        _route(
            ListConfigResourcesRequest, list_config_resources.handle, list_config_resources.error_response
        ),
        _route(
            ConsumerGroupHeartbeatRequest,
            consumer_group_heartbeat.handle,
            consumer_group_heartbeat.error_response,
        ),
        _route(
            ConsumerGroupDescribeRequest,
            consumer_group_describe.handle,
            consumer_group_describe.error_response,
        ),
        _route(
            ShareGroupHeartbeatRequest, share_group_heartbeat.handle, share_group_heartbeat.error_response
        ),
        _route(ShareGroupDescribeRequest, share_group_describe.handle, share_group_describe.error_response),
        _route(ShareFetchRequest, share_fetch.handle, share_fetch.error_response),
        _route(ShareAcknowledgeRequest, share_acknowledge.handle, share_acknowledge.error_response),
        _route(
            DescribeShareGroupOffsetsRequest,
            describe_share_group_offsets.handle,
            describe_share_group_offsets.error_response,
        ),
        _route(
            AlterShareGroupOffsetsRequest,
            alter_share_group_offsets.handle,
            alter_share_group_offsets.error_response,
        ),
        _route(
            DeleteShareGroupOffsetsRequest,
            delete_share_group_offsets.handle,
            delete_share_group_offsets.error_response,
        ),
        _route(StreamAdminRequest, stream_admin.handle, stream_admin.error_response),
    ):
        assert r.entry.key not in table, f"two handlers for {r.entry.name}"
        table[r.entry.key] = r
    return MappingProxyType(table)


def supported_versions() -> list[tuple[int, int, int]]:
    """(api key, min, max) of every API this broker serves, for ApiVersions."""
    return sorted((k, r.min_version, r.max_version) for k, r in routes().items())
