"""Configuration keys, sources and validation (framework/config.py)."""

from __future__ import annotations

import ast
import functools
import re
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework import config as cfg
from framework import properties
from framework.config import BrokerConfig, parse_duration_ms, parse_size
from framework.errors import ConfigError, ErrorCode
from framework.security.listeners import ListenerConfig

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
    assert c.int("num.partitions") == 1
    assert c.bool("auto.create.topics.enable") is True
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
    assert c.int("log.retention.ms") == 5
    assert c.topic_default("retention.ms") == 5
    assert c.int("num.partitions") == 6
    assert c.str("listeners") == "0.0.0.0:19092"
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
    assert c.int("num.partitions") == 8
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
    assert c.bool("auto.create.topics.enable") is False
    assert c.topic_default("min.cleanable.dirty.ratio") == 0.25
    assert c.topic_default("cleanup.policy") == ["compact", "delete"]


def test_os_environ_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SFTRAFFIC_NODE_ID", "17")
    assert BrokerConfig.load().node_id == 17


def test_unknown_key_names_key_source_and_the_nearest_known_key(tmp_path: Path) -> None:
    p = _write(tmp_path, "log.retenton.ms = 5\n")
    with pytest.raises(ConfigError) as ei:
        BrokerConfig.load(p, environ={})
    msg = str(ei.value)
    assert "'log.retenton.ms'" in msg and str(p) in msg
    assert "did you mean log.retention.ms?" in msg
    assert "see `sftraffic config reference`" in msg and "README" not in msg
    assert "\n" not in msg
    assert ei.value.code == ErrorCode.INVALID_CONFIG
    with pytest.raises(
        ConfigError, match=r"'no\.such\.key' in command line \(see `sftraffic config reference`\)"
    ):
        BrokerConfig.load(overrides={"no.such.key": 1}, environ={})


def test_topic_only_key_is_not_a_broker_key() -> None:
    # brokers take the broker synonym (log.retention.ms), as in Kafka
    with pytest.raises(ConfigError, match=r"'retention\.ms'.*did you mean log\.retention\.ms\?"):
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
    assert c.int("num.partitions") == 4


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
# BrokerConfig's typed reads, ``config.int("key")``: read only as methods (``int("1")`` is no read)
TYPED_READS = {*cfg.ACCESSORS, "value"}


def _read_key(node: ast.AST, names: set[str]) -> str | None:
    """The key ``node`` reads: ``config.int("key")`` (any typed accessor), ``x["key"]`` (a
    mapping of resolved values), ``x.get("key")`` (or topic_default/stream_default) or
    ``"key" in x``; writes (``x["key"] = v``, ``{"key": v}``) and declarations are no reads."""

    def const(n: ast.AST) -> str | None:
        return n.value if isinstance(n, ast.Constant) and n.value in names else None

    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
        return const(node.slice)
    if isinstance(node, ast.Call):
        f = node.func
        fname = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        if fname in READ_CALLS or (isinstance(f, ast.Attribute) and fname in TYPED_READS):
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
    ``GroupConfig(max_size=config.int("group.max.size"))``) counts only if that field is read
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
        "reads.py": 'n = config.int("node.id")\nif "log.dirs" in c: pass\n'
        'r = b.topic_default("retention.ms")\nv = values["cleanup.policy"]\n'
        'p = config.password("ssl.key.password")\n',
        "writes.py": 'overrides["num.partitions"] = 3\nx = {"listeners": "h:1"}\nn = int("segment.ms")\n',
        "fields.py": 'a = S(used_field=c.int("segment.bytes") // 8, unused_field=c.int("segment.ms"))\n'
        'g = G(used_too=v["flush.ms"])\nprint(s.used_field, g.used_too)\n',
        "synonym.py": 'y = c.int("log.retention.bytes")\nz = c.get("log.segment.bytes")\n',
    }
    got = key_readers(src)
    assert got == {
        "node.id": {"reads.py"},
        "log.dirs": {"reads.py"},
        "retention.ms": {"reads.py"},
        "cleanup.policy": {"reads.py"},
        "ssl.key.password": {"reads.py"},
        "segment.bytes": {"fields.py", "synonym.py"},
        "flush.ms": {"fields.py"},
        "retention.bytes": {"synonym.py"},
    }


