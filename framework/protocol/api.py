"""The APIs this project speaks and the version range of each, in one place.

``min_version``/``max_version`` are the versions the broker serves (advertised in ApiVersions
when a handler exists). They follow what Apache Kafka 4.x serves, capped where a newer version
needs a feature we do not have (e.g. Produce v11+ is for transactions v2, v13 addresses topics
by id; OffsetCommit v10 is KIP-848 only).
"""

from __future__ import annotations

from dataclasses import dataclass

from framework.protocol.messages import (
    alter_client_quotas,
    alter_configs,
    alter_user_scram_credentials,
    api_versions,
    create_acls,
    create_partitions,
    create_topics,
    delete_acls,
    delete_groups,
    delete_records,
    delete_topics,
    describe_acls,
    describe_client_quotas,
    describe_cluster,
    describe_configs,
    describe_groups,
    describe_log_dirs,
    describe_producers,
    describe_user_scram_credentials,
    elect_leaders,
    fetch,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    produce,
    sasl_authenticate,
    sasl_handshake,
    stream_admin,
    sync_group,
)


@dataclass(frozen=True, slots=True)
class ApiEntry:
    key: int
    name: str
    kio_name: str | None
    request: type
    response: type
    min_version: int
    max_version: int

    def request_flexible(self, version: int) -> bool:
        return version >= self.request.FLEXIBLE  # type: ignore[attr-defined,no-any-return]


def _e(name: str, kio_name: str | None, req: type, resp: type, lo: int, hi: int) -> ApiEntry:
    return ApiEntry(req.API_KEY, name, kio_name, req, resp, lo, hi)  # type: ignore[attr-defined]


