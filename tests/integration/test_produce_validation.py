"""Produce validation over real sockets (Kafka's LogValidator): unmodified clients get a prompt,
precise answer for batches the broker refuses, nothing refused is stored, and damaged stored
data never answers UNKNOWN_SERVER_ERROR.

* a keyless record on a compacted topic: INVALID_RECORD with KIP-467 ``record_errors`` and
  ``error_message``; confluent-kafka (idempotent or not) and kafka-python get a delivery
  failure at once (librdkafka retried the CORRUPT_MESSAGE answered before, for
  ``message.timeout.ms``: no delivery report, nothing logged by the broker);
* CRC-valid batches with malformed records or a garbage compressed body (each codec):
  INVALID_RECORD naming the problem; timestamps out of ``message.timestamp.*.max.ms``:
  INVALID_TIMESTAMP;
* valid batches of every codec from both clients are accepted and read back;
* a damaged compressed batch planted on disk (bypassing validation, as an older broker stored
  them): ListOffsets by timestamp answers CORRUPT_MESSAGE, Fetch serves the bytes as stored.
"""

from __future__ import annotations

import struct
import time
from pathlib import Path
from typing import Any

import kafka
import kafka.errors
import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from framework.client.wire import WireClient
from framework.protocol import records as rb
from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.fetch import FetchPartition, FetchRequest, FetchResponse, FetchTopic
from framework.protocol.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
)
from framework.protocol.messages.produce import (
    PartitionProduceData,
    PartitionProduceResponse,
    ProduceRequest,
    ProduceResponse,
    TopicProduceData,
)
from testing import BrokerProcess
from tests.support.brokers import BrokerFactory, create_topic, quiet_logger

pytestmark = pytest.mark.integration

CODECS = {"gzip": rb.GZIP, "snappy": rb.SNAPPY, "lz4": rb.LZ4, "zstd": rb.ZSTD}


# -- helpers -----------------------------------------------------------------------------------
def now_ms() -> int:
    return int(time.time() * 1000)


def produce_wire(bootstrap: str, topic: str, records: bytes, version: int = 9) -> PartitionProduceResponse:
    req = ProduceRequest(
        acks=1,
        timeout_ms=5000,
        topic_data=[
            TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=0, records=records)])
        ],
    )
    with WireClient(bootstrap) as c:
        return c.send(req, ProduceResponse, version=version).responses[0].partition_responses[0]


def list_offset(bootstrap: str, topic: str, timestamp: int) -> tuple[int, int]:
    """(error code, offset) of ListOffsets for ``timestamp`` on partition 0."""
    req = ListOffsetsRequest(
        replica_id=-1,
        topics=[
            ListOffsetsTopic(
                name=topic, partitions=[ListOffsetsPartition(partition_index=0, timestamp=timestamp)]
            )
        ],
    )
    with WireClient(bootstrap) as c:
        p = c.send(req, ListOffsetsResponse, version=7).topics[0].partitions[0]
    return p.error_code, p.offset


def fetch(bootstrap: str, topic: str, offset: int) -> tuple[int, bytes]:
    req = FetchRequest(
        max_wait_ms=100,
        min_bytes=1,
        topics=[
            FetchTopic(
                topic=topic,
                partitions=[FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)],
            )
        ],
    )
    with WireClient(bootstrap) as c:
        p = c.send(req, FetchResponse, version=11).responses[0].partitions[0]
    return p.error_code, bytes(p.records or b"")


def log_end(bootstrap: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "le", "logger": quiet_logger()})
    try:
        return int(c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1])
    finally:
        c.close()


def refit(batch: bytes, body: bytes) -> bytes:
    """``batch``'s header around another records section, CRC recomputed (a broken producer)."""
    out = bytearray(batch[: rb.HEADER_SIZE]) + body
    struct.pack_into(">i", out, 8, len(out) - rb.LOG_OVERHEAD)
    struct.pack_into(">I", out, 17, rb.crc32c(memoryview(out)[21:]))
    return bytes(out)


