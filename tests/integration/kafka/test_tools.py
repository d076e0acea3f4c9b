"""Kafka's command-line tools (``bin/*.sh``, run by main class) against the ``broker`` fixture.

Each test runs the tools as a user would and checks their answers; the same assertions hold on
Apache Kafka 4.3 (``./run test-on-kafka`` runs this module against it). Tools that need an API
the store does not serve are in :data:`GAPS`: expected to fail on our broker (strictly: a gap
that closes shows up as XPASS and must leave the list and the table in
docs/reference/kafka-compatibility.md) and to work on
Kafka.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from testing import ClusterProcesses, wait_for
from tests.support.brokers import EXTERNAL_BOOTSTRAP, create_topic, quiet_logger
from tests.support.clients import consume_all
from tests.support.cluster import OVERRIDES, fill, partitions_of, read_partitions
from tests.support.kafka_tools import Tool

pytestmark = [pytest.mark.integration, pytest.mark.kafka]

Cli = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def cli(broker: Any, tool: Tool) -> Cli:
    """``cli("kafka-topics --list")``: the tool with ``--bootstrap-server`` of the broker; more
    arguments may follow in further strings (split as a shell would)."""

    def run(*command: str, **kw: Any) -> subprocess.CompletedProcess[str]:
        name, *args = shlex.split(" ".join(command))
        return tool(name, "--bootstrap-server", broker.bootstrap, *args, **kw)

    return run


def lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip()]


def partition_rows(describe: str) -> list[str]:
    """The partition lines of ``kafka-topics --describe`` (one per partition)."""
    return [ln for ln in describe.splitlines() if re.search(r"\tPartition: \d+", ln)]


def produce(bootstrap: str, topic: str, values: list[bytes], **kw: Any) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "logger": quiet_logger()})
    for v in values:
        p.produce(topic, value=v, **kw)
    assert p.flush(30) == 0


# -- kafka-topics --------------------------------------------------------------------------------
def test_kafka_topics_create_list_describe_alter_delete(cli: Cli, topic_name: Any) -> None:
    t = topic_name("topics")
    out = cli(
        f"kafka-topics --create --topic {t} --partitions 3",
        "--replication-factor 1 --config retention.ms=3600000",
    )
    assert f"Created topic {t}." in out.stdout
    assert t in lines(cli("kafka-topics --list").stdout)
    described = cli(f"kafka-topics --describe --topic {t}").stdout
    assert f"Topic: {t}\tTopicId: " in described and "PartitionCount: 3\tReplicationFactor: 1" in described
    assert "retention.ms=3600000" in described
    rows = partition_rows(described)
    assert len(rows) == 3 and all("Leader: " in r and "Isr: " in r for r in rows)
    again = cli(f"kafka-topics --create --topic {t}", check=False)
    assert again.returncode != 0 and "already exists" in again.stdout + again.stderr

    cli(f"kafka-topics --alter --topic {t} --partitions 5")
    assert len(partition_rows(cli(f"kafka-topics --describe --topic {t}").stdout)) == 5

    cli(f"kafka-topics --delete --topic {t}")
    gone = cli(f"kafka-topics --describe --topic {t}", check=False)
    assert gone.returncode != 0 and "does not exist" in gone.stdout + gone.stderr


# -- kafka-configs -------------------------------------------------------------------------------
def test_kafka_configs_describe_and_alter_topic_configs(cli: Cli, broker: Any, topic_name: Any) -> None:
    t = topic_name("configs")
    create_topic(broker.bootstrap, t, 1)
    topic = f"kafka-configs --entity-type topics --entity-name {t}"
    assert cli(f"{topic} --describe").stdout.strip() == f"Dynamic configs for topic {t} are:"

    out = cli(f"{topic} --alter --add-config retention.ms=7200000,cleanup.policy=compact").stdout
    assert f"Completed updating config for topic {t}." in out
    described = cli(f"{topic} --describe").stdout
    assert (
        "retention.ms=7200000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=7200000"
        in described
    )
    assert "cleanup.policy=compact" in described

    cli(f"{topic} --alter --delete-config retention.ms")
    every = cli(f"{topic} --describe --all").stdout
    assert f"All configs for topic {t} are:" in every
    assert (
        "cleanup.policy=compact sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact"
        in every
    )
    assert "retention.ms=604800000 sensitive=false synonyms=" in every  # Kafka: {}, ours: the broker default
    for key in ("segment.bytes=", "min.insync.replicas=", "max.message.bytes=", "message.timestamp.type="):
        assert key in every, key

    out = cli("kafka-configs --entity-type brokers --entity-default --describe").stdout
    assert "Default configs for brokers in the cluster are:" in out


def test_kafka_configs_client_quotas(cli: Cli) -> None:
    """kafka-configs over DescribeClientQuotas/AlterClientQuotas: users, client ids,
    both, and the defaults."""
    user = "kafka-configs --entity-type users --entity-name qalice"
    out = cli(f"{user} --alter --add-config producer_byte_rate=1048576,consumer_byte_rate=2097152").stdout
    assert "Completed updating config for user qalice." in out
    described = cli(f"{user} --describe").stdout
    assert "Quota configs for user-principal 'qalice' are" in described
    assert "producer_byte_rate=1048576.0" in described and "consumer_byte_rate=2097152.0" in described
    pair = "kafka-configs --entity-type users --entity-name qalice --entity-type clients --entity-default"
    cli(f"{pair} --alter --add-config request_percentage=25")
    assert "request_percentage=25.0" in cli(f"{pair} --describe").stdout
    clients = "kafka-configs --entity-type clients --entity-name qapp"
    cli(f"{clients} --alter --add-config producer_byte_rate=4096")
    cli(f"{clients} --alter --delete-config producer_byte_rate")
    assert "producer_byte_rate" not in cli(f"{clients} --describe").stdout
    bad = cli(f"{clients} --alter --add-config producer_byte_rate=1.5", check=False)
    assert bad.returncode != 0


# -- console producer / consumer -----------------------------------------------------------------
def test_console_producer_and_consumer_round_trip(cli: Cli, broker: Any, topic_name: Any) -> None:
    t = topic_name("console")
    create_topic(broker.bootstrap, t, 2)
    records = [f"key-{i}:value {i} with spaces, ünïcode" for i in range(50)]
    reader = "--reader-property parse.key=true --reader-property key.separator=:"
    cli(
        f"kafka-console-producer --topic {t} {reader} --producer-property acks=all",
        input="\n".join(records) + "\n",
    )
    fmt = "--formatter-property print.key=true --formatter-property print.partition=true"
    fmt += " --formatter-property key.separator=|"
    consume = f"kafka-console-consumer --topic {t} --group g-{t} {fmt}"
    out = cli(f"{consume} --from-beginning --max-messages 50 --timeout-ms 30000").stdout
    got = [ln.split("|") for ln in lines(out)]
    assert sorted(f"{k}:{v}" for _, k, v in got) == sorted(records)  # rows: Partition:P|KEY|VALUE
    by_key: dict[str, set[str]] = {}
    for part, k, _ in got:
        by_key.setdefault(k, set()).add(part)
    assert all(len(parts) == 1 for parts in by_key.values())  # a key stays on one partition
    # the group committed what it read: from its offsets on, nothing is left
    rest = cli(f"{consume} --timeout-ms 5000", check=False)
    assert lines(rest.stdout) == [] and "Processed a total of 0 messages" in rest.stderr


# -- kafka-get-offsets ---------------------------------------------------------------------------
def test_kafka_get_offsets(cli: Cli, broker: Any, topic_name: Any) -> None:
    b, t = broker.bootstrap, topic_name("offsets")
    create_topic(b, t, 2)
    now = int(time.time() * 1000)
    p = Producer({"bootstrap.servers": b, "logger": quiet_logger()})
    for i, ts in enumerate((now - 30_000, now - 10_000, now - 20_000)):  # the max timestamp at offset 1
        p.produce(t, value=b"%d" % i, partition=0, timestamp=ts)
    p.produce(t, value=b"x", partition=1)
    assert p.flush(30) == 0

    def offsets(args: str) -> list[str]:
        return sorted(lines(cli(f"kafka-get-offsets {args}").stdout))

    assert offsets(f"--topic {t}") == [f"{t}:0:3", f"{t}:1:1"]  # --time -1, the default
    assert offsets(f"--topic {t} --time -2") == [f"{t}:0:0", f"{t}:1:0"]
    assert offsets(f"--topic-partitions {t}:0 --time -3") == [f"{t}:0:1"]  # the max timestamp's
    assert offsets(f"--topic-partitions {t}:0 --time {now - 15_000}") == [f"{t}:0:1"]  # first at or after


# -- kafka-consumer-groups -----------------------------------------------------------------------
def group_rows(out: str, group: str) -> dict[int, list[str]]:
    """Rows of ``group`` by partition: GROUP TOPIC PARTITION CURRENT-OFFSET (or NEW-OFFSET) ..."""
    rows = [ln.split() for ln in lines(out) if ln.startswith(group + " ")]
    return {int(r[2]): r for r in rows}


def test_kafka_consumer_groups_list_describe_reset_delete(cli: Cli, broker: Any, topic_name: Any) -> None:
    t = topic_name("groups")
    group = f"g-{t}"
    create_topic(broker.bootstrap, t, 2)
    produce(broker.bootstrap, t, [b"m%d" % i for i in range(20)])
    cli(
        f"kafka-console-consumer --topic {t} --group {group}",
        "--from-beginning --max-messages 20 --timeout-ms 30000",
    )
    cg = f"kafka-consumer-groups --group {group}"

    assert group in lines(cli("kafka-consumer-groups --list").stdout)
    rows = group_rows(cli(f"{cg} --describe").stdout, group)
    assert sorted(rows) == [0, 1] and sum(int(r[3]) for r in rows.values()) == 20
    assert all(r[3] == r[4] and r[5] == "0" for r in rows.values())  # current == end, lag 0
    state = cli(f"{cg} --describe --state").stdout
    assert re.search(rf"^{re.escape(group)}\s+\S+\s+\(\d+\)\s+\S*\s+Empty\s+0$", state, re.M), state

    out = cli(f"{cg} --reset-offsets --to-earliest --topic {t} --execute").stdout
    assert {r[3] for r in group_rows(out, group).values()} == {"0"}  # NEW-OFFSET
    rows = group_rows(cli(f"{cg} --describe").stdout, group)
    assert all(r[3] == "0" and r[5] == r[4] for r in rows.values())  # the lag is the whole log again
    out = cli(f"{cg} --reset-offsets --shift-by 2 --topic {t}:0 --execute").stdout
    assert [r[3] for r in group_rows(out, group).values()] == ["2"]

    cli(f"{cg} --delete-offsets --topic {t}:0")
    assert sorted(group_rows(cli(f"{cg} --describe").stdout, group)) == [1]
    out = cli(f"{cg} --delete").stdout
    assert f"Deletion of requested consumer groups ('{group}') was successful." in out
    assert group not in lines(cli("kafka-consumer-groups --list").stdout)


# -- kafka-leader-election, kafka-delete-records -------------------------------------------------
def test_kafka_leader_election_preferred(cli: Cli, broker: Any, topic_name: Any) -> None:
    t = topic_name("elect")
    create_topic(broker.bootstrap, t, 2)
    out = cli(f"kafka-leader-election --election-type preferred --topic {t} --partition 0").stdout
    # its only replica leads already: ELECTION_NOT_NEEDED, which the tool reports so
    assert f"Valid replica already elected for partitions {t}-0" in out


def test_kafka_delete_records(cli: Cli, broker: Any, topic_name: Any, tmp_path: Path) -> None:
    b, t = broker.bootstrap, topic_name("delrec")
    create_topic(b, t, 1)
    produce(b, t, [b"m%d" % i for i in range(10)])
    spec = tmp_path / "offsets.json"
    spec.write_text(json.dumps({"version": 1, "partitions": [{"topic": t, "partition": 0, "offset": 4}]}))
    out = cli(f"kafka-delete-records --offset-json-file {spec}").stdout
    assert f"partition: {t}-0\tlow_watermark: 4" in out
    assert lines(cli(f"kafka-get-offsets --topic {t} --time -2").stdout) == [f"{t}:0:4"]
    assert [m.offset() for m in consume_all(b, t, 1, 6)] == list(range(4, 10))


# -- verifiable producer / consumer (idempotence, assignment strategies) --------------------------
def events(out: str) -> list[dict[str, Any]]:
    return [json.loads(ln) for ln in lines(out) if ln.startswith("{")]


@pytest.mark.parametrize("assignor", ["CooperativeStickyAssignor", "RangeAssignor"])
def test_verifiable_producer_and_consumer(
    cli: Cli, broker: Any, topic_name: Any, tmp_path: Path, assignor: str
) -> None:
    t = topic_name("verifiable")
    create_topic(broker.bootstrap, t, 4)
    conf = tmp_path / "producer.properties"
    conf.write_text("enable.idempotence=true\nretries=2147483647\nmax.in.flight.requests.per.connection=5\n")
    out = cli(f"kafka-verifiable-producer --topic {t} --max-messages 2000 --acks -1 --command-config {conf}")
    sent = [e for e in events(out.stdout) if e["name"] == "producer_send_success"]
    assert len(sent) == 2000 and events(out.stdout)[-1]["acked"] == 2000
    per_partition: dict[int, list[int]] = {}
    for e in sent:
        per_partition.setdefault(e["partition"], []).append(e["offset"])
    assert all(sorted(o) == list(range(len(o))) for o in per_partition.values())  # dense, once each

    strategy = f"org.apache.kafka.clients.consumer.{assignor}"
    out = cli(
        f"kafka-verifiable-consumer --topic {t} --group-id g-{t} --max-messages 2000 --reset-policy earliest "
        f"--assignment-strategy {strategy}",
        timeout=120,
    )
    evs = events(out.stdout)
    assigned = [e for e in evs if e["name"] == "partitions_assigned"]
    assert assigned and sorted(p["partition"] for p in assigned[0]["partitions"]) == [0, 1, 2, 3]
    assert sum(e["count"] for e in evs if e["name"] == "records_consumed") == 2000
    commits = [e for e in evs if e["name"] == "offsets_committed"]
    assert commits and all(e["success"] for e in commits), commits
    final = {o["partition"]: o["offset"] for e in commits for o in e["offsets"]}
    assert final == {p: len(o) for p, o in per_partition.items()}


# -- kafka-acls --------------------------------------------------------------------------------------
AUTHORIZER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:ANONYMOUS",  # the tool connects over PLAINTEXT
}


def test_kafka_acls_without_an_authorizer(cli: Cli) -> None:
    """As Kafka: the ACL APIs answer SECURITY_DISABLED and the tool says so (exit code 1)."""
    out = cli("kafka-acls --list", check=False)
    assert out.returncode == 1 and "No Authorizer is configured" in out.stdout + out.stderr


def test_kafka_acls_add_list_remove(tool: Tool, broker_factory: Any) -> None:
    b = broker_factory(AUTHORIZER)

    def acls(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return tool(
            "kafka-acls", "--bootstrap-server", b.bootstrap, *shlex.split(" ".join(args)), check=check
        )

    acls(
        "--add --allow-principal User:alice --operation Read --operation Describe",
        "--topic traffic. --resource-pattern-type prefixed",
    )
    acls("--add --producer --topic orders --allow-principal User:bob")  # Write, Describe, Create
    acls("--add --deny-principal User:eve --operation All --topic orders")
    acls("--add --allow-principal User:carol --operation Read --group dashboard")
    listed = acls("--list").stdout
    assert "name=traffic., patternType=PREFIXED" in listed
    assert "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)" in listed
    assert "(principal=User:eve, host=*, operation=ALL, permissionType=DENY)" in listed
    for op in ("WRITE", "DESCRIBE", "CREATE"):
        assert f"(principal=User:bob, host=*, operation={op}, permissionType=ALLOW)" in listed
    assert "resourceType=GROUP, name=dashboard, patternType=LITERAL" in listed
    # --list of a topic shows the ACLs that apply to it: its literal ones and matching prefixes
    one = acls("--list --topic traffic.speeds --resource-pattern-type match").stdout
    assert "name=traffic., patternType=PREFIXED" in one and "orders" not in one
    acls(
        "--remove --force --allow-principal User:alice --operation Read --topic traffic.",
        "--resource-pattern-type prefixed",
    )
    after = acls("--list --topic traffic. --resource-pattern-type prefixed").stdout
    assert "operation=READ" not in after and "operation=DESCRIBE" in after
    acls("--remove --force --topic orders")  # every ACL of the literal resource
    assert "orders" not in acls("--list").stdout


# -- the perf tools (the Java client's own load generators) ---------------------------------------
def test_producer_and_consumer_perf_tests(cli: Cli, broker: Any, topic_name: Any) -> None:
    t = topic_name("perf")
    create_topic(broker.bootstrap, t, 3)
    perf = f"--topic {t} --num-records 50000 --record-size 100 --throughput -1 --producer-props acks=all"
    out = cli(f"kafka-producer-perf-test {perf}").stdout
    assert re.search(r"^50000 records sent, ", out, re.M), out
    out = cli(f"kafka-consumer-perf-test --topic {t} --num-records 50000 --timeout 30000").stdout
    assert int(lines(out)[-1].split(", ")[4]) >= 50000, out  # data.consumed.in.nMsg


def test_transactional_perf_producer_and_kafka_transactions(cli: Cli, broker: Any, topic_name: Any) -> None:
    """The Java producer's transactions, then kafka-transactions list / describe."""
    t = topic_name("txtool")
    create_topic(broker.bootstrap, t, 1)
    out = cli(
        f"kafka-producer-perf-test --topic {t} --num-records 100 --record-size 10 --throughput -1 "
        f"--transactional-id tx-{t} --transaction-duration-ms 100 --producer-props max.block.ms=10000",
        timeout=60,
    ).stdout
    assert "100 records sent" in out, out
    out = cli("kafka-transactions list", timeout=60).stdout
    assert "TransactionalId" in out and f"tx-{t}" in out, out
    out = cli(f"kafka-transactions describe --transactional-id tx-{t}", timeout=60).stdout
    assert f"tx-{t}" in out and "CompleteCommit" in out, out