def test_every_typed_read_in_the_store_names_a_key_of_its_type() -> None:
    """``config.int("k")`` reads an int or long key, ``config.str`` a string, ...: checked at
    every call site with a literal key, not only those a test happens to run."""
    wrong = []
    for p in sorted((ROOT / "framework").rglob("*.py")):
        for node in ast.walk(ast.parse(p.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            accessor = node.func.attr
            if accessor not in cfg.ACCESSORS or not node.args or not isinstance(node.args[0], ast.Constant):
                continue
            k = cfg.lookup(str(node.args[0].value))
            if k is not None and k.type not in cfg.ACCESSORS[accessor]:
                wrong.append(f"{p.relative_to(ROOT)}:{node.lineno}: {accessor}({k.name!r}) of a {k.type}")
    assert not wrong


def test_typed_reads_check_the_declared_type_and_give_defaults() -> None:
    c = cfg.BrokerConfig.load(overrides={"num.partitions": "4"}, environ={})
    assert c.int("num.partitions") == 4 and c.int("log.retention.ms") == cfg.key("retention.ms").default
    assert c.bool("delete.topic.enable") is True and c.list("controller.quorum.voters") == []
    assert c.password("ssl.key.password") == "" and c.value("num.partitions") == 4
    with pytest.raises(TypeError, match=re.escape("partitions is declared int: read it with config.int()")):
        c.str("num.partitions")
    with pytest.raises(TypeError, match=re.escape("ssl.key.password is declared password")):
        c.str("ssl.key.password")
    assert not hasattr(c, "__getitem__")


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


# ---------------------------------------------------------------------------------------
# Apache Kafka's server.properties

# The settings of the config/server.properties Apache Kafka 4.3 ships (KRaft combined mode).
KAFKA_SERVER_PROPERTIES = """\
# Kafka's comments and blank lines are part of the format
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=localhost:9093
listeners=PLAINTEXT://:9092,CONTROLLER://:9093
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600

log.dirs=/tmp/kraft-combined-logs
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
#log.flush.interval.messages=10000
#log.flush.interval.ms=1000
log.retention.hours=168
#log.retention.bytes=1073741824
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
"""


def _props(tmp_path: Path, text: str, name: str = "server.properties") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def _warned(c: BrokerConfig) -> set[str]:
    """The first word of each warning: the key or variable it is about."""
    return {w.split(" ")[0].split("=")[0].rstrip(":") for w in c.warnings}


def test_kafkas_own_server_properties_is_a_single_node_with_one_warning_per_ignored_key(
    tmp_path: Path,
) -> None:
    p = _props(tmp_path, KAFKA_SERVER_PROPERTIES)
    c = BrokerConfig.load(p, environ={})
    assert c.node_id == 1
    assert c.str("listeners") == "PLAINTEXT://:9092"  # the CONTROLLER listener is not a Kafka listener here
    assert c.str("advertised.listeners") == "PLAINTEXT://localhost:9092"
    assert c.str("inter.broker.listener.name") == "PLAINTEXT"
    assert c.list("controller.quorum.voters") == []  # a single node
    assert c.data_dir == Path("/tmp/kraft-combined-logs")
    assert c.topic_default("retention.ms") == 168 * 3_600_000
    assert c.sources["log.retention.ms"] == str(p)
    assert c.topic_default("segment.bytes") == 1_073_741_824
    assert c.int("transaction.state.log.replication.factor") == 1
    assert c.int("transaction.state.log.min.isr") == 1
    assert c.int("log.retention.check.interval.ms") == 300_000
    assert _warned(c) == {
        "num.network.threads",
        "num.io.threads",
        "socket.send.buffer.bytes",
        "socket.receive.buffer.bytes",
        "num.recovery.threads.per.data.dir",
        "share.coordinator.state.topic.replication.factor",
        "share.coordinator.state.topic.min.isr",
        "controller.quorum.bootstrap.servers",
        "controller.listener.names",
    }
    assert len(c.warnings) == 9 and all("\n" not in w and str(p) in w for w in c.warnings)
    assert "num.io.threads has no effect: the broker runs one event loop" in "\n".join(c.warnings)
    assert any("CONTROLLER://:9093 is not opened" in w for w in c.warnings)
    # as the broker checks its listeners before it binds anything
    listeners = ListenerConfig.from_config(c)
    assert [str(e) for e in listeners.listeners] == ["PLAINTEXT://:9092"]


def test_every_key_of_kafkas_shipped_file_has_a_decided_treatment() -> None:
    """Each key is ours, an alias, judged against the others, or has a reason of its own: none
    falls through to the catch-all warning for Kafka settings nobody looked at."""
    for name in properties.parse(KAFKA_SERVER_PROPERTIES):
        decided = (
            cfg.lookup(name) is not None
            or name in cfg.KAFKA_ALIASES
            or name in cfg._DEFERRED
            or cfg.kafka_setting(name) is not cfg._GENERIC
        )
        assert decided, name


@pytest.mark.parametrize(
    ("given", "target", "value"),
    [
        ({"log.retention.hours": "24"}, "log.retention.ms", 86_400_000),
        ({"log.retention.minutes": "90"}, "log.retention.ms", 5_400_000),
        ({"log.retention.hours": "-1"}, "log.retention.ms", -1),
        # Kafka's order in one source: ms over minutes over hours
        ({"log.retention.hours": "24", "log.retention.minutes": "5"}, "log.retention.ms", 300_000),
        ({"log.retention.minutes": "5", "log.retention.ms": "7"}, "log.retention.ms", 7),
        ({"log.roll.hours": "2"}, "log.roll.ms", 7_200_000),
        ({"log.roll.jitter.hours": "1"}, "log.roll.jitter.ms", 3_600_000),
        ({"log.dir": "/srv/kafka"}, "log.dirs", "/srv/kafka"),
        ({"log.dir": "/a", "log.dirs": "/b"}, "log.dirs", "/b"),
        ({"broker.id": "4"}, "node.id", 4),
        ({"broker.id": "4", "node.id": "4"}, "node.id", 4),
        ({"broker.id": "-1", "node.id": "3"}, "node.id", 3),  # Kafka's -1: not set
        (
            {"security.inter.broker.protocol": "ssl", "listeners": "SSL://h:1"},
            "inter.broker.listener.name",
            "SSL",
        ),
        ({"compression.type": "producer"}, "compression.type.broker", "producer"),
    ],
)
def test_kafka_spellings_map_onto_our_keys(given: dict[str, str], target: str, value: object) -> None:
    c = BrokerConfig.load(overrides=given, environ={})
    assert c.value(target) == value
    assert c.warnings == []


def test_a_kafka_spelling_in_a_later_source_wins_over_our_key_in_an_earlier_one(tmp_path: Path) -> None:
    p = _props(tmp_path, "log.retention.ms=5\n")
    c = BrokerConfig.load(p, environ={"SFTRAFFIC_LOG_RETENTION_HOURS": "1"})
    assert c.topic_default("retention.ms") == 3_600_000
    assert c.sources["log.retention.ms"] == "environment SFTRAFFIC_LOG_RETENTION_HOURS"
    c = BrokerConfig.load(p, overrides={"log.retention.hours": 2}, environ={})
    assert c.topic_default("retention.ms") == 7_200_000


@pytest.mark.parametrize(
    ("given", "shown"),
    [
        ({"broker.id": "0", "node.id": "1"}, "broker.id=0 and node.id=1 differ"),
        (
            {"security.inter.broker.protocol": "SSL", "inter.broker.listener.name": "PLAINTEXT"},
            "security.inter.broker.protocol=SSL and inter.broker.listener.name=PLAINTEXT differ",
        ),
        ({"log.retention.hours": "many"}, "log.retention.hours='many'"),
        ({"compression.type": "zstd"}, "compression.type=zstd is not supported"),
    ],
)
def test_kafka_spellings_that_disagree_or_are_bad_fail_naming_the_key(
    given: dict[str, str], shown: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(shown)):
        BrokerConfig.load(overrides=given, environ={})


@pytest.mark.parametrize(
    ("given", "reason"),
    [
        ({"listener.name.internal.ssl.keystore.location": "/k.pem"}, "settings per listener are not"),
        ({"zookeeper.connect": "localhost:2181"}, "ZooKeeper is gone"),
        ({"process.roles": "controller"}, "every sftraffic node serves clients"),
        ({"process.roles": "broker"}, "none are given"),
        (
            {"process.roles": "broker", "controller.quorum.voters": "1@h:1", "node.id": "1"},
            "node 1 is in controller.quorum.voters",
        ),
        (
            {"process.roles": "broker,controller", "controller.quorum.voters": "2@h:1", "node.id": "1"},
            "node 1 is not in controller.quorum.voters",
        ),
        ({"controller.quorum.bootstrap.servers": "a:9093,b:9093"}, "give controller.quorum.voters="),
        ({"principal.builder.class": "com.example.Builder"}, "sftraffic runs no Kafka plugins"),
        ({"metric.reporters": "com.example.Reporter"}, "sftraffic runs no Kafka plugins"),
        ({"ssl.enabled.protocols": "TLSv1.3"}, "TLS 1.2 and 1.3 are enabled"),
        ({"ssl.cipher.suites": "TLS_AES_256_GCM_SHA384"}, "OpenSSL's defaults"),
        ({"remote.log.storage.system.enable": "true"}, "tiered storage is not implemented"),
        ({"transaction.two.phase.commit.enable": "true"}, "KIP-939"),
    ],
)
def test_kafka_settings_the_broker_cannot_honour_are_refused_with_the_reason(
    given: dict[str, str], reason: str
) -> None:
    with pytest.raises(ConfigError) as ei:
        BrokerConfig.load(overrides=given, environ={})
    msg = str(ei.value)
    assert "is not supported by sftraffic" in msg and reason in msg and "command line" in msg, msg
    assert "\n" not in msg


def test_kafka_log_dirs_with_several_directories_is_refused() -> None:
    for name in ("log.dirs", "log.dir"):
        with pytest.raises(ConfigError, match=rf"config {re.escape(name)}='/a,/b'.*must be one directory"):
            BrokerConfig.load(overrides={name: "/a,/b"}, environ={})


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("socket.send.buffer.bytes", "-1"),  # Kafka's "the OS's size": what the broker does
        ("log.cleaner.enable", "true"),
        ("log.preallocate", "false"),
        ("remote.log.storage.system.enable", "false"),
        ("unstable.api.versions.enable", "false"),
        ("ssl.enabled.protocols", "TLSv1.2, TLSv1.3"),
        ("metric.reporters", ""),
        (
            "principal.builder.class",
            "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",
        ),
        ("create.topic.policy.class.name", ""),
    ],
)
def test_kafka_settings_at_what_the_broker_does_anyway_pass_silently(name: str, value: str) -> None:
    assert BrokerConfig.load(overrides={name: value}, environ={}).warnings == []


