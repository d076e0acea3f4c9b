"""Authorization with real clients: ACLs through confluent-kafka's AdminClient, stream
permissions (MapR's produceperm, consumeperm, topicperm, adminperm) through ``sftraffic streams
grant|revoke|describe``, and what each user may then do, over SASL/SCRAM on 127.0.0.1.

One broker with a PLAINTEXT and a SASL_PLAINTEXT listener and StandardAuthorizer on; users made
with ``sftraffic users add --data-dir`` before its first start; ``User:admin`` is the super user.
A producer-only user writes but does not read, a consumer-only user the reverse, neither sees
the other stream's topics, a group ACL is needed to commit offsets, a revocation takes effect on
the next request; a stream admin grants on its stream only. The same in a 3-broker cluster,
where the inter-broker listener is SASL too (the brokers' user is a super user).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from framework.client.wire import from_client_config
from framework.protocol.messages.describe_acls import DescribeAclsRequest, DescribeAclsResponse
from framework.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
)
from testing import BrokerProcess, ClusterProcesses, free_port
from tests.support.authorization import MECH, Site, password, secured, users_add

pytestmark = [
    pytest.mark.integration,
    pytest.mark.sftraffic_only(reason="starts brokers with SASL listeners, users and an authorizer"),
]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    d = tmp_path_factory.mktemp("authz") / "data"
    users_add(d)
    ports = {"PLAINTEXT": free_port(), "SASL_PLAINTEXT": free_port()}
    b = BrokerProcess(d, port=ports["PLAINTEXT"], overrides=secured(ports)).start()
    s = Site(f"127.0.0.1:{ports['SASL_PLAINTEXT']}", b.bootstrap)
    s.cli("create", "traffic")
    s.cli("create", "weather")
    s.topics("traffic.speeds", "traffic.volumes", "weather.rain")
    yield s
    b.stop()


# -- helpers ---------------------------------------------------------------------------------------
def produce(
    site: Site, user: str, topic: str, n: int = 3, producer: Producer | None = None, idempotent: bool = False
) -> list[Any]:
    """Produce n records; the delivery errors (None for each success). An idempotent producer
    needs Write on some topic (else InitProducerId fails: a fatal CLUSTER_AUTHORIZATION_FAILED)."""
    conf = {
        "enable.idempotence": idempotent,
        "message.timeout.ms": 10000,
        "retries": 0 if not idempotent else 5,
    }
    p = producer or Producer(site.conf(user, **conf))
    errors: list[Any] = []
    for i in range(n):
        try:
            p.produce(topic, value=f"{user}-{i}".encode(), on_delivery=lambda err, _m: errors.append(err))
        except KafkaException as exc:  # refused at once: the client's metadata says it is not allowed
            errors.append(exc.args[0])
    p.flush(20)
    return errors


def read(site: Site, user: str, topic: str, want: int, timeout: float = 15.0) -> tuple[list[bytes], Any]:
    """Read a topic's partition 0 from the start (assign, no group): values, and the first error."""
    c = Consumer(site.conf(user, **{"group.id": "unused", "enable.auto.commit": False}))
    c.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    error = None
    deadline = time.monotonic() + timeout
    try:
        while len(got) < want and error is None and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                # librdkafka looks up the (unused) group's coordinator too: not this test's business
                if m.error().code() != KafkaError.GROUP_AUTHORIZATION_FAILED:
                    error = m.error()
            else:
                got.append(m.value())
    finally:
        c.close()
    return got, error


def code(err: Any) -> int:
    return int(err.code()) if err is not None else 0


def binding(
    rt: Any, name: str, pt: Any, who: str, op: Any, perm: Any = AclPermissionType.ALLOW
) -> AclBinding:
    return AclBinding(rt, name, pt, who, "*", op, perm)


ANY_FILTER = AclBindingFilter(
    ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
)


