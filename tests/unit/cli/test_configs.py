"""``sftraffic configs``: kafka-configs' --add-config / --delete-config and entity flags, and the
names of DescribeConfigs' sources (framework/cli/configs.py, framework/client/admin.py)."""

from __future__ import annotations

import pytest

from framework.cli.configs import Target, parse_add_config, parse_delete_config, quota_values, target
from framework.cli.main import build_parser
from framework.client.admin import source_name
from framework.errors import StoreError


def _target(*argv: str) -> Target:
    return target(build_parser().parse_args(["configs", "describe", *argv]))


def test_add_config_splits_on_commas_outside_brackets() -> None:
    got = parse_add_config(["cleanup.policy=[compact,delete],retention.ms=9000", "segment.ms = 60000"])
    assert got == {"cleanup.policy": "compact,delete", "retention.ms": "9000", "segment.ms": "60000"}


@pytest.mark.parametrize("bad", ["retention.ms", "=5", "a=1,b"])
def test_add_config_refuses_an_item_without_key_and_value(bad: str) -> None:
    with pytest.raises(StoreError, match="expected KEY=VALUE"):
        parse_add_config([bad])


def test_delete_config_takes_commas_and_repeats() -> None:
    assert parse_delete_config(["a,b", "c", "a"]) == ["a", "b", "c"]
    with pytest.raises(StoreError):
        parse_delete_config(["a,,b"])


def test_quota_values_are_numbers_and_scram_goes_to_users() -> None:
    assert quota_values({"producer_byte_rate": "1048576"}) == {"producer_byte_rate": 1048576.0}
    with pytest.raises(StoreError, match="a quota is a number"):
        quota_values({"producer_byte_rate": "fast"})
    with pytest.raises(StoreError, match="sftraffic users add"):
        quota_values({"SCRAM-SHA-256": "[password=x]"})


def test_entities() -> None:
    assert _target("--topic", "t") == Target("topic", "t")
    assert _target("--broker", "2") == Target("broker", "2")
    assert _target("--broker-defaults") == Target("broker", "")
    assert _target("--user", "alice") == Target("quota", entity=(("user", "alice"),))
    assert _target("--user", "alice", "--client", "app") == Target(
        "quota", entity=(("user", "alice"), ("client-id", "app"))
    )
    assert _target("--client-defaults") == Target("quota", entity=(("client-id", None),))
    assert str(_target("--user-defaults", "--client", "app")) == "user <default>, client-id app"


def test_kafka_configs_entity_spelling() -> None:
    assert _target("--entity-type", "topics", "--entity-name", "t") == Target("topic", "t")
    assert _target("--entity-type", "brokers", "--entity-default") == Target("broker", "")
    assert _target("--entity-type", "users", "--entity-name", "bob") == Target(
        "quota", entity=(("user", "bob"),)
    )
    every = _target("--entity-type", "clients")
    assert every == Target("quota", entity=(("client-id", None),), names_given=False)
    assert str(every) == "every client-id"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ((), "name the entity"),
        (("--topic", "t", "--broker", "1"), "one entity at a time"),
        (("--topic", "t", "--user", "u"), "one entity at a time"),
        (("--broker", "one"), "node id"),
        (("--entity-type", "topics"), "needs --entity-name"),
        (("--entity-name", "x"), "go with --entity-type"),
        (("--entity-type", "users", "--user", "u"), "give one of them"),
    ],
)
def test_bad_entities_are_one_line(argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(StoreError, match=message):
        _target(*argv)


def test_source_names_tell_a_stream_value_by_its_synonym() -> None:
    assert source_name(1) == "topic"
    assert source_name(5) == "default"
    assert source_name(4) == "static_broker"
    assert source_name(3) == "dynamic_default_broker"
    assert source_name(3, [("stream:traffic:retention.ms", 3), ("log.retention.ms", 5)]) == "stream"
    assert source_name(42) == "unknown"