def deliver(p: Producer, sends: list[dict[str, Any]], timeout: float = 10.0) -> tuple[list[Any], float]:
    """Produce ``sends``; (their delivery errors in order, seconds until the last report)."""
    reports: list[Any] = [None] * len(sends)
    seen: list[float] = []
    t0 = time.monotonic()

    def on(i: int) -> Any:
        def cb(err: Any, _msg: Any) -> None:
            reports[i] = err
            seen.append(time.monotonic() - t0)

        return cb

    for i, kw in enumerate(sends):
        p.produce(on_delivery=on(i), **kw)
    left = p.flush(timeout)
    assert left == 0, f"{left} message(s) got no delivery report within {timeout} s"
    return reports, max(seen)


# -- KIP-467: keyless records on a compacted topic -----------------------------------------------
@pytest.mark.parametrize("idempotent", [False, True])
def test_confluent_kafka_gets_a_prompt_report_for_keyless_records_on_a_compacted_topic(
    broker: BrokerProcess, topic_name: Any, idempotent: bool
) -> None:
    topic = topic_name("compacted")
    create_topic(broker.bootstrap, topic, 1, {"cleanup.policy": "compact"})
    p = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "enable.idempotence": idempotent,
            "compression.type": "lz4",
            "linger.ms": 50,  # the four go in one batch
            "logger": quiet_logger(),
        }
    )
    sends = [{"topic": topic, "value": b"no key %d" % i} for i in range(3)]
    sends.append({"topic": topic, "key": b"k", "value": b"keyed, same batch"})
    errors, took = deliver(p, sends)
    assert took < 5, f"delivery reports took {took:.1f} s"
    assert [e.code() for e in errors[:3]] == [KafkaError.INVALID_RECORD] * 3
    assert not errors[0].retriable()
    assert errors[3].code() == KafkaError._INVALID_DIFFERENT_RECORD  # refused with its batch
    assert log_end(broker.bootstrap, topic) == 0  # nothing of the batch stored
    # the producer goes on (an idempotent one bumps its epoch: KIP-360)
    again, _ = deliver(p, [{"topic": topic, "key": b"k", "value": b"keyed"}])
    assert again == [None]
    assert log_end(broker.bootstrap, topic) == 1
    refusals = [ln for ln in broker.logs().splitlines() if f"refused a batch for {topic}-0" in ln]
    assert (
        refusals
        and "INFO" in refusals[0]
        and "INVALID_RECORD" in refusals[0]
        and "without a key" in refusals[0]
    )


def test_kafka_python_gets_invalid_record_for_a_keyless_record(
    broker: BrokerProcess, topic_name: Any
) -> None:
    topic = topic_name("compacted-kp")
    create_topic(broker.bootstrap, topic, 1, {"cleanup.policy": "compact"})
    for idempotent in (True, False):  # kafka-python's default is idempotent
        p = kafka.KafkaProducer(
            bootstrap_servers=broker.bootstrap,
            retries=5,
            compression_type="zstd",
            enable_idempotence=idempotent,
        )
        try:
            t0 = time.monotonic()
            with pytest.raises(kafka.errors.InvalidRecordError, match="without a key"):
                p.send(topic, value=b"no key").get(timeout=10)
            assert time.monotonic() - t0 < 5
            if not idempotent:  # an idempotent kafka-python producer treats the error as fatal
                assert p.send(topic, key=b"k", value=b"v").get(timeout=10).offset == 0
        finally:
            p.close(timeout=5)


@pytest.mark.parametrize("version", [8, 9, 10])
def test_record_errors_and_error_message_in_the_response(
    broker: BrokerProcess, topic_name: Any, version: int
) -> None:
    topic = topic_name("kip467")
    create_topic(broker.bootstrap, topic, 1, {"cleanup.policy": "compact,delete"})
    batch = rb.build_batch([(b"a", b"1"), (None, b"2"), (b"c", b"3"), (None, b"4")], timestamp_ms=now_ms())
    r = produce_wire(broker.bootstrap, topic, batch, version)
    assert r.error_code == ErrorCode.INVALID_RECORD
    assert [e.batch_index for e in r.record_errors] == [1, 3]
    assert all("without a key" in (e.batch_index_error_message or "") for e in r.record_errors)
    assert r.error_message and f"{topic}-0" in r.error_message and "2 record(s) refused" in r.error_message
    assert r.base_offset == -1


