"""The admin commands a Kafka user reaches for, driven through ``sftraffic``'s main() against a
real broker: topics, configs (topic, broker, broker defaults, client quotas), groups, cluster
info, users, with ``-o json`` read back as a user's ``jq`` would; and on a broker with SASL users
and an authorizer, acls, ``--command-config`` files (librdkafka's and Java's names), refused
passwords and refused requests, each one line and exit code 2.

Everything but the secured broker and streams runs on Apache Kafka too (``./run test-on-kafka
tests/integration/test_cli_admin.py``).
"""

from __future__ import annotations

import io
import json
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from framework.cli import output
from framework.cli.main import main
from testing import BrokerProcess, free_port, sftraffic
from tests.support.brokers import TEST_BROKER_SETTINGS, quiet_logger

pytestmark = pytest.mark.integration

OURS_ONLY = pytest.mark.sftraffic_only(reason="a broker of its own with SASL users and an authorizer")


@dataclass
class Ran:
    rc: int
    out: str
    err: str

    def json(self) -> Any:
        assert self.rc == 0, self.err
        return json.loads(self.out)


@pytest.fixture(autouse=True)
def _no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("SFTRAFFIC_BOOTSTRAP", "SFTRAFFIC_CLIENT_CONFIG", "SFTRAFFIC_KAFKA_CONFIG"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("COLUMNS", "200")
    # the commands' console was made when its module was first imported, maybe by another test
    # of this worker, at the width it found then: tables would fold their cells
    monkeypatch.setattr(output.console, "width", 200)


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Any:
    def run(*argv: str) -> Ran:
        capsys.readouterr()
        rc = main(list(argv))
        got = capsys.readouterr()
        return Ran(rc, got.out, got.err)

    return run


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def one_line(r: Ran) -> str:
    assert r.rc == 2, r.out + r.err
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.err, r.err
    return lines[0]


# -- topics and configs ------------------------------------------------------------------------
def test_topics_create_alter_describe_as_json(broker: BrokerProcess, cli: Any) -> None:
    b = ["-b", broker.bootstrap]
    t = name("cli-topic")
    assert cli("topics", "create", t, "-p", "1", "-c", "retention.ms=3600000", *b).rc == 0
    (doc,) = cli("topics", "describe", t, "-o", "json", *b).json()["topics"]
    assert [p["partition"] for p in doc["partitions"]] == [0]
    assert doc["partitions"][0]["leader"] in doc["partitions"][0]["isr"]
    configs = {c["name"]: c for c in doc["configs"]}
    assert configs["retention.ms"]["value"] == "3600000" and configs["retention.ms"]["source"] == "topic"

    r = cli(
        "topics",
        "alter",
        t,
        "--partitions",
        "3",
        "-c",
        "segment.ms=600000",
        "--delete-config",
        "retention.ms",
        *b,
    )
    assert r.rc == 0, r.err
    (doc,) = cli("topics", "describe", t, "--all-configs", "-o", "json", *b).json()["topics"]
    assert [p["partition"] for p in doc["partitions"]] == [0, 1, 2]
    configs = {c["name"]: c for c in doc["configs"]}
    assert (configs["segment.ms"]["value"], configs["segment.ms"]["source"]) == ("600000", "topic")
    assert configs["retention.ms"]["source"] in ("default", "static_broker")  # back to the broker's
    listed = {x["name"]: x for x in cli("topics", "list", "-o", "json", *b).json()["topics"]}
    assert listed[t]["partitions"] == 3

    assert "INVALID_PARTITIONS" in one_line(cli("topics", "alter", t, "--partitions", "2", *b))  # fewer
    missing = name("no-such-topic")
    r = cli("topics", "describe", t, missing, "-o", "json", *b)
    assert [x["name"] for x in json.loads(r.out)["topics"]] == [t]  # the one that exists, still
    assert one_line(r) == f"sftraffic topics: topic {missing}: does not exist"


def test_configs_of_a_topic_a_broker_and_the_broker_defaults(broker: BrokerProcess, cli: Any) -> None:
    b = ["-b", broker.bootstrap]
    t = name("cli-configs")
    assert cli("topics", "create", t, *b).rc == 0
    r = cli(
        "configs",
        "alter",
        "--topic",
        t,
        "--add-config",
        "cleanup.policy=[compact,delete],retention.ms=9000",
        *b,
    )
    assert r.rc == 0 and f"Completed updating config for topic {t}." in r.out
    doc = cli("configs", "describe", "--topic", t, "-o", "json", *b).json()
    assert (doc["resource_type"], doc["resource_name"]) == ("topic", t)
    got = {c["name"]: (c["value"], c["source"]) for c in doc["configs"]}
    assert got == {"cleanup.policy": ("compact,delete", "topic"), "retention.ms": ("9000", "topic")}
    assert (
        cli(
            "configs",
            "alter",
            "--entity-type",
            "topics",
            "--entity-name",
            t,
            "--delete-config",
            "cleanup.policy",
            *b,
        ).rc
        == 0
    )
    doc = cli("configs", "describe", "--topic", t, "--all", "-o", "json", *b).json()
    got = {c["name"]: (c["value"], c["source"]) for c in doc["configs"]}
    assert got["retention.ms"] == ("9000", "topic") and got["cleanup.policy"] == ("delete", "default")

    broker_id = str(cli("cluster", "info", "-o", "json", *b).json()["brokers"][0]["id"])
    key = "leader.replication.throttled.rate"
    assert cli("configs", "alter", "--broker", broker_id, "--add-config", f"{key}=10485760", *b).rc == 0
    try:
        doc = cli("configs", "describe", "--broker", broker_id, "-o", "json", *b).json()
        assert {c["name"]: (c["value"], c["source"]) for c in doc["configs"]}[key] == (
            "10485760",
            "dynamic_broker",
        )
    finally:
        assert cli("configs", "alter", "--broker", broker_id, "--delete-config", key, *b).rc == 0
    key = "follower.replication.throttled.rate"

    def defaults() -> dict[str, tuple[str, str]]:
        doc = cli("configs", "describe", "--broker-defaults", "-o", "json", *b).json()
        return {c["name"]: (c["value"], c["source"]) for c in doc["configs"]}

    assert cli("configs", "alter", "--broker-defaults", "--add-config", f"{key}=20971520", *b).rc == 0
    try:
        assert defaults()[key] == ("20971520", "dynamic_default_broker")
        assert {source for _, source in defaults().values()} == {"dynamic_default_broker"}
    finally:
        assert cli("configs", "alter", "--broker-defaults", "--delete-config", key, *b).rc == 0
    assert key not in defaults()

    assert "does not exist" in one_line(cli("configs", "describe", "--topic", name("nope"), *b))
    assert "bogus.key" in one_line(cli("configs", "alter", "--topic", t, "--add-config", "bogus.key=1", *b))


def test_client_quotas(broker: BrokerProcess, cli: Any) -> None:
    b = ["-b", broker.bootstrap]
    user, client = name("quota-user"), name("quota-client")
    r = cli(
        "configs",
        "alter",
        "--user",
        user,
        "--add-config",
        "producer_byte_rate=1048576,consumer_byte_rate=2e6",
        *b,
    )
    assert r.rc == 0, r.err
    assert (
        cli(
            "configs",
            "alter",
            "--user",
            user,
            "--client",
            client,
            "--add-config",
            "request_percentage=50",
            *b,
        ).rc
        == 0
    )

    def quotas(*entity: str) -> list[Any]:
        return [
            (q["entity"], {v["key"]: v["value"] for v in q["values"]})
            for q in cli("configs", "describe", *entity, "-o", "json", *b).json()["quotas"]
        ]

    assert quotas("--user", user) == [
        (
            [{"entity_type": "user", "entity_name": user}],
            {"consumer_byte_rate": 2e6, "producer_byte_rate": 1048576.0},
        )
    ]
    assert quotas("--user", user, "--client", client) == [
        (
            [
                {"entity_type": "user", "entity_name": user},
                {"entity_type": "client-id", "entity_name": client},
            ],
            {"request_percentage": 50.0},
        )
    ]
    assert cli("configs", "alter", "--user", user, "--delete-config", "consumer_byte_rate", *b).rc == 0
    assert quotas("--user", user)[0][1] == {"producer_byte_rate": 1048576.0}
    assert cli("configs", "alter", "--user", user, "--delete-config", "producer_byte_rate", *b).rc == 0
    assert (
        cli(
            "configs",
            "alter",
            "--user",
            user,
            "--client",
            client,
            "--delete-config",
            "request_percentage",
            *b,
        ).rc
        == 0
    )
    assert quotas("--user", user) == []
    assert "a quota is a number" in one_line(
        cli("configs", "alter", "--client", client, "--add-config", "producer_byte_rate=fast", *b)
    )


# -- groups ------------------------------------------------------------------------------------
def test_groups_describe_members_and_delete(broker: BrokerProcess, cli: Any) -> None:
    b = ["-b", broker.bootstrap]
    t, group = name("cli-group-topic"), name("cli-group")
    assert cli("topics", "create", t, "-p", "2", *b).rc == 0
    p = Producer({"bootstrap.servers": broker.bootstrap, "logger": quiet_logger()})
    for i in range(3):
        p.produce(t, f"r{i}".encode(), partition=0)
    assert p.flush(30) == 0
    c = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "client.id": "cli-admin-test",
            "enable.auto.commit": False,
            "logger": quiet_logger(),
        }
    )
    try:
        c.subscribe([t])
        deadline = time.monotonic() + 30
        while len(c.assignment()) < 2 and time.monotonic() < deadline:
            c.poll(0.2)
        assert len(c.assignment()) == 2
        c.commit(offsets=[TopicPartition(t, 0, 1)], asynchronous=False)

        (g,) = cli("groups", "describe", group, "--members", "-o", "json", *b).json()["groups"]
        assert g["state"] == "Stable"
        (m,) = g["members"]
        assert m["client_id"] == "cli-admin-test" and m["host"]
        assert m["assignment"] == [{"topic": t, "partition": 0}, {"topic": t, "partition": 1}]
        assert g["offsets"] == [
            {
                "topic": t,
                "partition": 0,
                "committed_offset": 1,
                "log_end_offset": 3,
                "lag": 2,
                "member_id": m["member_id"],
            }
        ]
        assert g["total_lag"] == 2
        table = cli("groups", "describe", group, "--members", *b)
        assert table.rc == 0 and "cli-admin-test" in table.out and f"{t}-0, {t}-1" in table.out
        assert "active members" in one_line(cli("groups", "delete", group, *b))
    finally:
        c.close()
    listed = {x["group_id"]: x for x in cli("groups", "list", "-o", "json", *b).json()["groups"]}
    assert listed[group]["state"] == "Empty"
    assert cli("groups", "delete", group, *b).rc == 0
    assert group not in {x["group_id"] for x in cli("groups", "list", "-o", "json", *b).json()["groups"]}
    r = cli("groups", "describe", group, "-o", "json", *b)
    assert (
        json.loads(r.out) == {"groups": []}
        and one_line(r) == f"sftraffic groups: group {group}: does not exist"
    )


