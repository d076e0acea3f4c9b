"""Transactions benchmark (issue 19), one run: what transactions cost the producer and the reader.

One broker from this checkout (``BrokerProcess``, a fresh data dir), a topic of 3 partitions,
confluent-kafka, 100-byte values, linger 5 ms. Each repetition runs, in an order that rotates
(so the shared machine's drift does not favour one side):

* **produce**: an idempotent producer, and a transactional producer committing every 100 ms,
  each for ``--seconds``; msgs/s from the first ``produce()`` to the end of ``flush()``;
* **consume**: the transactional topic read from the start (``assign``, no group) at
  ``read_uncommitted`` and at ``read_committed`` (the broker's LSO, the aborted-transactions
  list; the client's filtering of control batches); msgs/s until every record is read.

Goals (the issue's): transactional >= 0.8x idempotent; read_committed >= 0.9x read_uncommitted
(medians over the repetitions).

Usage::

    python -m load.bench_transactions [--seconds 8] [--reps 3] [--json load/results/transactions-DATE.json]
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from deploy.local.process import BrokerProcess

PARTITIONS = 3
VALUE = b"x" * 100


def _quiet() -> logging.Logger:
    lg = logging.getLogger("bench.transactions")
    lg.addHandler(logging.NullHandler())
    lg.propagate = False
    return lg


def produce(bootstrap: str, topic: str, transactional: bool, seconds: float) -> tuple[float, int]:
    """(msgs/s, count) of one producer writing as fast as it can for ``seconds``."""
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "linger.ms": 5,
        "enable.idempotence": True,
        "logger": _quiet(),
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
            "logger": _quiet(),
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    runs: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="bench-txn-") as tmp:
        b = BrokerProcess(Path(tmp) / "broker").start()
        try:
            admin = AdminClient({"bootstrap.servers": b.bootstrap, "logger": _quiet()})
            for rep in range(args.reps):
                idem, txn = f"idem-{rep}", f"txn-{rep}"
                for t in (idem, txn):
                    admin.create_topics([NewTopic(t, PARTITIONS, 1)])[t].result(30)
                run: dict[str, float] = {}
                order = [False, True] if rep % 2 == 0 else [True, False]
                for transactional in order:
                    topic = txn if transactional else idem
                    rate, n = produce(b.bootstrap, topic, transactional, args.seconds)
                    run["transactional" if transactional else "idempotent"] = rate
                    if transactional:
                        total = n
                levels = ["read_uncommitted", "read_committed"]
                for isolation in levels if rep % 2 == 0 else levels[::-1]:
                    run[isolation] = consume(b.bootstrap, txn, isolation, total)
                runs.append(run)
                shown = ", ".join(f"{k} {v:,.0f} msg/s" for k, v in run.items())
                print(f"rep {rep + 1}: {shown}", flush=True)
        finally:
            b.stop()
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    produce_ratio = med["transactional"] / med["idempotent"]
    consume_ratio = med["read_committed"] / med["read_uncommitted"]
    result = {
        "seconds": args.seconds,
        "reps": runs,
        "median": med,
        "transactional_vs_idempotent": round(produce_ratio, 3),
        "read_committed_vs_read_uncommitted": round(consume_ratio, 3),
        "goals": {
            "transactional >= 0.8x idempotent": produce_ratio >= 0.8,
            "read_committed >= 0.9x read_uncommitted": consume_ratio >= 0.9,
        },
    }
    print(
        f"median: transactional/idempotent {produce_ratio:.2f} (goal >= 0.8), "
        f"read_committed/read_uncommitted {consume_ratio:.2f} (goal >= 0.9)"
    )
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if all(result["goals"].values()) else 1  # type: ignore[union-attr]


if __name__ == "__main__":
    raise SystemExit(main())
