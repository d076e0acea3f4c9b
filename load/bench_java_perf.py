"""Kafka's own load generators as a second client: ``kafka-producer-perf-test`` and
``kafka-consumer-perf-test`` (the Java client) against our broker and Apache Kafka, one node each.

Goals (reported, not asserted): produce and consume throughput >= 1.0x Apache Kafka's, broker
CPU per message <= Kafka's.

How it measures, in full: ``docs/benchmarks.md``, "bench java-perf".
"""

from __future__ import annotations

import re
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from deploy.kafka.tools import perf_tool_cmd
from load.harness.kafka import create_topic, delete_topic
from load.harness.procfs import Interference, PhaseCpu, rest_cores
from load.harness.profiler import Profiler
from load.harness.report import document, goal, log
from load.harness.runner import Processes, rotation
from load.harness.stats import spread
from load.peers import KafkaLauncher, Launcher, OursLauncher, Server

SYSTEMS = ("ours", "kafka")
PHASES = ("produce_acks1", "produce_acksall", "consume")
# the figure of each phase that the ratio and the goal are about, and whether higher is better
HEADLINE = {"produce_acks1": "records_s", "produce_acksall": "records_s", "consume": "nmsg_s"}
PRODUCER_SUMMARY = re.compile(
    r"^(?P<records>\d+) records sent, (?P<records_s>[\d.]+) records/sec \((?P<mb_s>[\d.]+) MB/sec\), "
    r"(?P<avg_ms>[\d.]+) ms avg latency, (?P<max_ms>[\d.]+) ms max latency, (?P<p50_ms>\d+) ms 50th, "
    r"(?P<p95_ms>\d+) ms 95th, (?P<p99_ms>\d+) ms 99th, (?P<p999_ms>\d+) ms 99.9th\.$",
    re.M,
)
# ConsumerPerformance's header names → our keys
CONSUMER_FIELDS = {
    "data.consumed.in.MB": "mb",
    "MB.sec": "mb_s",
    "data.consumed.in.nMsg": "records",
    "nMsg.sec": "nmsg_s",
    "rebalance.time.ms": "rebalance_ms",
    "fetch.time.ms": "fetch_ms",
    "fetch.MB.sec": "fetch_mb_s",
    "fetch.nMsg.sec": "fetch_nmsg_s",
}
BROKER = {"group.initial.rebalance.delay.ms": 0}  # as deploy/kafka/server.properties sets for Kafka
SETTLE_S = 5.0  # a JVM broker is never quite idle: wait at most this long after a phase


def parse_producer(text: str) -> dict[str, float]:
    """The figures of ProducerPerformance's final summary line (the one with percentiles)."""
    found = list(PRODUCER_SUMMARY.finditer(text))
    if not found:
        raise ValueError(f"no summary line in the producer's output:\n{text[-1500:]}")
    return {k: float(v) for k, v in found[-1].groupdict().items()}


def parse_consumer(text: str) -> dict[str, float]:
    """ConsumerPerformance's result: the line after its ``start.time, end.time, ...`` header."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for i, line in enumerate(lines[:-1]):
        if line.startswith("start.time"):
            row = dict(zip(line.split(", "), lines[i + 1].split(", "), strict=False))
            return {ours: float(row[theirs]) for theirs, ours in CONSUMER_FIELDS.items() if theirs in row}
    raise ValueError(f"no result line in the consumer's output:\n{text[-1500:]}")


def tool_args(phase: str, bootstrap: str, topic: str, records: int, size: int) -> tuple[str, list[str]]:
    if phase == "consume":
        args = ["--bootstrap-server", bootstrap, "--topic", topic, "--num-records", str(records)]
        return "kafka-consumer-perf-test", [*args, "--timeout", "60000"]
    acks = "all" if phase == "produce_acksall" else "1"
    args = ["--bootstrap-server", bootstrap, "--topic", topic, "--num-records", str(records)]
    args += ["--record-size", str(size), "--throughput", "-1", "--command-property", f"acks={acks}"]
    return "kafka-producer-perf-test", args


def run_tool(
    phase: str, server: Server, topic: str, records: int, size: int, rest: float | None = None
) -> dict[str, Any]:
    """One tool run against ``server``: its figures, the wall time with the JVM's start, the
    broker's CPU per message (all, and above ``rest`` cores) and the other processes' share."""
    tool, args = tool_args(phase, server.bootstrap, topic, records, size)
    cpu, load = PhaseCpu(server.cpu_seconds, rest or 0.0), Interference([server.pid], children=True)
    t0 = time.perf_counter()
    out = subprocess.run(perf_tool_cmd(tool, *args), capture_output=True, text=True, timeout=600, check=False)
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise RuntimeError(f"{tool} exited {out.returncode}:\n{out.stdout[-1500:]}\n{out.stderr[-1500:]}")
    figures = parse_consumer(out.stdout) if phase == "consume" else parse_producer(out.stdout)
    if figures.get("records", 0) < records:
        raise RuntimeError(f"{tool}: {figures.get('records')} of {records} records:\n{out.stdout[-1500:]}")
    _used, per_msg, _after = cpu.settle(records, timeout=SETTLE_S, window=1.0)
    above = cpu.above_rest(records)
    return figures | {
        "wall_s": round(wall, 2),
        "server_cpu_us_per_msg": round(per_msg, 3) if per_msg is not None else None,
        "server_cpu_us_per_msg_above_rest": round(above, 3) if above is not None else None,
        "server_rest_cores": rest,
        "other_cpu_share": load.share(),
    }


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def summarise(runs: list[dict[str, Any]], systems: list[str]) -> dict[str, Any]:
    """Per system and phase, every figure's median with min, max and n over the repetitions."""
    out: dict[str, Any] = {}
    for s in systems:
        for phase in PHASES:
            mine = [r for r in runs if r["system"] == s and r["phase"] == phase and "error" not in r]
            keys = dict.fromkeys(k for r in mine for k, v in r.items() if isinstance(v, float))
            out.setdefault(s, {})[phase] = {k: spread(r.get(k) for r in mine) for k in keys}
    return out


