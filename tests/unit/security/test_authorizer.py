"""The authorizer's decision table, from Kafka's rules (StandardAuthorizerData) and the cases of
Kafka's own StandardAuthorizerTest / AuthorizerInterfaceDefaultTest, translated one for one
where they exist (the test names say which)."""

from __future__ import annotations

import pytest

from framework import config as cfg
from framework.errors import ConfigError, InvalidRequest
from framework.security.authorizer import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    PatternType,
    Permission,
    ResourceType,
    StandardAuthorizer,
    check_new,
    parse_super_users,
)
from framework.security.principal import KafkaPrincipal

T, G, C, X = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
Op = AclOperation
ALLOW, DENY = Permission.ALLOW, Permission.DENY
HOST = "127.0.0.1"


def acl(
    rt: ResourceType,
    name: str,
    pt: PatternType,
    who: str,
    op: AclOperation,
    perm: Permission,
    host: str = "*",
) -> AclBinding:
    return AclBinding(rt, name, pt, who, host, op, perm)


def user(name: str) -> KafkaPrincipal:
    return KafkaPrincipal("User", name)


def decide(
    a: StandardAuthorizer, who: str, *actions: tuple[AclOperation, ResourceType, str], host: str = HOST
) -> list[bool]:
    return [a.authorize(user(who), host, op, rt, name) for op, rt, name in actions]


# -- findResult: implication and principal matching (testFindResultImplication ...) ---------------
@pytest.mark.parametrize("op", [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.DESCRIBE])
def test_an_allow_of_read_write_delete_alter_implies_describe(op: AclOperation) -> None:
    a = StandardAuthorizer([acl(T, "foo_", PRE, "User:bob", op, ALLOW)])
    assert decide(a, "bob", (Op.DESCRIBE, T, "foo_bar")) == [True]


@pytest.mark.parametrize("op", [Op.CREATE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, Op.CLUSTER_ACTION])
def test_other_allows_do_not_imply_describe(op: AclOperation) -> None:
    a = StandardAuthorizer([acl(T, "foo_", PRE, "User:bob", op, ALLOW)])
    assert decide(a, "bob", (Op.DESCRIBE, T, "foo_bar")) == [False]


@pytest.mark.parametrize("op", [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER])
def test_a_deny_implies_nothing(op: AclOperation) -> None:
    """DENY Read does not deny Describe (it still makes the resource one with ACLs)."""
    a = StandardAuthorizer(
        [acl(T, "foo_", PRE, "User:bob", op, DENY), acl(T, "foo_", PRE, "User:bob", Op.DESCRIBE, ALLOW)]
    )
    assert decide(a, "bob", (Op.DESCRIBE, T, "foo_bar"), (op, T, "foo_bar")) == [True, False]


def test_deny_describe_denies_describe() -> None:
    a = StandardAuthorizer(
        [acl(T, "foo_", PRE, "User:bob", Op.DESCRIBE, DENY), acl(T, "foo_", PRE, "User:bob", Op.READ, ALLOW)]
    )
    assert decide(a, "bob", (Op.DESCRIBE, T, "foo_bar"), (Op.READ, T, "foo_bar")) == [False, True]


def test_alter_configs_implies_describe_configs_only_when_allowed() -> None:
    allow = StandardAuthorizer([acl(T, "foo_", PRE, "User:bob", Op.ALTER_CONFIGS, ALLOW)])
    assert decide(allow, "bob", (Op.DESCRIBE_CONFIGS, T, "foo_bar"), (Op.DESCRIBE, T, "foo_bar")) == [
        True,
        False,
    ]
    deny = StandardAuthorizer(
        [
            acl(T, "foo_", PRE, "User:bob", Op.ALTER_CONFIGS, DENY),
            acl(T, "foo_", PRE, "User:bob", Op.DESCRIBE_CONFIGS, ALLOW),
        ]
    )
    assert decide(deny, "bob", (Op.DESCRIBE_CONFIGS, T, "foo_bar"), (Op.ALTER_CONFIGS, T, "foo_bar")) == [
        True,
        False,
    ]