# -- kafka-log-dirs, kafka-metadata-quorum, kafka-topics --describe paged --------------------------
def test_kafka_log_dirs_describe(cli: Cli, broker: Any, topic_name: Any) -> None:
    """DescribeLogDirs: every replica of the topics asked for, its size growing with its records."""
    t = topic_name("logdirs")
    create_topic(broker.bootstrap, t, 2)
    produce(broker.bootstrap, t, [b"x" * 1000] * 20, partition=1)
    out = cli(f"kafka-log-dirs --describe --topic-list {t}", timeout=60).stdout
    report = json.loads(next(ln for ln in out.splitlines() if ln.startswith("{")))
    (b,) = report["brokers"]
    sizes = {
        p["partition"]: (p["size"], p["offsetLag"], p["isFuture"])
        for d in b["logDirs"]
        for p in d["partitions"]
        if d["error"] is None
    }
    assert set(sizes) == {f"{t}-0", f"{t}-1"}, out
    assert sizes[f"{t}-0"][0] == 0 and sizes[f"{t}-1"][0] > 20_000, out
    assert {lag for _s, lag, _f in sizes.values()} == {0} and not any(f for *_x, f in sizes.values())


def test_kafka_metadata_quorum_describe(cli: Cli, broker: Any) -> None:
    """DescribeQuorum: --status and --replication print the leader, its epoch and the voters."""
    status = cli("kafka-metadata-quorum describe --status", timeout=60).stdout
    fields = dict(re.findall(r"^(\w+):\s+(.*)$", status, re.M))
    assert {
        "ClusterId",
        "LeaderId",
        "LeaderEpoch",
        "HighWatermark",
        "MaxFollowerLag",
        "CurrentVoters",
    } <= set(fields), status
    assert int(fields["LeaderId"]) >= 0 and int(fields["MaxFollowerLag"]) >= 0, status
    assert f'"id": {fields["LeaderId"]}' in fields["CurrentVoters"], status
    replication = cli("kafka-metadata-quorum describe --replication", timeout=60).stdout
    assert re.search(rf"^{fields['LeaderId']}\s.*\sLeader\s*$", replication, re.M), replication