@pytest.mark.parametrize(
    ("name", "value", "reason"),
    [
        ("num.io.threads", "16", "the broker runs one event loop"),
        ("group.share.assignment.interval.ms", "1000", "share groups (KIP-932) take the session timeout"),
        ("group.consumer.migration.policy", "bidirectional", "consumer groups (KIP-848) take only"),
        ("sasl.jaas.config", "x required;", "SCRAM credentials kept in the metadata"),
        ("metric.reporters", "org.apache.kafka.common.metrics.JmxReporter", "no JMX"),
        ("request.timeout.ms", "30000", "sftraffic does not implement this Apache Kafka setting"),
    ],
)
def test_kafka_settings_without_effect_here_are_one_warning_naming_key_and_reason(
    name: str, value: str, reason: str
) -> None:
    c = BrokerConfig.load(overrides={name: value}, environ={})
    assert len(c.warnings) == 1
    assert c.warnings[0].startswith(f"{name} has no effect: ") and reason in c.warnings[0]
    assert c.warnings[0].endswith("(command line)")
    assert name not in c.values  # nothing to read: it changes nothing


@pytest.mark.parametrize(
    ("typo", "meant"),
    [
        ("log.retention.hour", "log.retention.hours"),
        ("num.io.thread", "num.io.threads"),
        ("log.segmentbytes", "log.segment.bytes"),
        ("auto.create.topic.enable", "auto.create.topics.enable"),
        ("controller.quorum.voter", "controller.quorum.voters"),
        ("group.share.session.timeout", "group.share.session.timeout.ms"),  # not warned: a typo
        ("segment.bytes", "log.segment.bytes"),  # a topic key: its broker default
    ],
)
def test_a_key_unknown_to_kafka_and_sftraffic_names_the_nearest(typo: str, meant: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(f"did you mean {meant}?")):
        BrokerConfig.load(overrides={typo: "1"}, environ={})