def test_principal_matching_the_user_or_the_wildcard_user() -> None:
    a = StandardAuthorizer(
        [acl(T, "foo_", PRE, "User:bob", Op.READ, ALLOW), acl(G, "bar", LIT, "User:*", Op.READ, DENY)]
    )
    assert decide(a, "bob", (Op.READ, T, "foo_bar")) == [True]
    assert decide(a, "alice", (Op.READ, T, "foo_bar")) == [False]  # ACLs on it, none applies
    assert decide(a, "bob", (Op.READ, G, "bar")) == [False]
    # a principal type other than User is another principal
    assert not a.authorize(KafkaPrincipal("Group", "bob"), HOST, Op.READ, T, "foo_bar")


# -- testSimpleAuthorizations / testDenyPrecedenceWithOperationAll / testTopicAclWithOperationAll -
def test_simple_authorizations() -> None:
    a = StandardAuthorizer(
        [
            acl(T, "foo_", PRE, "User:bob", Op.READ, ALLOW),
            acl(T, "foo_", PRE, "User:bob", Op.WRITE, ALLOW),
            acl(G, "bar", LIT, "User:bob", Op.DESCRIBE_CONFIGS, ALLOW),
            acl(G, "bar", LIT, "User:bob", Op.ALTER_CONFIGS, ALLOW),
        ]
    )
    assert decide(a, "bob", (Op.READ, T, "foo_"), (Op.ALTER_CONFIGS, G, "bar")) == [True, True]
    assert decide(a, "bob", (Op.READ, T, "foo"), (Op.DELETE, G, "bar")) == [False, False]


def test_deny_precedence_with_operation_all() -> None:
    a = StandardAuthorizer(
        [
            acl(T, "foo", LIT, "User:alice", Op.ALL, DENY),
            acl(T, "foo", PRE, "User:alice", Op.READ, ALLOW),
            acl(T, "foo", LIT, "User:*", Op.ALL, DENY),
            acl(T, "foo", PRE, "User:*", Op.DESCRIBE, ALLOW),
        ]
    )
    assert decide(
        a, "alice", (Op.WRITE, T, "foo"), (Op.READ, T, "foo"), (Op.DESCRIBE, T, "foo"), (Op.READ, T, "foobar")
    ) == [
        False,
        False,
        False,
        True,
    ]
    got = decide(
        a,
        "bob",
        (Op.DESCRIBE, T, "foo"),
        (Op.READ, T, "foo"),
        (Op.WRITE, T, "foo"),
        (Op.DESCRIBE, T, "foobaz"),
        (Op.READ, T, "foobaz"),
    )
    assert got == [False, False, False, True, False]


def test_topic_acl_with_operation_all() -> None:
    a = StandardAuthorizer(
        [
            acl(T, "foo", LIT, "User:*", Op.ALL, ALLOW),
            acl(T, "bar", PRE, "User:alice", Op.ALL, ALLOW),
            acl(T, "baz", LIT, "User:bob", Op.ALL, ALLOW),
        ]
    )
    assert decide(
        a, "alice", (Op.WRITE, T, "foo"), (Op.DESCRIBE_CONFIGS, T, "bar"), (Op.DESCRIBE, T, "baz")
    ) == [
        True,
        True,
        False,
    ]
    assert decide(a, "bob", (Op.WRITE, T, "foo"), (Op.READ, T, "bar"), (Op.DESCRIBE, T, "baz")) == [
        True,
        False,
        True,
    ]
    assert decide(a, "malory", (Op.DESCRIBE, T, "foo"), (Op.WRITE, T, "bar"), (Op.READ, T, "baz")) == [
        True,
        False,
        False,
    ]


