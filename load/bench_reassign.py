"""Reassignment benchmark: move partitions' replicas between the brokers of a cluster
of ours under a replication throttle, and compare the time the move takes with the time the
throttle implies.

Goal: the measured duration within ±20 % of the one the throttle implies.

How it measures, in full: ``docs/benchmarks.md``, "bench reassign".
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic  # type: ignore[attr-defined]

from framework.client.reassign import alter_reassignments, list_reassignments
from framework.client.wire import WireClient
from framework.protocol.messages.metadata import MetadataRequest, MetadataResponse
from load.harness.kafka import produce_blocking, quiet_logger
from load.harness.report import document, goal, log
from testing import ClusterProcesses, free_port, wait_for

MB = 1_000_000
VALUE = 65_536
OVERRIDES: dict[str, object] = {
    "broker.session.timeout.ms": 3000,
    "replica.lag.time.max.ms": 10_000,
    "log.segment.bytes": 64 * 1024 * 1024,
}


def plan(brokers: int, new: int, partitions: int, rf: int) -> tuple[list[list[int]], list[list[int]]]:
    """(initial, target) replica lists: the topic on the old brokers, then moved as the doc says."""
    old = list(range(1, brokers - new + 1))
    fresh = list(range(brokers - new + 1, brokers + 1))
    if rf > len(old):
        raise SystemExit(f"--rf {rf} needs at least {rf} brokers besides the {new} new one(s)")
    initial = [[old[(p + j) % len(old)] for j in range(rf)] for p in range(partitions)]
    if new >= rf:
        target = [[fresh[(p + j) % new] for j in range(rf)] for p in range(partitions)]
    else:
        target = [[fresh[p % new], *initial[p][1:]] for p in range(partitions)]
    return initial, target


def implied_seconds(initial: list[list[int]], target: list[list[int]], size: int, rate: float) -> float:
    """The time the throttle allows: the busiest broker's bytes in (as a new follower) or out (as
    the leader, the first initial replica) over the rate, both sides throttled at ``rate``."""
    recv: dict[int, int] = {}
    sent: dict[int, int] = {}
    for before, after in zip(initial, target, strict=True):
        for b in after:
            if b not in before:
                recv[b] = recv.get(b, 0) + size
                sent[before[0]] = sent.get(before[0], 0) + size
    return max([*recv.values(), *sent.values(), 0]) / rate


def throttles(topic: str, initial: list[list[int]], target: list[list[int]]) -> tuple[str, str]:
    """The topic's throttled-replica lists as kafka-reassign-partitions computes them."""
    leader = sorted({f"{p}:{b}" for p, before in enumerate(initial) for b in before})
    follower = sorted(
        {
            f"{p}:{b}"
            for p, (before, after) in enumerate(zip(initial, target, strict=True))
            for b in after
            if b not in before
        }
    )
    return ",".join(leader), ",".join(follower)


def set_throttle(
    bootstrap: str, brokers: int, topic: str, lists: tuple[str, str] | None, rate: int | None
) -> None:
    a = AdminClient({"bootstrap.servers": bootstrap}, logger=quiet_logger())

    def op(name: str, value: str | None) -> ConfigEntry:
        kind = AlterConfigOpType.DELETE if value is None else AlterConfigOpType.SET
        return ConfigEntry(name, value, incremental_operation=kind)

    resources = [
        ConfigResource(
            "TOPIC",
            topic,
            incremental_configs=[
                op("leader.replication.throttled.replicas", lists[0] if lists else None),
                op("follower.replication.throttled.replicas", lists[1] if lists else None),
            ],
        )
    ]
    value = None if rate is None else str(rate)
    for b in range(1, brokers + 1):
        resources.append(
            ConfigResource(
                "BROKER",
                str(b),
                incremental_configs=[
                    op("leader.replication.throttled.rate", value),
                    op("follower.replication.throttled.rate", value),
                ],
            )
        )
    for res in resources:  # librdkafka takes one BROKER resource per call
        for f in a.incremental_alter_configs([res]).values():
            f.result(30)