def test_nearest_names_nothing_when_nothing_is_close() -> None:
    assert cfg.nearest("completely.different", cfg.broker_names()) is None
    assert cfg.nearest("log.retenton.ms", cfg.broker_names()) == "log.retention.ms"


def test_validate_names_the_nearest_topic_key() -> None:
    with pytest.raises(
        ConfigError, match=r"'retention\.mss' in topic t; did you mean retention\.ms\?; topic configs:"
    ):
        cfg.validate({"retention.mss": 1}, cfg.TOPIC, "topic t")


def test_kafka_voters_and_their_controller_listener(tmp_path: Path) -> None:
    base = (
        "process.roles=broker,controller\nnode.id=1\n"
        "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:{cport}\n"
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n"
        "controller.listener.names=CONTROLLER\n"
        "controller.quorum.voters=1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095\n"
        "offsets.topic.replication.factor=3\n"
    )
    # the voter entry is the controller listener's address: the quorum's Raft endpoint, silently
    c = BrokerConfig.load(_props(tmp_path, base.format(cport=9093)), environ={})
    assert c.str("listeners") == "PLAINTEXT://127.0.0.1:9092"
    assert c.list("controller.quorum.voters") == ["1@127.0.0.1:9093", "2@127.0.0.1:9094", "3@127.0.0.1:9095"]
    assert c.warnings == []
    # elsewhere: the listener is not opened, and the warning says where the quorum listens
    c = BrokerConfig.load(_props(tmp_path, base.format(cport=9099)), environ={})
    assert _warned(c) == {"controller.listener.names"}
    assert (
        "the metadata quorum listens on node 1's controller.quorum.voters address 127.0.0.1:9093"
        in c.warnings[0]
    )
    # bootstrap servers beside voters, and the offsets topic's replication factor we do not give
    text = base.format(cport=9093) + "controller.quorum.bootstrap.servers=127.0.0.1:9093\n"
    c = BrokerConfig.load(
        _props(tmp_path, text), overrides={"offsets.topic.replication.factor": 2}, environ={}
    )
    assert _warned(c) == {"controller.quorum.bootstrap.servers", "offsets.topic.replication.factor"}
    assert any("min(3, voters) replicas, 3 here (command line)" in w for w in c.warnings)


