"""``sftraffic acls``: the ACLs and filters its flags make, as kafka-acls makes them
(framework/cli/acls.py, framework/client/acls.py)."""

from __future__ import annotations

import pytest

from framework.cli.acls import to_add, to_list, to_remove
from framework.cli.main import build_parser
from framework.client.acls import parse_operation, principal_of
from framework.errors import StoreError
from framework.security.authorizer import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    PatternType,
    Permission,
    ResourceType,
)

Op, R, P = AclOperation, ResourceType, PatternType


def _args(action: str, *argv: str):  # type: ignore[no-untyped-def]
    return build_parser().parse_args(["acls", action, *argv])


@pytest.mark.parametrize(
    "text", ["DescribeConfigs", "describe-configs", "DESCRIBE_CONFIGS", "describeconfigs"]
)
def test_operations_in_any_of_kafkas_spellings(text: str) -> None:
    assert parse_operation(text) == Op.DESCRIBE_CONFIGS


def test_an_operation_the_resource_has_not_is_refused() -> None:
    with pytest.raises(StoreError, match="a GROUP has only All, Read"):
        parse_operation("Write", R.GROUP)
    with pytest.raises(StoreError, match="one of All, Read"):
        parse_operation("Fly")


def test_principals() -> None:
    assert principal_of("alice") == "User:alice"
    assert principal_of("User:*") == "User:*"
    with pytest.raises(StoreError):
        principal_of("User:")


def test_add_one_acl_per_resource_operation_principal_and_host() -> None:
    got = to_add(
        _args(
            "add", "--allow-principal", "alice", "--deny-principal", "User:mallory",
            "--deny-host", "10.0.0.9", "--operation", "Read", "--operation", "Describe",
            "--topic", "traffic.", "--resource-pattern-type", "prefixed",
        )
    )  # fmt: skip
    t = (R.TOPIC, "traffic.", P.PREFIXED)
    assert set(got) == {
        AclBinding(*t, "User:alice", "*", Op.READ, Permission.ALLOW),
        AclBinding(*t, "User:alice", "*", Op.DESCRIBE, Permission.ALLOW),
        AclBinding(*t, "User:mallory", "10.0.0.9", Op.READ, Permission.DENY),
        AclBinding(*t, "User:mallory", "10.0.0.9", Op.DESCRIBE, Permission.DENY),
    }


def test_add_defaults_to_all_on_a_literal_pattern() -> None:
    (b,) = to_add(_args("add", "--allow-principal", "bob", "--cluster"))
    assert b == AclBinding(R.CLUSTER, "kafka-cluster", P.LITERAL, "User:bob", "*", Op.ALL, Permission.ALLOW)


def test_producer_and_consumer_shortcuts() -> None:
    prod = to_add(
        _args("add", "--allow-principal", "p", "--producer", "--topic", "t", "--transactional-id", "x")
    )
    assert {(b.resource_type, b.operation) for b in prod} == {
        (R.TOPIC, Op.WRITE), (R.TOPIC, Op.DESCRIBE), (R.TOPIC, Op.CREATE),
        (R.TRANSACTIONAL_ID, Op.WRITE), (R.TRANSACTIONAL_ID, Op.DESCRIBE),
    }  # fmt: skip
    cons = to_add(_args("add", "--allow-principal", "c", "--consumer", "--topic", "t", "--group", "g"))
    assert {(b.resource_type, b.operation) for b in cons} == {
        (R.TOPIC, Op.READ), (R.TOPIC, Op.DESCRIBE), (R.GROUP, Op.READ),
    }  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--allow-principal", "a"), "name a resource"),
        (("--topic", "t"), "name a principal"),
        (("--allow-principal", "a", "--consumer", "--topic", "t"), "needs --group"),
        (("--allow-principal", "a", "--topic", "t", "--resource-pattern-type", "match"), "literal, prefixed"),
        (("--allow-principal", "a", "--group", "g", "--operation", "Write"), "a GROUP has only"),
    ],
)
def test_bad_additions_are_one_line(argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(StoreError, match=message):
        to_add(_args("add", *argv))


def test_remove_without_operation_takes_every_operation_of_the_principal() -> None:
    (f,) = to_remove(_args("remove", "--allow-principal", "alice", "--topic", "t"))
    assert f == AclBindingFilter(R.TOPIC, "t", P.LITERAL, "User:alice", None, Op.ANY, Permission.ALLOW)


def test_remove_of_every_acl_of_a_resource_needs_force() -> None:
    with pytest.raises(StoreError, match="--force"):
        to_remove(_args("remove", "--topic", "t"))
    (f,) = to_remove(_args("remove", "--topic", "t", "--force"))
    assert f == AclBindingFilter(R.TOPIC, "t", P.LITERAL, None, None, Op.ANY, Permission.ANY)


def test_list_filters() -> None:
    assert to_list(_args("list")) == [AclBindingFilter()]
    got = to_list(_args("list", "--topic", "t", "--principal", "alice", "--resource-pattern-type", "match"))
    assert got == [AclBindingFilter(R.TOPIC, "t", P.MATCH, "User:alice")]