def test_kafka_topics_describe_pages_with_describe_topic_partitions(
    cli: Cli, broker: Any, topic_name: Any
) -> None:
    """Since 3.7 kafka-topics --describe uses DescribeTopicPartitions (KIP-966; it prints Elr and
    LastKnownElr only then), a page of at most --partition-size-limit-per-response partitions at
    a time: every partition of every topic comes back once, in order."""
    a, b = topic_name("pagea"), topic_name("pageb")
    create_topic(broker.bootstrap, a, 5)
    create_topic(broker.bootstrap, b, 3)
    out = cli(
        f"kafka-topics --describe --topic '{a}|{b}' --partition-size-limit-per-response 2", timeout=60
    ).stdout
    rows = [re.search(r"Topic: (\S+)\tPartition: (\d+)", r) for r in partition_rows(out)]
    got = [(m.group(1), int(m.group(2))) for m in rows if m]
    assert sorted(got) == sorted([(a, i) for i in range(5)] + [(b, i) for i in range(3)]), out
    assert all("Elr: " in r and "LastKnownElr: " in r for r in partition_rows(out)), out


# -- kafka-reassign-partitions on a 3-broker cluster ---------------------------------------------
def _json_after(text: str, heading: str) -> dict[str, Any]:
    """The JSON line the tool prints after ``heading``."""
    tail = text.split(heading, 1)[1]
    line = next(ln for ln in tail.splitlines() if ln.startswith("{"))
    parsed: dict[str, Any] = json.loads(line)
    return parsed


