"""Cluster metadata: topics, streams, configs and their persistence (metadata/store.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from framework import config as cfg
from framework.errors import (
    ConfigError,
    ErrorCode,
    InvalidPartitions,
    InvalidReplicationFactor,
    InvalidRequest,
    InvalidTopic,
    PolicyViolation,
    StoreError,
    TopicAlreadyExists,
    UnknownTopicOrPartition,
)
from framework.metadata.store import (
    MetadataStore,
    StreamAlreadyExists,
    TopicInfo,
    UnknownStream,
)
from framework.security.authorizer import AclBinding, AclBindingFilter, PatternType

DAY = 86_400_000


def _store(tmp_path: Path, **overrides: Any) -> MetadataStore:
    s = MetadataStore(tmp_path, cfg.BrokerConfig.load(overrides=overrides, environ={}))
    s.load()
    return s


def _reload(s: MetadataStore) -> MetadataStore:
    again = MetadataStore(s.dir.parent, s.broker)
    again.load()
    return again


@pytest.fixture
def store(tmp_path: Path) -> MetadataStore:
    return _store(tmp_path)


# ---------------------------------------------------------------------------------------
# topics


def test_create_topic_defaults_from_broker(tmp_path: Path) -> None:
    s = _store(tmp_path, **{"num.partitions": 3})
    t = s.create_topic("sensors")
    assert t.partitions == 3 and t.replication_factor == 1
    assert t.assignments == [[1], [1], [1]]
    assert len(t.topic_id) == 32 and s.topics_by_id[t.id_bytes] is t
    assert t.stream is None and t.configs == {} and t.created_ms > 0
    assert s.topic("sensors") is t


def test_create_topic_explicit_counts_and_replica_spread(store: MetadataStore) -> None:
    t = store.create_topic("speeds", 4, 2, brokers=[1, 2, 3])
    assert t.assignments == [[1, 2], [2, 3], [3, 1], [1, 2]]
    assert all(len(set(a)) == 2 for a in t.assignments)


def test_create_topic_with_assignments(store: MetadataStore) -> None:
    t = store.create_topic("a", assignments=[[2, 1], [1, 2]], brokers=[1, 2])
    assert t.assignments == [[2, 1], [1, 2]] and t.replication_factor == 2
    with pytest.raises(InvalidRequest):
        store.create_topic("b", assignments=[[3]], brokers=[1, 2])  # unknown broker
    with pytest.raises(InvalidRequest):
        store.create_topic("b", assignments=[[1, 1]], brokers=[1, 2])  # duplicate replica
    with pytest.raises(InvalidRequest):
        store.create_topic("b", 2, assignments=[[1]], brokers=[1, 2])
    with pytest.raises(InvalidReplicationFactor):
        store.create_topic("b", assignments=[[1], [1, 2]], brokers=[1, 2])


def test_duplicate_topic(store: MetadataStore) -> None:
    store.create_topic("t")
    with pytest.raises(TopicAlreadyExists) as ei:
        store.create_topic("t")
    assert ei.value.code == ErrorCode.TOPIC_ALREADY_EXISTS


@pytest.mark.parametrize("name", ["", ".", "..", "a" * 250, "has space", "slash/x", "ümlaut", "a:b", "tab\t"])
def test_invalid_topic_names(store: MetadataStore, name: str) -> None:
    with pytest.raises(InvalidTopic) as ei:
        store.create_topic(name)
    assert ei.value.code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert name not in store.topics


@pytest.mark.parametrize("name", ["a" * 249, "A-z_0.9", "...x", "_", "-"])
def test_valid_edge_topic_names(store: MetadataStore, name: str) -> None:
    assert store.create_topic(name).name == name


def test_dot_underscore_collision(store: MetadataStore) -> None:
    store.create_topic("traffic.speed")
    with pytest.raises(InvalidTopic, match=r"collides with 'traffic\.speed'"):
        store.create_topic("traffic_speed")
    store.create_topic("traffic-speed")  # '-' is distinct


def test_internal_topic_names_are_reserved(store: MetadataStore) -> None:
    with pytest.raises(PolicyViolation):
        store.create_topic("__consumer_offsets")
    t = store.create_topic("__consumer_offsets", 5, internal=True)
    assert t.internal and t.partitions == 5


def test_partition_limits(store: MetadataStore) -> None:
    assert store.create_topic("max", 4096).partitions == 4096
    for n in (4097, 0, -5):
        with pytest.raises(InvalidPartitions) as ei:
            store.create_topic(f"bad{n}", n)
        assert "4096" in str(ei.value)
    with pytest.raises(InvalidPartitions):
        store.create_topic("too-many", assignments=[[1]] * 4097)


def test_partition_limit_is_configurable(tmp_path: Path) -> None:
    s = _store(tmp_path, **{"max.partitions.per.topic": 8})
    with pytest.raises(InvalidPartitions, match="8"):
        s.create_topic("t", 9)


def test_replication_factor_larger_than_brokers(store: MetadataStore) -> None:
    with pytest.raises(InvalidReplicationFactor) as ei:
        store.create_topic("t", 1, 3)
    msg = str(ei.value)
    assert "replication factor 3" in msg and "1 available broker" in msg
    assert ei.value.code == ErrorCode.INVALID_REPLICATION_FACTOR
    with pytest.raises(InvalidReplicationFactor, match=">= 1"):
        store.create_topic("t", 1, 0)
    assert "t" not in store.topics


def test_create_topic_with_bad_config(store: MetadataStore) -> None:
    with pytest.raises(ConfigError, match=r"retention\.ms.*topic t"):
        store.create_topic("t", configs={"retention.ms": "soon"})
    with pytest.raises(ConfigError, match=r"log\.retention\.ms"):
        store.create_topic("t", configs={"log.retention.ms": "5"})
    assert "t" not in store.topics


def test_validate_only_changes_nothing(store: MetadataStore) -> None:
    before = store.path.read_bytes()
    t = store.create_topic("t", 2, validate_only=True)
    assert t.partitions == 2 and "t" not in store.topics
    assert store.path.read_bytes() == before


def test_delete_topic(store: MetadataStore) -> None:
    t = store.create_topic("t")
    store.delete_topic("t")
    assert "t" not in store.topics and t.id_bytes not in store.topics_by_id
    with pytest.raises(UnknownTopicOrPartition):
        store.delete_topic("t")
    with pytest.raises(UnknownTopicOrPartition):
        store.topic("t")
    assert "t" not in _reload(store).topics


def test_listeners_are_notified(store: MetadataStore) -> None:
    events: list[tuple[str, str]] = []
    store.listeners.append(lambda e, n: events.append((e, n)))
    store.create_topic("t")
    store.alter_topic("t", {"retention.ms": 5})
    store.create_partitions("t", 2, None, [1])
    store.create_stream("s", {})
    store.delete_topic("t")
    assert events == [
        ("topic_created", "t"),
        ("topic_altered", "t"),
        ("partitions_created", "t"),
        ("stream_changed", "s"),
        ("topic_deleted", "t"),
    ]


# ---------------------------------------------------------------------------------------
# partitions


def test_create_partitions_only_grows(store: MetadataStore) -> None:
    store.create_topic("t", 2, 2, brokers=[1, 2])
    t = store.create_partitions("t", 4, None, [1, 2])
    assert t.partitions == 4 and t.replication_factor == 2
    assert t.assignments[:2] == [[1, 2], [2, 1]]
    for n in (4, 3):
        with pytest.raises(InvalidPartitions, match="only grow"):
            store.create_partitions("t", n, None, [1, 2])
    with pytest.raises(InvalidPartitions, match="4096"):
        store.create_partitions("t", 5000, None, [1, 2])
    with pytest.raises(InvalidRequest):
        store.create_partitions("t", 6, [[1, 2]], [1, 2])
    assert store.create_partitions("t", 6, None, [1, 2], validate_only=True).partitions == 4
    assert _reload(store).topic("t").partitions == 4
    with pytest.raises(UnknownTopicOrPartition):
        store.create_partitions("nope", 2, None, [1])


def test_create_partitions_validates_client_assignments(store: MetadataStore) -> None:
    store.create_topic("t", 1, 2, brokers=[1, 2, 3])
    for bad in ([[1, 9]], [[]], [[2, 2]]):
        with pytest.raises(InvalidRequest):
            store.create_partitions("t", 2, bad, [1, 2, 3])
    with pytest.raises(InvalidReplicationFactor):
        store.create_partitions("t", 2, [[1, 2, 3]], [1, 2, 3])
    with pytest.raises(InvalidReplicationFactor, match="larger than the 1 available"):
        store.create_partitions("t", 2, None, [1])  # brokers went away: no duplicate replicas
    assert store.topic("t").partitions == 1
    assert store.create_partitions("t", 2, [[3, 1]], [1, 2, 3]).assignments[1] == [3, 1]


# ---------------------------------------------------------------------------------------
# configs and streams


def test_alter_topic_merge_delete_and_replace(store: MetadataStore) -> None:
    store.create_topic("t", configs={"retention.ms": "1000", "cleanup.policy": "compact"})
    t = store.alter_topic("t", {"segment.bytes": "2048"})
    assert t.configs == {"retention.ms": 1000, "cleanup.policy": ["compact"], "segment.bytes": 2048}
    t = store.alter_topic("t", {}, delete=["retention.ms"])
    assert "retention.ms" not in t.configs
    t = store.alter_topic("t", {"retention.bytes": 10}, replace=True)
    assert t.configs == {"retention.bytes": 10}
    with pytest.raises(ConfigError):
        store.alter_topic("t", {"no.such.config": 1})
    with pytest.raises(ConfigError, match="bogus"):
        store.alter_topic("t", {}, delete=["bogus"])
    with pytest.raises(ConfigError, match=r"log\.retention\.ms"):  # broker name, as in set
        store.alter_topic("t", {}, delete=["log.retention.ms"])
    with pytest.raises(ConfigError):
        store.alter_topic("t", {"retention.ms": -7})
    store.alter_topic("t", {"retention.ms": 1}, validate_only=True)
    assert store.topic("t").configs == {"retention.bytes": 10}
    assert _reload(store).topic("t").configs == {"retention.bytes": 10}
    with pytest.raises(UnknownTopicOrPartition):
        store.alter_topic("nope", {})


def test_topic_config_sources(tmp_path: Path) -> None:
    s = _store(tmp_path, **{"log.retention.ms": 5 * DAY, "log.segment.bytes": 1 << 20})
    s.create_stream("traffic", {"retention.ms": 2 * DAY, "segment.bytes": 4096, "cleanup.policy": "compact"})
    t = s.create_topic("traffic.speed", configs={"segment.bytes": 8192})
    assert t.stream == "traffic"
    values = s.topic_config_values(t)
    assert values["segment.bytes"] == (8192, "topic")
    assert values["retention.ms"] == (2 * DAY, "stream")
    assert values["cleanup.policy"] == (["compact"], "stream")
    assert values["max.message.bytes"] == (1_048_588, "default")
    other = s.create_topic("elsewhere")
    ov = s.topic_config_values(other)
    assert ov["retention.ms"] == (5 * DAY, "broker")
    assert ov["segment.bytes"] == (1 << 20, "broker")
    assert ov["cleanup.policy"] == (["delete"], "default")
    assert set(values) == {k.name for k in cfg.keys(cfg.TOPIC)}


def test_stream_defaults_for_partitions_and_replication(tmp_path: Path) -> None:
    s = _store(tmp_path, **{"num.partitions": 2})
    s.create_stream("traffic", {"num.partitions": 6})
    assert s.create_topic("traffic.speed").partitions == 6
    assert s.create_topic("traffic.flow", 3).partitions == 3  # explicit count wins
    assert s.create_topic("weather.temp").partitions == 2  # no such stream: broker default
    s.create_stream("big", {"default.replication.factor": 3})
    with pytest.raises(InvalidReplicationFactor, match="replication factor 3"):
        s.create_topic("big.t")
    assert s.create_topic("big.u", brokers=[1, 2, 3]).replication_factor == 3


def test_stream_membership_by_name(store: MetadataStore) -> None:
    store.create_stream("traffic", {})
    assert store.create_topic("traffic.speed").stream == "traffic"
    assert store.create_topic("traffic").stream is None  # no dot: not a member
    assert store.create_topic("trafficx.y").stream is None
    assert store.create_topic("traffic.a.b").stream == "traffic"  # first dot separates
    assert store.stream_topics("traffic") == ["traffic.a.b", "traffic.speed"]


def test_existing_topics_join_a_stream_created_later(store: MetadataStore) -> None:
    store.create_topic("traffic.speed", configs={"retention.ms": 1})
    store.create_topic("trafficking.x")
    assert store.topic("traffic.speed").stream is None
    store.create_stream("traffic", {"retention.ms": 99, "segment.bytes": 4096})
    t = store.topic("traffic.speed")
    assert t.stream == "traffic"
    assert store.topic("trafficking.x").stream is None
    values = store.topic_config_values(t)
    assert values["retention.ms"] == (1, "topic")
    assert values["segment.bytes"] == (4096, "stream")
    assert _reload(store).topic("traffic.speed").stream == "traffic"


def test_stream_validation_and_errors(store: MetadataStore) -> None:
    for bad in ("", "a.b", "x" * 201, "spa ce"):
        with pytest.raises(InvalidRequest):
            store.create_stream(bad, {})
    store.create_stream("s", {"retention.ms": 10})
    with pytest.raises(StreamAlreadyExists):
        store.create_stream("s", {})
    with pytest.raises(ConfigError, match="stream"):
        store.create_stream("t", {"max.partitions.per.topic": 3})
    with pytest.raises(ConfigError, match=r"num\.partitions"):
        store.create_stream("t", {"num.partitions": 0})
    assert "t" not in store.streams
    with pytest.raises(UnknownStream) as ei:
        store.alter_stream("nope", {})
    assert ei.value.code == ErrorCode.RESOURCE_NOT_FOUND
    with pytest.raises(UnknownStream):
        store.delete_stream("nope")
    assert store.create_stream("v", {}, validate_only=True).name == "v" and "v" not in store.streams


def test_alter_stream_changes_inherited_values(store: MetadataStore) -> None:
    store.create_stream("s", {"retention.ms": 10})
    t = store.create_topic("s.t")
    store.alter_stream("s", {"retention.ms": 20, "segment.bytes": 2048})
    assert store.topic_config_values(t)["retention.ms"] == (20, "stream")
    store.alter_stream("s", {}, delete=["retention.ms"])
    assert store.topic_config_values(t)["retention.ms"] == (7 * DAY, "default")
    store.alter_stream("s", {"retention.ms": 1}, validate_only=True)
    assert store.streams["s"].configs == {"segment.bytes": 2048}
    assert _reload(store).streams["s"].configs == {"segment.bytes": 2048}


def test_delete_stream_refused_while_it_has_topics(store: MetadataStore) -> None:
    store.create_stream("traffic", {})
    store.create_topic("traffic.speed")
    with pytest.raises(PolicyViolation) as ei:
        store.delete_stream("traffic")
    assert "traffic.speed" in str(ei.value) and "delete them first" in str(ei.value)
    store.delete_topic("traffic.speed")
    store.delete_stream("traffic")
    assert "traffic" not in store.streams and "traffic" not in _reload(store).streams


# ---------------------------------------------------------------------------------------
# persistence


def test_reload_gives_same_state(tmp_path: Path) -> None:
    s = _store(tmp_path)
    s.create_stream(
        "traffic",
        {
            "retention.ms": 2 * DAY,
            "cleanup.policy": "compact,delete",
            "min.cleanable.dirty.ratio": 0.3,
        },
    )
    s.create_topic("traffic.speed", 3, configs={"max.message.bytes": 10_000, "flush.messages": cfg.LONG_MAX})
    s.create_topic("plain", 1)
    s.create_topic("__consumer_offsets", 2, internal=True)
    again = _reload(s)
    assert again.cluster_id == s.cluster_id and s.cluster_id
    assert again.topics == s.topics
    assert again.streams == s.streams
    by_id = {k: v.name for k, v in s.topics_by_id.items()}
    assert {k: v.name for k, v in again.topics_by_id.items()} == by_id
    t = again.topic("traffic.speed")
    assert isinstance(t, TopicInfo)
    assert again.topic_config_values(t) == s.topic_config_values(s.topic("traffic.speed"))
    assert again.topic("__consumer_offsets").internal


def test_cluster_id_generated_once_or_taken_from_config(tmp_path: Path) -> None:
    s = _store(tmp_path / "a")
    assert len(s.cluster_id) == 22
    assert _reload(s).cluster_id == s.cluster_id
    assert json.loads(s.path.read_text())["cluster_id"] == s.cluster_id
    assert _store(tmp_path / "b", **{"cluster.id": "my-cluster"}).cluster_id == "my-cluster"


@pytest.mark.parametrize(
    "content",
    [
        '{"cluster_id": "x", "topics": [',  # torn write
        "",
        "\x00\x00\x00",
        "[]",  # valid JSON, wrong shape
        '{"topics": [{"name": "t"}]}',
        '{"topics": [{"name": "t", "topic_id": "zz", "assignments": [[1]]}]}',
        '{"streams": [{"nom": "s"}]}',
        '{"streams": 5}',
    ],
)
def test_damaged_metadata_file_gives_clear_store_error(tmp_path: Path, content: str) -> None:
    s = _store(tmp_path)
    s.path.write_text(content)
    again = MetadataStore(tmp_path, s.broker)
    with pytest.raises(StoreError) as ei:
        again.load()
    msg = str(ei.value)
    assert str(s.path) in msg
    assert "backup" in msg and "move the data dir away" in msg


def test_persist_is_atomic_tmp_then_rename(store: MetadataStore, monkeypatch: pytest.MonkeyPatch) -> None:
    store.create_topic("before")
    good = store.path.read_bytes()
    calls: list[tuple[str, Any]] = []
    real_replace, real_fsync = os.replace, os.fsync

    def replace(src: Any, dst: Any) -> None:
        calls.append(("replace", (Path(src).name, Path(dst).name)))
        # the new content is complete and fsynced before it takes the old file's place
        assert json.loads(Path(src).read_text())["topics"][-1]["name"] == "after"
        real_replace(src, dst)

    def fsync(fd: int) -> None:
        calls.append(("fsync", None))
        real_fsync(fd)

    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(os, "fsync", fsync)
    store.create_topic("after")
    assert calls == [
        ("fsync", None),
        ("replace", ("metadata.json.tmp", "metadata.json")),
        ("fsync", None),
    ]
    assert not store.path.with_suffix(".json.tmp").exists()
    assert good != store.path.read_bytes()


def test_crash_before_rename_keeps_old_state(store: MetadataStore, monkeypatch: pytest.MonkeyPatch) -> None:
    store.create_topic("kept")

    def boom(src: Any, dst: Any) -> None:
        raise OSError("crash")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        store.create_topic("lost")
    monkeypatch.undo()
    again = _reload(store)
    assert set(again.topics) == {"kept"}  # a leftover .tmp file is ignored
    again.create_topic("next")
    assert set(_reload(again).topics) == {"kept", "next"}


# -- ACLs --------------------------------------------------------------------------------------
def _acl(name: str, who: str = "User:bob", op: int = 3, pattern: int = 3) -> AclBinding:
    return AclBinding.of(2, name, pattern, who, "*", op, 3)


def test_acls_are_created_once_persisted_and_reloaded(store: MetadataStore) -> None:
    events: list[tuple[str, str]] = []
    store.listeners.append(lambda e, n: events.append((e, n)))
    a, b = _acl("t1"), _acl("s.", pattern=4)
    assert store.create_acls([a, b, a]) == [None, None, None]
    assert list(store.acls) == [a, b]
    assert store.create_acls([a]) == [None]  # already there: success, nothing to apply
    assert events == [("acls_changed", "acls")]
    assert list(_reload(store).acls) == [a, b]


def test_invalid_acls_are_refused_one_by_one(store: MetadataStore) -> None:
    bad = _acl("")
    results = store.create_acls([bad, _acl("t")])
    assert isinstance(results[0], InvalidRequest) and results[1] is None
    assert list(store.acls) == [_acl("t")]


def test_delete_acls_by_filter_reports_what_each_filter_deleted(store: MetadataStore) -> None:
    a, b, c = _acl("t1"), _acl("t2", who="User:eve"), _acl("t", pattern=4)
    store.create_acls([a, b, c])
    got = store.delete_acls(
        [
            AclBindingFilter(principal="User:bob"),
            AclBindingFilter(pattern_type=PatternType.UNKNOWN),
            AclBindingFilter(name="nothing"),
        ]
    )
    assert got[0] == [a, c] and isinstance(got[1], InvalidRequest) and got[2] == []
    assert list(store.acls) == [b] and list(_reload(store).acls) == [b]


def test_acl_changes_apply_in_log_order_whatever_came_first(store: MetadataStore) -> None:
    """A deletion planned on one broker and applied after another broker added the same ACL
    again removes it; adding twice (a retried proposal) keeps one."""
    a = _acl("t1")
    add = store.plan_create_acls([a])
    assert store.apply(add.op or "", add.arg) is None
    assert store.apply(add.op or "", add.arg) is None
    assert list(store.acls) == [a]
    remove = store.plan_delete_acls([AclBindingFilter()])
    assert store.apply(remove.op or "", remove.arg) is None
    assert store.apply(remove.op or "", remove.arg) is None
    assert not store.acls


def test_acls_travel_in_snapshots(store: MetadataStore, tmp_path: Path) -> None:
    store.create_acls([_acl("t1"), _acl("t2")])
    other = _store(tmp_path / "other")
    other.restore(store.snapshot())
    assert list(other.acls) == list(store.acls)
