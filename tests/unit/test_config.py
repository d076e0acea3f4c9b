"""Configuration keys, sources and validation (framework/config.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework import config as cfg
from framework.config import BrokerConfig, parse_duration_ms, parse_size
from framework.errors import ConfigError, ErrorCode

DAY = 86_400_000


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "broker.toml"
    p.write_text(text)
    return p


# ---------------------------------------------------------------------------------------
# sources


def test_defaults_without_any_source() -> None:
    c = BrokerConfig.load(environ={})
    assert c.node_id == 1
    assert c["num.partitions"] == 1
    assert c["auto.create.topics.enable"] is True
    assert c.topic_default("retention.ms") == 7 * DAY
    assert c.data_dir == Path("./data")
    assert c.values == {} and c.sources == {}


def test_toml_dotted_and_quoted_keys(tmp_path: Path) -> None:
    p = _write(
        tmp_path,
        """
"node.id" = 3
log.retention.ms = 5
num.partitions = 6
listeners = "0.0.0.0:19092"
"log.cleanup.policy" = ["compact", "delete"]
log.segment.bytes = 2048
log.dirs = "/var/lib/sftraffic"
""",
    )
    c = BrokerConfig.load(p, environ={})
    assert c.node_id == 3
    assert c["log.retention.ms"] == 5
    assert c.topic_default("retention.ms") == 5
    assert c["num.partitions"] == 6
    assert c["listeners"] == "0.0.0.0:19092"
    assert c.topic_default("cleanup.policy") == ["compact", "delete"]
    assert c.topic_default("segment.bytes") == 2048
    assert c.data_dir == Path("/var/lib/sftraffic")
    assert c.sources["log.retention.ms"] == str(p)


def test_toml_tables(tmp_path: Path) -> None:
    p = _write(
        tmp_path,
        """
[log]
retention.ms = 7
dirs = "/srv/data"

