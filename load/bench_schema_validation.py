"""Schema validation benchmark: broker produce throughput with ``confluent.value.schema.validation``
on against off (goal: on >= 0.9x off).

How it measures, in full: ``docs/benchmarks.md``, "bench schema-validation".
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from deploy.local.registry import RegistryProcess
from load.harness.kafka import create_topic, produce_blocking, producer
from load.harness.procfs import Interference, PhaseCpu, probe
from load.harness.profiler import Profiler, py_spy
from load.harness.report import document, goal, log
from load.harness.runner import Processes, rotation
from load.harness.stats import median, spread
from testing import BrokerProcess

GOAL_RATIO = 0.9
# a 5 ms linger at ~300k msgs/s sends batches of ~1,500 records: the in-process append's size
APPEND_BATCH = 1500
PRODUCER_SETTINGS: dict[str, Any] = {  # as load.bench_broker's
    "linger.ms": 5,
    "batch.size": 1_048_576,
    "batch.num.messages": 100_000,
    "queue.buffering.max.messages": 2_000_000,
    "queue.buffering.max.kbytes": 2_097_151,
    "compression.type": "none",
    "enable.idempotence": False,
    "acks": 1,
}
SCHEMA = {
    "type": "record",
    "name": "TrafficEvent",
    "namespace": "sf.traffic",
    "fields": [
        {"name": "sensor_id", "type": "string"},
        {"name": "ts", "type": "long"},
        {"name": "speed_kmh", "type": "float"},
        {"name": "occupancy", "type": "float"},
        {"name": "lane", "type": "int"},
        {"name": "direction", "type": "string"},
        {"name": "note", "type": "string"},
    ],
}


def avro_values(registry_url: str, n: int) -> tuple[list[bytes], int]:
    """``n`` Avro-framed traffic events (~100 bytes each) and their schema id."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    client = SchemaRegistryClient({"url": registry_url})
    ser = AvroSerializer(client, json.dumps(SCHEMA))
    ctx = SerializationContext("bench-values", MessageField.VALUE)
    rng = random.Random(1)
    values = []
    for i in range(n):
        event = {
            "sensor_id": f"sf-{rng.randrange(10_000):05d}",
            "ts": 1_700_000_000_000 + i,
            "speed_kmh": rng.uniform(0, 120),
            "occupancy": rng.random(),
            "lane": rng.randrange(6),
            "direction": rng.choice(["NB", "SB", "EB", "WB"]),
            "note": "x" * rng.randrange(60, 76),
        }
        values.append(ser(event, ctx))
    return values, int.from_bytes(values[0][1:5], "big")


def in_process(values: list[bytes], sid: int) -> dict[str, Any]:
    """ns per record of ``records.check_records`` without and with the schema check."""
    from framework.protocol import record_walk
    from framework.protocol import records as rb

    now = int(time.time() * 1000)
    out: dict[str, Any] = {"walk_compiled": record_walk.COMPILED}
    for n in (1000, 9000):
        batch = memoryview(
            bytearray(rb.build_batch([(None, values[i % len(values)]) for i in range(n)], timestamp_ms=now))
        )
        h = rb.validate_batches(batch)[0]
        check = rb.SchemaCheck(value_subject="bench-value", value_ids={sid})
        for name, schemas in (("off", None), ("on", check)):
            best = float("inf")
            for _ in range(30):
                t0 = time.perf_counter()
                rb.check_records(batch, 0, h, schemas=schemas)
                best = min(best, time.perf_counter() - t0)
            out[f"check_records_ns_per_record_{n}_{name}"] = round(best / n * 1e9, 1)
        out[f"extra_ns_per_record_{n}"] = round(
            out[f"check_records_ns_per_record_{n}_on"] - out[f"check_records_ns_per_record_{n}_off"], 1
        )
    out |= append_path(values, sid)
    return out