def ratios(summary: dict[str, Any]) -> dict[str, float | None]:
    """ours/kafka of the medians: throughput (higher is better), latency and CPU (lower is)."""

    def med(s: str, phase: str, key: str) -> float | None:
        sp = summary.get(s, {}).get(phase, {}).get(key)
        return sp["median"] if sp else None

    out: dict[str, float | None] = {}
    for phase, key in HEADLINE.items():
        out[phase] = ratio(med("ours", phase, key), med("kafka", phase, key))
        out[f"{phase}_server_cpu_per_msg"] = ratio(
            med("ours", phase, "server_cpu_us_per_msg_above_rest"),
            med("kafka", phase, "server_cpu_us_per_msg_above_rest"),
        )
    out["consume_fetch"] = ratio(
        med("ours", "consume", "fetch_nmsg_s"), med("kafka", "consume", "fetch_nmsg_s")
    )
    for phase in ("produce_acks1", "produce_acksall"):
        out[f"{phase}_avg_latency"] = ratio(med("ours", phase, "avg_ms"), med("kafka", phase, "avg_ms"))
    return out


def goals(r: dict[str, float | None]) -> list[dict[str, Any]]:
    g = [goal(f"{phase} ours/kafka", r[phase], 1.0, "x", True) for phase in HEADLINE]
    g += [
        goal(f"{phase} broker CPU per message ours/kafka", r[f"{phase}_server_cpu_per_msg"], 1.0, "x", False)
        for phase in HEADLINE
    ]
    return g


