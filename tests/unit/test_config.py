"""Configuration keys, sources and validation (framework/config.py)."""

from __future__ import annotations

import ast
import functools
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


# ---------------------------------------------------------------------------------------
# no key is accepted and silently ignored

ROOT = Path(__file__).resolve().parents[2]

# Keys no code of the store reads, each with the reason accepting it ignores nothing.
NOT_READ = {
    "confluent.key.subject.name.strategy": "only its default, TopicNameStrategy, is accepted "
    "(ConfigKey.unsupported): schema validation checks the subject <topic>-key",
    "confluent.value.subject.name.strategy": "only its default, TopicNameStrategy, is accepted "
    "(ConfigKey.unsupported): schema validation checks the subject <topic>-value",
    "compression.type": "only its default, producer, is accepted (ConfigKey.unsupported): batches "
    "are stored as the producer compressed them; DescribeConfigs reports it",
    "file.delete.delay.ms": "only its default, 0, is accepted (ConfigKey.unsupported): segments are "
    "deleted at once; DescribeConfigs reports it",
    "ssl.keystore.type": "only its default, PEM, is accepted (ConfigKey.unsupported): Python's ssl "
    "reads PEM keystores only",
    "ssl.truststore.type": "only its default, PEM, is accepted (ConfigKey.unsupported): Python's ssl "
    "reads PEM truststores only",
    "replica.alter.log.dirs.io.max.bytes.per.second": "only deleting it is accepted "
    "(ConfigKey.unsupported): a broker has one log dir, replicas never move between dirs; "
    "kafka-reassign-partitions --verify deletes it",
}
# The command line and the client helpers set keys or show described values: the store is what
# must honour them.
CLIENT_SIDE = ("framework/cli/", "framework/client/")
READ_CALLS = {"get", "topic_default", "stream_default", "dynamic_broker_value"}


def _read_key(node: ast.AST, names: set[str]) -> str | None:
    """The key ``node`` reads: ``x["key"]``, ``x.get("key")`` (or topic_default/stream_default)
    or ``"key" in x``; writes (``x["key"] = v``, ``{"key": v}``) and declarations are no reads."""

    def const(n: ast.AST) -> str | None:
        return n.value if isinstance(n, ast.Constant) and n.value in names else None

    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
        return const(node.slice)
    if isinstance(node, ast.Call):
        f = node.func
        fname = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        if fname in READ_CALLS:
            return next((k for a in node.args if (k := const(a))), None)
    if isinstance(node, ast.Compare) and isinstance(node.ops[0], ast.In):
        return const(node.left)
    return None


