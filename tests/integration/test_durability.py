"""Durability with a real broker process: restarts, SIGKILL mid-produce, TTL retention."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from testing import wait_for
from tests.support.brokers import BrokerFactory, create_topic, quiet_logger
from tests.support.clients import consume_all

pytestmark = pytest.mark.integration


def _ids(msgs: list[Any]) -> list[int]:
    return [int(m.value().split(b":")[0]) for m in msgs]


def _high_watermark(bootstrap: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "hw", "logger": quiet_logger()})
    try:
        return int(c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1])
    finally:
        c.close()


def test_restart_keeps_every_message(broker_factory: BrokerFactory) -> None:
    b = broker_factory()
    create_topic(b.bootstrap, "kept", 2)
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5, "logger": quiet_logger()})
    for i in range(50_000):
        p.produce("kept", key=b"k%d" % (i % 10), value=b"%d:payload" % i)
        if i % 5000 == 0:
            p.poll(0)
    assert p.flush(30) == 0
    assert b.stop() == 0
    assert "stopped cleanly" in b.logs()
    b.start()
    msgs = consume_all(b.bootstrap, "kept", 2, 50_000)
    assert sorted(_ids(msgs)) == list(range(50_000))
    # the log continues where it stopped
    p2 = Producer({"bootstrap.servers": b.bootstrap, "logger": quiet_logger()})
    offsets: list[int] = []
    p2.produce(
        "kept",
        key=b"k0",
        value=b"50000:after",
        partition=0,
        on_delivery=lambda e, m: offsets.append(m.offset()),
    )
    assert p2.flush(30) == 0
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "x", "logger": quiet_logger()})
    _lo, hi = c.get_watermark_offsets(TopicPartition("kept", 0), timeout=10)
    c.close()
    assert offsets == [hi - 1]


@pytest.mark.parametrize(
    ("mode", "conf", "overrides"),
    [
        (
            "acks=1,flush.messages=1",
            {"acks": "1", "enable.idempotence": False},
            {"log.flush.interval.messages": 1},
        ),
        ("acks=all,idempotent", {"acks": "all", "enable.idempotence": True}, {}),
    ],
)
def test_sigkill_during_produce_loses_no_acknowledged_message(
    broker_factory: BrokerFactory, mode: str, conf: dict[str, Any], overrides: dict[str, object]
) -> None:
    b = broker_factory(overrides)
    create_topic(b.bootstrap, "crash", 1)
    acked: set[int] = set()
    lock = threading.Lock()

    def cb(err: Any, msg: Any) -> None:
        if err is None:
            with lock:
                acked.add(int(msg.value().split(b":")[0]))

    p = Producer(
        {
            "bootstrap.servers": b.bootstrap,
            "linger.ms": 2,
            "message.timeout.ms": 20_000,
            "logger": quiet_logger(),
            **conf,
        }
    )
    stop = threading.Event()
    sent = [0]

    def produce() -> None:
        i = 0
        while not stop.is_set():
            try:
                p.produce("crash", value=b"%d:%s" % (i, b"z" * 100), on_delivery=cb)
                i += 1
            except BufferError:
                p.poll(0.01)
            if i % 500 == 0:
                p.poll(0)
        sent[0] = i

    t = threading.Thread(target=produce)
    t.start()
    wait_for(lambda: len(acked) >= 20_000, timeout=60, what="20k acknowledged messages")
    b.kill()  # SIGKILL: no flush, no clean-shutdown marker
    b.start()  # same port and data dir: the producer reconnects and keeps going
    wait_for(lambda: len(acked) >= 40_000, timeout=60, what="acks after the restart")
    stop.set()
    t.join()
    p.flush(30)
    assert "logs will be recovered" in b.logs()
    with lock:
        must_have = set(acked)
    # everything the log holds (without idempotence a retried batch may be stored twice, so
    # reading only as many messages as were acknowledged could stop short of the end)
    msgs = consume_all(b.bootstrap, "crash", 1, _high_watermark(b.bootstrap, "crash"), timeout=60)
    got = _ids(msgs)
    missing = must_have - set(got)
    assert not missing, f"{mode}: {len(missing)} acknowledged messages lost"
    offsets = [m.offset() for m in msgs]
    assert offsets == list(range(len(offsets))), "offsets not dense after recovery"
    if conf.get("enable.idempotence"):
        assert len(got) == len(set(got)), "idempotent producer wrote duplicates across the crash"


def test_ttl_retention_deletes_old_segments_and_consumers_reset(
    broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    b = broker_factory({"log.retention.check.interval.ms": 200})
    create_topic(b.bootstrap, "ttl", 1, {"retention.ms": "60000", "segment.bytes": "16384"})
    p = Producer(
        {
            "bootstrap.servers": b.bootstrap,
            "linger.ms": 0,
            "batch.num.messages": 20,
            "logger": quiet_logger(),
        }
    )
    old = int(time.time() * 1000) - 3_600_000  # an hour old: past the one-minute TTL
    for i in range(2000):
        p.produce("ttl", value=b"%d:%s" % (i, b"o" * 100), timestamp=old + i)
        if i % 100 == 0:
            p.flush(10)
    assert p.flush(30) == 0
    for i in range(2000, 2100):
        p.produce("ttl", value=b"%d:%s" % (i, b"n" * 100))
    assert p.flush(30) == 0
    part_dir = b.data_dir / "ttl-0"
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "ttl-check", "logger": quiet_logger()})

    def low() -> int:
        return int(c.get_watermark_offsets(TopicPartition("ttl", 0), timeout=10, cached=False)[0])

    # the segment that holds offset 2000 (new) may begin with old records and stays; each record
    # here takes over 110 bytes, so a 16 KiB segment holds fewer than 150 and it begins past 1850
    wait_for(lambda: low() > 1850, timeout=60, what="retention to move the log start offset")
    c.close()
    lo_c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "ttl-check2", "logger": quiet_logger()})
    low_now = int(lo_c.get_watermark_offsets(TopicPartition("ttl", 0), timeout=10)[0])
    lo_c.close()
    assert low_now <= 2000, "fresh messages must survive"
    assert len(list(part_dir.glob("*.log"))) < 10, "expired segment files must be deleted from disk"
    # a consumer asking for offset 0 gets OFFSET_OUT_OF_RANGE and resets per its policy
    c2 = Consumer(
        {
            "bootstrap.servers": b.bootstrap,
            "group.id": "ttl-reset",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "logger": quiet_logger(),
        }
    )
    c2.assign([TopicPartition("ttl", 0, 0)])
    got: list[Any] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (not got or _ids(got)[-1] < 2099):
        got.extend(m for m in c2.consume(1000, timeout=0.5) if m.error() is None)
    c2.close()
    start = got[0].offset()
    assert start == low_now
    assert _ids(got)[-100:] == list(range(2000, 2100))