def test_before_v8_the_code_alone(broker: BrokerProcess, topic_name: Any) -> None:
    topic = topic_name("kip467-old")
    create_topic(broker.bootstrap, topic, 1, {"cleanup.policy": "compact"})
    r = produce_wire(broker.bootstrap, topic, rb.build_batch([(None, b"x")], timestamp_ms=now_ms()), 7)
    assert r.error_code == ErrorCode.INVALID_RECORD
    assert r.record_errors == [] and r.error_message is None  # not in v7's format


# -- malformed batches -------------------------------------------------------------------------
@pytest.mark.parametrize("codec", list(CODECS))
def test_garbage_compressed_body_with_a_valid_crc_is_refused(
    broker: BrokerProcess, topic_name: Any, codec: str
) -> None:
    topic = topic_name(f"garbage-{codec}")
    create_topic(broker.bootstrap, topic, 1)
    good = rb.build_batch([(b"k", b"v")] * 3, timestamp_ms=now_ms(), compression=CODECS[codec])
    r = produce_wire(broker.bootstrap, topic, refit(good, b"\x00garbage" * 8))
    assert r.error_code == ErrorCode.INVALID_RECORD
    assert f"cannot decompress {codec} records" in (r.error_message or "")
    assert log_end(broker.bootstrap, topic) == 0
    assert list_offset(broker.bootstrap, topic, now_ms() - 60_000) == (0, -1)  # nothing stored to trip over
    assert produce_wire(broker.bootstrap, topic, good).error_code == 0


@pytest.mark.parametrize(
    ("what", "damage", "match"),
    [
        (
            "count",
            lambda b: struct.pack_into(">i", b, 57, 5) or struct.pack_into(">i", b, 23, 4),
            "declares 5",
        ),
        ("offset delta", lambda b: b.__setitem__(rb.HEADER_SIZE + 3, 4), "offset delta 2, expected 0"),
        ("record length", lambda b: b.__setitem__(rb.HEADER_SIZE, 40), "record 0"),
    ],
)
def test_malformed_records_are_refused(
    broker: BrokerProcess, topic_name: Any, what: str, damage: Any, match: str
) -> None:
    topic = topic_name("malformed")
    create_topic(broker.bootstrap, topic, 1)
    raw = bytearray(rb.build_batch([(b"k", b"v" * 10)] * 3, timestamp_ms=now_ms()))
    damage(raw)
    struct.pack_into(">I", raw, 17, rb.crc32c(memoryview(raw)[21:]))
    r = produce_wire(broker.bootstrap, topic, bytes(raw))
    assert r.error_code == ErrorCode.INVALID_RECORD, what
    assert match in (r.error_message or ""), r.error_message
    assert log_end(broker.bootstrap, topic) == 0


def test_timestamps_out_of_range_get_invalid_timestamp(broker: BrokerProcess, topic_name: Any) -> None:
    topic = topic_name("ts-window")
    create_topic(broker.bootstrap, topic, 1, {"message.timestamp.before.max.ms": "3600000"})
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 50, "logger": quiet_logger()})
    old = now_ms() - 2 * 3_600_000
    errors, took = deliver(
        p, [{"topic": topic, "value": b"old", "timestamp": old}, {"topic": topic, "value": b"now"}]
    )
    assert took < 5
    assert errors[0].code() == KafkaError.INVALID_TIMESTAMP
    # the batch holding "old" is refused whole: "now" too when it shared that batch (usually; not
    # when a starved client sent "old" alone after its linger): the log holds exactly what was
    # reported delivered (the wire batch below checks the whole-batch refusal deterministically)
    assert log_end(broker.bootstrap, topic) == sum(e is None for e in errors)
    r = produce_wire(
        broker.bootstrap, topic, rb.build_batch([(b"k", b"new"), (b"k", b"old")], timestamps=[now_ms(), old])
    )
    assert r.error_code == ErrorCode.INVALID_TIMESTAMP
    assert [e.batch_index for e in r.record_errors] == [1]
    assert "out of range" in (r.record_errors[0].batch_index_error_message or "")