def append_path(values: list[bytes], sid: int, n: int = APPEND_BATCH, rounds: int = 300) -> dict[str, Any]:
    """The leader's whole append (``Log.append_as_leader``: header/CRC check, record walk,
    offsets patched, written to a segment in a temporary directory) of ``n``-record batches,
    with the schema check off and on, alternating batch by batch; µs per batch (medians)."""
    from framework.protocol import records as rb
    from framework.storage.log import Log
    from framework.storage.log_config import LogConfig

    now = int(time.time() * 1000)
    raw = rb.build_batch([(None, values[i % len(values)]) for i in range(n)], timestamp_ms=now)
    check = rb.SchemaCheck(value_subject="bench-value", value_ids={sid})
    times: dict[str, list[float]] = {"off": [], "on": []}
    with tempfile.TemporaryDirectory(prefix="bench-schema-append-") as d:
        logs = {
            name: Log.open(Path(d) / name, "bench", 0, LogConfig(segment_bytes=1 << 30))[0] for name in times
        }
        for i in range(rounds):
            for name in rotation(["off", "on"], i + 1):
                payload = memoryview(bytearray(raw))
                t0 = time.perf_counter()
                logs[name].append_as_leader(payload, now, schemas=check if name == "on" else None)
                times[name].append(time.perf_counter() - t0)
        for lg in logs.values():
            lg.close()
    off, on = median(times["off"]), median(times["on"])
    assert off is not None and on is not None
    return {
        "append_batch_records": n,
        "append_us_per_batch_off": round(off * 1e6, 1),
        "append_us_per_batch_on": round(on * 1e6, 1),
        "append_throughput_ratio": round(off / on, 3),
    }


def register(registry_url: str, subject: str) -> int:
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    return int(
        SchemaRegistryClient({"url": registry_url}).register_schema(
            subject, Schema(json.dumps(SCHEMA), "AVRO")
        )
    )


