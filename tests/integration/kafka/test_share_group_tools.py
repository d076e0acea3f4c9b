"""Kafka's share-group tools on the store: ``kafka-console-share-consumer`` reads a topic as a
queue with the Java client's KafkaShareConsumer, and ``kafka-share-groups`` lists, describes,
resets, deletes offsets of and deletes the group."""

from __future__ import annotations

import re

import pytest

from tests.support.brokers import EXTERNAL_BOOTSTRAP, BrokerFactory, create_topic
from tests.support.kafka_tools import Tool

pytestmark = [
    pytest.mark.integration,
    pytest.mark.kafka,
    # Kafka sets share.auto.offset.reset per group (kafka-configs --entity-type groups), the
    # store for every group as a broker setting
    pytest.mark.skipif(bool(EXTERNAL_BOOTSTRAP), reason="share.auto.offset.reset is a broker setting here"),
]

TOPIC, GROUP = "java-queue", "java-workers"


def offsets(described: str) -> dict[int, tuple[int, int]]:
    """partition -> (start offset, lag) from ``kafka-share-groups --describe``."""
    out: dict[int, tuple[int, int]] = {}
    for line in described.splitlines():
        m = re.match(rf"{GROUP}\s+{TOPIC}\s+(\d+)\s+(-|\d+)\s+(-|\d+)", line)
        if m:
            out[int(m[1])] = (int(m[2]) if m[2] != "-" else -1, int(m[3]) if m[3] != "-" else -1)
    return out


def test_console_share_consumer_and_kafka_share_groups(broker_factory: BrokerFactory, tool: Tool) -> None:
    b = broker_factory({"share.auto.offset.reset": "earliest"})
    create_topic(b.bootstrap, TOPIC, 2)
    lines = "\n".join(f"k{i}:v{i}" for i in range(6)) + "\n"
    tool(
        "kafka-console-producer",
        "--bootstrap-server",
        b.bootstrap,
        "--topic",
        TOPIC,
        "--property",
        "parse.key=true",
        "--property",
        "key.separator=:",
        input=lines,
    )
    consumed = tool(
        "kafka-console-share-consumer",
        "--bootstrap-server",
        b.bootstrap,
        "--topic",
        TOPIC,
        "--group",
        GROUP,
        "--max-messages",
        "6",
        "--timeout-ms",
        "30000",
    )
    assert sorted(consumed.stdout.split()) == sorted(f"v{i}" for i in range(6))

    def share_groups(*args: str) -> str:
        return str(tool("kafka-share-groups", "--bootstrap-server", b.bootstrap, *args).stdout)

    assert GROUP in share_groups("--list").split()
    assert "Empty" in share_groups("--describe", "--group", GROUP, "--state")
    # every record acknowledged: each partition's start offset is its end, no lag
    described = offsets(share_groups("--describe", "--group", GROUP))
    assert set(described) == {0, 1}
    assert sum(start for start, _ in described.values()) == 6
    assert {lag for _, lag in described.values()} == {0}
    share_groups("--reset-offsets", "--group", GROUP, "--topic", TOPIC, "--to-earliest", "--execute")
    assert offsets(share_groups("--describe", "--group", GROUP)) == {
        p: (0, start) for p, (start, _) in described.items()
    }
    assert "Successful" in share_groups("--delete-offsets", "--group", GROUP, "--topic", TOPIC)
    assert "successful" in share_groups("--delete", "--group", GROUP)
    assert GROUP not in share_groups("--list").split()
