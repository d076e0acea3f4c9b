"""Replication benchmark: a 3-broker cluster of ours on 127.0.0.1 (``ClusterProcesses``).

**(a) Throughput.** A 6-partition topic with replication factor 3 and min.insync.replicas 2;
one confluent-kafka producer writes N 100-byte values (200k; 50k with ``--quick``) with
acks=1, then N with acks=all and idempotence (linger 5 ms, 1 MB batches), timed from the
first produce call to the last acknowledgement; the same on a single broker for reference.
Every broker, the follower fetchers and the client share the machine's cores.

**(b) Failover.** A producer writes at a fixed rate (2,000 msgs/s, acks=all, idempotent) to a
3-partition topic; the broker leading partition 0 is SIGKILLed (a crash) or SIGTERMed (a stop:
controlled shutdown hands its leaderships over). Figures: the longest gap between two
consecutive acknowledgements of partition 0 (the unavailability a producer sees: for a crash,
fencing after ``broker.session.timeout.ms`` + a new leader + the client's metadata refresh),
and an audit: every acknowledged message is then read back exactly once (lost and duplicated
counts, both must be 0). Crashes with the default session timeout (3 s) and Kafka's (9 s); a
stop with the default.

**(c) Stopping under load.** While a producer writes (acks=all, idempotent), each broker in
turn is sent SIGTERM and restarted, 20 times (5 with ``--quick``): the time from the signal to
the process's exit (goal: at most 5 s each), its exit code and its "stopped cleanly" line.

Usage::

    python -m load.bench_cluster [--quick] [--json FILE]
"""

from __future__ import annotations

import itertools
import signal
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from deploy.local.process import BrokerProcess, ClusterProcesses, wait_for
from load.harness.kafka import admin, create_topic, quiet_logger
from load.harness.report import machine_info, parser
from load.harness.runner import run_main


def _produce(bootstrap: str, topic: str, n: int, acks: str) -> float:
    """msgs/s of ``n`` values, first produce() to the last acknowledgement (a delivery callback
    per message, as when the figures of 2026-11-23 were taken)."""
    from confluent_kafka import Producer

    conf = {"acks": acks, "enable.idempotence": acks == "all", "linger.ms": 5, "batch.size": 1_000_000}
    conf |= {"queue.buffering.max.messages": 1_000_000, "logger": quiet_logger()}
    p = Producer({"bootstrap.servers": bootstrap, **conf})
    done = [0]

    def cb(err: Any, _msg: Any) -> None:
        done[0] += err is None

    value = b"x" * 100
    t0 = time.perf_counter()
    for i in range(n):
        while True:
            try:
                p.produce(topic, value=value, key=str(i % 1000).encode(), on_delivery=cb)
                break
            except BufferError:
                p.poll(0.01)
    p.flush(120)
    dt = time.perf_counter() - t0
    if done[0] != n:
        raise RuntimeError(f"only {done[0]} of {n} acknowledged")
    return n / dt


def throughput(root: Path, n: int) -> dict[str, Any]:
    out: dict[str, Any] = {"messages": n, "value_bytes": 100}
    with ClusterProcesses(root / "tp", 3) as c:
        create_topic(c.bootstrap, "tp", 6, 3, {"min.insync.replicas": "2"}, 30)
        _produce(c.bootstrap, "tp", 20_000, "1")  # warm up connections and metadata
        out["cluster_rf3_acks1_msgs_s"] = round(_produce(c.bootstrap, "tp", n, "1"))
        out["cluster_rf3_acks_all_msgs_s"] = round(_produce(c.bootstrap, "tp", n, "all"))
    with BrokerProcess(root / "single") as b:
        create_topic(b.bootstrap, "tp", 6, 1, timeout=30)
        _produce(b.bootstrap, "tp", 20_000, "1")
        out["single_acks1_msgs_s"] = round(_produce(b.bootstrap, "tp", n, "1"))
        out["single_acks_all_msgs_s"] = round(_produce(b.bootstrap, "tp", n, "all"))
    return out