def fill(bootstrap: str, topic: str, partitions: int, size: int) -> float:
    """``size`` bytes into each partition (acks=1); the seconds it took."""
    t0 = time.monotonic()
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": 1,
            "linger.ms": 20,
            "batch.size": 1_048_576,
            "queue.buffering.max.kbytes": 262_144,
            "logger": quiet_logger(),
        }
    )
    value = b"x" * VALUE
    for part in range(partitions):
        for _ in range(max(size // VALUE, 1)):
            produce_blocking(p, topic, value, 0.05, partition=part)
            p.poll(0)
    if p.flush(300) != 0:
        raise RuntimeError("the fill did not finish")
    return time.monotonic() - t0


def view(c: ClusterProcesses, topic: str) -> list[dict[int, tuple[int, list[int], list[int]]]]:
    out = []
    for b in c.brokers:
        with WireClient(b.bootstrap, timeout=5) as w:
            md = w.send(MetadataRequest(topics=None, allow_auto_topic_creation=False), MetadataResponse)
        for t in md.topics:
            if t.name == topic:
                out.append(
                    {p.partition_index: (p.leader_id, p.replica_nodes, p.isr_nodes) for p in t.partitions}
                )
    return out


def placed(c: ClusterProcesses, topic: str, want: list[list[int]]) -> bool:
    views = view(c, topic)
    return len(views) == len(c.brokers) and all(
        v[p][1] == r and sorted(v[p][2]) == sorted(r) and v[p][0] in r
        for v in views
        for p, r in enumerate(want)
    )


def create(bootstrap: str, topic: str, initial: list[list[int]]) -> None:
    a = AdminClient({"bootstrap.servers": bootstrap}, logger=quiet_logger())
    a.create_topics([NewTopic(topic, num_partitions=len(initial), replica_assignment=initial)])[topic].result(
        30
    )


def counters(ports: list[int]) -> dict[str, float]:
    """The throttle counters summed over the brokers, by side."""
    out: dict[str, float] = {}
    for port in ports:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            for line in r.read().decode().splitlines():
                if line.startswith(
                    ("sftraffic_replication_throttled_bytes", "sftraffic_replication_throttle_skips")
                ):
                    name, _, value = line.rpartition(" ")
                    out[name] = out.get(name, 0.0) + float(value)
    return out


def move(c: ClusterProcesses, topic: str, target: list[list[int]], timeout: float) -> float:
    bootstrap = c.brokers[0].bootstrap
    t0 = time.monotonic()
    got = alter_reassignments(bootstrap, {(topic, p): r for p, r in enumerate(target)})
    bad = {k: v for k, v in got.items() if v[0]}
    if bad:
        raise RuntimeError(f"reassignment refused: {bad}")
    wait_for(
        lambda: not list_reassignments(bootstrap) and placed(c, topic, target), timeout, 0.1, f"{topic} moved"
    )
    return time.monotonic() - t0


def run(args: argparse.Namespace) -> dict[str, Any]:
    if args.smoke:
        args.partitions, args.mb, args.target_s = 2, 2, 4.0
    elif args.quick:
        args.mb, args.target_s = 10, 10.0
    initial, target = plan(args.brokers, args.new, args.partitions, args.rf)
    size = int(args.mb * MB)
    rate = args.rate or int(implied_seconds(initial, target, size, 1.0) / args.target_s)
    implied = implied_seconds(initial, target, size, rate)
    config = {
        "brokers": args.brokers,
        "voters": args.voters or args.brokers,
        "new_brokers": args.new,
        "partitions": args.partitions,
        "replication_factor": args.rf,
        "mb_per_partition": args.mb,
        "rate_bytes_per_s": rate,
        "initial": initial,
        "target": target,
    }
    doc = document("reassign", args, config)
    ports = [free_port() for _ in range(args.brokers)]
    base = Path(tempfile.mkdtemp(prefix="bench-reassign-"))
    c = ClusterProcesses(
        base,
        args.brokers,
        overrides=OVERRIDES,
        broker_overrides=[{"metrics.listen": f"127.0.0.1:{p}"} for p in ports],
        voters=args.voters or None,
    )
    c.start()
    try:
        results: dict[str, Any] = {}
        if args.baseline:
            create(c.bootstrap, "unthrottled", initial)
            fill(c.bootstrap, "unthrottled", args.partitions, size)
            wait_for(lambda: placed(c, "unthrottled", initial), 120, 0.2, "the baseline topic in sync")
            log("moving the baseline topic without a throttle")
            results["unthrottled_s"] = round(move(c, "unthrottled", target, 600), 2)
        topic = "throttled"
        create(c.bootstrap, topic, initial)
        log(f"filling {args.partitions} x {args.mb} MB")
        results["fill_s"] = round(fill(c.bootstrap, topic, args.partitions, size), 2)
        wait_for(lambda: placed(c, topic, initial), 120, 0.2, "the topic in sync")
        set_throttle(c.bootstrap, args.brokers, topic, throttles(topic, initial, target), rate)
        before = counters(ports)
        log(f"moving at {rate / MB:.2f} MB/s (throttle-implied {implied:.1f} s)")
        measured = move(c, topic, target, max(implied * 4, 60))
        after = counters(ports)
        set_throttle(c.bootstrap, args.brokers, topic, None, None)
        results |= {
            "measured_s": round(measured, 2),
            "implied_s": round(implied, 2),
            "ratio": round(measured / implied, 3),
            "moved_mb": round(
                sum(len(set(a) - set(b)) for a, b in zip(target, initial, strict=True)) * args.mb, 1
            ),
            "throttle": {k: after.get(k, 0.0) - before.get(k, 0.0) for k in sorted(after)},
        }
        # the throttle counts bytes on the wire: a fetch of replica.fetch.max.bytes ends in a
        # partial batch the follower drops and fetches again (as Kafka's), a few % over the payload
        wire = results["throttle"].get('sftraffic_replication_throttled_bytes{side="follower"}', 0.0)
        payload = results["moved_mb"] * MB
        if wire and payload:
            results["wire_over_payload"] = round(wire / payload, 3)
            results["ratio_to_wire_implied"] = round(measured / (implied * wire / payload), 3)
        doc["results"] = results
        doc["goals"] = [
            goal("measured / throttle-implied duration (not over)", results["ratio"], 1.2, "x", higher=False),
            goal("measured / throttle-implied duration (not under)", results["ratio"], 0.8, "x", higher=True),
        ]
    except Exception as exc:  # reported in the JSON
        doc["errors"].append(f"{type(exc).__name__}: {exc}")
        doc.setdefault("goals", [])
    finally:
        c.stop()
        shutil.rmtree(base, ignore_errors=True)
    return doc


if __name__ == "__main__":
    from load.scenarios import main

    raise SystemExit(main("reassign"))
