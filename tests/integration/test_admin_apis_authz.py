"""The cluster admin APIs with Kafka's StandardAuthorizer, over SASL/SCRAM with kafka-python:
DescribeLogDirs and DescribeQuorum need Describe on the cluster; DescribeTopicPartitions shows
only the topics the principal may Describe (left out of an all-topics answer, refused without
their id when named). The broker and users are set up as in test_authorization.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)
from kafka.admin import KafkaAdminClient
from kafka.errors import ClusterAuthorizationFailedError, TopicAuthorizationFailedError

from testing import BrokerProcess, free_port
from tests.support.authorization import MECH, Site, password, secured, users_add

pytestmark = [
    pytest.mark.integration,
    pytest.mark.sftraffic_only(reason="starts a broker with a SASL listener, users and an authorizer"),
]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    d = tmp_path_factory.mktemp("admin-authz") / "data"
    users_add(d)
    ports = {"PLAINTEXT": free_port(), "SASL_PLAINTEXT": free_port()}
    while ports["SASL_PLAINTEXT"] == ports["PLAINTEXT"]:
        ports["SASL_PLAINTEXT"] = free_port()
    b = BrokerProcess(d, port=ports["PLAINTEXT"], overrides=secured(ports)).start()
    s = Site(f"127.0.0.1:{ports['SASL_PLAINTEXT']}", b.bootstrap)
    s.topics("traffic.speeds", "weather.rain", partitions=2)
    acl = AclBinding(
        ResourceType.TOPIC,
        "traffic.",
        ResourcePatternType.PREFIXED,
        "User:carol",
        "*",
        AclOperation.DESCRIBE,
        AclPermissionType.ALLOW,
    )
    a = s.admin()  # referenced until the result is in: a destroyed client fails its futures
    for f in a.create_acls([acl]).values():
        f.result(30)
    yield s
    b.stop()


def admin_as(site: Site, user: str) -> KafkaAdminClient:
    return KafkaAdminClient(
        bootstrap_servers=site.sasl,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism=MECH,
        sasl_plain_username=user,
        sasl_plain_password=password(user),
    )


@pytest.fixture
def carol(site: Site) -> Iterator[KafkaAdminClient]:
    a = admin_as(site, "carol")
    yield a
    a.close()


@pytest.fixture
def admin(site: Site) -> Iterator[KafkaAdminClient]:
    a = admin_as(site, "admin")
    yield a
    a.close()


def test_log_dirs_need_describe_on_the_cluster(carol: KafkaAdminClient, admin: KafkaAdminClient) -> None:
    assert carol.describe_log_dirs()[0]["log_dirs"] == []  # CLUSTER_AUTHORIZATION_FAILED, nothing shown
    (log_dir,) = admin.describe_log_dirs()[0]["log_dirs"]
    assert {"traffic.speeds", "weather.rain"} <= {t["name"] for t in log_dir["topics"]}


def test_quorum_needs_describe_on_the_cluster(carol: KafkaAdminClient, admin: KafkaAdminClient) -> None:
    with pytest.raises(ClusterAuthorizationFailedError):
        carol.describe_metadata_quorum()
    assert admin.describe_metadata_quorum()["topics"][0]["partitions"][0]["error"] is None


def test_topic_partitions_show_only_what_may_be_described(
    carol: KafkaAdminClient, admin: KafkaAdminClient
) -> None:
    every = carol.describe_topic_partitions([])["topics"]
    assert [t["name"] for t in every] == ["traffic.speeds"]
    named = {
        t["name"]: t
        for t in carol.describe_topic_partitions(["traffic.speeds", "weather.rain", "x.nope"])["topics"]
    }
    for name in ("weather.rain", "x.nope"):  # exists or not: the same answer, no id
        assert named[name]["error_code"] == TopicAuthorizationFailedError.errno, named[name]
        assert named[name]["partitions"] == [] and named[name]["topic_id"] is None  # the zero uuid
    assert named["traffic.speeds"]["error_code"] == 0 and len(named["traffic.speeds"]["partitions"]) == 2
    assert {"traffic.speeds", "weather.rain"} <= {
        t["name"] for t in admin.describe_topic_partitions([])["topics"]
    }