def _generate_plan(tool: Tool, b: str, t: str, tmp_path: Path) -> tuple[dict[str, Any], Path]:
    """--generate a move of ``t`` onto brokers 2 and 3: the proposal, and the file holding it."""
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": t}]}))
    gen = tool(
        "kafka-reassign-partitions",
        "--bootstrap-server",
        b,
        "--generate",
        "--topics-to-move-json-file",
        str(topics),
        "--broker-list",
        "2,3",
    ).stdout
    current = _json_after(gen, "Current partition replica assignment")
    proposed = _json_after(gen, "Proposed partition reassignment configuration")
    assert sorted(p["replicas"] for p in current["partitions"]) == [[1, 2], [2, 3], [3, 1]]
    assert all(set(p["replicas"]) <= {2, 3} and len(p["replicas"]) == 2 for p in proposed["partitions"])
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(proposed))
    return proposed, plan


def _execute_throttled(tool: Tool, a: AdminClient, b: str, t: str, plan: Path) -> None:
    """--execute with --throttle: the topic's throttled-replica lists set; --list while it runs."""
    rate = 500_000  # the two partitions leaving broker 1 (2 MB) take ~4 s
    out = tool(
        "kafka-reassign-partitions",
        "--bootstrap-server",
        b,
        "--execute",
        "--reassignment-json-file",
        str(plan),
        "--throttle",
        str(rate),
    ).stdout
    assert f"The inter-broker throttle limit was set to {rate} B/s" in out, out
    assert "Successfully started partition reassignments for" in out, out
    described = a.describe_configs([ConfigResource("TOPIC", t)])
    cfgs = next(iter(described.values())).result(30)
    assert cfgs["follower.replication.throttled.replicas"].value, "no follower throttle set"
    listed = tool("kafka-reassign-partitions", "--bootstrap-server", b, "--list").stdout
    assert "Current partition reassignments:" in listed or "No partition reassignments found" in listed