# -- hosts (testHostAddressAclValidation) ------------------------------------------------------------
def test_host_address_acls() -> None:
    h1, h2, local = "192.168.1.1", "192.168.1.2", "10.0.0.5"
    a = StandardAuthorizer(
        [
            acl(T, "foo", LIT, "User:alice", Op.READ, DENY, host=h1),
            acl(T, "foo", LIT, "User:alice", Op.READ, ALLOW),
            acl(T, "bar", LIT, "User:bob", Op.READ, ALLOW, host=h2),
            acl(T, "bar", LIT, "User:*", Op.DESCRIBE, ALLOW, host=local),
        ]
    )
    actions = [(Op.READ, T, "foo"), (Op.READ, T, "bar"), (Op.DESCRIBE, T, "bar")]
    assert decide(a, "alice", *actions, host=local) == [True, False, True]
    assert decide(a, "alice", *actions, host=h1) == [False, False, False]
    assert decide(a, "alice", *actions, host=h2) == [True, False, False]
    assert decide(a, "bob", *actions, host=local) == [False, False, True]
    assert decide(a, "bob", *actions, host=h1) == [False, False, False]
    assert decide(a, "bob", *actions, host=h2) == [False, True, True]


# -- patterns (testAuthorizationWithManyAcls, testPrefixAcls) ---------------------------------------
def many() -> StandardAuthorizer:
    return StandardAuthorizer(
        [
            acl(T, "green2", LIT, "User:*", Op.READ, ALLOW),
            acl(T, "green", PRE, "User:bob", Op.READ, ALLOW),
            acl(T, "betamax4", LIT, "User:bob", Op.READ, ALLOW),
            acl(T, "betamax", LIT, "User:bob", Op.READ, ALLOW),
            acl(T, "beta", PRE, "User:*", Op.READ, ALLOW),
            acl(T, "alpha", PRE, "User:*", Op.READ, ALLOW),
            acl(T, "alp", PRE, "User:bob", Op.READ, DENY),
            acl(G, "*", LIT, "User:bob", Op.WRITE, ALLOW),
            acl(G, "wheel", LIT, "User:*", Op.WRITE, DENY),
        ]
    )


def test_authorization_with_many_acls() -> None:
    a = many()
    assert decide(a, "bob", (Op.READ, T, "green1"), (Op.WRITE, G, "wheel")) == [True, False]
    assert decide(a, "bob", (Op.READ, T, "alpha"), (Op.WRITE, G, "arbitrary"), (Op.READ, T, "ala")) == [
        False,
        True,
        False,
    ]
    assert decide(a, "alice", (Op.READ, T, "alphabet"), (Op.READ, T, "betamax"), (Op.READ, T, "green1")) == [
        True,
        True,
        False,
    ]


def test_prefix_acls() -> None:
    a = StandardAuthorizer(
        [
            acl(T, "fooa", PRE, "User:alice", Op.ALL, ALLOW),
            acl(T, "foobar", LIT, "User:bob", Op.ALL, ALLOW),
            acl(T, "f", PRE, "User:bob", Op.ALL, ALLOW),
        ]
    )
    assert decide(a, "bob", (Op.WRITE, T, "foobarr"), (Op.READ, T, "goobar"), (Op.READ, T, "fooa")) == [
        True,
        False,
        True,
    ]
    assert decide(a, "alice", (Op.DESCRIBE, T, "fooa"), (Op.WRITE, T, "bar"), (Op.READ, T, "baz")) == [
        True,
        False,
        False,
    ]


def test_a_literal_acl_is_not_a_prefix_and_the_wildcard_is_literal_only() -> None:
    a = StandardAuthorizer(
        [acl(T, "foo", LIT, "User:bob", Op.READ, ALLOW), acl(T, "*", PRE, "User:bob", Op.WRITE, ALLOW)]
    )
    assert decide(a, "bob", (Op.READ, T, "foo"), (Op.READ, T, "foobar")) == [True, False]
    # a PREFIXED "*" is the prefix "*", not "any name"
    assert decide(a, "bob", (Op.WRITE, T, "x"), (Op.WRITE, T, "*x")) == [False, True]


