"""A Kafka Streams application (``java/WindowedCount.java``: a count per key and 10-second
tumbling window of event time) against the broker: its consumer group, its changelog topic,
its output; at least once, and exactly once (``exactly_once_v2``: the transaction coordinator,
TxnOffsetCommit with the group's generation)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from deploy.kafka.resolve import java_cmd
from testing import ManagedProcess, wait_for
from tests.support.brokers import create_topic, quiet_logger
from tests.support.clients import consume_all

pytestmark = [pytest.mark.integration, pytest.mark.kafka]


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
def test_windowed_count(
    broker: Any, java_classes: Path, topic_name: Any, tmp_path: Path, guarantee: str
) -> None:
    b = broker.bootstrap
    src, out, app = topic_name("wc-in"), topic_name("wc-out"), topic_name("wc-app")
    create_topic(b, src, 2)
    create_topic(b, out, 1)
    base = (int(time.time() * 1000) // 10_000) * 10_000 - 60_000  # a window boundary a minute ago
    events = [("a", 1), ("a", 2), ("b", 3), ("a", 4), ("a", 12), ("b", 13), ("a", 15), ("c", 25)]
    p = Producer({"bootstrap.servers": b, "logger": quiet_logger()})
    for key, second in events:
        p.produce(src, key=key, value=b"x", timestamp=base + second * 1000)
    assert p.flush(30) == 0

    cmd = java_cmd(
        "WindowedCount",
        b,
        app,
        src,
        out,
        str(tmp_path / "state"),
        guarantee,
        heap="384m",
        extra_classpath=[java_classes],
    )
    streams = ManagedProcess("streams", cmd, ready="RUNNING", grace=60)  # EOS close on a busy machine
    try:
        streams.start(timeout=120)
        expected = {
            f"a@{base}": "3",
            f"b@{base}": "1",
            f"a@{base + 10_000}": "2",
            f"b@{base + 10_000}": "1",
            f"c@{base + 20_000}": "1",
        }
        latest: dict[str, str] = {}

        def counted() -> bool:
            latest.clear()
            for m in consume_all(b, out, 1, 8, timeout=2):
                latest[m.key().decode()] = m.value().decode()
            return latest == expected

        wait_for(counted, timeout=60, interval=0.5, what=f"the windowed counts (got {latest})")
        assert "UNCAUGHT" not in streams.logs()
    finally:
        code = streams.stop()
    assert code in (0, 143), streams.tail(40)  # closed by its shutdown hook
    assert "CLOSED true NOT_RUNNING" in streams.logs(), streams.tail(40)