def test_a_single_node_asked_for_more_offsets_replicas_is_warned() -> None:
    c = BrokerConfig.load(overrides={"offsets.topic.replication.factor": 3}, environ={})
    assert c.warnings == [
        "offsets.topic.replication.factor has no effect: __consumer_offsets gets min(3, voters) "
        "replicas, 1 here (command line)"
    ]


def test_kafka_keys_are_taken_in_toml_and_the_environment_too(tmp_path: Path) -> None:
    p = _write(tmp_path, "[log.retention]\nhours = 2\n\n[num.io]\nthreads = 4\n")
    c = BrokerConfig.load(p, environ={"SFTRAFFIC_NUM_NETWORK_THREADS": "3", "SFTRAFFIC_BROKER_ID": "7"})
    assert c.topic_default("retention.ms") == 7_200_000
    assert c.node_id == 7
    assert _warned(c) == {"num.io.threads", "num.network.threads"}
    assert any(w.endswith("(environment SFTRAFFIC_NUM_NETWORK_THREADS)") for w in c.warnings)


# ---------------------------------------------------------------------------------------
# --config file formats


def test_the_file_format_goes_by_the_extension(tmp_path: Path) -> None:
    props = "log.dirs=/srv/data\nlog.retention.ms: 5\nnum.partitions 3\n"
    c = BrokerConfig.load(_props(tmp_path, props), environ={})
    assert (c.str("log.dirs"), c.int("log.retention.ms"), c.int("num.partitions")) == ("/srv/data", 5, 3)
    with pytest.raises(ConfigError, match=r"not valid TOML: .*name the file \.properties"):
        BrokerConfig.load(_props(tmp_path, props, "broker.toml"), environ={})
    # a .properties file is never read as TOML: quotes are part of the key
    with pytest.raises(ConfigError, match=r"""'"node\.id"'.*did you mean node\.id\?"""):
        BrokerConfig.load(_props(tmp_path, '"node.id" = 3\n'), environ={})


@pytest.mark.parametrize("name", ["broker.conf", "server", "kafka.cfg"])
def test_another_name_is_read_as_the_format_it_parses_as(tmp_path: Path, name: str) -> None:
    c = BrokerConfig.load(
        _props(tmp_path, "log.dirs=/srv/a\n# Kafka\n\nnum.partitions=2\n", name), environ={}
    )
    assert (c.str("log.dirs"), c.int("num.partitions")) == ("/srv/a", 2)
    c = BrokerConfig.load(_props(tmp_path, '[log]\ndirs = "/srv/b"\nretention.ms = 9\n', name), environ={})
    assert (c.str("log.dirs"), c.int("log.retention.ms")) == ("/srv/b", 9)
    with pytest.raises(ConfigError) as ei:
        BrokerConfig.load(_props(tmp_path, "<broker>\n  <id>1</id>\n</broker>\n", name), environ={})
    msg = str(ei.value)
    assert "is neither TOML" in msg and "nor Java properties" in msg and ".toml or .properties" in msg
    assert "\n" not in msg