# -- cluster, users, bad input -------------------------------------------------------------------
def test_cluster_info_as_json(broker: BrokerProcess, cli: Any) -> None:
    doc = cli("cluster", "info", "-o", "json", "-b", broker.bootstrap).json()
    ids = [x["id"] for x in doc["brokers"]]
    assert ids and doc["controller_id"] in ids and doc["cluster_id"]
    assert all(x["host"] and x["port"] > 0 for x in doc["brokers"])
    q = doc["metadata_quorum"]
    assert q is not None, doc.get("metadata_quorum_error")
    assert q["leader_id"] in [v["replica_id"] for v in q["voters"]]
    apis = {a["name"]: a for a in doc["api_versions"]["api_keys"]}
    assert apis["Produce"]["api_key"] == 0 and apis["Fetch"]["max_version"] >= apis["Fetch"]["min_version"]
    assert "DescribeQuorum" in apis
    assert cli("cluster", "info", "--apis", "-b", broker.bootstrap).rc == 0


def test_users_add_reads_the_password_from_stdin(broker: BrokerProcess, cli: Any, tmp_path: Path) -> None:
    user = name("cli-user")
    added = subprocess.run(
        sftraffic("users", "add", user, "--password", "-", "-b", broker.bootstrap),
        input="from-stdin-0123456789\n",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert added.returncode == 0 and f"user {user}: SCRAM-SHA-256 set" in added.stdout, added.stderr
    pw = tmp_path / "pw"
    pw.write_text("from-a-file-0123456789\n")
    assert (
        cli(
            "users",
            "add",
            user,
            "--password-file",
            str(pw),
            "--mechanism",
            "SCRAM-SHA-512",
            "-b",
            broker.bootstrap,
        ).rc
        == 0
    )
    users = {u["user"]: u for u in cli("users", "list", "-o", "json", "-b", broker.bootstrap).json()["users"]}
    assert [c["mechanism"] for c in users[user]["credential_infos"]] == ["SCRAM-SHA-256", "SCRAM-SHA-512"]
    assert cli("users", "delete", user, "-b", broker.bootstrap).rc == 0
    assert user not in {
        u["user"] for u in cli("users", "list", "-o", "json", "-b", broker.bootstrap).json()["users"]
    }


def test_unreachable_and_missing_files_are_one_line(cli: Any, tmp_path: Path) -> None:
    port = free_port()
    assert "no broker reachable" in one_line(cli("topics", "list", "-b", f"127.0.0.1:{port}"))
    assert "no broker reachable" in one_line(cli("cluster", "info", "-b", f"127.0.0.1:{port}"))
    missing = tmp_path / "admin.properties"
    line = one_line(cli("groups", "list", "--command-config", str(missing), "-b", f"127.0.0.1:{port}"))
    assert str(missing) in line and "No such file" in line


def test_acls_on_a_cluster_without_an_authorizer_say_so(broker: BrokerProcess, cli: Any) -> None:
    # librdkafka reads DescribeAcls' SECURITY_DISABLED as "no ACLs"; the command tells them apart
    for argv in (
        ("acls", "list"),
        ("acls", "add", "--allow-principal", "User:a", "--operation", "Read", "--topic", "t"),
    ):
        assert "no authorizer" in one_line(cli(*argv, "-b", broker.bootstrap))


# -- streams -----------------------------------------------------------------------------------
@pytest.mark.sftraffic_only(reason="streams are sftraffic's extension (StreamAdmin)")
def test_a_topic_shows_the_configs_it_takes_from_its_stream(broker: BrokerProcess, cli: Any) -> None:
    b = ["-b", broker.bootstrap]
    s = name("clistream").replace("-", "_")
    assert cli("streams", "create", s, "--ttl", "2d", *b).rc == 0
    assert cli("topics", "create", f"{s}.speeds", *b).rc == 0
    (doc,) = cli("topics", "describe", f"{s}.speeds", "-o", "json", *b).json()["topics"]
    ttl = {c["name"]: c for c in doc["configs"]}["retention.ms"]
    assert (ttl["value"], ttl["source"]) == ("172800000", "stream")
    assert ttl["synonyms"][0] == {
        "name": f"stream:{s}:retention.ms",
        "value": "172800000",
        "source": "stream",
    }
    (st,) = cli("streams", "describe", s, "-o", "json", *b).json()["streams"]
    assert st["topics"] == [f"{s}.speeds"] and st["permissions"] is None  # no authorizer
    assert {c["name"]: c["source"] for c in st["configs"]}["retention.ms"] == "stream"
    assert s in [x["name"] for x in cli("streams", "list", "-o", "json", *b).json()["streams"]]


# -- a broker with SASL users and an authorizer ----------------------------------------------------
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def password(user: str) -> str:
    return f"{user}-pw-0123456789"


@dataclass
class Secure:
    sasl: str
    dir: Path

    def x(self, user: str, pw: str | None = None) -> list[str]:
        """-X settings logging in as ``user``."""
        conf = {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": user,
            "sasl.password": pw or password(user),
        }
        return ["-b", self.sasl, *(a for k, v in conf.items() for a in ("-X", f"{k}={v}"))]


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secure]:
    base = tmp_path_factory.mktemp("secure")
    data = base / "data"
    for user in ("admin", "alice"):
        pw = base / f"{user}.password"
        pw.write_text(password(user) + "\n")
        assert main(["users", "add", user, "--password-file", str(pw), "--data-dir", str(data)]) == 0
    ports = {"PLAINTEXT": free_port(), "SASL_PLAINTEXT": free_port()}
    settings = {
        **TEST_BROKER_SETTINGS,
        "listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items()),
        "sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "authorizer.class.name": AUTHORIZER,
        "super.users": "User:admin",
    }
    b = BrokerProcess(data, port=ports["PLAINTEXT"], overrides=settings).start()
    yield Secure(f"127.0.0.1:{ports['SASL_PLAINTEXT']}", base)
    b.stop()


