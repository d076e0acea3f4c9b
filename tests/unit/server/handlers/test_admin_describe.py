"""DescribeLogDirs (35), DescribeTopicPartitions (75) and DescribeQuorum (55) over a real
metadata store and logs (no sockets): pagination, bad input's error codes, and what a principal
without Describe sees (requests and responses pass through the codec)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from framework import config as cfg
from framework.metadata.admin import MetadataAdmin
from framework.metadata.cache import MetadataCache
from framework.metadata.quorum import QuorumStatus, VoterState
from framework.metadata.store import MetadataStore
from framework.protocol import codec
from framework.protocol.error_codes import ErrorCode
from framework.protocol.fields import ZERO_UUID
from framework.protocol.messages.describe_log_dirs import (
    DescribableLogDirTopic,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
)
from framework.protocol.messages.describe_quorum import (
    DescribeQuorumRequest,
    DescribeQuorumRequestPartitionData,
    DescribeQuorumRequestTopicData,
    DescribeQuorumResponse,
    DescribeQuorumResponsePartitionData,
    DescribeQuorumResponseTopicData,
)
from framework.protocol.messages.describe_topic_partitions import (
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsRequestCursor,
    DescribeTopicPartitionsResponse,
    TopicRequest,
)
from framework.replication.partition import Partition
from framework.security.authorizer import (
    CLUSTER_NAME,
    AclBinding,
    AclOperation,
    PatternType,
    Permission,
    ResourceType,
    StandardAuthorizer,
)
from framework.security.principal import KafkaPrincipal
from framework.server import authz as authz_mod
from framework.server.context import BrokerServices
from framework.server.forward import FORWARDED_CLIENT_ID
from framework.server.handlers import describe_log_dirs, describe_quorum, describe_topic_partitions
from framework.server.router import routes, supported_versions
from framework.storage.log import Log
from tests.support import broker_parts
from tests.support.broker_parts import Replicas, request_context
from tests.support.storage import append, batch, open_log

NODE = 1
BOB = KafkaPrincipal("User", "bob")


@pytest.fixture
def store(tmp_path: Path) -> MetadataStore:
    s = MetadataStore(tmp_path / "md", cfg.BrokerConfig.load(overrides={"node.id": NODE}, environ={}))
    s.load()
    for name, n in (("alpha", 3), ("beta", 2), ("gamma", 1), ("secret", 2)):
        s.create_topic(name, n, 1, brokers=[NODE])
    return s


@pytest.fixture
def logs(tmp_path: Path) -> Iterator[list[Log]]:
    made: list[Log] = []
    yield made
    for lg in made:
        lg.close()


def services(
    store: MetadataStore,
    parts: list[Partition] | None = None,
    acls: list[AclBinding] | None = None,
    *,
    forwarder: Any = None,
    admin: bool = False,
) -> BrokerServices:
    """A broker's parts over ``store``: its metadata cache, the replicas ``parts``, an
    authorizer with ``acls`` (None: none), and with ``admin`` the metadata changes."""
    cache = MetadataCache(NODE, store, ("127.0.0.1", 9092))
    az = None if acls is None else authz_mod.Authz(StandardAuthorizer(acls))
    return broker_parts.services(
        cluster=cache,
        partitions=Replicas.of(*(parts or []), log_dir=store.dir.parent),
        authz=az,
        config=store.broker,
        forwarder=forwarder,
        admin=MetadataAdmin(store, cache, store.broker) if admin else None,
    )


def call(
    b: BrokerServices, handler: Any, req: Any, resp_cls: type, version: int, who: KafkaPrincipal = BOB
) -> Any:
    """``req`` through the codec to the handler, and its answer back through the codec."""
    req, _ = codec.decode(type(req), version, codec.encode(req, version))
    ctx = request_context(b, type(req).API_KEY, version, principal=who)
    try:
        resp = asyncio.run(handler.handle(ctx, req))
    except Exception as exc:  # what the listener does with a StoreError
        code = getattr(exc, "code", None)
        if code is None:
            raise
        resp = handler.error_response(req, int(code), str(exc))
    resp, _ = codec.decode(resp_cls, version, codec.encode(resp, version))
    return resp


def allow(rt: ResourceType, name: str, op: AclOperation, pt: PatternType = PatternType.LITERAL) -> AclBinding:
    return AclBinding(rt, name, pt, str(BOB), "*", op, Permission.ALLOW)


def test_served_versions() -> None:
    served = supported_versions()
    assert (35, 1, 4) in served and (55, 0, 2) in served and (75, 0, 0) in served
    assert {35, 55, 75} <= set(routes())


# -- DescribeTopicPartitions ---------------------------------------------------------------------
def dtp(b: Any, names: list[str], limit: int = 2000, cursor: tuple[str, int] | None = None) -> Any:
    req = DescribeTopicPartitionsRequest(
        topics=[TopicRequest(n) for n in names],
        response_partition_limit=limit,
        cursor=None if cursor is None else DescribeTopicPartitionsRequestCursor(*cursor),
    )
    return call(b, describe_topic_partitions, req, DescribeTopicPartitionsResponse, 0)


def pages(b: Any, names: list[str], limit: int) -> list[list[tuple[str, int]]]:
    out, cursor = [], None
    while True:
        resp = dtp(b, names, limit, cursor)
        out.append([(t.name, p.partition_index) for t in resp.topics for p in t.partitions])
        if resp.next_cursor is None:
            return out
        cursor = (resp.next_cursor.topic_name, resp.next_cursor.partition_index)


def test_topics_page_by_page_in_name_order(store: MetadataStore) -> None:
    b = services(store)
    everything = pages(b, [], 2000)
    assert len(everything) == 1
    names = [n for n, _ in everything[0] if not n.startswith("__")]
    assert names == ["alpha"] * 3 + ["beta"] * 2 + ["gamma"] + ["secret"] * 2
    by_two = pages(b, ["gamma", "beta", "alpha"], 2)
    assert by_two == [
        [("alpha", 0), ("alpha", 1)],
        [("alpha", 2), ("beta", 0)],
        [("beta", 1), ("gamma", 0)],
    ]
    assert pages(b, ["beta", "alpha"], 5) == [
        [("alpha", 0), ("alpha", 1), ("alpha", 2), ("beta", 0), ("beta", 1)]
    ]
    resp = dtp(b, ["gamma", "beta", "alpha"], 3)  # alpha fills the page: the cursor is beta's start
    assert (resp.next_cursor.topic_name, resp.next_cursor.partition_index) == ("beta", 0)
    resp = dtp(b, ["alpha"], 0)  # at least one partition per page
    assert [len(t.partitions) for t in resp.topics] == [1] and resp.next_cursor.partition_index == 1
    t = dtp(b, ["alpha"]).topics[0]
    p = t.partitions[0]
    assert (t.error_code, t.topic_id, t.is_internal) == (0, store.topics["alpha"].id_bytes, False)
    assert (p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes) == (NODE, 0, [NODE], [NODE])
    assert (p.eligible_leader_replicas, p.last_known_elr, p.offline_replicas) == ([], [], [])


def test_unknown_and_invalid_names_and_bad_cursors(store: MetadataStore) -> None:
    b = services(store)
    resp = dtp(b, ["nope", "bad/name", "alpha"])
    codes = {t.name: (t.error_code, t.topic_id) for t in resp.topics}
    assert codes["nope"] == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ZERO_UUID)
    assert codes["bad/name"] == (ErrorCode.INVALID_TOPIC_EXCEPTION, ZERO_UUID)
    assert codes["alpha"][0] == ErrorCode.NONE
    for cursor in (("beta", 0), ("alpha", -1)):  # beta is not in the list; a negative partition
        resp = dtp(b, ["alpha"], cursor=cursor)
        assert [(t.name, t.error_code) for t in resp.topics] == [("alpha", ErrorCode.INVALID_REQUEST)]


def test_topics_the_principal_may_not_describe_are_not_disclosed(store: MetadataStore) -> None:
    b = services(store, acls=[allow(ResourceType.TOPIC, "a", AclOperation.DESCRIBE, PatternType.PREFIXED)])
    listed = [t.name for t in dtp(b, []).topics]
    assert listed == ["alpha"]  # every topic asked for: the others are left out
    resp = dtp(b, ["alpha", "secret", "nope"])
    got = {t.name: (t.error_code, t.topic_id, t.partitions) for t in resp.topics}
    assert got["secret"] == (ErrorCode.TOPIC_AUTHORIZATION_FAILED, ZERO_UUID, [])
    assert got["nope"] == (ErrorCode.TOPIC_AUTHORIZATION_FAILED, ZERO_UUID, [])  # existence not told
    assert got["alpha"][0] == ErrorCode.NONE
    ops = next(t for t in resp.topics if t.name == "alpha").topic_authorized_operations
    assert ops == 1 << AclOperation.DESCRIBE


# -- DescribeLogDirs -------------------------------------------------------------------------------
def replica(lg: Log, topic: str, index: int, leader: int, node: int = NODE) -> Partition:
    return Partition(topic, index, b"\x00" * 16, lg, [1, 2], leader, 0, [1, 2], node_id=node)


def test_log_dirs_sizes_lags_and_filters(store: MetadataStore, tmp_path: Path, logs: list[Log]) -> None:
    led, _ = open_log(tmp_path / "alpha-0")
    followed, _ = open_log(tmp_path / "beta-1")
    logs += [led, followed]
    append(led, batch(3, value=b"x" * 100))
    append(followed, batch(2, value=b"y"))
    lead, follow = replica(led, "alpha", 0, NODE), replica(followed, "beta", 1, 2)
    follow.leader_high_watermark = 7  # the leader's high watermark at the follower's last fetch
    b = services(store, [lead, follow])
    for version in (1, 2, 3, 4):
        resp = call(
            b, describe_log_dirs, DescribeLogDirsRequest(topics=None), DescribeLogDirsResponse, version
        )
        (result,) = resp.results
        assert result.error_code == 0 and result.log_dir == str(store.dir.parent.resolve())
        got = {
            (t.name, p.partition_index): (p.partition_size, p.offset_lag, p.is_future_key)
            for t in result.topics
            for p in t.partitions
        }
        assert got == {("alpha", 0): (led.size_bytes, 0, False), ("beta", 1): (followed.size_bytes, 5, False)}
        assert led.size_bytes > 300
        if version >= 4:
            assert 0 < result.usable_bytes <= result.total_bytes
    only = DescribeLogDirsRequest(
        topics=[DescribableLogDirTopic("beta", [1, 9]), DescribableLogDirTopic("zz", [0])]
    )
    (result,) = call(b, describe_log_dirs, only, DescribeLogDirsResponse, 4).results
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in result.topics] == [("beta", [1])]


def test_log_dirs_need_describe_on_the_cluster(store: MetadataStore) -> None:
    b = services(store, acls=[allow(ResourceType.TOPIC, "*", AclOperation.ALL)])
    resp = call(b, describe_log_dirs, DescribeLogDirsRequest(topics=None), DescribeLogDirsResponse, 4)
    assert (resp.error_code, resp.results) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [])
    b = services(store, acls=[allow(ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.DESCRIBE)])
    resp = call(b, describe_log_dirs, DescribeLogDirsRequest(topics=None), DescribeLogDirsResponse, 4)
    assert resp.error_code == 0 and len(resp.results) == 1


# -- DescribeQuorum --------------------------------------------------------------------------------
def quorum_request(topic: str = "__cluster_metadata", parts: tuple[int, ...] = (0,)) -> DescribeQuorumRequest:
    return DescribeQuorumRequest(
        topics=[DescribeQuorumRequestTopicData(topic, [DescribeQuorumRequestPartitionData(p) for p in parts])]
    )


def test_quorum_of_a_single_node_and_of_a_cluster(store: MetadataStore) -> None:
    b = services(store)
    for version in (0, 1, 2):
        resp = call(b, describe_quorum, quorum_request(), DescribeQuorumResponse, version)
        (p,) = resp.topics[0].partitions
        assert (resp.error_code, p.error_code, p.leader_id, p.high_watermark) == (0, 0, NODE, 0)
        assert [v.replica_id for v in p.current_voters] == [NODE] and p.observers == []
    status = QuorumStatus(
        2,
        7,
        120,
        False,
        [VoterState(1, 118, -1, -1), VoterState(2, -1, -1, -1), VoterState(3, -1, -1, -1)],
        {1: "127.0.0.1:19001", 2: "127.0.0.1:19002", 3: "127.0.0.1:19003"},
    )
    b.cluster.quorum_status = lambda: status
    resp = call(b, describe_quorum, quorum_request(), DescribeQuorumResponse, 2)
    (p,) = resp.topics[0].partitions
    assert (p.leader_id, p.leader_epoch, p.high_watermark) == (2, 7, 120)
    assert [(v.replica_id, v.log_end_offset) for v in p.current_voters] == [(1, 118), (2, -1), (3, -1)]
    assert [(n.node_id, n.listeners[0].name, n.listeners[0].port) for n in resp.nodes] == [
        (1, "CONTROLLER", 19001),
        (2, "CONTROLLER", 19002),
        (3, "CONTROLLER", 19003),
    ]


def test_quorum_bad_input_and_authorization(store: MetadataStore) -> None:
    b = services(store)
    for req in (quorum_request("other"), quorum_request(parts=(1,)), quorum_request(parts=(0, 0))):
        resp = call(b, describe_quorum, req, DescribeQuorumResponse, 2)
        assert resp.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    b = services(store, acls=[allow(ResourceType.TOPIC, "*", AclOperation.ALL)])
    resp = call(b, describe_quorum, quorum_request(), DescribeQuorumResponse, 2)
    assert resp.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED


class Forwarder:
    """The leader's answer (or a failure) for requests this broker forwards."""

    def __init__(self, answer: DescribeQuorumResponse | None) -> None:
        self.answer = answer
        self.sent: list[tuple[int, int]] = []

    async def forward(self, node_id: int, req: Any, version: int, response_cls: type, timeout: float) -> Any:
        self.sent.append((node_id, version))
        if self.answer is None:
            raise ConnectionRefusedError(111, "refused")
        return self.answer