def failover(
    root: Path, session_ms: int, how: str = "kill", rate: int = 2000, seconds: float = 12.0
) -> dict[str, Any]:
    from confluent_kafka import Consumer, Producer

    overrides = {"broker.session.timeout.ms": session_ms}
    with ClusterProcesses(root / f"fo-{how}-{session_ms}", 3, overrides) as c:
        create_topic(c.bootstrap, "fo", 3, 3, {"min.insync.replicas": "2"}, 30)
        client = admin(c.bootstrap)
        leader = client.list_topics("fo", timeout=10).topics["fo"].partitions[0].leader
        conf = {"acks": "all", "enable.idempotence": True, "linger.ms": 1, "message.timeout.ms": 120_000}
        p = Producer({"bootstrap.servers": c.bootstrap, "logger": quiet_logger(), **conf})
        acked, acks_p0, errors = dict[bytes, int](), list[float](), list[str]()

        def cb(err: Any, msg: Any) -> None:
            if err is not None:
                errors.append(str(err))
                return
            acked[msg.key()] = msg.partition()
            if msg.partition() == 0:
                acks_p0.append(time.monotonic())

        t0, killed_t, i = time.monotonic(), 0.0, 0
        while time.monotonic() - t0 < seconds or (
            killed_t and time.monotonic() - killed_t < session_ms / 1000 + 6
        ):
            now = time.monotonic()
            if not killed_t and now >= t0 + seconds / 3:
                victim = next(b for b in c.brokers if b.node_id == leader)
                victim.signal(signal.SIGTERM if how == "term" else signal.SIGKILL)
                killed_t = now
            while i < (now - t0) * rate:
                p.produce("fo", key=str(i).encode(), value=b"v" * 100, partition=i % 3, on_delivery=cb)
                i += 1
            p.poll(0.005)
        p.flush(120)
        # acks of batches sent before the kill may still arrive just after it: the figure is the
        # longest silence between two consecutive acknowledgements of partition 0
        acks_p0.sort()
        gap = max((b - a for a, b in itertools.pairwise(acks_p0)), default=float("nan"))
        new_leader = client.list_topics("fo", timeout=10).topics["fo"].partitions[0].leader
        conf = {
            "group.id": f"audit-{how}-{session_ms}",
            "auto.offset.reset": "earliest",
            "logger": quiet_logger(),
        }
        consumer = Consumer({"bootstrap.servers": c.bootstrap, **conf})
        consumer.subscribe(["fo"])
        seen: set[bytes] = set()
        dup = 0

        def all_seen() -> bool:
            nonlocal dup
            for m in consumer.consume(5000, 0.5):
                if m.error() is None:
                    dup += m.key() in seen
                    seen.add(m.key())
            return all(k in seen for k in acked)

        wait_for(all_seen, 60, 0, "every acknowledged message to be read back")
        consumer.close()
        return {
            "signal": "SIGTERM" if how == "term" else "SIGKILL",
            "broker_session_timeout_ms": session_ms,
            "rate_msgs_s": rate,
            "produced": i,
            "acknowledged": len(acked),
            "delivery_errors": len(errors),
            "killed_leader": leader,
            "new_leader": new_leader,
            "partition0_unavailable_s": round(gap, 2),
            "lost": sum(1 for k in acked if k not in seen),
            "duplicates": dup,
        }


def stopping(root: Path, times: int) -> dict[str, Any]:
    """SIGTERM each broker in turn under acks=all traffic; seconds from the signal to the exit."""
    from confluent_kafka import Producer

    with ClusterProcesses(root / "stop", 3) as c:
        create_topic(c.bootstrap, "st", 6, 3, {"min.insync.replicas": "2"}, 30)
        conf = {"acks": "all", "enable.idempotence": True, "linger.ms": 5, "logger": quiet_logger()}
        p = Producer({"bootstrap.servers": c.bootstrap, **conf})
        stop = threading.Event()
        failures: list[str] = []

        def write() -> None:
            while not stop.is_set():
                try:
                    p.produce(
                        "st", b"v" * 100, on_delivery=lambda e, _m: e is None or failures.append(str(e))
                    )
                except BufferError:
                    pass
                p.poll(0.001)

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        exits: list[float] = []
        clean = 0
        try:
            for n in range(times):
                b = c.brokers[n % len(c.brokers)]
                t0 = time.monotonic()
                b.signal(signal.SIGTERM)
                assert b.proc is not None
                code = b.proc.wait(30)
                exits.append(time.monotonic() - t0)
                clean += code == 0 and "stopped cleanly" in b.tail(5)
                b.start(60)
                c.wait_registered(len(c.brokers))
        finally:
            stop.set()
            writer.join(10)
            p.flush(60)
        return {
            "stops": times,
            "sigterm_to_exit_max_s": round(max(exits), 2),
            "sigterm_to_exit_median_s": round(sorted(exits)[len(exits) // 2], 2),
            "stopped_cleanly": clean,
            "delivery_failures": len(failures),
        }


def main(argv: list[str] | None = None) -> int:
    args = parser("cluster", __doc__, "50k messages instead of 200k", None).parse_args(argv)

    def run() -> dict[str, Any]:
        with tempfile.TemporaryDirectory(prefix="bench-cluster-") as tmp:
            machine = machine_info("load.bench_cluster")
            return {
                "machine": machine,
                "command": machine["command"],
                "throughput": throughput(Path(tmp), 50_000 if args.quick else 200_000),
                "failover": [
                    failover(Path(tmp), 3000),
                    failover(Path(tmp), 9000),
                    failover(Path(tmp), 3000, how="term"),
                ],
                "stopping": stopping(Path(tmp), 5 if args.quick else 20),
            }

    def render(doc: dict[str, Any], console: Console) -> None:
        console.print_json(data={k: v for k, v in doc.items() if k != "machine"})

    return run_main(run, render, args.json, lambda _doc: True, "bench_cluster")


if __name__ == "__main__":
    raise SystemExit(main())