def test_wildcard_literal_matches_every_name_of_its_resource_type_only() -> None:
    a = StandardAuthorizer([acl(T, "*", LIT, "User:*", Op.READ, ALLOW)])
    assert decide(a, "eve", (Op.READ, T, "anything"), (Op.READ, T, "*"), (Op.READ, G, "anything")) == [
        True,
        True,
        False,
    ]


def test_the_cluster_resource() -> None:
    a = StandardAuthorizer([acl(C, CLUSTER_NAME, LIT, "User:ops", Op.ALTER, ALLOW)])
    assert decide(a, "ops", (Op.ALTER, C, CLUSTER_NAME), (Op.DESCRIBE, C, CLUSTER_NAME)) == [True, True]
    assert decide(a, "ops", (Op.CLUSTER_ACTION, C, CLUSTER_NAME)) == [False]


# -- super.users and allow.everyone.if.no.acl.found (testAllowEveryoneIfNoAclFound ...) --------------
@pytest.mark.parametrize(("allow_everyone", "expected"), [(True, [False, True]), (False, [False, False])])
def test_allow_everyone_if_no_acl_found(allow_everyone: bool, expected: list[bool]) -> None:
    """topic1 has an ACL (for Alice): Bob is denied whatever the setting; topic2 has none."""
    a = StandardAuthorizer(
        [acl(T, "topic1", LIT, "User:Alice", Op.READ, ALLOW)], allow_if_no_acl=allow_everyone
    )
    assert decide(a, "Bob", (Op.READ, T, "topic1"), (Op.READ, T, "topic2")) == expected


def test_super_users_may_do_anything_even_when_denied() -> None:
    a = StandardAuthorizer(
        [acl(T, "*", LIT, "User:*", Op.ALL, DENY)], super_users=parse_super_users("User:admin; User:broker")
    )
    assert decide(a, "admin", (Op.WRITE, T, "x"), (Op.CLUSTER_ACTION, C, CLUSTER_NAME)) == [True, True]
    assert decide(a, "broker", (Op.READ, T, "x")) == [True]
    assert decide(a, "alice", (Op.READ, T, "x")) == [False]
    assert a.authorized_operations(user("admin"), HOST, G, "g") == sum(
        1 << op for op in (Op.READ, Op.DELETE, Op.DESCRIBE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS)
    )


def test_super_users_are_parsed_as_kafka_does() -> None:
    assert parse_super_users("") == frozenset()
    assert parse_super_users(" User:a ;;User:b") == {"User:a", "User:b"}
    with pytest.raises(ConfigError):
        parse_super_users("admin")


def test_authorizer_class_name_is_kafkas_exactly() -> None:
    key = cfg.key("authorizer.class.name")
    assert key.parse("org.apache.kafka.metadata.authorizer.StandardAuthorizer")
    assert key.parse("") == ""
    for other in ("kafka.security.authorizer.AclAuthorizer", "StandardAuthorizer", "true"):
        with pytest.raises(
            ConfigError, match=r"org\.apache\.kafka\.metadata\.authorizer\.StandardAuthorizer"
        ):
            key.parse(other)
    assert cfg.key("allow.everyone.if.no.acl.found").default is False


# -- authorized operations (the bit fields of Metadata, DescribeGroups, DescribeCluster) -------------
def test_authorized_operations_bits() -> None:
    a = StandardAuthorizer(
        [
            acl(T, "t", LIT, "User:bob", Op.WRITE, ALLOW),
            acl(T, "t", LIT, "User:bob", Op.ALTER_CONFIGS, ALLOW),
            acl(C, CLUSTER_NAME, LIT, "User:bob", Op.IDEMPOTENT_WRITE, ALLOW),
        ]
    )
    bits = a.authorized_operations(user("bob"), HOST, T, "t")
    assert bits == (1 << Op.WRITE) | (1 << Op.DESCRIBE) | (1 << Op.ALTER_CONFIGS) | (1 << Op.DESCRIBE_CONFIGS)
    assert a.authorized_operations(user("bob"), HOST, C, CLUSTER_NAME) == 1 << Op.IDEMPOTENT_WRITE
    assert a.authorized_operations(user("eve"), HOST, T, "t") == 0


