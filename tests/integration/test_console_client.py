"""``sftraffic produce`` and ``sftraffic consume`` run as a user runs them: terminal-less
subprocesses with stdin piped, against one broker for the module (Apache Kafka under
``./run test-on-kafka``), checked with real Kafka clients where the claim is about the log.

Covers: keys (--key-sep), empty and absent keys and headers round trip; JSON round trip and a
bad line's one-line error; Avro through a real ``sftraffic registry`` process (read back with
Confluent's own deserializer too); -e over every partition, -n, --offset -2; a group committing
what it printed (the next member continues after it; Ctrl-C commits and leaves); read_committed
hiding an aborted transaction and showing a --transactional-id produce; a delivery failure and
an unreachable broker as one line and exit 2.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from deploy.local.registry import RegistryProcess
from testing import free_port, sftraffic
from tests.support.brokers import create_topic, quiet_logger

pytestmark = pytest.mark.integration

# no registry from the environment: consume decodes Avro only where a test asks
ENV = {k: v for k, v in os.environ.items() if not k.startswith("SFTRAFFIC_")}


def run(
    broker: Any, command: str, *args: str, stdin: str | None = None, timeout: float = 90
) -> subprocess.CompletedProcess[str]:
    """``sftraffic COMMAND ARGS -b BROKER`` (``broker``: a broker, or its address)."""
    bootstrap = broker if isinstance(broker, str) else broker.bootstrap
    data = stdin.encode() if stdin is not None else None
    p = subprocess.run(
        sftraffic(command, *args, "-b", bootstrap),
        input=data,
        capture_output=True,
        check=False,
        timeout=timeout,
        env=ENV,
    )
    return subprocess.CompletedProcess(p.args, p.returncode, p.stdout.decode(), p.stderr.decode())


def ok(p: subprocess.CompletedProcess[str]) -> str:
    assert p.returncode == 0, f"rc {p.returncode}: {p.stderr}"
    assert "Traceback" not in p.stderr
    return p.stdout


def one_line_error(p: subprocess.CompletedProcess[str]) -> str:
    assert p.returncode == 2, f"rc {p.returncode}: {p.stdout} {p.stderr}"
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    return lines[0]


def records(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines()]


def raw_values(broker: Any, t: str, n: int) -> list[bytes]:
    """The first ``n`` values of partition 0 as a Kafka client reads them."""
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "raw", "logger": quiet_logger()})
    try:
        c.assign([TopicPartition(t, 0, 0)])
        out: list[bytes] = []
        while len(out) < n:
            m = c.poll(30)
            assert m is not None and m.error() is None
            out.append(m.value())
        return out
    finally:
        c.close()


def topic(broker: Any, partitions: int = 1, config: dict[str, str] | None = None) -> str:
    name = f"cc-{uuid.uuid4().hex[:10]}"
    create_topic(broker.bootstrap, name, partitions, config)
    return name


def test_keys_empty_keys_and_headers_round_trip(broker: Any) -> None:
    t = topic(broker)
    lines = "k1:v1\nk2:v:with:colons\n\n:empty-key\nk3:\nno-separator\nzażółć:gęślą\n"
    out = ok(run(broker, "produce", t, "--key-sep", ":", "-H", "src=cli", "-H", "flag", "-v", stdin=lines))
    assert out.splitlines() == [f"{t} [0] @ {i}" for i in range(6)]  # the empty line is no record

    got = records(ok(run(broker, "consume", t, "--from-beginning", "-e", "--format", "json")))
    assert [(r["key"], r["value"]) for r in got] == [
        ("k1", "v1"),
        ("k2", "v:with:colons"),
        ("", "empty-key"),
        ("k3", ""),
        (None, "no-separator"),
        ("zażółć", "gęślą"),
    ]
    assert all(r["headers"] == [{"key": "src", "value": "cli"}, {"key": "flag", "value": None}] for r in got)
    assert [r["offset"] for r in got] == list(range(6))
    assert all(r["timestamp_type"] == "CreateTime" and r["timestamp"] > 0 for r in got)

    # kcat's letters; -Z prints a null key as NULL; --value and -k instead of stdin
    text = ok(run(broker, "consume", t, "--offset", "3", "-e", "-Z", "-f", r"%o|%k|%K|%v|%S|%h\n"))
    assert text.splitlines() == [
        "3|k3|2||0|src=cli,flag=NULL",
        "4|NULL|-1|no-separator|12|src=cli,flag=NULL",
        f"5|zażółć|{len('zażółć'.encode())}|gęślą|{len('gęślą'.encode())}|src=cli,flag=NULL",
    ]
    ok(run(broker, "produce", t, "-k", "fixed", "--value", "a", "--value", "", "-Z", "--value", "c"))
    tail = records(ok(run(broker, "consume", t, "--offset", "-3", "-e", "-f", "json")))
    assert [(r["key"], r["value"]) for r in tail] == [("fixed", "a"), ("fixed", None), ("fixed", "c")]


def test_json_round_trip_and_a_bad_line(broker: Any) -> None:
    t = topic(broker)
    values = [{"sensor": "s-1", "speed": 42.5}, [1, 2, 3], "text", None, {"nested": {"ok": True}}]
    ok(run(broker, "produce", t, "--format", "json", stdin="".join(json.dumps(v) + "\n" for v in values)))
    got = records(ok(run(broker, "consume", t, "--from-beginning", "-e", "-f", "json")))
    assert [json.loads(r["value"]) for r in got] == values

    bad = run(broker, "produce", t, "--format", "json", stdin='{"a": 1}\n{"b": 2}\n{not json\n{"c": 3}\n')
    line = one_line_error(bad)
    assert "line 3" in line and "not JSON" in line
    after = ok(run(broker, "consume", t, "--offset", str(len(values)), "-e"))
    assert after.splitlines() == ['{"a": 1}', '{"b": 2}']  # before the bad line; nothing after it


SCHEMA = {
    "type": "record",
    "name": "TrafficEvent",
    "namespace": "sf.traffic",
    "fields": [
        {"name": "sensor_id", "type": "string"},
        {"name": "speed", "type": "int"},
        {"name": "lane", "type": ["null", "int"], "default": None},
    ],
}


@pytest.fixture(scope="module")
def registry(broker: Any) -> Iterator[RegistryProcess]:
    r = RegistryProcess(
        broker.bootstrap, topic=f"_schemas-{uuid.uuid4().hex[:8]}", group=f"sr-{uuid.uuid4().hex[:8]}"
    )
    r.start(timeout=60)
    yield r
    r.stop()


def test_avro_round_trip_through_the_registry(broker: Any, registry: RegistryProcess) -> None:
    t = topic(broker)
    client = SchemaRegistryClient({"url": registry.url})
    schema_id = client.register_schema(f"{t}-value", Schema(json.dumps(SCHEMA), "AVRO"))
    events = [{"sensor_id": "s-1", "speed": 42, "lane": 2}, {"sensor_id": "s-2", "speed": 7, "lane": None}]
    stdin = "".join(f"s-{i + 1}|{json.dumps(e)}\n" for i, e in enumerate(events))
    ok(run(broker, "produce", t, "--format", "avro", "--registry", registry.url, "-K", "|", stdin=stdin))

    got = records(
        ok(run(broker, "consume", t, "--from-beginning", "-e", "-f", "json", "--registry", registry.url))
    )
    assert [(r["key"], r["value"], r["value_schema_id"]) for r in got] == [
        ("s-1", events[0], schema_id),
        ("s-2", events[1], schema_id),
    ]
    text = ok(run(broker, "consume", t, "--from-beginning", "-e", "-f", "avro", "--registry", registry.url))
    assert [json.loads(line) for line in text.splitlines()] == events
    # the wire format is Confluent's: its own deserializer reads what was written
    deser = AvroDeserializer(SchemaRegistryClient({"url": registry.url}))
    ctx = SerializationContext(t, MessageField.VALUE)
    assert [deser(v, ctx) for v in raw_values(broker, t, len(events))] == events

    misfit = run(broker, "produce", t, "--format", "avro", "--registry", registry.url, stdin='{"speed": 1}\n')
    assert "line 1" in one_line_error(misfit)
    nosubject = run(broker, "produce", t, "--format", "avro", "--registry", registry.url, "--subject", "nope")
    assert "'nope' has no schema" in one_line_error(nosubject)


def test_exit_at_end_count_and_offsets_from_the_end(broker: Any) -> None:
    t = topic(broker, partitions=3)
    ok(run(broker, "produce", t, "-K", "=", stdin="".join(f"k{i}=v{i}\n" for i in range(30))))
    everything = records(ok(run(broker, "consume", t, "--from-beginning", "-e", "-f", "json")))
    assert sorted(r["value"] for r in everything) == sorted(f"v{i}" for i in range(30))
    by_partition: dict[int, list[str]] = {}
    for r in everything:
        by_partition.setdefault(r["partition"], []).append(r["value"])
    assert len(by_partition) == 3  # murmur2 of 30 keys reaches every partition

    last_two = records(ok(run(broker, "consume", t, "--offset", "-2", "-e", "-f", "json")))
    assert sorted(r["value"] for r in last_two) == sorted(v for vs in by_partition.values() for v in vs[-2:])
    first = ok(run(broker, "consume", t, "-p", "1", "--from-beginning", "-n", "3"))
    assert first.splitlines() == by_partition[1][:3]
    assert ok(run(broker, "consume", t, "-e")) == ""  # from the end: nothing, then exit


def test_a_group_commits_what_it_printed_and_the_next_member_continues(broker: Any) -> None:
    t = topic(broker)
    group = f"g-{uuid.uuid4().hex[:8]}"
    ok(run(broker, "produce", t, stdin="".join(f"r{i}\n" for i in range(6))))
    assert ok(run(broker, "consume", t, "-g", group, "--from-beginning", "-n", "4")).split() == [
        "r0",
        "r1",
        "r2",
        "r3",
    ]
    assert ok(run(broker, "consume", t, "-g", group, "--from-beginning", "-e")).split() == ["r4", "r5"]

    # Ctrl-C: the member commits what it printed and leaves (the next one is assigned at once,
    # not after the session time-out)
    ok(run(broker, "produce", t, "--value", "r6"))
    proc = subprocess.Popen(
        sftraffic("consume", t, "-g", group, "-b", broker.bootstrap),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=ENV,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"r6\n"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0 and b"Traceback" not in err, err
    assert ok(run(broker, "consume", t, "-g", group, "-e", timeout=40)) == ""
    ok(run(broker, "produce", t, "--value", "r7"))
    assert ok(run(broker, "consume", t, "-g", group, "-e", timeout=40)) == "r7\n"


def test_read_committed_hides_an_aborted_transaction(broker: Any) -> None:
    t = topic(broker)
    txn = Producer(
        {"bootstrap.servers": broker.bootstrap, "transactional.id": f"tx-{t}", "logger": quiet_logger()}
    )
    txn.init_transactions(30)
    txn.begin_transaction()
    txn.produce(t, value=b"aborted")
    txn.flush(30)
    txn.abort_transaction(30)
    ok(run(broker, "produce", t, "--transactional-id", f"cli-{t}", stdin="c1\nc2\n"))
    # a transactional produce that fails half-way is aborted: nothing of it shows
    fail = run(broker, "produce", t, "--transactional-id", f"cli-{t}", "--format", "json", stdin="1\n2\nno\n")
    assert "transaction was aborted" in one_line_error(fail)

    committed = ok(run(broker, "consume", t, "--from-beginning", "-e", "--isolation", "read_committed"))
    assert committed.split() == ["c1", "c2"]
    everything = ok(run(broker, "consume", t, "--from-beginning", "-e")).split()  # read_uncommitted
    # the failed one's records reached the log or not, as the abort found them
    assert everything[:3] == ["aborted", "c1", "c2"] and everything[3:] in ([], ["1"], ["1", "2"])


def test_a_refused_record_is_one_line_and_exit_2(broker: Any) -> None:
    t = topic(broker, config={"max.message.bytes": "1024"})
    line = one_line_error(run(broker, "produce", t, stdin="x" * 4000 + "\n"))
    assert "line 1 not delivered" in line and "too large" in line.lower()


def test_an_unreachable_broker_is_one_line_and_exit_2() -> None:
    nowhere = f"127.0.0.1:{free_port()}"
    for command, stdin in (("produce", "x\n"), ("consume", None)):
        line = one_line_error(run(nowhere, command, "t", stdin=stdin, timeout=30))
        assert line.startswith(f"sftraffic {command}: no broker reachable at {nowhere}")
