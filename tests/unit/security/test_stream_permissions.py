"""Stream permissions (MapR's produceperm, consumeperm, topicperm, adminperm) as ACLs: what each
grants, who holds what, what a revoke deletes."""

from __future__ import annotations

import pytest

from framework.security.authorizer import (
    AclBinding,
    AclOperation,
    PatternType,
    Permission,
    ResourceType,
    StandardAuthorizer,
)
from framework.security.principal import KafkaPrincipal
from framework.security.stream_permissions import bindings, holders, stream_of, to_revoke

Op, Res = AclOperation, ResourceType
ALICE = KafkaPrincipal("User", "alice")


def can(acls: list[AclBinding], *checks: tuple[AclOperation, ResourceType, str]) -> list[bool]:
    a = StandardAuthorizer(acls)
    return [a.authorize(ALICE, "10.0.0.1", op, rt, name) for op, rt, name in checks]


def test_produce_writes_and_describes_the_streams_topics_only() -> None:
    acls = bindings("traffic", "produce", "User:alice")
    assert can(
        acls,
        (Op.WRITE, Res.TOPIC, "traffic.speeds"),
        (Op.DESCRIBE, Res.TOPIC, "traffic.speeds"),
        (Op.READ, Res.TOPIC, "traffic.speeds"),
        (Op.WRITE, Res.TOPIC, "weather.rain"),
        (Op.WRITE, Res.TOPIC, "trafficjam.x"),
    ) == [True, True, False, False, False]
    assert StandardAuthorizer(acls).authorize_by_resource_type(ALICE, "h", Op.WRITE, Res.TOPIC)


def test_consume_reads_topics_and_groups_of_the_stream() -> None:
    acls = bindings("traffic", "consume", "User:alice")
    assert can(
        acls,
        (Op.READ, Res.TOPIC, "traffic.speeds"),
        (Op.READ, Res.GROUP, "traffic.dashboard"),
        (Op.WRITE, Res.TOPIC, "traffic.speeds"),
        (Op.READ, Res.GROUP, "other"),
    ) == [True, True, False, False]


def test_topic_admin_and_admin_are_told_apart() -> None:
    topic_admin = StandardAuthorizer(bindings("traffic", "topic-admin", "User:alice"))
    admin = StandardAuthorizer(bindings("traffic", "admin", "User:alice"))
    for a in (topic_admin, admin):
        assert a.authorize(ALICE, "h", Op.ALTER, Res.TOPIC, "traffic.")
    assert not topic_admin.holds_literal(ALICE, "h", Op.ALTER, Res.TOPIC, "traffic.")
    assert admin.holds_literal(ALICE, "h", Op.ALTER, Res.TOPIC, "traffic.")
    assert topic_admin.authorize(ALICE, "h", Op.CREATE, Res.TOPIC, "traffic.new")
    assert not admin.authorize(ALICE, "h", Op.CREATE, Res.TOPIC, "traffic.new")


def test_stream_of_an_acl() -> None:
    def b(rt: ResourceType, name: str) -> AclBinding:
        return AclBinding(rt, name, PatternType.PREFIXED, "User:x", "*", Op.READ, Permission.ALLOW)

    assert stream_of(b(Res.TOPIC, "traffic.")) == "traffic"
    assert stream_of(b(Res.GROUP, "traffic.dash")) == "traffic"
    assert stream_of(b(Res.TOPIC, "traffic")) is None
    assert stream_of(b(Res.TOPIC, "*")) is None
    assert stream_of(b(Res.CLUSTER, "kafka-cluster")) is None
    with pytest.raises(ValueError, match="stream name"):
        bindings("a.b", "produce", "User:x")


def test_holders_and_revokes_keep_what_another_permission_needs() -> None:
    acls = [
        *bindings("traffic", "produce", "User:alice"),
        *bindings("traffic", "consume", "User:alice"),
        *bindings("traffic", "consume", "User:bob"),
        *bindings("weather", "admin", "User:bob"),
    ]
    extra = AclBinding(Res.TOPIC, "traffic.x", PatternType.LITERAL, "User:eve", "*", Op.READ, Permission.DENY)
    acls.append(extra)
    who, others = holders("traffic", acls)
    assert [(h.principal, h.permissions) for h in who] == [
        ("User:alice", ("produce", "consume")),
        ("User:bob", ("consume",)),
    ]
    assert others == [extra]
    gone = to_revoke("traffic", "produce", "User:alice", "*", acls)
    assert [(b.operation, b.pattern_type) for b in gone] == [
        (Op.WRITE, PatternType.PREFIXED)
    ]  # Describe stays
    assert len(to_revoke("traffic", "consume", "User:bob", "*", acls)) == 3