# -- authorizeByResourceType (Kafka's AuthorizerInterfaceDefaultTest cases) ---------------------------
def by_type(
    a: StandardAuthorizer, who: str = "alice", op: AclOperation = Op.WRITE, rt: ResourceType = T
) -> bool:
    return a.authorize_by_resource_type(user(who), HOST, op, rt)


def test_by_resource_type_needs_some_allow() -> None:
    assert not by_type(StandardAuthorizer())
    assert by_type(StandardAuthorizer(allow_if_no_acl=True))  # "hardcode" has no ACLs: allowed
    assert by_type(StandardAuthorizer([acl(T, "t1", LIT, "User:alice", Op.WRITE, ALLOW)]))
    assert by_type(StandardAuthorizer([acl(T, "t", PRE, "User:*", Op.ALL, ALLOW)]))
    assert not by_type(StandardAuthorizer([acl(T, "t1", LIT, "User:alice", Op.READ, ALLOW)]))
    assert not by_type(StandardAuthorizer([acl(T, "t1", LIT, "User:bob", Op.WRITE, ALLOW)]))
    assert not by_type(
        StandardAuthorizer([acl(T, "t1", LIT, "User:alice", Op.WRITE, ALLOW, host="10.9.9.9")])
    )


def test_by_resource_type_deny_dominance() -> None:
    allow_lit = acl(T, "foo", LIT, "User:alice", Op.WRITE, ALLOW)
    allow_pre = acl(T, "foobar", PRE, "User:alice", Op.WRITE, ALLOW)
    assert not by_type(StandardAuthorizer([allow_lit, acl(T, "foo", LIT, "User:alice", Op.WRITE, DENY)]))
    assert not by_type(StandardAuthorizer([allow_lit, acl(T, "fo", PRE, "User:alice", Op.WRITE, DENY)]))
    assert not by_type(StandardAuthorizer([allow_pre, acl(T, "foo", PRE, "User:*", Op.ALL, DENY)]))
    # a deny of a longer prefix does not dominate the allow of a shorter one
    assert by_type(StandardAuthorizer([allow_pre, acl(T, "foobarbaz", PRE, "User:alice", Op.WRITE, DENY)]))
    # a literal deny does not dominate a prefixed allow
    assert by_type(StandardAuthorizer([allow_pre, acl(T, "foobar", LIT, "User:alice", Op.WRITE, DENY)]))
    # a wildcard deny denies every allow, a wildcard allow allows
    assert not by_type(StandardAuthorizer([allow_lit, acl(T, "*", LIT, "User:alice", Op.WRITE, DENY)]))
    assert by_type(StandardAuthorizer([acl(T, "*", LIT, "User:alice", Op.WRITE, ALLOW)]))


def test_by_resource_type_super_user() -> None:
    assert by_type(StandardAuthorizer([acl(T, "*", LIT, "User:*", Op.ALL, DENY)], super_users={"User:alice"}))


# -- the literal-only check behind stream admins (adminperm) ------------------------------------------
def test_holds_literal_tells_a_literal_grant_from_a_prefixed_one() -> None:
    a = StandardAuthorizer(
        [
            acl(T, "s.", LIT, "User:admin", Op.ALTER, ALLOW),
            acl(T, "s.", PRE, "User:topics", Op.ALTER, ALLOW),
            acl(T, "s.", LIT, "User:blocked", Op.ALTER, ALLOW),
            acl(T, "s", PRE, "User:blocked", Op.ALTER, DENY),
        ]
    )

    def holds(who: str) -> bool:
        return a.holds_literal(user(who), HOST, Op.ALTER, T, "s.")

    assert [holds(w) for w in ("admin", "topics", "blocked", "eve")] == [True, False, False, False]
    assert decide(a, "topics", (Op.ALTER, T, "s.")) == [True]  # authorize() does not tell them apart