def _verify_until_done_clearing_throttles(tool: Tool, a: AdminClient, b: str, t: str, plan: Path) -> None:
    verified = ""

    def done() -> bool:
        nonlocal verified
        verified = tool(
            "kafka-reassign-partitions",
            "--bootstrap-server",
            b,
            "--verify",
            "--reassignment-json-file",
            str(plan),
        ).stdout
        return "still in progress" not in verified

    wait_for(done, 120, 1.0, "the reassignment to complete")
    assert verified.count("is completed") == 3, verified
    assert "Clearing broker-level throttles on brokers 1,2,3" in verified, verified
    assert f"Clearing topic-level throttles on topic {t}" in verified, verified

    def cleared() -> bool:
        # the configs change through the metadata quorum: the broker answering may see it a
        # moment after the one that took the change
        topic = next(iter(a.describe_configs([ConfigResource("TOPIC", t)]).values())).result(30)
        broker2 = next(iter(a.describe_configs([ConfigResource("BROKER", "2")]).values())).result(30)
        return not topic["follower.replication.throttled.replicas"].value and broker2[
            "follower.replication.throttled.rate"
        ].value == str(2**63 - 1)

    wait_for(cleared, 30, 0.5, "--verify's throttle removal to show in DescribeConfigs")


def _cancel_a_throttled_move(c: ClusterProcesses, tool: Tool, a: AdminClient, plan: Path) -> None:
    """--cancel of a move held back by a slow throttle: the replicas are back as they were."""
    b = c.bootstrap
    reassign = ("kafka-reassign-partitions", "--bootstrap-server", b)
    slow = "slowmove"
    a.create_topics([NewTopic(slow, num_partitions=1, replica_assignment=[[1, 2]])])[slow].result(30)
    fill(b, slow, 0, 200, 10_000)  # 2 MB at 100 kB/s: 20 s
    plan.write_text(
        json.dumps({"version": 1, "partitions": [{"topic": slow, "partition": 0, "replicas": [1, 3]}]})
    )
    tool(*reassign, "--execute", "--reassignment-json-file", str(plan), "--throttle", "100000")
    cancelled = tool(*reassign, "--cancel", "--reassignment-json-file", str(plan)).stdout
    assert f"Successfully cancelled partition reassignment for: {slow}-0" in cancelled, cancelled

    def reverted() -> bool:
        v = partitions_of(c.brokers[0], slow)
        return v is not None and v[0][1] == [1, 2] and sorted(v[0][2]) == [1, 2]

    wait_for(reverted, 15, 0.2, "the replicas back on brokers 1 and 2")
    assert "No partition reassignments found" in tool(*reassign, "--list").stdout


