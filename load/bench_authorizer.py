"""Authorizer benchmark: broker CPU per produced message with StandardAuthorizer and 1,000 ACLs
on, against the same broker with no authorizer (goal: <= 1.1x).

How it measures, in full: ``docs/benchmarks.md``, "bench authorizer".
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from framework.security.authorizer import (
    AclBinding,
    AclOperation,
    PatternType,
    Permission,
    ResourceType,
    StandardAuthorizer,
)
from framework.security.principal import KafkaPrincipal
from framework.security.stream_permissions import bindings
from load.harness.kafka import EndOffsets, produce_blocking, producer, quiet_logger
from load.harness.procfs import Interference, PhaseCpu, probe, rest_cores
from load.harness.report import document, goal, log
from load.harness.runner import Processes, rotation
from load.harness.stats import median, rounded, spread
from testing import BrokerProcess, free_port, sftraffic

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
MECH = "SCRAM-SHA-256"
USERS = {"admin": "admin-secret-0123456789", "bench": "bench-secret-0123456789"}
TOPIC, PARTITIONS, VALUE = "bench.t", 3, b"x" * 100
ACLS = 1000
GOAL_RATIO = 1.1
SYSTEMS = ("off", "on")
SHAPES: dict[str, dict[str, Any]] = {
    "batched": {"linger.ms": 5, "batch.size": 1_048_576, "batch.num.messages": 100_000},
    "small": {"linger.ms": 0, "batch.num.messages": 10},
}
PRODUCER = {
    "acks": 1,
    "compression.type": "none",
    "enable.idempotence": False,
    "queue.buffering.max.messages": 2_000_000,
    "queue.buffering.max.kbytes": 2_097_151,
}


def acl_set(n: int = ACLS) -> list[AclBinding]:
    """``bench``'s produce permission on ``bench.`` and n - 2 others (users u0..u49)."""
    out = bindings("bench", "produce", "User:bench")
    T, G = ResourceType.TOPIC, ResourceType.GROUP
    ops = [AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.ALTER_CONFIGS]
    i = 0
    while len(out) < n:
        who, op = f"User:u{i % 50}", ops[i % len(ops)]
        kind = i % 10
        if kind < 5:
            b = AclBinding(T, f"other-{i}", PatternType.LITERAL, who, "*", op, Permission.ALLOW)
        elif kind < 7:
            b = AclBinding(T, f"s{i}.", PatternType.PREFIXED, who, "*", op, Permission.ALLOW)
        elif kind == 7:  # names next to the benchmark's topic: its prefixes get ACLs to look at
            b = AclBinding(T, f"bench.t{i}", PatternType.LITERAL, who, "*", op, Permission.ALLOW)
        elif kind == 8:
            b = AclBinding(G, f"g{i}", PatternType.LITERAL, who, "*", AclOperation.READ, Permission.ALLOW)
        else:
            b = AclBinding(T, f"secret-{i}", PatternType.PREFIXED, who, "10.0.0.9", op, Permission.DENY)
        out.append(b)
        i += 1
    out[-1] = AclBinding(T, "*", PatternType.LITERAL, "User:u7", "*", AclOperation.DESCRIBE, Permission.ALLOW)
    return out


def sasl_conf(bootstrap: str, user: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": MECH,
        "sasl.username": user,
        "sasl.password": USERS[user],
    }


class Broker:
    """One broker of the comparison: its process and the SASL address."""

    def __init__(self, name: str, base: Path) -> None:
        self.name = name
        data = base / name
        for user, pw in USERS.items():
            subprocess.run(
                sftraffic("users", "add", user, "--password", pw, "--data-dir", str(data)),
                check=True,
                capture_output=True,
                timeout=60,
            )
        plain, sasl = free_port(), free_port()
        overrides: dict[str, object] = {
            "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
            "sasl.enabled.mechanisms": MECH,
        }
        if name == "on":
            # ANONYMOUS (the PLAINTEXT listener) only counts the stored records
            overrides |= {"authorizer.class.name": AUTHORIZER, "super.users": "User:admin;User:ANONYMOUS"}
        self.proc = BrokerProcess(data, port=plain, overrides=overrides)
        self.bootstrap = f"127.0.0.1:{sasl}"
        self.rest: float = 0.0

    def cpu(self) -> float | None:
        return probe(self.proc.pid)()

    def prepare(self, acls: list[AclBinding]) -> None:
        from confluent_kafka.admin import (  # type: ignore[attr-defined]
            AclBinding,
            AclOperation,
            AclPermissionType,
            AdminClient,
            NewTopic,
            ResourcePatternType,
            ResourceType,
        )

        a = AdminClient({**sasl_conf(self.bootstrap, "admin")}, logger=quiet_logger())
        a.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
        if self.name == "on":
            kacls = [
                AclBinding(
                    ResourceType[b.resource_type.name],
                    b.name,
                    ResourcePatternType[b.pattern_type.name],
                    b.principal,
                    b.host,
                    AclOperation[b.operation.name],
                    AclPermissionType[b.permission.name],
                )
                for b in acls
            ]
            for start in range(0, len(kacls), 200):
                for f in a.create_acls(kacls[start : start + 200]).values():
                    f.result(30)
        self.rest = rest_cores(self.cpu) or 0.0


