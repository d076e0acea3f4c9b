"""Transactions benchmark, one run: what transactions cost the producer and the reader.

Goals: transactional >= 0.8x idempotent; read_committed >= 0.9x read_uncommitted
(medians over the repetitions).

How it measures, in full: ``docs/benchmarks.md``, "bench transactions".
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from load.harness.kafka import quiet_logger
from load.harness.report import document, goal, log
from load.harness.runner import Processes, rotation
from testing import BrokerProcess

PARTITIONS = 3
VALUE = b"x" * 100


def produce(bootstrap: str, topic: str, transactional: bool, seconds: float) -> tuple[float, int]:
    """(msgs/s, count) of one producer writing as fast as it can for ``seconds``."""
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "linger.ms": 5,
        "enable.idempotence": True,
        "logger": quiet_logger(),
    }
    if transactional:
        conf["transactional.id"] = f"bench-{uuid.uuid4().hex[:8]}"
    p = Producer(conf)
    if transactional:
        p.init_transactions(30)
        p.begin_transaction()
    n = 0
    t0 = last = time.monotonic()
    while time.monotonic() - t0 < seconds:
        for _ in range(1000):
            try:
                p.produce(topic, VALUE)
                n += 1
            except BufferError:
                p.poll(0.001)
        p.poll(0)
        if transactional and time.monotonic() - last >= 0.1:
            p.commit_transaction(30)
            p.begin_transaction()
            last = time.monotonic()
    if transactional:
        p.commit_transaction(60)
    assert p.flush(60) == 0
    return n / (time.monotonic() - t0), n


def consume(bootstrap: str, topic: str, isolation: str, total: int) -> float:
    """msgs/s reading ``total`` records of ``topic`` from the start at ``isolation``."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex[:8]}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "logger": quiet_logger(),
        }
    )
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        n = 0
        t0 = time.monotonic()
        while n < total:
            msgs = c.consume(10_000, 5.0)
            if not msgs:
                raise RuntimeError(f"{isolation}: stalled after {n} of {total} records")
            n += sum(1 for m in msgs if m.error() is None)
        return n / (time.monotonic() - t0)
    finally:
        c.close()


def repetition(bootstrap: str, admin: Any, rep: int, seconds: float) -> dict[str, float]:
    """One repetition: both producers, then both isolation levels, in an order that alternates."""
    idem, txn = f"idem-{rep}", f"txn-{rep}"
    for t in (idem, txn):
        admin.create_topics([NewTopic(t, PARTITIONS, 1)])[t].result(30)
    run: dict[str, float] = {}
    total = 0
    for transactional in rotation([False, True], rep + 1):
        rate, n = produce(bootstrap, txn if transactional else idem, transactional, seconds)
        run["transactional" if transactional else "idempotent"] = rate
        total = n if transactional else total
    for isolation in rotation(["read_uncommitted", "read_committed"], rep + 1):
        run[isolation] = consume(bootstrap, txn, isolation, total)
    log(f"rep {rep + 1}: " + ", ".join(f"{k} {v:,.0f} msg/s" for k, v in run.items()))
    return run


def run(args: argparse.Namespace) -> dict[str, Any]:
    doc = document("transactions", args, dict(args.sizes) | {"partitions": PARTITIONS})
    runs: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="bench-txn-") as tmp, Processes() as procs:
        b = procs.start(BrokerProcess(Path(tmp) / "broker"))
        admin = AdminClient({"bootstrap.servers": b.bootstrap}, logger=quiet_logger())
        runs = [repetition(b.bootstrap, admin, rep, args.seconds) for rep in range(args.reps)]
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    produce_ratio = med["transactional"] / med["idempotent"]
    consume_ratio = med["read_committed"] / med["read_uncommitted"]
    return doc | {
        "seconds": args.seconds,
        "reps": runs,
        "median": med,
        "transactional_vs_idempotent": round(produce_ratio, 3),
        "read_committed_vs_read_uncommitted": round(consume_ratio, 3),
        "goals": [
            goal("transactional / idempotent produce", round(produce_ratio, 3), 0.8, "x", True),
            goal("read_committed / read_uncommitted", round(consume_ratio, 3), 0.9, "x", True),
        ],
    }


if __name__ == "__main__":
    from load.scenarios import main

    raise SystemExit(main("transactions"))