@pytest.mark.sftraffic_only(reason="starts a 3-broker sftraffic cluster of its own")
def test_kafka_reassign_partitions_generate_execute_verify_with_throttle(tool: Tool, tmp_path: Path) -> None:
    """Kafka's own tool moves a topic off broker 1 (--generate --broker-list 2,3), with
    --throttle (topic throttled-replica lists and broker rates set through
    IncrementalAlterConfigs), --list while it runs, --verify until done, which clears the
    throttles; every record is still there."""
    c = ClusterProcesses(tmp_path, 3, overrides=OVERRIDES).start()
    try:
        b = c.bootstrap
        t = "reassigned"
        a = AdminClient({"bootstrap.servers": b, "logger": quiet_logger()})
        a.create_topics([NewTopic(t, num_partitions=3, replica_assignment=[[1, 2], [2, 3], [3, 1]])])[
            t
        ].result(30)
        for part in range(3):
            fill(b, t, part, 100, 10_000)  # 1 MB each
        proposed, plan = _generate_plan(tool, b, t, tmp_path)
        _execute_throttled(tool, a, b, t, plan)
        _verify_until_done_clearing_throttles(tool, a, b, t, plan)
        view = partitions_of(c.brokers[1], t)
        assert view is not None
        want = {p["partition"]: p["replicas"] for p in proposed["partitions"]}
        assert {p: r for p, (_l, r, _i) in view.items()} == want
        assert (
            "No partition reassignments found"
            in tool("kafka-reassign-partitions", "--bootstrap-server", b, "--list").stdout
        )
        assert len(read_partitions(b, t, 3)) == 300

        # --cancel of a move held back by a slow throttle: the replicas are back as they were
        _cancel_a_throttled_move(c, tool, a, plan)
    finally:
        c.stop()


