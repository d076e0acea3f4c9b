"""Share-group benchmark: four share consumers (librdkafka's ShareConsumer, one process each)
read a preloaded 8-partition topic as a queue, on our broker and on Apache Kafka, the order of
the two alternating between repetitions.

Goal (reported, not asserted): the group's read rate >= 1.0x Apache Kafka's (medians), every
record delivered, none twice.

How it measures, in full: ``docs/benchmarks.md``, "bench share".
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from load.harness.kafka import create_topic, delete_topic, producer, quiet_logger
from load.harness.procfs import PhaseCpu
from load.harness.report import document, goal, log
from load.harness.runner import Processes, rotation
from load.harness.stats import spread
from load.peers import KafkaLauncher, Launcher, OursLauncher, Server

SYSTEMS = ("ours", "kafka")
PARTITIONS = 8
MEMBERS = 4
VALUE_SIZE = 100
TIMEOUT_S = 300.0
# ours: where a share group starts is a broker setting; Kafka's is the group's (set below)
OURS = {"share.auto.offset.reset": "earliest", "group.initial.rebalance.delay.ms": 0}


def preload(bootstrap: str, topic: str, count: int) -> None:
    p, failures = producer(bootstrap, acks=1, **{"linger.ms": 20, "batch.size": 1_048_576})
    value = os.urandom(VALUE_SIZE)
    for i in range(count):
        while True:
            try:
                p.produce(topic, value, partition=i % PARTITIONS)
                break
            except BufferError:
                p.poll(0.005)
    if p.flush(120) or failures:
        raise RuntimeError(f"preload: {len(failures)} failed, {len(p)} not delivered")


def start_earliest(bootstrap: str, group: str) -> None:
    """Kafka's share.auto.offset.reset is a group setting (latest by default)."""
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    entry = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    a = AdminClient({"bootstrap.servers": bootstrap}, logger=quiet_logger())
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[entry])
    for fut in a.incremental_alter_configs([res]).values():
        fut.result(timeout=30)


def _member(bootstrap: str, topic: str, group: str, out: Any, stop: Any) -> None:
    """One share consumer: reports (records, first and last record's time) every 0.2 s, and the
    offsets it got at the end (partition << 40 | offset)."""
    from confluent_kafka import ShareConsumer

    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "logger": quiet_logger()})
    c.subscribe([topic])
    got: list[int] = []
    first = last = 0.0
    reported = time.monotonic()
    try:
        while not stop.is_set():
            msgs = c.poll(0.2)
            now = time.monotonic()
            for m in msgs:
                if m.error() is not None:
                    print(f"member {os.getpid()}: {m.error()}", file=sys.stderr, flush=True)
                p, o = m.partition(), m.offset()
                if m.error() is None and p is not None and o is not None:
                    got.append(p << 40 | o)
            if msgs:
                first, last = first or now, now
            if now - reported >= 0.2:
                out.put(("count", os.getpid(), len(got), first, last))
                reported = now
    finally:
        c.close()
        out.put(("done", os.getpid(), got, first, last))


def run_group(system: str, server: Server, count: int) -> dict[str, Any]:
    """Preload ``count`` records, then the group reads them all: its rate from the first record
    to the last, the broker's CPU per record, and what was delivered twice or not at all."""
    topic, group = f"share-{uuid.uuid4().hex[:8]}", f"share-bench-{uuid.uuid4().hex[:8]}"
    create_topic(server.bootstrap, topic, PARTITIONS, timeout=60)
    preload(server.bootstrap, topic, count)
    if system == "kafka":
        start_earliest(server.bootstrap, group)
    ctx = mp.get_context("spawn")
    out, stop = ctx.Queue(), ctx.Event()
    cpu = PhaseCpu(server.cpu_seconds, 0.0)
    t0 = time.monotonic()
    members = [
        ctx.Process(target=_member, args=(server.bootstrap, topic, group, out, stop)) for _ in range(MEMBERS)
    ]
    for p in members:
        p.start()
    counts: dict[int, tuple[int, float, float]] = {}
    try:
        while sum(c for c, _, _ in counts.values()) < count:
            if time.monotonic() - t0 > TIMEOUT_S:
                raise TimeoutError(
                    f"{sum(c for c, _, _ in counts.values())} of {count} records in {TIMEOUT_S:.0f} s"
                )
            try:
                kind, pid, n, first, last = out.get(timeout=1.0)
            except queue.Empty:
                continue
            if kind == "count":
                counts[pid] = (n, first, last)
    finally:
        stop.set()
        finals: list[tuple[Any, ...]] = []
        deadline = time.monotonic() + 60
        while len(finals) < len(members) and time.monotonic() < deadline:
            try:
                msg = out.get(timeout=1.0)
            except queue.Empty:
                continue
            if msg[0] == "done":
                finals.append(msg)
        for p in members:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
        delete_topic(server.bootstrap, topic)
    got = [o for f in finals if f[0] == "done" for o in f[2]]
    firsts = [f[3] for f in finals if f[0] == "done" and f[3]]
    lasts = [f[4] for f in finals if f[0] == "done" and f[4]]
    span = max(lasts) - min(firsts) if firsts and lasts else None
    _used, per_msg, _after = cpu.settle(count, timeout=5.0, window=1.0)
    return {
        "records": len(got),
        "distinct": len(set(got)),
        "missing": count - len(set(got)),
        "twice": len(got) - len(set(got)),
        "members_with_records": sum(1 for f in finals if f[0] == "done" and f[2]),
        "records_s": round(count / span, 1) if span else None,
        "first_record_s": round(min(firsts) - t0, 2) if firsts else None,
        "server_cpu_us_per_msg": round(per_msg, 3) if per_msg is not None else None,
    }