_ENTRIES = [
    _e("Produce", "produce", produce.ProduceRequest, produce.ProduceResponse, 3, 10),
    _e("Fetch", "fetch", fetch.FetchRequest, fetch.FetchResponse, 4, 16),
    _e(
        "ListOffsets",
        "list_offsets",
        list_offsets.ListOffsetsRequest,
        list_offsets.ListOffsetsResponse,
        1,
        10,
    ),
    _e("Metadata", "metadata", metadata.MetadataRequest, metadata.MetadataResponse, 0, 13),
    _e(
        "OffsetCommit",
        "offset_commit",
        offset_commit.OffsetCommitRequest,
        offset_commit.OffsetCommitResponse,
        2,
        9,
    ),
    _e(
        "OffsetFetch",
        "offset_fetch",
        offset_fetch.OffsetFetchRequest,
        offset_fetch.OffsetFetchResponse,
        1,
        9,
    ),
    _e(
        "FindCoordinator",
        "find_coordinator",
        find_coordinator.FindCoordinatorRequest,
        find_coordinator.FindCoordinatorResponse,
        0,
        5,
    ),
    _e("JoinGroup", "join_group", join_group.JoinGroupRequest, join_group.JoinGroupResponse, 0, 9),
    _e("Heartbeat", "heartbeat", heartbeat.HeartbeatRequest, heartbeat.HeartbeatResponse, 0, 4),
    _e(
        "LeaveGroup",
        "leave_group",
        leave_group.LeaveGroupRequest,
        leave_group.LeaveGroupResponse,
        0,
        5,
    ),
    _e("SyncGroup", "sync_group", sync_group.SyncGroupRequest, sync_group.SyncGroupResponse, 0, 5),
    _e(
        "DescribeGroups",
        "describe_groups",
        describe_groups.DescribeGroupsRequest,
        describe_groups.DescribeGroupsResponse,
        0,
        5,
    ),
    _e(
        "ListGroups",
        "list_groups",
        list_groups.ListGroupsRequest,
        list_groups.ListGroupsResponse,
        0,
        5,
    ),
    _e(
        "SaslHandshake",
        "sasl_handshake",
        sasl_handshake.SaslHandshakeRequest,
        sasl_handshake.SaslHandshakeResponse,
        0,
        1,
    ),
    _e(
        "ApiVersions",
        "api_versions",
        api_versions.ApiVersionsRequest,
        api_versions.ApiVersionsResponse,
        0,
        4,
    ),
    _e(
        "CreateTopics",
        "create_topics",
        create_topics.CreateTopicsRequest,
        create_topics.CreateTopicsResponse,
        2,
        7,
    ),
    _e(
        "DeleteTopics",
        "delete_topics",
        delete_topics.DeleteTopicsRequest,
        delete_topics.DeleteTopicsResponse,
        1,
        6,
    ),
    _e(
        "DeleteRecords",
        "delete_records",
        delete_records.DeleteRecordsRequest,
        delete_records.DeleteRecordsResponse,
        0,
        2,
    ),
    _e(
        "InitProducerId",
        "init_producer_id",
        init_producer_id.InitProducerIdRequest,
        init_producer_id.InitProducerIdResponse,
        0,
        5,
    ),
    _e(
        "OffsetForLeaderEpoch",
        "offset_for_leader_epoch",
        offset_for_leader_epoch.OffsetForLeaderEpochRequest,
        offset_for_leader_epoch.OffsetForLeaderEpochResponse,
        2,
        4,
    ),
    _e(
        "DescribeAcls",
        "describe_acls",
        describe_acls.DescribeAclsRequest,
        describe_acls.DescribeAclsResponse,
        1,
        3,
    ),
    _e(
        "CreateAcls",
        "create_acls",
        create_acls.CreateAclsRequest,
        create_acls.CreateAclsResponse,
        1,
        3,
    ),
    _e(
        "DeleteAcls",
        "delete_acls",
        delete_acls.DeleteAclsRequest,
        delete_acls.DeleteAclsResponse,
        1,
        3,
    ),
    _e(
        "DescribeConfigs",
        "describe_configs",
        describe_configs.DescribeConfigsRequest,
        describe_configs.DescribeConfigsResponse,
        1,
        4,
    ),
    _e(
        "AlterConfigs",
        "alter_configs",
        alter_configs.AlterConfigsRequest,
        alter_configs.AlterConfigsResponse,
        0,
        2,
    ),
    _e(
        "DescribeLogDirs",
        "describe_log_dirs",
        describe_log_dirs.DescribeLogDirsRequest,
        describe_log_dirs.DescribeLogDirsResponse,
        1,
        4,
    ),
    _e(
        "SaslAuthenticate",
        "sasl_authenticate",
        sasl_authenticate.SaslAuthenticateRequest,
        sasl_authenticate.SaslAuthenticateResponse,
        0,
        2,
    ),
    _e(
        "CreatePartitions",
        "create_partitions",
        create_partitions.CreatePartitionsRequest,
        create_partitions.CreatePartitionsResponse,
        0,
        3,
    ),
    _e(
        "DeleteGroups",
        "delete_groups",
        delete_groups.DeleteGroupsRequest,
        delete_groups.DeleteGroupsResponse,
        0,
        2,
    ),
    _e(
        "ElectLeaders",
        "elect_leaders",
        elect_leaders.ElectLeadersRequest,
        elect_leaders.ElectLeadersResponse,
        0,
        2,
    ),
    _e(
        "IncrementalAlterConfigs",
        "incremental_alter_configs",
        incremental_alter_configs.IncrementalAlterConfigsRequest,
        incremental_alter_configs.IncrementalAlterConfigsResponse,
        0,
        1,
    ),
    _e(
        "OffsetDelete",
        "offset_delete",
        offset_delete.OffsetDeleteRequest,
        offset_delete.OffsetDeleteResponse,
        0,
        0,
    ),
    _e(
        "DescribeCluster",
        "describe_cluster",
        describe_cluster.DescribeClusterRequest,
        describe_cluster.DescribeClusterResponse,
        0,
        1,
    ),
    _e(
        "DescribeProducers",
        "describe_producers",
        describe_producers.DescribeProducersRequest,
        describe_producers.DescribeProducersResponse,
        0,
        0,
    ),
    _e(
        "DescribeUserScramCredentials",
        "describe_user_scram_credentials",
        describe_user_scram_credentials.DescribeUserScramCredentialsRequest,
        describe_user_scram_credentials.DescribeUserScramCredentialsResponse,
        0,
        0,
    ),
    _e(
        "AlterUserScramCredentials",
        "alter_user_scram_credentials",
        alter_user_scram_credentials.AlterUserScramCredentialsRequest,
        alter_user_scram_credentials.AlterUserScramCredentialsResponse,
        0,
        0,
    ),
    _e(
        "DescribeClientQuotas",
        "describe_client_quotas",
        describe_client_quotas.DescribeClientQuotasRequest,
        describe_client_quotas.DescribeClientQuotasResponse,
        0,
        1,
    ),
    _e(
        "AlterClientQuotas",
        "alter_client_quotas",
        alter_client_quotas.AlterClientQuotasRequest,
        alter_client_quotas.AlterClientQuotasResponse,
        0,
        1,
    ),
    # sftraffic extension (not a Kafka API): stream policies
    _e("StreamAdmin", None, stream_admin.StreamAdminRequest, stream_admin.StreamAdminResponse, 0, 0),
]

#: api key → entry
API_TABLE: dict[int, ApiEntry] = {e.key: e for e in _ENTRIES}