# -- valid batches of every codec, from both clients -----------------------------------------------
@pytest.mark.parametrize("codec", list(CODECS))
def test_every_codec_from_both_clients_is_accepted(
    broker: BrokerProcess, topic_name: Any, codec: str
) -> None:
    topic = topic_name(f"codec-{codec}")
    create_topic(broker.bootstrap, topic, 1, {"cleanup.policy": "compact,delete"})
    t0 = now_ms()
    value = b'{"sensor": "sf-%05d", "speed": %d, "lane": %d}'
    ck = Producer(
        {"bootstrap.servers": broker.bootstrap, "compression.type": codec, "logger": quiet_logger()}
    )
    for i in range(2000):
        ck.produce(topic, key=b"s%d" % (i % 50), value=value % (i, i % 90, i % 4), headers=[("h", b"x")])
    assert ck.flush(30) == 0
    kp = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type=codec, linger_ms=5)
    try:
        futures = [
            kp.send(topic, key=b"s%d" % (i % 50), value=value % (i, i % 90, i % 4)) for i in range(2000)
        ]
        kp.flush(30)
        assert all(f.get(timeout=10) for f in futures)
    finally:
        kp.close(timeout=5)
    assert log_end(broker.bootstrap, topic) == 4000
    err, off = list_offset(broker.bootstrap, topic, t0)
    assert err == 0 and off == 0
    assert list_offset(broker.bootstrap, topic, -3)[0] == 0  # max timestamp


# -- damaged stored data -----------------------------------------------------------------------
def test_a_damaged_batch_on_disk_answers_precise_errors(
    broker_factory: BrokerFactory, topic_name: Any
) -> None:
    """An lz4 batch with a valid CRC and a junk body is planted at the end of the segment while
    the broker is stopped (as a broker without record validation stored them)."""
    b = broker_factory()
    topic = topic_name("damaged")
    create_topic(b.bootstrap, topic, 1)
    t0 = now_ms() - 10_000
    p = Producer({"bootstrap.servers": b.bootstrap, "logger": quiet_logger()})
    for i in range(10):
        p.produce(topic, key=b"k", value=b"good %d" % i, timestamp=t0 + i)
    assert p.flush(10) == 0
    b.stop()
    seg = next(Path(b.data_dir).glob(f"{topic}-0/*.log"))
    good = rb.build_batch([(b"k", b"v")] * 3, base_offset=10, timestamp_ms=t0 + 100, compression=rb.LZ4)
    with open(seg, "ab") as fh:
        fh.write(refit(good, b"\x00garbage" * 8))
    b.start()
    assert log_end(b.bootstrap, topic) == 13
    assert list_offset(b.bootstrap, topic, t0 + 5) == (0, 5)  # look-ups before it still work
    assert list_offset(b.bootstrap, topic, t0 + 50)[0] == ErrorCode.CORRUPT_MESSAGE
    assert list_offset(b.bootstrap, topic, -3)[0] == ErrorCode.CORRUPT_MESSAGE  # it holds the max
    err, data = fetch(b.bootstrap, topic, 10)  # served as stored, as Kafka does
    assert err == 0 and rb.read_header(data).base_offset == 10
    assert fetch(b.bootstrap, topic, 0)[0] == 0
    logs = b.logs()
    assert "batch at offset 10" in logs and "cannot decompress lz4 records" in logs
    assert "UNKNOWN_SERVER_ERROR" not in logs and "Traceback" not in logs
    # the broker keeps serving the partition: new data goes after the damaged batch
    assert (
        produce_wire(
            b.bootstrap, topic, rb.build_batch([(b"k", b"after")], timestamp_ms=now_ms())
        ).base_offset
        == 13
    )
