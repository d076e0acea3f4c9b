"""A broker whose disk fills up, for real: a 2 MB tmpfs mounted by the test holds the data dir
and a ballast file.

While the disk is full, produce answers KAFKA_STORAGE_ERROR (retriable: librdkafka retries it)
and writes nothing half-way; once the ballast is deleted the broker takes writes again without
a restart, every acknowledged record is readable exactly once, and a restart on the same
directory recovers the log cleanly with all of them. Needs root (mount); skipped, saying why,
where mounting is refused.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from testing import BrokerProcess
from tests.support.brokers import BrokerFactory, create_topic, quiet_logger

pytestmark = pytest.mark.integration

TOPIC = "full"
VALUE = 2000  # bytes per record: ~700 fill the disk
BALLAST = 640 * 1024
TORN = re.compile(r"\b[1-9]\d* bytes truncated|truncated \d+ bytes|rebuilding indexes")  # recovery cut data


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mnt = tmp_path / "disk"
    mnt.mkdir()
    try:
        out = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except OSError as exc:
        pytest.skip(f"cannot run mount: {exc}")
    if out.returncode != 0:
        pytest.skip(f"mounting a tmpfs was refused (needs root): {out.stderr.strip() or out.returncode}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True, timeout=30, check=False)


def value(i: int) -> bytes:
    return b"%08d:" % i + os.urandom(VALUE // 2).hex().encode()[: VALUE - 9]


def fill(p: Producer, start: int, acked: dict[int, int], errors: Counter[Any], limit: int = 4000) -> int:
    """Produce one record at a time (retries=0) until the broker refuses for lack of space."""
    i = start
    while i < start + limit:
        report: list[Any] = []
        for j in range(i, i + 10):
            p.produce(
                TOPIC,
                value=value(j),
                partition=0,
                on_delivery=lambda e, m, j=j, r=report: r.append((j, e, m)),
            )
        assert p.flush(30) == 0
        for j, err, msg in report:
            if err is None:
                acked[j] = msg.offset()
            else:
                errors[err.code()] += 1
        i += 10
        if errors:
            return i
    raise AssertionError(f"the disk never filled after {limit} records")


def read_all(bootstrap: str, expected: int, timeout: float = 60) -> list[tuple[int, int]]:
    """(offset, record id) of every record of the partition, from offset 0."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "full-disk-check",
            "enable.auto.commit": False,
            "logger": quiet_logger(),
            "check.crcs": True,
        }
    )
    c.assign([TopicPartition(TOPIC, 0, 0)])
    out: list[tuple[int, int]] = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < expected and time.monotonic() < deadline:
            for m in c.consume(1000, timeout=0.5):
                assert m.error() is None, m.error()
                out.append((m.offset(), int(m.value()[:8])))
    finally:
        c.close()
    return out


def test_full_disk_refuses_retriably_then_resumes_and_recovers(
    small_disk: Path, broker_factory: BrokerFactory
) -> None:
    ballast = small_disk / "ballast"
    ballast.write_bytes(os.urandom(BALLAST))
    data = small_disk / "data"
    b: BrokerProcess = broker_factory(
        {"log.segment.bytes": 256 * 1024, "log.index.interval.bytes": 4096}, data_dir=data
    )
    create_topic(b.bootstrap, TOPIC, 1)

    # 1. fill the disk: refusals are KAFKA_STORAGE_ERROR, nothing else
    once = Producer(
        {"bootstrap.servers": b.bootstrap, "retries": 0, "linger.ms": 2, "acks": 1, "logger": quiet_logger()}
    )
    acked: dict[int, int] = {}
    errors: Counter[Any] = Counter()
    nxt = fill(once, 0, acked, errors)
    assert set(errors) == {KafkaError.KAFKA_STORAGE_ERROR}, errors
    assert acked, "nothing was acknowledged before the disk filled"
    full_at = len(acked)

    # 2. a retrying producer waits it out: nothing delivered, nothing failed while the disk is full
    patient = Producer(
        {
            "bootstrap.servers": b.bootstrap,
            "linger.ms": 2,
            "message.timeout.ms": 120_000,
            "enable.idempotence": True,
            "logger": quiet_logger(),
        }
    )
    waited: dict[int, Any] = {}
    for j in range(nxt, nxt + 50):
        patient.produce(
            TOPIC,
            value=value(j),
            partition=0,
            on_delivery=lambda e, m, j=j: waited.__setitem__(j, e if e is not None else m.offset()),
        )
    patient.flush(3)
    assert not any(isinstance(v, KafkaError) for v in waited.values()), waited
    stuck = 50 - len(waited)
    assert stuck > 0, "the disk had room again on its own"
    assert "KAFKA_STORAGE_ERROR" in b.logs() and "disk full (ENOSPC)" in b.logs()

    # 3. free space: the broker resumes without a restart
    ballast.unlink()
    assert patient.flush(60) == 0
    assert all(isinstance(v, int) for v in waited.values()) and len(waited) == 50, waited
    acked.update(waited)
    errors.clear()
    more: dict[int, int] = {}
    for j in range(nxt + 50, nxt + 100):
        once.produce(
            TOPIC,
            value=value(j),
            partition=0,
            on_delivery=lambda e, m, j=j: more.__setitem__(j, m.offset() if e is None else e),
        )
    assert once.flush(30) == 0
    assert all(isinstance(v, int) for v in more.values()), more
    acked.update(more)
    assert len(acked) == full_at + 100

    # 4. every acknowledged record is there exactly once, at the offset it was acknowledged with
    def check(bootstrap: str) -> None:
        got = read_all(bootstrap, len(acked))
        ids = Counter(i for _, i in got)
        assert not [i for i, n in ids.items() if n > 1], "a record was stored twice"
        assert [o for o, _ in got] == list(range(len(got))), "offsets not dense"
        assert {i: o for o, i in got} == acked

    check(b.bootstrap)

    # 5. restart on the same directory: the log recovers cleanly with all of them
    b.stop()
    again = broker_factory(data_dir=data)
    check(again.bootstrap)
    assert not TORN.search(again.logs()), again.logs()
    # and after a crash (SIGKILL: every segment after the recovery point is scanned)
    again.kill()
    third = broker_factory(data_dir=data)
    check(third.bootstrap)
    assert not TORN.search(third.logs()), third.logs()