@OURS_ONLY
def test_command_config_files_in_librdkafkas_and_javas_names(secure: Secure, cli: Any) -> None:
    # as `sftraffic up --secure` writes <data-dir>/secure/sftraffic-admin.properties
    admin = secure.dir / "admin.properties"
    admin.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
        f"sasl.username=admin\nsasl.password={password('admin')}\n"
    )
    t = name("secure-topic")
    assert cli("topics", "create", t, "-b", secure.sasl, "--command-config", str(admin)).rc == 0
    listed = cli("topics", "list", "-o", "json", "-b", secure.sasl, "--command-config", str(admin)).json()
    assert t in [x["name"] for x in listed["topics"]]
    java = secure.dir / "alice.properties"  # as kafka-topics.sh --command-config takes it
    java.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="alice" password="{password("alice")}";\n'
    )
    r = cli("configs", "describe", "--topic", t, "-b", secure.sasl, "--command-config", str(java))
    assert "TOPIC_AUTHORIZATION_FAILED" in one_line(r)  # she logged in; she may not look at it
    wrong = one_line(cli("topics", "list", *secure.x("alice", "not-her-password")))
    assert "refused to authenticate as 'alice'" in wrong
    plain = one_line(cli("groups", "list", "-b", secure.sasl))  # at once, not librdkafka's time-out
    assert "does not answer plaintext requests" in plain and "--command-config" in plain