[log.cleaner]
min.cleanable.ratio = 0.75
""",
    )
    c = BrokerConfig.load(p, environ={})
    assert c.topic_default("retention.ms") == 7
    assert c.topic_default("min.cleanable.dirty.ratio") == 0.75
    assert c.data_dir == Path("/srv/data")


def test_environment_overrides_file_and_command_line_overrides_both(tmp_path: Path) -> None:
    p = _write(tmp_path, 'num.partitions = 2\nlog.retention.ms = 1000\n"node.id" = 4\n')
    env = {
        "SFTRAFFIC_NUM_PARTITIONS": "3",
        "SFTRAFFIC_LOG_RETENTION_MS": "2000",
        "SFTRAFFIC_BOOTSTRAP": "somewhere:9092",  # belongs to the apps: ignored
        "PATH": "/bin",
    }
    c = BrokerConfig.load(p, overrides={"num.partitions": "8"}, environ=env)
    assert c["num.partitions"] == 8
    assert c.sources["num.partitions"] == "command line"
    assert c.topic_default("retention.ms") == 2000
    assert c.sources["log.retention.ms"] == "environment SFTRAFFIC_LOG_RETENTION_MS"
    assert c.node_id == 4
    assert c.sources["node.id"] == str(p)


def test_environment_values_are_parsed_from_strings() -> None:
    c = BrokerConfig.load(
        environ={
            "SFTRAFFIC_AUTO_CREATE_TOPICS_ENABLE": "false",
            "SFTRAFFIC_LOG_CLEANER_MIN_CLEANABLE_RATIO": "0.25",
            "SFTRAFFIC_LOG_CLEANUP_POLICY": "compact, delete",
        }
    )
    assert c["auto.create.topics.enable"] is False
    assert c.topic_default("min.cleanable.dirty.ratio") == 0.25
    assert c.topic_default("cleanup.policy") == ["compact", "delete"]


def test_os_environ_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SFTRAFFIC_NODE_ID", "17")
    assert BrokerConfig.load().node_id == 17


def test_unknown_key_names_key_and_source(tmp_path: Path) -> None:
    p = _write(tmp_path, "log.retention.hours = 5\n")
    with pytest.raises(ConfigError) as ei:
        BrokerConfig.load(p, environ={})
    msg = str(ei.value)
    assert "log.retention.hours" in msg and str(p) in msg
    assert ei.value.code == ErrorCode.INVALID_CONFIG
    with pytest.raises(ConfigError, match=r"'no\.such\.key' in command line"):
        BrokerConfig.load(overrides={"no.such.key": 1}, environ={})


def test_topic_only_key_is_not_a_broker_key() -> None:
    # brokers take the broker synonym (log.retention.ms), as in Kafka
    with pytest.raises(ConfigError, match=r"retention\.ms"):
        BrokerConfig.load(overrides={"retention.ms": 5}, environ={})
    with pytest.raises(ConfigError, match="SFTRAFFIC_RETENTION_MS"):
        BrokerConfig.load(environ={"SFTRAFFIC_RETENTION_MS": "5"})


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("node.id", "abc"),
        ("node.id", -1),
        ("node.id", True),
        ("node.id", 1.5),
        ("num.partitions", 0),
        ("num.partitions", 5000),
        ("log.level", "TRACE"),
        ("log.format", "xml"),
        ("auto.create.topics.enable", "maybe"),
        ("socket.request.max.bytes", 10),
        ("log.retention.ms", "1e3"),
        ("log.retention.ms", -2),
        ("log.cleanup.policy", "shred"),
        ("log.cleanup.policy", []),
        ("log.cleaner.min.cleanable.ratio", 1.5),
        ("log.cleaner.min.cleanable.ratio", "nan"),
        ("log.segment.bytes", 2**31),  # an int key: Kafka's 32-bit INT
        ("log.retention.ms", 2**63),  # a long key: 64-bit
        ("listeners", {"a": 1}),
    ],
)
def test_bad_values_name_key_and_source(name: str, raw: object) -> None:
    with pytest.raises(ConfigError) as ei:
        BrokerConfig.load(overrides={name: raw}, environ={})
    msg = str(ei.value)
    assert name in msg, msg
    assert "command line" in msg


def test_bad_value_in_file_names_file(tmp_path: Path) -> None:
    p = _write(tmp_path, 'log.level = "LOUD"\n')
    with pytest.raises(ConfigError, match=r"log\.level.*LOUD.*" + re.escape(str(p))):
        BrokerConfig.load(p, environ={})


def test_bad_value_in_environment_names_variable() -> None:
    with pytest.raises(ConfigError) as ei:
        BrokerConfig.load(environ={"SFTRAFFIC_LOG_SEGMENT_BYTES": "big"})
    assert "log.segment.bytes" in str(ei.value)
    assert "SFTRAFFIC_LOG_SEGMENT_BYTES" in str(ei.value)


def test_missing_and_invalid_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        BrokerConfig.load(tmp_path / "nope.toml", environ={})
    p = _write(tmp_path, "node.id = = 3\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        BrokerConfig.load(p, environ={})


def test_int_values_accept_underscores_and_integral_floats() -> None:
    over = {"log.segment.bytes": "1_048_576", "num.partitions": 4.0}
    c = BrokerConfig.load(overrides=over, environ={})
    assert c.topic_default("segment.bytes") == 1_048_576
    assert c["num.partitions"] == 4


# ---------------------------------------------------------------------------------------
# topic and stream scope


def test_validate_topic_scope() -> None:
    out = cfg.validate(
        {
            "retention.ms": "3600000",
            "cleanup.policy": "compact",
            "min.cleanable.dirty.ratio": "0.1",
        },
        cfg.TOPIC,
        "topic t",
    )
    assert out == {
        "retention.ms": 3_600_000,
        "cleanup.policy": ["compact"],
        "min.cleanable.dirty.ratio": 0.1,
    }


def test_validate_rejects_broker_keys_in_topic_scope() -> None:
    with pytest.raises(ConfigError) as ei:
        cfg.validate({"log.retention.ms": 5}, cfg.TOPIC, "topic t")
    msg = str(ei.value)
    assert "log.retention.ms" in msg and "topic t" in msg
    assert "retention.ms" in msg.split("topic configs:")[1]  # lists what is allowed
    with pytest.raises(ConfigError, match=r"node\.id"):
        cfg.validate({"node.id": 5}, cfg.TOPIC)


def test_validate_stream_scope() -> None:
    props = {"num.partitions": 12, "retention.ms": 1000, "default.replication.factor": 1}
    out = cfg.validate(props, cfg.STREAM, "stream s")
    assert out["num.partitions"] == 12
    with pytest.raises(ConfigError, match="stream"):
        cfg.validate({"max.partitions.per.topic": 10}, cfg.STREAM, "stream s")
    with pytest.raises(ConfigError, match=r"num\.partitions"):
        cfg.validate({"num.partitions": 10}, cfg.TOPIC, "topic t")  # not a topic config


def test_validate_bad_value_names_key_and_source() -> None:
    with pytest.raises(ConfigError, match=r"message\.timestamp\.type.*topic sensors"):
        cfg.validate({"message.timestamp.type": "Whenever"}, cfg.TOPIC, "topic sensors")


def test_broker_synonyms_resolve_topic_defaults() -> None:
    c = BrokerConfig.load(
        overrides={
            "log.retention.ms": 60_000,
            "log.segment.bytes": 4096,
            "message.max.bytes": 2_000_000,
            "log.message.timestamp.type": "LogAppendTime",
            "min.insync.replicas": 2,
            "producer.id.expiration.ms": 1234,
        },
        environ={},
    )
    assert c.topic_default("retention.ms") == 60_000
    assert c.topic_default("segment.bytes") == 4096
    assert c.topic_default("max.message.bytes") == 2_000_000
    assert c.topic_default("message.timestamp.type") == "LogAppendTime"
    assert c.topic_default("min.insync.replicas") == 2
    assert c.topic_default("producer.id.expiration.ms") == 1234  # same name at both levels
    assert c.topic_default("retention.bytes") == -1  # untouched: built-in default
    assert cfg.key("log.retention.ms") is cfg.key("retention.ms")
    assert cfg.lookup("no.such") is None
    with pytest.raises(ConfigError, match=r"no\.such"):
        cfg.key("no.such")


def test_every_key_default_passes_its_own_validation() -> None:
    for k in cfg.keys():  # noqa: SIM118 (a function, not a dict)
        assert k.parse(k.default) == k.default, k.name
        assert isinstance(k.render(k.default), str)
        assert k.doc
        assert k.type in cfg.TYPE_CODES


def test_render_for_describe_configs() -> None:
    assert cfg.key("cleanup.policy").render(["compact", "delete"]) == "compact,delete"
    assert cfg.key("unclean.leader.election.enable").render(False) == "false"
    assert cfg.key("retention.ms").render(None) == ""
    assert cfg.key("retention.ms").render(5) == "5"


def test_scopes_partition_keys() -> None:
    broker = {k.name for k in cfg.keys(cfg.BROKER)}
    topic = {k.name for k in cfg.keys(cfg.TOPIC)}
    stream = {k.name for k in cfg.keys(cfg.STREAM)}
    assert "retention.ms" in topic and "retention.ms" in stream and "retention.ms" not in broker
    assert "num.partitions" in stream and "num.partitions" in broker
    assert "num.partitions" not in topic
    assert topic <= stream | topic


# ---------------------------------------------------------------------------------------
# durations and sizes


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("500ms", 500),
        ("30s", 30_000),
        ("100m", 6_000_000),
        ("6h", 21_600_000),
        ("180d", 180 * DAY),
        ("2w", 14 * DAY),
        ("3mo", 90 * DAY),
        ("1y", 365 * DAY),
        ("1.5h", 5_400_000),
        (" 45 S ", 45_000),
        ("250", 250),
        ("-1", -1),
    ],
)
def test_parse_duration_ms(text: str, ms: int) -> None:
    assert parse_duration_ms(text) == ms


@pytest.mark.parametrize("text", ["", "s", "ms", "abc", "5x", "1e3s", "5 days", "--5s", "²s", "1.2.3h"])
def test_parse_duration_rejects_junk(text: str) -> None:
    with pytest.raises(ConfigError, match=r"cannot read duration .*e\.g\. 500ms"):
        parse_duration_ms(text)


@pytest.mark.parametrize(
    ("text", "n"),
    [
        ("512", 512),
        ("512b", 512),
        ("512k", 512 * 1024),
        ("512KB", 512 * 1024),
        ("100m", 100 * 1024**2),
        ("1g", 1024**3),
        ("1.5g", 1536 * 1024**2),
        ("2t", 2 * 1024**4),
        ("-1", -1),
    ],
)
def test_parse_size(text: str, n: int) -> None:
    assert parse_size(text) == n


@pytest.mark.parametrize("text", ["", "b", "junk", "xk", "infk", "nang", "1e3q", "k", "²"])
def test_parse_size_rejects_junk(text: str) -> None:
    with pytest.raises(ConfigError, match=r"cannot read size .*e\.g\. 512k"):
        parse_size(text)


@given(st.text(max_size=8))
@settings(max_examples=300, deadline=None, database=None)
def test_parsers_only_return_ints_or_raise_config_error(text: str) -> None:
    for fn in (parse_duration_ms, parse_size):
        try:
            assert isinstance(fn(text), int)
        except ConfigError:
            pass