def measure(b: Broker, shape: str, count: int) -> dict[str, Any]:
    p, failures = producer(b.bootstrap, **sasl_conf(b.bootstrap, "bench"), **PRODUCER, **SHAPES[shape])
    p.produce(TOPIC, b"warm-up")
    if p.flush(30) != 0 or failures:
        raise RuntimeError(f"{b.name}: warm-up not delivered: {failures[:3]}")
    before = EndOffsets(b.proc.bootstrap, [TOPIC], PARTITIONS).total()
    noise = Interference([b.proc.pid])
    phase = PhaseCpu(b.cpu, rest=b.rest)
    t0 = time.perf_counter()
    for _ in range(count):
        produce_blocking(p, TOPIC, VALUE)
    undelivered = p.flush(max(60.0, count / 5_000))
    seconds = time.perf_counter() - t0
    phase.client_done()
    cpu_s, us, _after = phase.settle(count)
    stored = EndOffsets(b.proc.bootstrap, [TOPIC], PARTITIONS).total() - before
    return {
        "system": b.name,
        "shape": shape,
        "messages": count,
        "seconds": round(seconds, 3),
        "msgs_s": round(count / seconds),
        "broker_cpu_s": None if cpu_s is None else round(cpu_s, 3),
        "broker_cpu_us_per_msg": None if us is None else round(us, 3),
        "broker_cpu_us_per_msg_above_rest": rounded(phase.above_rest(count)),
        "others_busy_share": rounded(noise.share()),
        "errors": len(failures) + undelivered + abs(stored - count),
    }


def in_process(acls: list[AclBinding], calls: int) -> dict[str, Any]:
    a = StandardAuthorizer(acls)
    bench = KafkaPrincipal("User", "bench")
    args = (bench, "127.0.0.1", AclOperation.WRITE, ResourceType.TOPIC, TOPIC)
    assert a.authorize(*args)
    t0 = time.perf_counter()
    for _ in range(calls):
        a.authorize(*args)
    uncached = (time.perf_counter() - t0) / calls * 1e6
    s = a.session(bench, "127.0.0.1")
    allowed = s.allowed
    w, tp = AclOperation.WRITE, ResourceType.TOPIC
    t0 = time.perf_counter()
    for _ in range(calls):
        allowed(w, tp, TOPIC)
    cached = (time.perf_counter() - t0) / calls * 1e6
    return {
        "acls": len(acls),
        "calls": calls,
        "authorize_uncached_us": round(uncached, 3),
        "decision_cache_hit_us": round(cached, 4),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    cfg = dict(args.sizes)
    doc = document("authorizer", args, cfg | {"acls": ACLS, "shapes": SHAPES, "producer": PRODUCER})
    acls = acl_set()
    doc["in_process"] = in_process(acls, 200_000 if cfg["reps"] > 1 else 20_000)
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-authz-") as tmp, Processes() as procs:
        brokers = {name: Broker(name, Path(tmp)) for name in SYSTEMS}
        for b in brokers.values():
            procs.start(b.proc)
            b.prepare(acls)
        for rep in range(cfg["reps"]):
            for shape in SHAPES:
                n = cfg["count"] if shape == "batched" else cfg["small_count"]
                for name in rotation(SYSTEMS, rep):
                    log(f"rep {rep + 1}/{cfg['reps']} {shape} {name}: {n} messages")
                    r = measure(brokers[name], shape, n) | {"rep": rep}
                    runs.append(r)
                    if r["errors"]:
                        doc["errors"].append(f"{name} {shape} rep {rep}: {r['errors']} errors")
    doc["runs"] = runs
    doc["summary"] = {}
    doc["goals"] = []
    for shape in SHAPES:
        row: dict[str, Any] = {}
        for name in SYSTEMS:
            mine = [r for r in runs if r["system"] == name and r["shape"] == shape]
            row[name] = {
                "msgs_s": spread(r["msgs_s"] for r in mine),
                "broker_cpu_us_per_msg": spread(r["broker_cpu_us_per_msg_above_rest"] for r in mine),
            }
        on = median(
            r["broker_cpu_us_per_msg_above_rest"] for r in runs if r["system"] == "on" and r["shape"] == shape
        )
        off = median(
            r["broker_cpu_us_per_msg_above_rest"]
            for r in runs
            if r["system"] == "off" and r["shape"] == shape
        )
        ratio = on / off if on is not None and off else None
        row["cpu_ratio_on_off"] = rounded(ratio)
        doc["summary"][shape] = row
        doc["goals"].append(
            goal(f"broker CPU/msg on/off ({shape})", rounded(ratio), GOAL_RATIO, "x", higher=False)
        )
    return doc


if __name__ == "__main__":
    from load.scenarios import main

    raise SystemExit(main("authorizer"))