@OURS_ONLY
def test_acls_add_list_remove(secure: Secure, cli: Any) -> None:
    admin, alice = secure.x("admin"), secure.x("alice")
    t = name("acl-topic")
    assert cli("topics", "create", t, *admin).rc == 0
    assert "AUTHORIZATION_FAILED" in one_line(cli("configs", "describe", "--topic", t, *alice))

    r = cli(
        "acls",
        "add",
        "--allow-principal",
        "User:alice",
        "--operation",
        "DescribeConfigs",
        "--operation",
        "Describe",
        "--topic",
        t,
        *admin,
    )
    assert r.rc == 0, r.err
    acls = cli("acls", "list", "--topic", t, "-o", "json", *admin).json()["acls"]
    assert acls == [
        {"resource_type": "TOPIC", "resource_name": t, "pattern_type": "LITERAL", "principal": "User:alice",
         "host": "*", "operation": op, "permission_type": "ALLOW"}
        for op in ("DESCRIBE", "DESCRIBE_CONFIGS")
    ]  # fmt: skip
    assert cli("configs", "describe", "--topic", t, *alice).rc == 0  # allowed now

    prefix = name("acl-prefix") + "."
    r = cli(
        "acls",
        "add",
        "--allow-principal",
        "alice",
        "--producer",
        "--topic",
        prefix,
        "--resource-pattern-type",
        "prefixed",
        *admin,
    )
    assert r.rc == 0, r.err
    matching = cli(
        "acls", "list", "--topic", prefix + "speeds", "--resource-pattern-type", "match", "-o", "json", *admin
    ).json()["acls"]
    assert sorted(a["operation"] for a in matching) == ["CREATE", "DESCRIBE", "WRITE"]
    assert {a["pattern_type"] for a in matching} == {"PREFIXED"}
    mine = cli("acls", "list", "--principal", "User:alice", "-o", "json", *admin).json()["acls"]
    assert len(mine) == 5

    assert "--force" in one_line(cli("acls", "remove", "--topic", t, *admin))
    assert cli("acls", "remove", "--allow-principal", "User:alice", "--topic", t, *admin).rc == 0
    assert cli("acls", "list", "--topic", t, "-o", "json", *admin).json()["acls"] == []
    assert "AUTHORIZATION_FAILED" in one_line(cli("configs", "describe", "--topic", t, *alice))
    r = cli("acls", "remove", "--topic", prefix, "--resource-pattern-type", "prefixed", "--force", *admin)
    assert (
        r.rc == 0 and cli("acls", "list", "--principal", "alice", "-o", "json", *admin).json()["acls"] == []
    )
    assert "CLUSTER_AUTHORIZATION_FAILED" in one_line(
        cli("acls", "add", "--allow-principal", "alice", "--cluster", *alice)
    )


@OURS_ONLY
def test_users_added_through_sasl_with_a_password_from_stdin_can_log_in(
    secure: Secure, cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    user = name("carol")
    monkeypatch.setattr("sys.stdin", io.StringIO(password(user) + "\n"))
    assert cli("users", "add", user, "--password", "-", *secure.x("admin")).rc == 0
    assert cli("topics", "list", *secure.x(user)).rc == 0  # logs in with it
    assert "refused to authenticate" in one_line(cli("topics", "list", *secure.x(user, "guess")))
