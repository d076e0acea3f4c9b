"""deploy/kafka without a JVM: node configs, cluster ids, ports, tool names, command lines."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from deploy.kafka.cluster import KafkaCluster, new_cluster_id
from deploy.kafka.resolve import KAFKA_VERSION, POM, java_cmd
from deploy.kafka.tools import TOOLS, main_class, perf_tool_cmd


def props(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if line.strip() and not line.startswith("#"))


def test_a_three_node_cluster_on_given_ports(tmp_path: Path) -> None:
    c = KafkaCluster(
        3, tmp_path, port=29092, overrides={"num.partitions": 6, "auto.create.topics.enable": False}
    )
    assert c.bootstrap == "127.0.0.1:29092,127.0.0.1:29093,127.0.0.1:29094"
    p = props(c.config_text(2))
    assert p["node.id"] == "2" and p["process.roles"] == "broker,controller"
    assert p["controller.quorum.voters"] == "1@127.0.0.1:39092,2@127.0.0.1:39093,3@127.0.0.1:39094"
    assert p["listeners"] == "PLAINTEXT://127.0.0.1:29093,CONTROLLER://127.0.0.1:39093"
    assert p["advertised.listeners"] == "PLAINTEXT://127.0.0.1:29093"
    assert p["log.dirs"] == str(tmp_path / "node-2" / "data")
    assert p["offsets.topic.replication.factor"] == "3" and p["transaction.state.log.min.isr"] == "2"
    assert p["num.partitions"] == "6" and p["auto.create.topics.enable"] == "false"  # overrides win


def test_a_single_node_replicates_internal_topics_once_and_takes_free_ports(tmp_path: Path) -> None:
    c = KafkaCluster(1, tmp_path)
    p = props(c.config_text(1))
    assert p["offsets.topic.replication.factor"] == "1" and p["transaction.state.log.min.isr"] == "1"
    assert len(set(c.ports + c.controller_ports)) == 2


def test_cluster_ids_look_like_kafkas_and_are_kept(tmp_path: Path) -> None:
    ids = {new_cluster_id() for _ in range(200)}
    assert len(ids) == 200
    assert all(re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_-]{21}", i) for i in ids)
    c = KafkaCluster(1, tmp_path)
    assert c.cluster_id() == KafkaCluster(1, tmp_path).cluster_id()  # a restart reuses it


def test_the_pom_pins_one_kafka_version_for_every_artifact() -> None:
    pom = POM.read_text()
    assert KAFKA_VERSION.startswith("4.")
    kafka_artifacts = re.findall(
        r"<groupId>org\.apache\.kafka</groupId>\s*<artifactId>([^<]+)</artifactId>\s*<version>([^<]+)</version>",
        pom,
    )
    assert {a for a, _ in kafka_artifacts} >= {
        "kafka_2.13",
        "kafka-server",
        "kafka-tools",
        "kafka-clients",
        "kafka-streams",
    }
    assert {v for _, v in kafka_artifacts} == {"${kafka.version}"}


def test_tools_by_script_name_and_their_command_lines(tmp_path: Path) -> None:
    assert main_class("kafka-topics.sh") == "org.apache.kafka.tools.TopicCommand"
    assert main_class("kafka-configs") == "kafka.admin.ConfigCommand"
    assert main_class("org.example.Main") == "org.example.Main"
    with pytest.raises(KeyError, match="unknown Kafka tool"):
        main_class("kafka-nope")
    assert len(TOOLS) >= 20
    cmd = java_cmd("kafka.Kafka", "server.properties", heap="512m", daemon=True, lib=tmp_path)
    assert cmd[1] == "-Xmx512m" and "-XX:+UseG1GC" in cmd and cmd[-2:] == ["kafka.Kafka", "server.properties"]
    assert cmd[cmd.index("-cp") + 1] == f"{tmp_path}/*"
    tool = java_cmd("org.apache.kafka.tools.TopicCommand", "--list", extra_classpath=["/x"], lib=tmp_path)
    assert (
        "-Dsftraffic.kafka.log.target=SYSTEM_ERR" in tool
        and tool[tool.index("-cp") + 1] == f"/x:{tmp_path}/*"
    )


def test_the_perf_tools_run_as_kafkas_scripts_run_them(tmp_path: Path) -> None:
    cmd = perf_tool_cmd("kafka-producer-perf-test", "--num-records", "10", lib=tmp_path)
    assert cmd[1] == "-Xmx512m" and "-XX:+UseG1GC" in cmd and "-XX:MaxInlineLevel=15" in cmd
    assert not any("TieredStopAtLevel" in c or "SerialGC" in c for c in cmd)  # the full JIT
    assert cmd[-3:] == ["org.apache.kafka.tools.ProducerPerformance", "--num-records", "10"]
    # the JVM keeps the last of a repeated -D: the tool logs WARN to stderr, stdout is its answer
    levels = [c for c in cmd if c.startswith("-Dsftraffic.kafka.log.")]
    assert levels[-2:] == ["-Dsftraffic.kafka.log.level=warn", "-Dsftraffic.kafka.log.target=SYSTEM_ERR"]