def _keyword_of(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> str | None:
    """The keyword argument ``node`` is (part of) the value of, e.g. ``segment_bytes=v[...]``."""
    while node in parents and not isinstance(node, ast.stmt):
        if isinstance(node, ast.keyword):
            return node.arg
        node = parents[node]
    return None


def key_readers(sources: dict[str, str]) -> dict[str, set[str]]:
    """Key name -> modules of ``sources`` (path -> text) that read it and use what they read.

    A key read straight into a keyword argument (``LogConfig(segment_bytes=v["segment.bytes"])``,
    ``GroupConfig(max_size=config["group.max.size"])``) counts only if that field is read
    somewhere (``.segment_bytes``): a setting copied into a field nobody reads is ignored.
    A broker synonym's read counts for its topic key.
    """
    by_name = {k.name: k.name for k in cfg.keys(None)}
    by_name.update({k.broker_name: k.name for k in cfg.keys(None) if k.broker_name})
    names = set(by_name)
    direct: dict[str, set[str]] = {}
    via_field: dict[str, set[tuple[str, str]]] = {}
    attrs: set[str] = set()
    for path, text in sources.items():
        tree = ast.parse(text)
        parents = {c: n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
                attrs.add(node.attr)
            name = _read_key(node, names)
            if name is None:
                continue
            field = _keyword_of(node, parents)
            if field is None:
                direct.setdefault(by_name[name], set()).add(path)
            else:
                via_field.setdefault(by_name[name], set()).add((path, field))
    out = {k: set(v) for k, v in direct.items()}
    for key, uses in via_field.items():
        for path, field in uses:
            if field in attrs:
                out.setdefault(key, set()).add(path)
    return out


@functools.cache
def store_readers() -> dict[str, set[str]]:
    sources = {}
    for p in sorted((ROOT / "framework").rglob("*.py")):
        rel = p.relative_to(ROOT).as_posix()
        if not rel.startswith(CLIENT_SIDE):
            sources[rel] = p.read_text()
    return key_readers(sources)


@pytest.mark.parametrize("name", sorted(k.name for k in cfg.keys(None)))
def test_every_key_is_read_by_the_store_or_allow_listed_with_a_reason(name: str) -> None:
    readers = store_readers().get(name)
    if name in NOT_READ:
        assert not readers, f"{name} is read now (by {sorted(readers or ())}): remove it from NOT_READ"
        return
    assert readers, (
        f"{name} is accepted but nothing in framework/ (outside cli/ and client/) reads it: "
        "implement it, or refuse values other than its default (define(..., unsupported=why))"
    )


def test_not_read_keys_are_declared_and_refuse_every_value_but_the_default() -> None:
    for name, why in NOT_READ.items():
        k = cfg.key(name)
        assert why and k.name == name
        assert k.unsupported, f"{name} is neither read nor refused"
        assert k.parse(k.render(k.default)) == k.default


def test_the_reader_analysis_tells_reads_from_writes_and_chases_fields() -> None:
    src = {
        "reads.py": 'n = config["node.id"]\nif "log.dirs" in c: pass\nr = b.topic_default("retention.ms")\n',
        "writes.py": 'overrides["num.partitions"] = 3\nx = {"listeners": "h:1"}\n',
        "fields.py": 'a = S(used_field=c["segment.bytes"] // 8, unused_field=c["segment.ms"])\n'
        "print(s.used_field)\n",
        "synonym.py": 'y = c.get("log.retention.bytes")\n',
    }
    got = key_readers(src)
    assert got == {
        "node.id": {"reads.py"},
        "log.dirs": {"reads.py"},
        "retention.ms": {"reads.py"},
        "segment.bytes": {"fields.py"},
        "retention.bytes": {"synonym.py"},
    }


def test_the_store_reads_keys_where_expected() -> None:
    got = store_readers()
    assert "framework/config.py" in got["node.id"]  # BrokerConfig.node_id
    assert "framework/storage/log_config.py" in got["segment.jitter.ms"]  # read by storage/log.py
    assert "framework/storage/log_config.py" in got["segment.index.bytes"]
    assert "framework/coordinator/group_service.py" in got["group.max.size"]


@pytest.mark.parametrize(
    ("name", "raw", "shown"),
    [
        ("compression.type", "gzip", "compression.type=gzip"),
        ("file.delete.delay.ms", "60000", "file.delete.delay.ms=60000"),
    ],
)
def test_unsupported_values_are_refused_at_validation(name: str, raw: str, shown: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(shown) + " is not supported by sftraffic; .*topic t"):
        cfg.validate({name: raw}, cfg.TOPIC, "topic t")
    with pytest.raises(ConfigError, match=" is not supported by sftraffic"):
        cfg.validate({name: raw}, cfg.STREAM, "stream s")
    assert cfg.validate({name: cfg.key(name).default}, cfg.TOPIC) == {name: cfg.key(name).default}


def test_unsupported_broker_synonyms_are_refused_at_start(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"log\.segment\.delete\.delay\.ms=1000 is not supported.*command line"
    ):
        BrokerConfig.load(overrides={"log.segment.delete.delay.ms": 1000}, environ={})
    p = _write(tmp_path, 'compression.type.broker = "lz4"\n')
    with pytest.raises(
        ConfigError, match=r"compression\.type\.broker=lz4 is not supported.*" + re.escape(str(p))
    ):
        BrokerConfig.load(p, environ={})
    ok = BrokerConfig.load(overrides={"log.segment.delete.delay.ms": 0}, environ={})
    assert ok.topic_default("file.delete.delay.ms") == 0