def _start(
    launchers: list[Launcher], workdir: Path, procs: Processes
) -> tuple[dict[str, Server], dict[str, str]]:
    servers: dict[str, Server] = {}
    not_run: dict[str, str] = {}
    for launcher in launchers:
        reason = launcher.unavailable()
        if reason is None:
            try:
                servers[launcher.name] = procs.add(launcher.start(workdir / launcher.name))
                continue
            except Exception as exc:
                reason = f"did not start: {type(exc).__name__}: {exc}"
        not_run[launcher.name] = reason
        log(f"[red]{launcher.name}: {reason}[/red]")
    return servers, not_run


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    keys = ("records_s", "server_cpu_us_per_msg", "first_record_s")
    systems = [s for s in SYSTEMS if any(r["system"] == s for r in runs)]
    return {
        s: {k: spread(r.get(k) for r in runs if r["system"] == s and "error" not in r) for k in keys}
        for s in systems
    }


def ratio(summary: dict[str, Any], key: str) -> float | None:
    def med(s: str) -> float | None:
        sp = summary.get(s, {}).get(key)
        return sp["median"] if sp else None

    ours, kafka = med("ours"), med("kafka")
    return round(ours / kafka, 3) if ours is not None and kafka else None


def run(args: Any) -> dict[str, Any]:
    cfg = dict(args.sizes) | {"partitions": PARTITIONS, "members": MEMBERS, "value_size": VALUE_SIZE}
    cfg["broker_settings"] = OURS
    doc: dict[str, Any] = document("share", args, cfg)
    launchers: list[Launcher] = [OursLauncher(overrides=OURS)]
    if args.peers != "none":
        launchers.append(KafkaLauncher())
    runs: list[dict[str, Any]] = []
    errors: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bench-share-") as tmp, Processes() as procs:
        servers, not_run = _start(launchers, Path(tmp), procs)
        errors += [f"{name}: {why}" for name, why in not_run.items()]
        for rep in range(1, cfg["reps"] + 1):
            for system in rotation([s for s in SYSTEMS if s in servers], rep):
                row: dict[str, Any] = {"rep": rep, "system": system}
                try:
                    row |= run_group(system, servers[system], cfg["records"])
                    if row["missing"] or row["twice"]:
                        errors.append(f"rep {rep} {system}: {row['missing']} missing, {row['twice']} twice")
                except Exception as exc:
                    row["error"] = f"{type(exc).__name__}: {exc}"
                    errors.append(f"rep {rep} {system}: {row['error']}")
                runs.append(row)
                log(f"rep {rep} {system}: {row}")
    summary = summarise(runs)
    r = {
        "records_s": ratio(summary, "records_s"),
        "server_cpu_per_msg": ratio(summary, "server_cpu_us_per_msg"),
    }
    doc |= {
        "not_run": not_run,
        "runs": runs,
        "summary": summary,
        "ratios": {"ours/kafka": r},
        "goals": [
            goal("share-group read rate ours/kafka", r["records_s"], 1.0, "x", True),
            goal("broker CPU per record ours/kafka", r["server_cpu_per_msg"], 1.0, "x", False),
        ],
        "errors": errors,
    }
    return doc


if __name__ == "__main__":
    from load.scenarios import main

    raise SystemExit(main("share"))
