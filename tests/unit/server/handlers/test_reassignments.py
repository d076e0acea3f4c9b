"""AlterPartitionReassignments (45), ListPartitionReassignments (46) and the dynamic broker
configs of IncrementalAlterConfigs / DescribeConfigs on a single node (a real metadata store, no
sockets; requests and responses pass through the codec). A single node holds every replica:
the only valid target is itself and nothing is ever in progress. The cluster's behaviour is in
tests/unit/metadata/test_quorum_reassign.py and tests/integration/test_cluster_reassign.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from framework import config as cfg
from framework.metadata.store import MetadataStore
from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ReassignablePartition,
    ReassignableTopic,
)
from framework.protocol.messages.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsResponse,
)
from framework.protocol.messages.incremental_alter_configs import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from framework.protocol.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from framework.server.context import BrokerServices
from framework.server.handlers import (
    alter_partition_reassignments,
    describe_configs,
    incremental_alter_configs,
    list_partition_reassignments,
)
from framework.server.router import supported_versions
from tests.unit.server.handlers.test_admin_describe import NODE, call, services

BROKER, TOPIC = 4, 2
SET, DELETE = 0, 1


@pytest.fixture
def b(tmp_path: Path) -> BrokerServices:
    s = MetadataStore(tmp_path / "md", cfg.BrokerConfig.load(overrides={"node.id": NODE}, environ={}))
    s.load()
    s.create_topic("t", 2, 1, brokers=[NODE])
    return services(s, admin=True)


def alter(
    b: BrokerServices, targets: dict[tuple[str, int], list[int] | None], version: int = 1, allow: bool = True
) -> Any:
    by_topic: dict[str, list[ReassignablePartition]] = {}
    for (t, p), r in targets.items():
        by_topic.setdefault(t, []).append(ReassignablePartition(partition_index=p, replicas=r))
    req = AlterPartitionReassignmentsRequest(
        allow_replication_factor_change=allow,
        topics=[ReassignableTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
    )
    resp = call(b, alter_partition_reassignments, req, AlterPartitionReassignmentsResponse, version)
    return {(t.name, p.partition_index): p.error_code for t in resp.responses for p in t.partitions}


def test_served_versions() -> None:
    served = supported_versions()
    assert (45, 0, 1) in served and (46, 0, 0) in served


def test_a_single_node_answers_as_kafka_with_one_broker(b: Any) -> None:
    got = alter(b, {("t", 0): [NODE], ("t", 1): [NODE, 2], ("nope", 0): [NODE], ("t", 9): [NODE]})
    assert got == {
        ("t", 0): ErrorCode.NONE,  # already there: nothing to move
        ("t", 1): ErrorCode.INVALID_REPLICA_ASSIGNMENT,  # no broker 2
        ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("t", 9): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert alter(b, {("t", 0): None}) == {("t", 0): ErrorCode.NO_REASSIGNMENT_IN_PROGRESS}
    assert alter(b, {("t", 0): [NODE, NODE]}) == {("t", 0): ErrorCode.INVALID_REPLICA_ASSIGNMENT}
    assert alter(b, {("t", 0): [NODE]}, version=0) == {("t", 0): ErrorCode.NONE}
    listed = call(
        b,
        list_partition_reassignments,
        ListPartitionReassignmentsRequest(topics=None),
        ListPartitionReassignmentsResponse,
        0,
    )
    assert listed.error_code == 0 and listed.topics == []


def iac(b: Any, resource_type: int, name: str, *ops: tuple[str, int, str | None]) -> Any:
    req = IncrementalAlterConfigsRequest(
        resources=[
            AlterConfigsResource(
                resource_type=resource_type,
                resource_name=name,
                configs=[AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops],
            )
        ]
    )
    return call(b, incremental_alter_configs, req, IncrementalAlterConfigsResponse, 1).responses[0]


def described(b: Any, resource_type: int, name: str, key: str) -> Any:
    req = DescribeConfigsRequest(
        resources=[
            DescribeConfigsResource(resource_type=resource_type, resource_name=name, configuration_keys=[key])
        ]
    )
    r = call(b, describe_configs, req, DescribeConfigsResponse, 4).results[0]
    assert r.error_code == 0, r.error_message
    (entry,) = r.configs
    return entry


def test_throttle_rates_are_dynamic_broker_configs(b: Any) -> None:
    rate = "leader.replication.throttled.rate"
    assert described(b, BROKER, str(NODE), rate).config_source == 5  # DEFAULT_CONFIG
    assert iac(b, BROKER, "", (rate, SET, "3000000")).error_code == 0
    e = described(b, BROKER, str(NODE), rate)
    assert (e.value, e.config_source, e.read_only) == ("3000000", 3, False)  # DYNAMIC_DEFAULT_BROKER_CONFIG
    assert iac(b, BROKER, str(NODE), (rate, SET, "2000000")).error_code == 0
    e = described(b, BROKER, str(NODE), rate)
    assert (e.value, e.config_source) == ("2000000", 2)  # DYNAMIC_BROKER_CONFIG
    # what kafka-reassign-partitions --verify sends when it clears the throttles
    cleared = iac(
        b,
        BROKER,
        str(NODE),
        (rate, DELETE, None),
        ("follower.replication.throttled.rate", DELETE, None),
        ("replica.alter.log.dirs.io.max.bytes.per.second", DELETE, None),
    )
    assert cleared.error_code == 0
    assert described(b, BROKER, str(NODE), rate).value == "3000000"  # the cluster default is left
    refused = iac(b, BROKER, str(NODE), ("replica.alter.log.dirs.io.max.bytes.per.second", SET, "100"))
    assert refused.error_code == ErrorCode.INVALID_CONFIG
    static = iac(b, BROKER, str(NODE), ("log.retention.ms", SET, "1000"))
    assert static.error_code == ErrorCode.INVALID_CONFIG and "run time" in static.error_message
    assert iac(b, BROKER, "", ("no.such.key", SET, "1")).error_code == ErrorCode.INVALID_CONFIG
    assert iac(b, BROKER, str(NODE), (rate, SET, "-1")).error_code == ErrorCode.INVALID_CONFIG


def test_throttled_replica_lists_are_topic_configs(b: Any) -> None:
    key = "follower.replication.throttled.replicas"
    assert iac(b, TOPIC, "t", (key, SET, "0:1,1:2")).error_code == 0
    assert described(b, TOPIC, "t", key).value == "0:1,1:2"
    assert iac(b, TOPIC, "t", (key, SET, "*")).error_code == 0
    assert iac(b, TOPIC, "t", (key, SET, "0-1")).error_code == ErrorCode.INVALID_CONFIG