# -- known gaps: APIs the store does not serve (docs/reference/kafka-compatibility.md) ------------
def gap(reason: str) -> pytest.MarkDecorator:
    return pytest.mark.xfail(not EXTERNAL_BOOTSTRAP, reason=reason, strict=True)


GAPS: list[Any] = [
    pytest.param(
        "kafka-features describe",
        "Feature: metadata.version",
        marks=gap("no finalized features in ApiVersions (metadata.version ...), no UpdateFeatures"),
        id="kafka-features",
    ),
]


@pytest.mark.parametrize(("command", "expect"), GAPS)
def test_known_gaps(cli: Cli, broker: Any, topic_name: Any, command: str, expect: str) -> None:
    t = topic_name("gap")
    create_topic(broker.bootstrap, t, 1)
    produce(broker.bootstrap, t, [b"one"])
    out = cli(command.format(t=t), timeout=60, check=False)
    text = out.stdout + out.stderr
    assert "does not support" not in text and "UnsupportedVersionException" not in text, text[-2000:]
    assert out.returncode == 0, text[-2000:]
    assert expect in text


def test_console_consumer_with_the_consumer_group_protocol(cli: Cli, broker: Any, topic_name: Any) -> None:
    """The Java consumer with ``group.protocol=consumer`` (KIP-848): the broker assigns."""
    t = topic_name("g848")
    create_topic(broker.bootstrap, t, 1)
    produce(broker.bootstrap, t, [b"one"])
    out = cli(
        f"kafka-console-consumer --topic {t} --group g848-{t} --from-beginning --max-messages 1 "
        "--timeout-ms 20000 --command-property group.protocol=consumer",
        timeout=60,
        check=False,
    )
    text = out.stdout + out.stderr
    assert out.returncode == 0, text[-2000:]
    assert "one" in text


def test_kafka_cluster_unregister_removes_an_observer_and_refuses_a_voter(tool: Tool, tmp_path: Path) -> None:
    """Kafka's `kafka-cluster unregister` (UnregisterBroker): a voter is refused; a stopped
    non-voting broker is unregistered once (a second time its id is no longer registered)."""
    c = ClusterProcesses(tmp_path, 3, overrides=OVERRIDES, voters=3).start()
    try:
        observer = c.add_broker()
        b = c.brokers[0].bootstrap
        unregister = ("kafka-cluster", "unregister", "--bootstrap-server", b, "--id")
        voter = tool(*unregister, "2", check=False)
        assert voter.returncode != 0, voter.stdout
        observer.stop()
        done = tool(*unregister, "4")
        assert "Broker 4 is no longer registered" in done.stdout, done.stdout
        again = tool(*unregister, "4", check=False)
        assert again.returncode != 0 and "BrokerIdNotRegistered" in again.stdout + again.stderr, again.stdout
    finally:
        c.stop()
