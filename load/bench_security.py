"""Security benchmark: produce and consume throughput over PLAINTEXT, SASL_SSL (SCRAM-SHA-256)
and SSL, and the broker's CPU per message on each (goal: SASL_SSL >= 0.7x PLAINTEXT).

How it measures, in full: ``docs/benchmarks.md``, "bench security".
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from load.harness.kafka import EndOffsets, create_topic, produce_blocking, producer, quiet_logger
from load.harness.procfs import Interference, PhaseCpu, probe, rest_cores
from load.harness.report import document, goal, log
from load.harness.runner import Processes, rotation
from load.harness.stats import median, rounded, spread
from testing import BrokerProcess, free_port, sftraffic

PROTOCOLS = ("PLAINTEXT", "SASL_SSL", "SSL")
USER, PASSWORD, MECH = "bench", "bench-Secret-0123456789", "SCRAM-SHA-256"
VALUE = b"v" * 100
GOAL_RATIO = 0.7


class SecureBroker:
    """The broker, its listeners' addresses and each protocol's client settings."""

    def __init__(self, base: Path) -> None:
        import trustme

        ca = trustme.CA()
        self.ca_pem, server_pem = base / "ca.pem", base / "server.pem"
        ca.cert_pem.write_to_path(str(self.ca_pem))
        ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(str(server_pem))
        data = base / "data"
        subprocess.run(
            sftraffic(
                "users", "add", USER, "--password", PASSWORD, "--mechanism", MECH, "--data-dir", str(data)
            ),
            check=True,
            capture_output=True,
            timeout=60,
        )
        self.ports = {p: free_port() for p in PROTOCOLS}
        self.proc = BrokerProcess(
            data,
            port=self.ports["PLAINTEXT"],
            overrides={
                "listeners": ",".join(f"{p}://127.0.0.1:{port}" for p, port in self.ports.items()),
                "sasl.enabled.mechanisms": MECH,
                "ssl.keystore.location": str(server_pem),
                "ssl.truststore.location": str(self.ca_pem),
                "ssl.client.auth": "none",
                "group.initial.rebalance.delay.ms": 0,
            },
        )
        self.rest = 0.0

    def conf(self, protocol: str) -> dict[str, Any]:
        c: dict[str, Any] = {
            "bootstrap.servers": f"127.0.0.1:{self.ports[protocol]}",
            "security.protocol": protocol,
        }
        if protocol in ("SSL", "SASL_SSL"):
            c["ssl.ca.location"] = str(self.ca_pem)
        if protocol.startswith("SASL"):
            c |= {"sasl.mechanism": MECH, "sasl.username": USER, "sasl.password": PASSWORD}
        return c

    def cpu(self) -> float | None:
        seconds: float | None = probe(self.proc.pid)()
        return seconds


def produce(b: SecureBroker, protocol: str, topic: str, count: int) -> dict[str, Any]:
    conf = b.conf(protocol)
    p, failures = producer(conf.pop("bootstrap.servers"), **conf)
    noise, phase = Interference([b.proc.pid]), PhaseCpu(b.cpu, rest=b.rest)
    t0 = time.perf_counter()
    for _ in range(count):
        produce_blocking(p, topic, VALUE)
    undelivered = p.flush(max(60.0, count / 5_000))
    seconds = time.perf_counter() - t0
    phase.client_done()
    _cpu, _us, _after = phase.settle(count)
    stored = EndOffsets(b.proc.bootstrap, [topic], 1).total()
    return {
        "seconds": round(seconds, 3),
        "msgs_s": round(count / seconds),
        "broker_cpu_us_per_msg": rounded(phase.above_rest(count)),
        "others_busy_share": rounded(noise.share()),
        "errors": len(failures) + undelivered + abs(stored - count),
    }


def consume(b: SecureBroker, protocol: str, topic: str, count: int) -> dict[str, Any]:
    from confluent_kafka import Consumer

    c = Consumer(
        {
            **b.conf(protocol),
            "group.id": f"g-{topic}",
            "auto.offset.reset": "earliest",
            "logger": quiet_logger(),
        }
    )
    c.subscribe([topic])
    noise, phase = Interference([b.proc.pid]), PhaseCpu(b.cpu, rest=b.rest)
    got, errors, t0 = 0, 0, time.perf_counter()
    deadline = time.monotonic() + max(120.0, count / 2_000)
    while got < count and time.monotonic() < deadline:
        for m in c.consume(10_000, 1.0):
            if m.error() is None:
                got += 1
            else:
                errors += 1
    seconds = time.perf_counter() - t0
    phase.client_done()
    c.close()
    phase.settle(count)
    return {
        "seconds": round(seconds, 3),
        "msgs_s": round(got / seconds),
        "broker_cpu_us_per_msg": rounded(phase.above_rest(count)),
        "others_busy_share": rounded(noise.share()),
        "errors": errors + (count - got),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    cfg = dict(args.sizes)
    doc: dict[str, Any] = document(
        "security", args, cfg | {"protocols": PROTOCOLS, "value_bytes": len(VALUE), "sasl": MECH}
    )
    doc["authorizer"] = (
        "n/a here: StandardAuthorizer with 1,000 ACLs on vs off (broker CPU per produced message, "
        "goal <= 1.1x) is measured by load/bench_authorizer.py"
    )
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-security-") as tmp, Processes() as procs:
        b = SecureBroker(Path(tmp))
        procs.start(b.proc)
        b.rest = rest_cores(b.cpu) or 0.0
        for rep in range(cfg["reps"]):
            for protocol in rotation(PROTOCOLS, rep + 1):
                topic = f"sec-{protocol.lower()}-{rep}"
                create_topic(b.proc.bootstrap, topic, 1)
                for kind, fn in (("produce", produce), ("consume", consume)):
                    log(f"rep {rep + 1}/{cfg['reps']} {protocol} {kind}: {cfg['count']} messages")
                    r = fn(b, protocol, topic, cfg["count"]) | {
                        "rep": rep,
                        "protocol": protocol,
                        "kind": kind,
                    }
                    runs.append(r)
                    if r["errors"]:
                        doc["errors"].append(f"{protocol} {kind} rep {rep}: {r['errors']} errors")
    doc["runs"] = runs
    doc["summary"], doc["goals"] = {}, []
    for kind in ("produce", "consume"):
        row: dict[str, Any] = {}
        for protocol in PROTOCOLS:
            mine = [r for r in runs if r["protocol"] == protocol and r["kind"] == kind]
            row[protocol] = {
                "msgs_s": spread(r["msgs_s"] for r in mine),
                "broker_cpu_us_per_msg": spread(r["broker_cpu_us_per_msg"] for r in mine),
            }
        base = median(r["msgs_s"] for r in runs if r["protocol"] == "PLAINTEXT" and r["kind"] == kind)
        for protocol in PROTOCOLS[1:]:
            m = median(r["msgs_s"] for r in runs if r["protocol"] == protocol and r["kind"] == kind)
            row[f"{protocol}/PLAINTEXT"] = rounded(m / base if m is not None and base else None)
        doc["summary"][kind] = row
        doc["goals"].append(
            goal(f"{kind} SASL_SSL/PLAINTEXT", row["SASL_SSL/PLAINTEXT"], GOAL_RATIO, "x", True)
        )
    return doc


if __name__ == "__main__":
    from load.scenarios import main

    raise SystemExit(main("security"))