def phase(
    bootstrap: str,
    registry_url: str,
    broker_pid: int,
    values: list[bytes],
    count: int,
    on: bool,
    profile: Path | None,
) -> dict[str, Any]:
    topic = f"sv-{'on' if on else 'off'}-{uuid.uuid4().hex[:8]}"
    config = {"confluent.value.schema.validation": "true" if on else "false"}
    create_topic(bootstrap, topic, 1, config=config)
    register(registry_url, f"{topic}-value")
    p, failures = producer(bootstrap, **PRODUCER_SETTINGS)
    p.produce(topic, values[0], partition=0)  # warm-up: connection and metadata outside the timing
    if p.flush(30) != 0 or failures:
        raise RuntimeError(f"warm-up not delivered: {failures[:1]}")
    nv = len(values)
    produce = p.produce
    prof = Profiler(broker_pid, profile, focus=("framework/",)) if profile else None
    other = Interference([broker_pid])
    cpu = PhaseCpu(probe(broker_pid))
    t0 = time.perf_counter()
    for i in range(count):
        v = values[i % nv]
        try:
            produce(topic, v, partition=0)
        except BufferError:
            produce_blocking(p, topic, v, partition=0)
    undelivered = p.flush(max(60.0, count / 10_000))
    seconds = time.perf_counter() - t0
    client_s = cpu.client_done()
    profiled = prof.summary() if prof is not None else None
    _, us_per_msg, _ = cpu.settle(count)
    return {
        "profile": profiled,
        "validation": on,
        "topic": topic,
        "count": count,
        "seconds": round(seconds, 3),
        "msgs_s": round(count / seconds, 1),
        "broker_cpu_us_per_msg": round(us_per_msg, 3) if us_per_msg is not None else None,
        "client_cpu_us_per_msg": round(client_s / count * 1e6, 3),
        "other_load_share": round(s, 3) if (s := other.share()) is not None else None,
        "failed": len(failures) + undelivered,
        "first_failure": failures[0] if failures else None,
    }


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Validation on against off: medians, their spread, and the ratios of back-to-back pairs."""
    on_runs = [r for r in runs if r["validation"]]
    off_runs = [r for r in runs if not r["validation"]]
    pairs = [
        round(a["msgs_s"] / b["msgs_s"], 3)
        for a, b in zip(
            sorted(on_runs, key=lambda r: r["rep"]), sorted(off_runs, key=lambda r: r["rep"]), strict=True
        )
    ]
    m_on, m_off = median(r["msgs_s"] for r in on_runs), median(r["msgs_s"] for r in off_runs)
    ratio = round(m_on / m_off, 3) if m_on and m_off else None
    c_on = median(r["broker_cpu_us_per_msg"] for r in on_runs)
    c_off = median(r["broker_cpu_us_per_msg"] for r in off_runs)
    return {
        "on_msgs_s": spread(r["msgs_s"] for r in on_runs),
        "off_msgs_s": spread(r["msgs_s"] for r in off_runs),
        "ratio_of_medians": ratio,
        "pair_ratios": pairs,
        "median_pair_ratio": median(pairs),
        "on_broker_cpu_us_per_msg": spread(r["broker_cpu_us_per_msg"] for r in on_runs),
        "off_broker_cpu_us_per_msg": spread(r["broker_cpu_us_per_msg"] for r in off_runs),
        "broker_cpu_extra_us_per_msg": round(c_on - c_off, 3)
        if c_on is not None and c_off is not None
        else None,
        "other_load_share": spread(r["other_load_share"] for r in runs),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    cfg = dict(args.sizes)
    doc = document("schema_validation", args, cfg)
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-schema-validation-") as tmp, Processes() as procs:
        broker = procs.start(
            BrokerProcess(Path(tmp) / "broker", overrides={"group.initial.rebalance.delay.ms": 0})
        )
        reg = procs.start(RegistryProcess(broker.bootstrap, log=Path(tmp) / "registry.log"))
        values, sid = avro_values(reg.url, cfg["values"])
        sizes = [len(v) for v in values]
        doc["values"] = {
            "schema_id": sid,
            "mean_bytes": round(sum(sizes) / len(sizes), 1),
            "distinct": len(values),
        }
        doc["in_process"] = in_process(values, sid)
        pid = broker.pid
        assert pid is not None
        for rep in range(1, cfg["reps"] + 1):
            for on in rotation([True, False], rep):
                want_profile = bool(args.profile) and on and rep == cfg["reps"]
                if want_profile and py_spy() is None:
                    doc["errors"].append("--profile: py-spy is not installed")
                    want_profile = False
                prof_path = Path(tmp) / "on.collapsed" if want_profile else None
                log(f"rep {rep}: validation {'on' if on else 'off'}, {cfg['count']:,} values")
                r = phase(broker.bootstrap, reg.url, pid, values, cfg["count"], on, prof_path)
                if r["profile"] is not None:
                    doc["profile_on"] = r["profile"]
                r["rep"] = rep
                r.pop("profile")
                runs.append(r)
                log(f"  {r['msgs_s']:,.0f} msgs/s, broker {r['broker_cpu_us_per_msg']} µs/msg")
                if r["failed"]:
                    doc["errors"].append(
                        f"rep {rep} validation {on}: {r['failed']} failed ({r['first_failure']})"
                    )
    doc["runs"] = runs
    doc["summary"] = _summary(runs)
    ratio, pairs = doc["summary"]["ratio_of_medians"], doc["summary"]["pair_ratios"]
    doc["goals"] = [
        goal("produce msgs/s, validation on / off (ratio of medians)", ratio, GOAL_RATIO, "x", higher=True),
        goal(
            "produce msgs/s, validation on / off (median of the pairs run back to back)",
            median(pairs),
            GOAL_RATIO,
            "x",
            higher=True,
        ),
        goal(
            f"leader append of {APPEND_BATCH}-record batches in process, on / off throughput",
            doc["in_process"]["append_throughput_ratio"],
            GOAL_RATIO,
            "x",
            higher=True,
        ),
    ]
    return doc


if __name__ == "__main__":
    from load.scenarios import main

    raise SystemExit(main("schema-validation"))