def test_a_properties_file_that_is_missing_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        BrokerConfig.load(tmp_path / "server.properties", environ={})


def test_properties_lines_end_only_where_java_ends_them(tmp_path: Path) -> None:
    # \f is whitespace in a .properties line (a separator here), not a line break as for str.splitlines
    c = BrokerConfig.load(_props(tmp_path, "num.partitions\f4\r\nlog.dirs=/srv/x\rnode.id=2\n"), environ={})
    assert (c.int("num.partitions"), c.str("log.dirs"), c.node_id) == (4, "/srv/x", 2)


# ---------------------------------------------------------------------------------------
# SFTRAFFIC_* environment variables


def test_an_unknown_sftraffic_variable_is_warned_of_with_the_nearest_setting() -> None:
    c = BrokerConfig.load(
        environ={
            "SFTRAFFIC_LOG_RETENTON_MS": "1",
            "SFTRAFFIC_BOOTSTRAPP": "h:1",
            "SFTRAFFIC_WHATEVER_THIS_IS": "1",
            "SFTRAFFIC_BOOTSTRAP": "h:1",  # the applications'
            "SFTRAFFIC_TEST_BOOTSTRAP": "h:1",
            "OTHER_LOG_RETENTON_MS": "1",  # not ours to judge
        }
    )
    assert c.warnings == [
        "SFTRAFFIC_BOOTSTRAPP is not a setting; did you mean SFTRAFFIC_BOOTSTRAP?",
        "SFTRAFFIC_LOG_RETENTON_MS is not a setting; did you mean SFTRAFFIC_LOG_RETENTION_MS?",
        "SFTRAFFIC_WHATEVER_THIS_IS is not a setting (see `sftraffic config reference`)",
    ]
    assert c.values == {}


def test_the_environment_variable_table_is_documented_and_apart_from_broker_keys() -> None:
    names = [v.name for v in cfg.ENVIRONMENT_VARIABLES]
    assert len(names) == len(set(names))
    broker_vars = {cfg.env_name(n) for n in cfg.broker_names()}
    for v in cfg.ENVIRONMENT_VARIABLES:
        assert v.name.startswith("SFTRAFFIC_") and v.name not in broker_vars, v.name
        assert v.read_by and v.doc.endswith(".") and "\n" not in v.doc, v.name


# Names in the tree that look like variables and are not: the conftest table of tests that need
# our broker, and the prefix load_cli.py builds SFTRAFFIC_LOAD_<NAME> variables from.
NOT_VARIABLES = {"SFTRAFFIC_ONLY", "SFTRAFFIC_LOAD"}
_MADE_UP = {"tests/unit/test_config.py", "tests/unit/cli/test_broker.py"}  # their odd names are on purpose


def test_every_sftraffic_variable_in_the_tree_is_a_broker_key_or_in_the_table() -> None:
    """Code, deployment files and scripts under git (not the docs: they are made from the table)."""
    known = {cfg.env_name(n) for n in cfg.broker_names() | {k.name for k in cfg.keys(None)}}
    known |= {v.name for v in cfg.ENVIRONMENT_VARIABLES} | NOT_VARIABLES
    pattern = re.compile(r"SFTRAFFIC_[A-Z0-9_]*[A-Z0-9]")
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, text=True
    ).stdout.split("\0")
    missing: dict[str, str] = {}
    for rel in filter(None, tracked):
        path = ROOT / rel
        if rel.endswith(".md") or rel in _MADE_UP or not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for name in pattern.findall(text):
            if name not in known:
                missing.setdefault(name, rel)
    assert not missing, f"add these to framework.config.ENVIRONMENT_VARIABLES: {missing}"


def test_kafkas_broker_config_names_are_kafka_4_3s() -> None:
    from framework import kafka_broker_configs as kafka

    assert kafka.KAFKA_VERSION.startswith("4.3")
    assert len(kafka.BROKER_CONFIGS) > 300
    assert kafka.BROKER_CONFIGS["log.retention.hours"] == ("int", "168")
    assert kafka.BROKER_CONFIGS["process.roles"][0] == "list"
    assert "zookeeper.connect" not in kafka.BROKER_CONFIGS  # gone in 4.0
    assert set(kafka.BROKER_CONFIGS) >= kafka.INTERNAL
