"""Mirror benchmark, one run: ``sftraffic mirror`` between two local single-node clusters.

Goals: throughput >= 100k msgs/s; lag p99 <= 2 s under 10k msgs/s.

How it measures, in full: ``docs/benchmarks.md``, "bench mirror".
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from load.harness.kafka import produce_blocking, quiet_logger
from load.harness.report import document, goal, log
from load.harness.runner import Processes
from testing import BrokerProcess, ManagedProcess, sftraffic

PARTITIONS = 6
VALUE = b"x" * 100


def _end(c: Consumer, topic: str) -> int:
    total = 0
    for p in range(PARTITIONS):
        try:
            total += c.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1]
        except Exception:
            pass
    return total


def preload(bootstrap: str, topic: str, n: int) -> float:
    p = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000, "logger": quiet_logger()}
    )
    t0 = time.monotonic()
    for i in range(n):
        produce_blocking(p, topic, VALUE, 0.01, key=str(i).encode())
    p.flush(120)
    return n / (time.monotonic() - t0)


def steady(bootstrap: str, topic: str, rate: int, seconds: float) -> int:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "logger": quiet_logger()})
    t0 = time.monotonic()
    sent = 0
    while (now := time.monotonic()) - t0 < seconds:
        due = int((now - t0) * rate)
        while sent < due:
            p.produce(topic, VALUE, timestamp=int(time.time() * 1000))
            sent += 1
        p.poll(0)
        time.sleep(0.002)
    p.flush(30)
    return sent


def throughput(src: str, dst: str, records: int, mirror: ManagedProcess) -> dict[str, Any]:
    """msgs/s from the mirror's first copy until the target holds every preloaded record."""
    probe = Consumer({"bootstrap.servers": dst, "group.id": "probe", "logger": quiet_logger()})
    t0, cpu0 = time.monotonic(), mirror.cpu_seconds()
    while _end(probe, "src.bulk") < records:
        time.sleep(0.05)
    elapsed = time.monotonic() - t0
    probe.close()
    cores = (mirror.cpu_seconds() - cpu0) / elapsed
    log(f"throughput: {records / elapsed:,.0f} msgs/s ({elapsed:.1f} s, mirror CPU {cores:.2f} cores)")
    return {"msgs_s": round(records / elapsed), "seconds": round(elapsed, 2), "cores": round(cores, 2)}


def lag(src: str, dst: str, rate: int, seconds: float) -> dict[str, Any]:
    """Copies' lag (read at the target - produced at the source) at a steady ``rate``."""
    lags: list[float] = []
    c = Consumer(
        {"bootstrap.servers": dst, "group.id": "lag", "auto.offset.reset": "earliest",
         "fetch.wait.max.ms": 10, "logger": quiet_logger()}
    )  # fmt: skip
    # assigned, not subscribed: no group join delaying the first reads
    c.assign([TopicPartition("src.steady", p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    sent: list[int] = []
    writer = threading.Thread(target=lambda: sent.append(steady(src, "steady", rate, seconds)))
    writer.start()
    deadline = time.monotonic() + seconds + 60
    while time.monotonic() < deadline and (writer.is_alive() or len(lags) < sent[0]):
        for m in c.consume(5000, 0.1):
            if m.error() is None:
                lags.append(time.time() - m.timestamp()[1] / 1000)
    c.close()
    lags.sort()
    q = statistics.quantiles(lags, n=100)
    figures = {"p50_s": round(q[49], 3), "p99_s": round(q[98], 3), "max_s": round(lags[-1], 3)}
    log(f"lag at {rate:,} msgs/s: {figures} ({len(lags):,} of {sent[0]:,} records read)")
    return {"lag": figures, "steady_read": len(lags), "steady_sent": sent[0]}


def run(args: argparse.Namespace) -> dict[str, Any]:
    config = {"exactly_once": args.exactly_once, "partitions": PARTITIONS, "value_bytes": len(VALUE)}
    doc = document("mirror", args, dict(args.sizes) | config | {"rate": args.rate})
    with tempfile.TemporaryDirectory(prefix="bench-mirror-") as tmp, Processes() as procs:
        src = procs.start(BrokerProcess(Path(tmp) / "source")).bootstrap
        dst = procs.start(BrokerProcess(Path(tmp) / "target")).bootstrap
        a = AdminClient({"bootstrap.servers": src}, logger=quiet_logger())
        for t in ("bulk", "steady"):
            a.create_topics([NewTopic(t, PARTITIONS, 1)])[t].result(30)
        log(f"preloaded {args.records:,} records ({preload(src, 'bulk', args.records):,.0f}/s)")
        cmd = sftraffic(
            "mirror", "--source", src, "--target", dst, "--source-alias", "src",
            "--topics", "bulk|steady", "--status-interval", "5",
            *(["--exactly-once"] if args.exactly_once else []),
        )  # fmt: skip
        mirror = ManagedProcess("mirror", cmd, ready="copying", log=Path(tmp) / "mirror.log", grace=20.0)
        tp = throughput(src, dst, args.records, procs.start(mirror))
        steady_lag = lag(src, dst, args.rate, args.seconds)
    doc |= {"records": args.records, "steady_rate": args.rate, "steady_seconds": args.seconds}
    doc |= {"throughput_msgs_per_s": tp["msgs_s"], "throughput_seconds": tp["seconds"]}
    doc |= {"mirror_cpu_cores": tp["cores"], **steady_lag, "load_average": os.getloadavg()[0]}
    doc["goals"] = [
        goal("throughput", tp["msgs_s"], 100_000, "msgs/s", True),
        goal(f"lag p99 at {args.rate:,} msgs/s", steady_lag["lag"]["p99_s"], 2.0, "s", False),
    ]
    return doc


if __name__ == "__main__":
    from load.scenarios import main

    raise SystemExit(main("mirror"))