def test_a_follower_forwards_to_the_raft_leader_and_falls_back_to_its_own_view(store: MetadataStore) -> None:
    status = QuorumStatus(2, 7, 120, False, [VoterState(1, 118, -1, -1), VoterState(2, -1, -1, -1)])
    leader_answer = DescribeQuorumResponse(
        topics=[
            DescribeQuorumResponseTopicData(
                "__cluster_metadata", [DescribeQuorumResponsePartitionData(leader_id=2, high_watermark=121)]
            )
        ]
    )
    for answer, hw in ((leader_answer, 121), (None, 120)):
        forwarder = Forwarder(answer)
        b = services(store, forwarder=forwarder)
        b.cluster.quorum_status = lambda: status
        ctx = request_context(b, 55, 2, principal=BOB)
        resp = asyncio.run(describe_quorum.handle(ctx, quorum_request()))
        assert forwarder.sent == [(2, 2)]
        assert resp.topics[0].partitions[0].high_watermark == hw
        # a forwarded request is never forwarded again: answered from this broker's view
        ctx = request_context(b, 55, 2, principal=BOB, client_id=FORWARDED_CLIENT_ID)
        resp = asyncio.run(describe_quorum.handle(ctx, quorum_request()))
        assert isinstance(resp, DescribeQuorumResponse) and forwarder.sent == [(2, 2)]


def test_an_unreadable_log_dir_answers_kafka_storage_error(store: MetadataStore, tmp_path: Path) -> None:
    b = services(store)
    b.partitions.log_dir = tmp_path / "gone"  # removed under the broker: Kafka's offline log dir
    for version in (1, 4):
        resp = call(
            b, describe_log_dirs, DescribeLogDirsRequest(topics=None), DescribeLogDirsResponse, version
        )
        (result,) = resp.results
        assert (result.error_code, result.topics) == (ErrorCode.KAFKA_STORAGE_ERROR, [])
        assert result.log_dir == str(tmp_path / "gone")