def eventually(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "not within the time"
        time.sleep(0.2)


# -- ACLs through Kafka's AdminClient --------------------------------------------------------------
def test_acl_crud_with_admin_client(site: Site) -> None:
    a = site.admin()
    mine = [
        binding(ResourceType.TOPIC, "crud-t", ResourcePatternType.LITERAL, "User:carol", AclOperation.READ),
        binding(ResourceType.TOPIC, "crud.", ResourcePatternType.PREFIXED, "User:carol", AclOperation.WRITE),
        binding(ResourceType.GROUP, "crud-g", ResourcePatternType.LITERAL, "User:carol", AclOperation.READ),
        binding(
            ResourceType.TOPIC,
            "crud-t",
            ResourcePatternType.LITERAL,
            "User:*",
            AclOperation.ALL,
            AclPermissionType.DENY,
        ),
    ]
    for f in a.create_acls(mine).values():
        assert f.result(15) is None
    every = a.describe_acls(ANY_FILTER).result(15)
    assert set(mine) <= set(every)
    match = AclBindingFilter(
        ResourceType.TOPIC,
        "crud.x",
        ResourcePatternType.MATCH,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    assert a.describe_acls(match).result(15) == [mine[1]]
    carol = AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        "User:carol",
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    assert set(a.describe_acls(carol).result(15)) == set(mine[:3])
    deleted = next(iter(a.delete_acls([carol]).values())).result(15)
    assert set(deleted) == set(mine[:3])
    left = a.describe_acls(ANY_FILTER).result(15)
    assert mine[3] in left and not set(mine[:3]) & set(left)
    deny = AclBindingFilter(
        ResourceType.TOPIC,
        "crud-t",
        ResourcePatternType.LITERAL,
        "User:*",
        "*",
        AclOperation.ALL,
        AclPermissionType.DENY,
    )
    assert next(iter(a.delete_acls([deny]).values())).result(15) == [mine[3]]

    # only a principal with Alter (create, delete) / Describe (list) on the cluster may touch them
    for who in ("nobody", "prod"):
        theirs = site.admin(who)  # (a client must outlive its futures)
        with pytest.raises(KafkaException) as ex:
            next(iter(theirs.create_acls(mine[:1]).values())).result(15)
        assert ex.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
        with pytest.raises(KafkaException) as ex:
            next(iter(theirs.delete_acls([ANY_FILTER]).values())).result(15)
        assert ex.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
        # librdkafka drops DescribeAcls' top-level error (an empty list); the answer is Kafka's
        assert theirs.describe_acls(ANY_FILTER).result(15) == []
        assert describe_acls_error(site.sasl, who) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    assert describe_acls_error(site.plain, None) == KafkaError.CLUSTER_AUTHORIZATION_FAILED  # ANONYMOUS


def describe_acls_error(bootstrap: str, user: str | None) -> int:
    conf = {} if user is None else {"security.protocol": "SASL_PLAINTEXT", "sasl.username": user}
    if user is not None:
        conf["sasl.password"] = password(user)
    req = DescribeAclsRequest(resource_type_filter=1, pattern_type_filter=1, operation=1, permission_type=1)
    with from_client_config(bootstrap, conf) as c:
        return c.send(req, DescribeAclsResponse).error_code


# -- stream permissions ---------------------------------------------------------------------------
def test_producer_writes_but_does_not_read_consumer_the_reverse(site: Site) -> None:
    site.cli("grant", "traffic", "prod", "--produce")
    site.cli("grant", "traffic", "cons", "--consume")
    assert produce(site, "prod", "traffic.speeds", idempotent=True) == [None] * 3

    got, err = read(site, "prod", "traffic.speeds", 1)
    assert got == [] and code(err) == KafkaError.TOPIC_AUTHORIZATION_FAILED

    got, err = read(site, "cons", "traffic.speeds", 3)
    assert err is None and got[:3] == [b"prod-0", b"prod-1", b"prod-2"]
    assert [code(e) for e in produce(site, "cons", "traffic.speeds", 1)] == [
        KafkaError.TOPIC_AUTHORIZATION_FAILED
    ]

    # neither is given another stream's topics, nor may use them
    for user in ("prod", "cons"):
        visible = set(site.admin(user).list_topics(timeout=15).topics)
        assert {"traffic.speeds", "traffic.volumes"} <= visible
        assert not {t for t in visible if not t.startswith("traffic.")}, visible
    assert [code(e) for e in produce(site, "prod", "weather.rain", 1)] == [
        KafkaError.TOPIC_AUTHORIZATION_FAILED
    ]

    described = site.cli("describe", "traffic").stdout
    assert "produce (produceperm)" in described and "User:prod" in described
    assert "consume (consumeperm)" in described and "User:cons" in described


def test_a_group_acl_is_needed_to_commit_offsets(site: Site) -> None:
    site.cli("grant", "traffic", "cons", "--consume")

    def commit(group: str) -> int:
        # OffsetCommit as user cons, sent as a consumer sends it (our wire client: librdkafka's
        # commit waits ~45 s for a coordinator that FindCoordinator refuses it)
        conf = {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.username": "cons",
            "sasl.password": password("cons"),
        }
        part = OffsetCommitRequestPartition(partition_index=0, committed_offset=0)
        req = OffsetCommitRequest(
            group_id=group, topics=[OffsetCommitRequestTopic(name="traffic.volumes", partitions=[part])]
        )
        with from_client_config(site.sasl.split(",")[0], conf) as c:
            resp = c.send(req, OffsetCommitResponse)
        return int(resp.topics[0].partitions[0].error_code)

    assert commit("traffic.dashboard") == 0  # groups named <stream>.* come with consume
    assert commit("analytics") == KafkaError.GROUP_AUTHORIZATION_FAILED
    grant = binding(
        ResourceType.GROUP, "analytics", ResourcePatternType.LITERAL, "User:cons", AclOperation.READ
    )
    admin = site.admin()
    next(iter(admin.create_acls([grant]).values())).result(15)
    assert commit("analytics") == 0


def test_revoking_takes_effect_on_the_next_request(site: Site) -> None:
    site.cli("grant", "traffic", "prod", "--produce")
    p = Producer(site.conf("prod", **{"message.timeout.ms": 5000, "retries": 0}))
    assert produce(site, "prod", "traffic.volumes", 1, producer=p) == [None]
    site.cli("revoke", "traffic", "prod", "--produce")
    assert [code(e) for e in produce(site, "prod", "traffic.volumes", 1, producer=p)] == [
        KafkaError.TOPIC_AUTHORIZATION_FAILED
    ]
    site.cli("grant", "traffic", "prod", "--produce")
    assert produce(site, "prod", "traffic.volumes", 1) == [None]


def test_a_stream_admin_grants_on_its_stream_only(site: Site) -> None:
    site.cli("grant", "traffic", "sadmin", "--admin")
    site.cli("grant", "traffic", "tadmin", "--topic-admin")
    site.cli("grant", "traffic", "carol", "--consume", user="sadmin")
    assert "User:carol" in site.cli("describe", "traffic", user="sadmin").stdout
    assert produce(site, "admin", "traffic.speeds", 1) == [None]  # something to read, whatever ran before
    got, err = read(site, "carol", "traffic.speeds", 1)
    assert err is None and got

    refused = site.cli("grant", "weather", "carol", "--consume", user="sadmin", check=False)
    assert refused.returncode == 2 and "CLUSTER_AUTHORIZATION_FAILED" in refused.stderr
    refused = site.cli("grant", "traffic", "carol", "--produce", user="tadmin", check=False)
    assert refused.returncode == 2 and "CLUSTER_AUTHORIZATION_FAILED" in refused.stderr

    # the topic admin creates and configures the stream's topics, not others
    ta = site.admin("tadmin")
    ta.create_topics([NewTopic("traffic.incidents", 1, 1)])["traffic.incidents"].result(15)
    with pytest.raises(KafkaException) as ex:
        ta.create_topics([NewTopic("weather.wind", 1, 1)])["weather.wind"].result(15)
    assert ex.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    site.cli("revoke", "traffic", "carol", "--consume", user="sadmin")
    assert "User:carol" not in site.cli("describe", "traffic").stdout


def test_authorized_operations_are_the_principals(site: Site) -> None:
    site.cli("grant", "traffic", "prod", "--produce")
    prod, admin = site.admin("prod"), site.admin("admin")
    d = prod.describe_topics(TopicCollection(["traffic.speeds"]), include_authorized_operations=True)
    assert {op.name for op in d["traffic.speeds"].result(15).authorized_operations} == {"WRITE", "DESCRIBE"}
    cluster = prod.describe_cluster(include_authorized_operations=True).result(15)
    assert not cluster.authorized_operations  # no Describe on the cluster: none shown
    cluster = admin.describe_cluster(include_authorized_operations=True).result(15)
    assert {op.name for op in cluster.authorized_operations} >= {
        "ALTER",
        "DESCRIBE",
        "CLUSTER_ACTION",
        "CREATE",
    }


def test_an_idempotent_producer_needs_write_somewhere(site: Site) -> None:
    """InitProducerId: IdempotentWrite on the cluster or Write on some topic (Kafka's KIP-679)."""
    errors: list[Any] = []
    p = Producer(
        site.conf(
            "nobody",
            **{
                "enable.idempotence": True,
                "message.timeout.ms": 5000,
                "error_cb": errors.append,
            },
        )
    )
    delivered = produce(site, "nobody", "traffic.speeds", 1, producer=p)
    assert delivered[0] is not None
    assert {code(e) for e in errors + delivered} & {
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
    }


def test_a_transactional_producer_needs_write_on_its_transactional_id(site: Site) -> None:
    """Write on the transactional id (prefixed here) for InitProducerId and the rest of
    the transaction, Write on the topic for its records; another id is refused."""
    site.topics("txer.out")
    a = site.admin()
    acls = [
        binding(ResourceType.TOPIC, "txer.out", ResourcePatternType.LITERAL, "User:txer", AclOperation.WRITE),
        binding(
            ResourceType.TRANSACTIONAL_ID,
            "txer-",
            ResourcePatternType.PREFIXED,
            "User:txer",
            AclOperation.WRITE,
        ),
    ]
    for f in a.create_acls(acls).values():
        f.result(15)
    p = Producer(site.conf("txer", **{"transactional.id": "txer-app"}))
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("txer.out", value=b"in a transaction")
    p.commit_transaction(30)
    other = Producer(site.conf("txer", **{"transactional.id": "someone-else"}))
    with pytest.raises(KafkaException) as exc:
        other.init_transactions(15)
    assert code(exc.value.args[0]) == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


# -- a 3-broker cluster ------------------------------------------------------------------------------
def test_permissions_in_a_three_broker_cluster(tmp_path: Path) -> None:
    n = 3
    plain = [free_port() for _ in range(n)]
    sasl = [free_port() for _ in range(n)]
    for i in range(n):
        users_add(tmp_path / f"broker-{i + 1}")
    inter = {
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.mechanism.inter.broker.protocol": MECH,
        "sasl.inter.broker.username": "broker",
        "sasl.inter.broker.password": password("broker"),
    }
    cluster = ClusterProcesses(
        tmp_path,
        n,
        ports=plain,
        broker_overrides=[
            secured({"PLAINTEXT": plain[i], "SASL_PLAINTEXT": sasl[i]}, **inter) for i in range(n)
        ],
    ).start()
    try:
        site = Site(",".join(f"127.0.0.1:{p}" for p in sasl), cluster.bootstrap)
        one = Site(f"127.0.0.1:{sasl[0]}", "")
        two = Site(f"127.0.0.1:{sasl[1]}", "")
        eventually(lambda: one.cli("create", "traffic", check=False).returncode == 0, 30)
        site.topics("traffic.speeds", "other.topic", partitions=3, rf=3)
        one.cli("grant", "traffic", "prod", "--produce")
        one.cli("grant", "traffic", "cons", "--consume")

        # every broker leads a partition: each applies the ACLs the quorum committed
        p = Producer(site.conf("prod", **{"message.timeout.ms": 10000, "retries": 0}))
        errs: list[Any] = []
        for part in range(3):
            p.produce("traffic.speeds", value=b"x", partition=part, on_delivery=lambda e, _m: errs.append(e))
        p.flush(20)
        assert errs == [None] * 3
        assert set(site.admin("prod").list_topics(timeout=15).topics) == {"traffic.speeds"}
        got, err = read(site, "prod", "traffic.speeds", 1)
        assert code(err) == KafkaError.TOPIC_AUTHORIZATION_FAILED
        got, err = read(site, "cons", "traffic.speeds", 1)
        assert err is None and got == [b"x"]

        # revoked through another broker: refused by all three, leaders of each partition
        two.cli("revoke", "traffic", "prod", "--produce")

        def refused(producer: Producer) -> bool:
            """Every partition's record is refused, by its leader or (once the client's metadata
            carries the topic's error) by librdkafka at once."""
            errs.clear()
            for part in range(3):
                try:
                    producer.produce(
                        "traffic.speeds", value=b"y", partition=part, on_delivery=lambda e, _m: errs.append(e)
                    )
                except KafkaException as exc:
                    errs.append(exc.args[0])
            producer.flush(20)
            return [code(e) for e in errs] == [KafkaError.TOPIC_AUTHORIZATION_FAILED] * 3

        eventually(lambda: refused(p), 10)
        # each broker applied the revoke: a new client's first metadata comes from the broker
        # it bootstraps from, and its records go to the three leaders
        for port in sasl:
            alone = Site(f"127.0.0.1:{port}", "").conf("prod", **{"message.timeout.ms": 10000, "retries": 0})
            eventually(lambda conf=alone: refused(Producer(conf)), 10)
    finally:
        cluster.stop()