# -- the decision cache ------------------------------------------------------------------------------
def test_decisions_are_cached_per_connection_until_the_acls_change() -> None:
    a = StandardAuthorizer([acl(T, "t", LIT, "User:bob", Op.WRITE, ALLOW)])
    s = a.session(user("bob"), HOST)
    assert s.allowed(Op.WRITE, T, "t") and not s.allowed(Op.READ, T, "t")
    a.load([acl(T, "t", LIT, "User:bob", Op.READ, ALLOW)])  # WRITE revoked, READ granted
    assert not s.allowed(Op.WRITE, T, "t") and s.allowed(Op.READ, T, "t")
    calls = []
    real = a.authorize
    a.authorize = lambda *args: calls.append(args) or real(*args)  # type: ignore[method-assign]
    for _ in range(3):
        s.allowed(Op.READ, T, "t")
    assert calls == []  # answered from the cache


# -- ACLs to create, filters -------------------------------------------------------------------------
def test_new_acls_are_checked_as_kafka_does() -> None:
    check_new(acl(T, "t", LIT, "User:bob", Op.READ, ALLOW))
    bad = [
        AclBinding(ResourceType.ANY, "t", LIT, "User:bob", "*", Op.READ, ALLOW),
        AclBinding(T, "t", PatternType.MATCH, "User:bob", "*", Op.READ, ALLOW),
        AclBinding(T, "t", LIT, "User:bob", "*", Op.ANY, ALLOW),
        AclBinding(T, "t", LIT, "User:bob", "*", Op.READ, Permission.ANY),
        AclBinding(T, "", LIT, "User:bob", "*", Op.READ, ALLOW),
        AclBinding(C, "other", LIT, "User:bob", "*", Op.ALTER, ALLOW),
        AclBinding(T, "t", LIT, "bob", "*", Op.READ, ALLOW),
        AclBinding.of(2, "t", 3, "User:bob", "*", 99, 3),  # an unknown operation code
    ]
    for b in bad:
        with pytest.raises(InvalidRequest):
            check_new(b)


def test_bindings_round_trip_through_their_stored_form() -> None:
    b = acl(T, "s.", PRE, "User:bob", Op.WRITE, DENY, host="10.0.0.1")
    assert AclBinding.from_json(b.to_json()) == b


def test_filters_as_kafka_matches_them() -> None:
    lit = acl(T, "foo", LIT, "User:bob", Op.READ, ALLOW)
    pre = acl(T, "fo", PRE, "User:bob", Op.READ, ALLOW)
    star = acl(T, "*", LIT, "User:alice", Op.WRITE, DENY)
    grp = acl(G, "foo", LIT, "User:bob", Op.READ, ALLOW)
    everything = [lit, pre, star, grp]

    def sel(**kw: object) -> list[AclBinding]:
        f = AclBindingFilter(**kw)  # type: ignore[arg-type]
        return [b for b in everything if f.matches(b)]

    assert sel() == everything
    assert sel(resource_type=T) == [lit, pre, star]
    assert sel(resource_type=T, name="foo") == [lit]  # ANY pattern: the name as is
    assert sel(resource_type=T, name="foo", pattern_type=PatternType.MATCH) == [lit, pre, star]
    assert sel(name="fo", pattern_type=PRE) == [pre]
    assert sel(pattern_type=LIT) == [lit, star, grp]
    assert sel(principal="User:alice") == [star]
    assert sel(operation=Op.READ, permission=ALLOW) == [lit, pre, grp]
    assert sel(host="10.0.0.1") == []
    with pytest.raises(InvalidRequest):
        AclBindingFilter.of(2, None, 0, None, None, 1, 1).check()
    with pytest.raises(InvalidRequest):
        AclBindingFilter.of(2, None, 1, None, None, 0, 1).check()