class Bench:
    """Both systems started, their runs and errors."""

    def __init__(self, cfg: dict[str, Any], workdir: Path, procs: Processes) -> None:
        self.cfg, self.workdir, self.procs = cfg, workdir, procs
        self.servers: dict[str, Server] = {}
        self.systems: dict[str, Any] = {}
        self.not_run: dict[str, str] = {}
        self.errors: list[str] = []
        self.runs: list[dict[str, Any]] = []
        self.rest: dict[str, float | None] = {}

    def start(self, launchers: list[Launcher]) -> None:
        for launcher in launchers:
            reason = launcher.unavailable()
            if reason is None:
                try:
                    server = self.procs.add(launcher.start(self.workdir / launcher.name))
                except Exception as exc:
                    reason = f"did not start: {type(exc).__name__}: {exc}"
            if reason is not None:
                self.not_run[launcher.name] = reason
                self.errors.append(f"{launcher.name}: {reason}")
                log(f"[red]{launcher.name}: {reason}[/red]")
                continue
            self.servers[launcher.name] = server
            self.systems[launcher.name] = {
                "label": launcher.label,
                "version": launcher.version(),
                "bootstrap": server.bootstrap,
            }
            log(f"{launcher.name}: started at {server.bootstrap} (pid {server.pid})")

    def warm_up(self) -> None:
        """One unmeasured producer run on each system: the broker's JVM (Kafka) compiles its hot
        paths, ours has its connections and caches; the figures are those of warm brokers."""
        for s, server in self.servers.items():
            topic = self.topic(s, "warmup")
            try:
                run_tool("produce_acks1", server, topic, self.cfg["records"], self.cfg["record_size"])
            except Exception as exc:
                self.errors.append(f"{s} warm-up: {type(exc).__name__}: {exc}")
            delete_topic(server.bootstrap, topic)

    def topic(self, system: str, phase: str) -> str:
        name = f"perf-{phase}-{uuid.uuid4().hex[:8]}"
        created: str = create_topic(self.servers[system].bootstrap, name, self.cfg["partitions"], timeout=60)
        return created

    def phase(self, system: str, phase: str, rep: int, topic: str) -> dict[str, Any]:
        row: dict[str, Any] = {"rep": rep, "system": system, "phase": phase}
        try:
            server, rest = self.servers[system], self.rest.get(system)
            row |= run_tool(phase, server, topic, self.cfg["records"], self.cfg["record_size"], rest)
        except Exception as exc:
            row["error"] = f"{type(exc).__name__}: {exc}"
            self.errors.append(f"rep {rep} {system} {phase}: {row['error']}")
        self.runs.append(row)
        log(f"rep {rep} {system} {phase}: {describe(row)}")
        return row

    def repetition(self, rep: int) -> list[str]:
        order: list[str] = rotation([s for s in SYSTEMS if s in self.servers], rep)
        topics = {(s, p): self.topic(s, p) for s in order for p in ("produce_acks1", "produce_acksall")}
        self.rest = {s: rest_cores(self.servers[s].cpu_seconds, 2.0) for s in order}
        for phase in PHASES:
            for s in order:
                self.phase(s, phase, rep, topics[s, "produce_acks1" if phase == "consume" else phase])
        for (s, _p), t in topics.items():  # keeps the disk of later repetitions small
            if (err := delete_topic(self.servers[s].bootstrap, t)) is not None:
                log(f"[yellow]{s}: {err}[/yellow]")
        return order

    def profile(self, phase: str) -> dict[str, Any]:
        """``phase`` once more on ours (not measured) with py-spy on our broker."""
        server = self.servers["ours"]
        assert server.pid is not None
        produced = self.topic("ours", "produce_acks1")
        if phase == "consume":  # something to read
            run_tool("produce_acks1", server, produced, self.cfg["records"], self.cfg["record_size"])
        topic = produced if phase == "consume" else self.topic("ours", phase)
        spy = Profiler(server.pid, self.workdir / f"py-spy-{phase}.txt", None, 100, focus=("framework/",))
        try:
            run = run_tool(phase, server, topic, self.cfg["records"], self.cfg["record_size"])
        finally:
            prof = spy.summary()
        prof.pop("file", None)
        log(f"py-spy, ours {phase}: {prof.get('self', prof)[:5]}")
        return {"run": run, "py_spy": prof}


def describe(row: dict[str, Any]) -> str:
    if "error" in row:
        return f"[red]{row['error'][:300]}[/red]"
    text = (
        f"{row['nmsg_s']:,.0f} msgs/s ({row['mb_s']:.1f} MB/s; fetching {row['fetch_nmsg_s']:,.0f}/s)"
        if row["phase"] == "consume"
        else f"{row['records_s']:,.0f} records/s ({row['mb_s']:.1f} MB/s), avg {row['avg_ms']:.0f} ms, "
        f"p99 {row['p99_ms']:.0f} ms"
    )
    cpu, above = row["server_cpu_us_per_msg"], row["server_cpu_us_per_msg_above_rest"]
    share = row["other_cpu_share"]
    text += f", broker {cpu:.2f} µs/msg ({above:.2f} above rest)" if cpu is not None else ""
    return text + (f", others {share:.0%} of the CPU" if share is not None else "")


def run(args: Any) -> dict[str, Any]:
    cfg = dict(args.sizes) | {"record_size": args.record_size, "partitions": args.partitions}
    cfg["broker_settings"] = BROKER
    doc: dict[str, Any] = document("java_perf", args, cfg)
    cfg["tool_jvm"] = " ".join(perf_tool_cmd("kafka-producer-perf-test", lib=Path("LIB"))[1:-1])
    with tempfile.TemporaryDirectory(prefix="bench-java-perf-") as tmp, Processes() as procs:
        bench = Bench(cfg, Path(tmp), procs)
        bench.start([OursLauncher(overrides=BROKER), KafkaLauncher()])
        bench.warm_up()
        order = [bench.repetition(rep) for rep in range(1, cfg["reps"] + 1)] if bench.servers else []
        summary = summarise(bench.runs, list(bench.servers))
        r = ratios(summary)
        doc |= {
            "systems": bench.systems,
            "not_run": bench.not_run,
            "order": order,
            "runs": bench.runs,
            "summary": summary,
            "ratios": {"ours/kafka": r},
            "goals": goals(r),
            "profile": {},
        }
        if args.profile and "ours" in bench.servers:
            for phase in PHASES:
                if (x := r[phase]) is not None and x < 1.0:
                    try:
                        doc["profile"][phase] = bench.profile(phase)
                    except Exception as exc:
                        doc["profile"][phase] = {"error": f"{type(exc).__name__}: {exc}"}
        doc["errors"] = bench.errors
    return doc


COLUMNS = ">broker µs/msg above rest|>ours/kafka"


if __name__ == "__main__":
    from load.scenarios import main

    raise SystemExit(main("java-perf"))
