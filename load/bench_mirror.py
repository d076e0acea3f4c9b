"""Mirror benchmark (issue 21), one run: ``sftraffic mirror`` between two local single-node clusters.

Two brokers from this checkout (``BrokerProcess``, fresh data dirs), ``sftraffic mirror`` as a
subprocess (its default intervals: commit 1 s), confluent-kafka, 100-byte values:

* **throughput**: ``--records`` preloaded into a 6-partition source topic, then the mirror
  started; msgs/s from its first copy (its ``copying`` line) until the target's end offsets hold
  every record (read with ListOffsets every 50 ms);
* **lag**: a second topic written at a steady ``--rate`` msgs/s for ``--seconds`` while the
  mirror runs; a consumer on the target reads the copies; lag = time read at the target minus
  the record's timestamp (set by the source producer when sent, kept by the mirror): end to
  end, producer linger and consumer fetch wait included. p50/p99/max.

With ``--exactly-once`` the mirror commits a transaction every second: the copies become
visible to the (read_committed) lag reader only then, which the lag figure includes; the
throughput's end offsets include the transaction markers (6 per commit).

Goals (the issue's): throughput >= 100k msgs/s; lag p99 <= 2 s under 10k msgs/s.

Usage::

    python -m load.bench_mirror [--records 500000] [--rate 10000] [--seconds 20] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from deploy.local.process import BrokerProcess, ManagedProcess, sftraffic

PARTITIONS = 6
VALUE = b"x" * 100


def _quiet() -> logging.Logger:
    lg = logging.getLogger("bench.mirror")
    lg.addHandler(logging.NullHandler())
    lg.propagate = False
    return lg


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
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000, "logger": _quiet()}
    )
    t0 = time.monotonic()
    for i in range(n):
        while True:
            try:
                p.produce(topic, VALUE, str(i).encode())
                break
            except BufferError:
                p.poll(0.01)
    p.flush(120)
    return n / (time.monotonic() - t0)


def steady(bootstrap: str, topic: str, rate: int, seconds: float) -> int:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "logger": _quiet()})
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--rate", type=int, default=10_000)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--exactly-once", action="store_true", help="run the mirror with --exactly-once")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-mirror-") as tmp:
        src, dst = BrokerProcess(Path(tmp) / "source"), BrokerProcess(Path(tmp) / "target")
        src.start()
        dst.start()
        mirror: ManagedProcess | None = None
        try:
            a = AdminClient({"bootstrap.servers": src.bootstrap, "logger": _quiet()})
            for t in ("bulk", "steady"):
                a.create_topics([NewTopic(t, PARTITIONS, 1)])[t].result(30)
            load_rate = preload(src.bootstrap, "bulk", args.records)
            print(f"preloaded {args.records:,} records ({load_rate:,.0f}/s)", flush=True)
            probe = Consumer({"bootstrap.servers": dst.bootstrap, "group.id": "probe", "logger": _quiet()})
            cmd = sftraffic(
                "mirror", "--source", src.bootstrap, "--target", dst.bootstrap, "--source-alias", "src",
                "--topics", "bulk|steady", "--status-interval", "5",
                *(["--exactly-once"] if args.exactly_once else []),
            )  # fmt: skip
            mirror = ManagedProcess("mirror", cmd, ready="copying", log=Path(tmp) / "mirror.log").start(60)
            t0 = time.monotonic()
            cpu0 = mirror.cpu_seconds()
            while _end(probe, "src.bulk") < args.records:
                time.sleep(0.05)
            elapsed = time.monotonic() - t0
            throughput = args.records / elapsed
            mirror_cpu = (mirror.cpu_seconds() - cpu0) / elapsed
            print(
                f"throughput: {throughput:,.0f} msgs/s ({elapsed:.1f} s, mirror CPU {mirror_cpu:.2f} cores)"
            )

            lags: list[float] = []
            c = Consumer(
                {"bootstrap.servers": dst.bootstrap, "group.id": "lag", "auto.offset.reset": "earliest",
                 "fetch.wait.max.ms": 10, "logger": _quiet()}
            )  # fmt: skip
            # assigned, not subscribed: no group join delaying the first reads
            c.assign([TopicPartition("src.steady", p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
            sent: list[int] = []
            writer = threading.Thread(
                target=lambda: sent.append(steady(src.bootstrap, "steady", args.rate, args.seconds))
            )
            writer.start()
            deadline = time.monotonic() + args.seconds + 60
            while time.monotonic() < deadline and (writer.is_alive() or len(lags) < sent[0]):
                for m in c.consume(5000, 0.1):
                    if m.error() is None:
                        lags.append(time.time() - m.timestamp()[1] / 1000)
            c.close()
            probe.close()
            lags.sort()
            q = statistics.quantiles(lags, n=100)
            lag = {"p50_s": round(q[49], 3), "p99_s": round(q[98], 3), "max_s": round(lags[-1], 3)}
            shown = ", ".join(f"{k[:-2]} {v} s" for k, v in lag.items())
            print(f"lag at {args.rate:,} msgs/s: {shown} ({len(lags):,} of {sent[0]:,} records read)")
        finally:
            if mirror is not None:
                mirror.stop(20)
            src.stop()
            dst.stop()
    result: dict[str, Any] = {
        "exactly_once": args.exactly_once,
        "records": args.records,
        "partitions": PARTITIONS,
        "value_bytes": len(VALUE),
        "throughput_msgs_per_s": round(throughput),
        "throughput_seconds": round(elapsed, 2),
        "mirror_cpu_cores": round(mirror_cpu, 2),
        "steady_rate": args.rate,
        "steady_seconds": args.seconds,
        "steady_read": len(lags),
        "steady_sent": sent[0],
        "lag": lag,
        "load_average": os.getloadavg()[0],
        "goals": {
            "throughput >= 100k msgs/s": throughput >= 100_000,
            "lag p99 <= 2 s at 10k msgs/s": lag["p99_s"] <= 2.0,
        },
    }
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if all(result["goals"].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
