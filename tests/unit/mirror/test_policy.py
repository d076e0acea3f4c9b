"""Remote topic names (DefaultReplicationPolicy) and what is never mirrored."""

from __future__ import annotations

import pytest

from mirror.policy import ReplicationPolicy, copied_configs


def test_names() -> None:
    p = ReplicationPolicy("east", "west")
    assert p.remote_topic("traffic_monitoring.traffic") == "east.traffic_monitoring.traffic"
    assert p.upstream_topic("east.orders") == "orders"
    assert p.upstream_topic("north.orders") is None
    assert p.offsets_topic == "mm2-offsets.east.internal"
    assert p.offset_syncs_topic == "mm2-offset-syncs.east.internal"
    assert p.checkpoints_topic == "east.checkpoints.internal"


def test_internal_topics_and_copies_from_the_target_are_never_mirrored() -> None:
    p = ReplicationPolicy("east", "west", topics=".*")
    for t in ("__consumer_offsets", "mm2-offsets.x.internal", "x.checkpoints.internal", "west.orders"):
        assert not p.mirrors_topic(t), t
    assert p.mirrors_topic("orders") and p.mirrors_topic("north.orders")
    assert not ReplicationPolicy("east", topics="orders|events").mirrors_topic("orders2")


def test_groups() -> None:
    p = ReplicationPolicy("east", groups="app-.*")
    assert p.mirrors_group("app-1")
    assert not p.mirrors_group("other")
    assert not ReplicationPolicy("east").mirrors_group("console-consumer-42")


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"source_alias": "a.b"}, "no dot"),
        ({"source_alias": "x", "target_alias": "x"}, "must differ"),
        ({"source_alias": "x", "topics": "("}, "--topics"),
    ],
)
def test_bad_settings_are_one_line_errors(kw: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ReplicationPolicy(**kw)


def test_configs_copied_by_allow_list() -> None:
    got = copied_configs({"retention.ms": "1", "min.insync.replicas": "2", "message.timestamp.type": "x"})
    assert got == {"retention.ms": "1"}
