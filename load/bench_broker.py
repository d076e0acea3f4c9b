"""Broker benchmark: our broker and the Kafka-API peers that install here, side by side, in one
run, with identical client settings (confluent-kafka on 127.0.0.1, 100-byte values).

How it measures, in full: ``docs/benchmarks.md``, "bench broker".
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from confluent_kafka import Consumer, Producer, TopicPartition
from rich.console import Console
from rich.markup import escape

from load.harness import procfs
from load.harness.kafka import create_topic, delete_topic, produce_blocking, producer, quiet_logger
from load.harness.procfs import BUSY_SHARE, IDLE_WINDOW_S, SETTLE_S, CpuProbe, Interference, PhaseCpu
from load.harness.report import log, machine_info, print_footer, print_goals, table, verdict
from load.harness.runner import rotation
from load.harness.stats import median, percentile, spread
from load.peers import PEERS, ExternalLauncher, Launcher, OursLauncher, Server, parse_peers

VALUE_SIZE = 100
MB = 1_000_000

# Client settings shared by every system (the reference harness's, so figures are comparable
# with earlier peer measurements).
PRODUCER_SETTINGS: dict[str, Any] = {
    "linger.ms": 5,
    "batch.size": 1_048_576,
    "batch.num.messages": 100_000,
    "queue.buffering.max.messages": 2_000_000,
    "queue.buffering.max.kbytes": 2_097_151,
    "compression.type": "none",
    "enable.idempotence": False,
}
# The latency phase overrides linger.ms (default 1). With the throughput setting (5) every
# message waits 0-5 ms in the client before it is sent, so p99 is >= 5 ms for any broker. With 0,
# librdkafka sends one request per message at 10k msgs/s and, with up to 1M requests in flight,
# never batches the backlog: on 2 shared cores Tansu and ours both saturate on per-request cost and
# the queue grows for the whole phase (p50 ~1 s), a request-rate test rather than a latency one.
LATENCY_LINGER_MS = 1
# The consume phase: librdkafka's defaults for everything that shapes fetching (a new user's
# consumer). Only offset commits are off: nothing is committed and no group is joined.
CONSUMER_SETTINGS: dict[str, Any] = {
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
}
# The consume_short_backoff phase: the defaults but the 1 s stall (see the module docstring).
CONSUMER_SHORT_BACKOFF_SETTINGS: dict[str, Any] = {**CONSUMER_SETTINGS, "fetch.queue.backoff.ms": 10}
# The consume_tuned phase: the reference harness's settings (kept, so that its figures stay
# comparable with earlier peer measurements).
CONSUMER_TUNED_SETTINGS: dict[str, Any] = {
    "fetch.max.bytes": 52_428_800,
    "max.partition.fetch.bytes": 10_485_760,
    "queued.min.messages": 1_000_000,
    "fetch.wait.max.ms": 100,
    # noida-db ignores fetch.max.bytes; librdkafka would drop its oversized responses otherwise.
    "receive.message.max.bytes": 1_000_000_000,
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    # Kept at the reference settings for comparability, although librdkafka stops fetching for
    # fetch.queue.backoff.ms (default 1000 ms) once its queue passes queued.max.messages.kbytes
    # (64 MB): a broker that fills every fetch up to max.partition.fetch.bytes (ours: 10 MB) trips
    # it and the consumer idles for up to a second (fetch.queue.backoff.ms=10 removes that stall).
}


# -- results --------------------------------------------------------------------------------
@dataclass
class Throughput:
    phase: str
    messages: int
    seconds: float
    msgs_s: float
    mb_s: float
    errors: int = 0
    broker_cpu_s: float | None = None
    broker_cpu_us_per_msg: float | None = None
    # Part of broker_cpu_s spent after the phase ended, until the broker went idle.
    broker_cpu_after_s: float | None = None
    # CPU of this whole process (Python thread and librdkafka's threads) over the phase: near
    # 1.0 s per second means the client, not the broker, set the pace.
    client_cpu_s: float | None = None
    # consume only: assign() to the first batch, and the rate after it. The headline rate counts
    # from assign(): a broker that ignores fetch.max.bytes (noida-db) sends most of the topic in
    # its first response, which a rate "after the first batch" would leave out.
    first_batch_s: float | None = None
    after_first_batch_msgs_s: float | None = None
    detail: str = ""


def throughput(
    phase: str, messages: int, seconds: float, errors: int, cpu: PhaseCpu, cfg: Any, **extra: Any
) -> Throughput:
    """A throughput result: ``messages`` minus ``errors`` over ``seconds``, with the server's CPU
    until idle (call after the client's work, i.e. after ``cpu.client_done()``). ``cfg``: a
    :class:`BenchConfig` or any config with ``value_size`` and ``idle_window_s``."""
    cpu_s, per_msg, after = cpu.settle(messages, SETTLE_S, cfg.idle_window_s)
    rate = max(0, messages - errors) / seconds if seconds > 0 else 0.0
    mb_s = rate * cfg.value_size / MB
    return Throughput(
        phase, messages, seconds, rate, mb_s, errors, cpu_s, per_msg, after, cpu.client_s, **extra
    )


@dataclass
class Latency:
    acks: int
    target_rate: int
    achieved_rate: float
    messages: int
    samples: int
    errors: int
    p50_ms: float | None
    p90_ms: float | None
    p99_ms: float | None
    p999_ms: float | None
    max_ms: float | None
    broker_cpu_us_per_msg: float | None = None
    broker_cpu_after_s: float | None = None

    @classmethod
    def of(
        cls, ms: list[float], n: int, sent_s: float, errors: int, cpu: PhaseCpu, cfg: Any, acks: int = 1
    ) -> Latency:
        """From the latencies ``ms`` of ``n`` messages sent at ``cfg.latency_rate`` over ``sent_s``."""
        _, per_msg, after = cpu.settle(n, SETTLE_S, cfg.idle_window_s)
        p50, p90, p99, p999 = (percentile(ms, q) for q in (50, 90, 99, 99.9))
        rate = n / sent_s if sent_s > 0 else 0.0
        head = (acks, cfg.latency_rate, rate, n, len(ms), errors)
        return cls(*head, p50, p90, p99, p999, max(ms, default=None), per_msg, after)


@dataclass
class PartitionsRss:
    partitions: int
    messages: int
    create_s: float
    produce_s: float
    errors: int
    rss_idle_mb: float | None
    rss_mb: float | None
    threads: int | None = None


@dataclass
class SystemReport:
    name: str
    label: str
    available: bool
    reason: str = ""
    persists: bool | None = None
    version: str | None = None
    figures: dict[str, float | None] = field(default_factory=dict)
    spread: dict[str, dict[str, Any] | None] = field(default_factory=dict)  # repetitions' figures
    reps: list[dict[str, Any]] = field(default_factory=list)
    latency: list[dict[str, Any]] = field(default_factory=list)
    partitions_rss: dict[str, Any] | None = None
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    reps_used: list[int] = field(default_factory=list)  # repetitions the medians are taken over
    stop_after_partitions_s: float | None = None  # clean shutdown with the 1,000 partitions


def _warm_up(p: Producer, topic: str, partition: int) -> None:
    """One message, flushed: connection, ApiVersions and Metadata happen outside the timing."""
    p.produce(topic, b"warm-up", partition=partition)
    if p.flush(30) != 0:
        raise TimeoutError("warm-up message not delivered in 30 s")


# -- measurements (each takes a bootstrap string) ------------------------------------------------
def measure_produce(
    bootstrap: str,
    topic: str,
    cfg: BenchConfig,
    cpu: CpuProbe | None = None,
    acks: int = 1,
    partition: int = 0,
) -> Throughput:
    """Send ``cfg.count`` values as fast as the client can; time from the first produce() to the
    end of flush(). Writes ``cfg.count`` + 1 messages (one warm-up)."""
    p, failures = producer(bootstrap, acks=acks, **PRODUCER_SETTINGS)
    _warm_up(p, topic, partition)
    value = os.urandom(cfg.value_size)
    produce, count = p.produce, cfg.count
    phase = PhaseCpu(cpu)
    t0 = time.perf_counter()
    for _ in range(count):
        try:
            produce(topic, value, partition=partition)
        except BufferError:
            produce_blocking(p, topic, value, partition=partition)
    undelivered = p.flush(max(60.0, count / 10_000))
    seconds = time.perf_counter() - t0
    phase.client_done()
    detail = failures[0] if failures else (f"{undelivered} undelivered after flush" if undelivered else "")
    name = f"produce_acks{'all' if acks == -1 else acks}"
    return throughput(name, count, seconds, len(failures) + undelivered, phase, cfg, detail=detail)


def measure_consume(
    bootstrap: str,
    topic: str,
    cfg: BenchConfig,
    cpu: CpuProbe | None = None,
    partition: int = 0,
    phase_name: str = "consume",
) -> Throughput:
    """Read ``cfg.count`` messages from offset 0 with assign(); the rate runs from assign() to the
    last message (bootstrap connection and metadata are done before, outside the timing).
    Client settings: ``CONSUMER_PHASES[phase_name]`` (``consume``: the client's defaults)."""
    # librdkafka insists on a group.id; nothing is committed and no group is joined.
    conf = {"bootstrap.servers": bootstrap, "group.id": f"sftraffic-bench-{topic}", "logger": quiet_logger()}
    c = Consumer({**conf, **CONSUMER_PHASES[phase_name]})
    count, got, errors, first_batch, last_offset = cfg.count, 0, 0, 0, -1
    detail = ""
    t_first: float | None = None
    try:
        c.list_topics(topic, timeout=10)  # warm-up: connect and learn the leader
        phase = PhaseCpu(cpu)
        t_assign = time.perf_counter()
        c.assign([TopicPartition(topic, partition, 0)])
        progress = time.monotonic()
        while got < count:
            # Ask for exactly what is left: consume() waits for a full batch or the timeout.
            batch = c.consume(min(10_000, count - got), 1.0)
            if not batch:
                if time.monotonic() - progress > 30:
                    detail = f"stalled at {got}/{count} messages for 30 s"
                    break
                continue
            progress = time.monotonic()
            if t_first is None:
                t_first, first_batch = time.perf_counter(), len(batch)
            # Checking every message would cost the client ~10% at 1M msgs/s; a batch whose last
            # message is fine is scanned no further (offsets are checked for gaps at the end).
            last = batch[-1]
            if last.error() is None:
                got += len(batch)
                last_offset = last.offset() or 0
                continue
            for m in batch:
                if m.error() is None:
                    got += 1
                    last_offset = m.offset() or 0
                else:
                    errors += 1
                    detail = detail or str(m.error())
        t_end = time.perf_counter()
        phase.client_done()
    finally:
        c.close()
    if got and last_offset != got - 1:
        errors += 1
        detail = detail or f"offsets not dense: {got} messages, last offset {last_offset}"
    after_first = None
    if t_first is not None and got > first_batch and t_end > t_first:
        after_first = (got - first_batch) / (t_end - t_first)
    first_s = t_first - t_assign if t_first is not None else None
    extra = {"first_batch_s": first_s, "after_first_batch_msgs_s": after_first, "detail": detail}
    res = throughput(phase_name, got, t_end - t_assign, 0, phase, cfg, **extra)
    res.errors = errors + (count - got)  # the rate counts every message read
    return res


def measure_latency(
    bootstrap: str, topic: str, cfg: BenchConfig, cpu: CpuProbe | None = None, acks: int = 1
) -> Latency:
    """Produce at a fixed rate (an absolute schedule, so a late send is followed by an early one
    rather than lowering the rate) and take librdkafka's per-message latency."""
    samples: list[float] = []
    failures: list[str] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            failures.append(str(err))
        elif (lat := msg.latency()) is not None:
            samples.append(lat * 1000)

    conf = {
        "bootstrap.servers": bootstrap,
        "logger": quiet_logger(),
        "on_delivery": on_delivery,
        "acks": acks,
    }
    p = Producer(conf | PRODUCER_SETTINGS | {"linger.ms": cfg.latency_linger_ms})
    _warm_up(p, topic, 0)
    samples.clear()
    value = os.urandom(cfg.value_size)
    n = int(cfg.latency_rate * cfg.latency_seconds)
    interval = 1.0 / cfg.latency_rate
    produce, poll, sleep, clock = p.produce, p.poll, time.sleep, time.perf_counter
    phase = PhaseCpu(cpu)
    t0 = clock()
    for i in range(n):
        delay = t0 + i * interval - clock()
        if delay > 0:
            sleep(delay)
        produce(topic, value, partition=0)
        poll(0)
    sent_s = clock() - t0
    undelivered = p.flush(60)
    return Latency.of(samples, n, sent_s, len(failures) + undelivered, phase, cfg, acks)


def measure_partitions_rss(bootstrap: str, topic: str, cfg: BenchConfig, pid: int | None) -> PartitionsRss:
    """RSS of ``pid`` after creating a ``cfg.partitions``-partition topic and producing
    ``cfg.per_partition`` values to each partition (meant for a fresh broker: idle RSS is read first)."""

    def mb() -> float | None:
        return procfs.rss_bytes(pid) / 2**20 if pid is not None else None

    rss_idle, partitions = mb(), cfg.partitions
    t0 = time.perf_counter()
    create_topic(bootstrap, topic, partitions, timeout=300)
    create_s = time.perf_counter() - t0
    p, failures = producer(bootstrap, acks=1, **PRODUCER_SETTINGS)
    value = os.urandom(VALUE_SIZE)
    t1 = time.perf_counter()
    for part in range(partitions):
        for _ in range(cfg.per_partition):
            produce_blocking(p, topic, value, partition=part)
    errors = len(failures) + p.flush(120)
    produce_s = time.perf_counter() - t1
    time.sleep(1.0)  # let lazily allocated buffers and background tasks settle
    threads = procfs.threads(pid) if pid is not None else None
    messages = partitions * cfg.per_partition
    return PartitionsRss(partitions, messages, create_s, produce_s, errors, rss_idle, mb(), threads)


# -- orchestration ------------------------------------------------------------------------------
@dataclass
class BenchConfig:
    count: int = 1_000_000
    reps: int = 3
    latency_rate: int = 10_000
    latency_seconds: float = 10.0
    latency_linger_ms: float = LATENCY_LINGER_MS
    # A latency phase disturbed by other processes is run again, at most this many times in all:
    # one busy second is enough to move a p99 by an order of magnitude.
    latency_attempts: int = 3
    idle_window_s: float = IDLE_WINDOW_S  # see load.harness.procfs.SETTLE_S
    partitions: int = 1000
    per_partition: int = 10
    value_size: int = VALUE_SIZE
    quick: bool = False
    # The fresh-instance RSS / many-partitions phase (sftraffic bench --quick skips it).
    rss_phase: bool = True

    @classmethod
    def of(cls, quick: bool, count: int | None = None, reps: int | None = None, **kw: Any) -> BenchConfig:
        """The full run's settings or --quick's (under a minute), ``count`` and ``reps`` when given."""
        small = {
            "count": 50_000,
            "reps": 1,
            "latency_seconds": 2.0,
            "latency_attempts": 1,
            "idle_window_s": 0.5,
        }
        given = {k: v for k, v in (("count", count), ("reps", reps)) if v}
        return cls(**((small | {"per_partition": 1}) if quick else {}) | given | kw, quick=quick)


# Figure key -> (label, unit, higher_is_better; None: context, not a score). Table row order.
FIGURES: dict[str, tuple[str, str, bool | None]] = {
    "produce_acks1_msgs_s": ("produce acks=1", "msgs/s", True),
    "produce_acks1_mb_s": ("produce acks=1", "MB/s", True),
    "produce_acksall_msgs_s": ("produce acks=all", "msgs/s", True),
    "produce_acksall_mb_s": ("produce acks=all", "MB/s", True),
    "consume_msgs_s": ("consume", "msgs/s", True),
    "consume_mb_s": ("consume", "MB/s", True),
    "consume_short_backoff_msgs_s": ("consume, backoff 10 ms", "msgs/s", True),
    "consume_tuned_msgs_s": ("consume, tuned", "msgs/s", True),
    "p50_ms_10k": ("latency p50 @10k/s acks=1", "ms", False),
    "p99_ms_10k": ("latency p99 @10k/s acks=1", "ms", False),
    "p50_ms_10k_acksall": ("latency p50 @10k/s acks=all", "ms", False),
    "p99_ms_10k_acksall": ("latency p99 @10k/s acks=all", "ms", False),
    "broker_cpu_us_per_msg_produce": ("broker CPU produce acks=1", "µs/msg", False),
    "broker_cpu_us_per_msg_produce_acksall": ("broker CPU produce acks=all", "µs/msg", False),
    "broker_cpu_us_per_msg_consume": ("broker CPU consume", "µs/msg", False),
    "broker_cpu_us_per_msg_consume_tuned": ("broker CPU consume, tuned", "µs/msg", False),
    "broker_cpu_us_per_msg_10k": ("broker CPU @10k/s acks=1", "µs/msg", False),
    "client_cores_produce": ("client CPU during produce acks=1", "cores", None),
    "broker_cores_produce": ("broker CPU during produce acks=1", "cores", None),
    "rss_mb_idle": ("RSS fresh broker", "MB", False),
    "rss_mb_1000_partitions": ("RSS 1,000 partitions", "MB", False),
    "create_1000_partitions_s": ("create 1,000-partition topic", "s", False),
    "stop_1000_partitions_s": ("clean stop with 1,000 partitions", "s", False),
}
# consume phase -> client settings; each reads produce_acks1's topic
CONSUMER_PHASES: dict[str, dict[str, Any]] = {
    "consume": CONSUMER_SETTINGS,
    "consume_short_backoff": CONSUMER_SHORT_BACKOFF_SETTINGS,
    "consume_tuned": CONSUMER_TUNED_SETTINGS,
}
PHASES = ("produce_acks1", *CONSUMER_PHASES, "produce_acksall")
T = TypeVar("T")


class Session:
    """One started server of one system: runs phases, records failures instead of raising."""

    def __init__(self, report: SystemReport, server: Server) -> None:
        self.report, self.server, self.bs = report, server, server.bootstrap
        self.cpu: CpuProbe = server.cpu_seconds
        self.row: dict[str, Any] = {}  # the repetition in progress
        self.topics: dict[str, str | None] = {}

    def attempt(self, what: str, fn: Callable[[], T]) -> T | None:
        try:
            return fn()
        except Exception as exc:
            msg = f"{what}: {type(exc).__name__}: {exc}"
            if not self.server.alive():
                msg += f"\n  server exited; last log lines:\n{self.server.log_tail()}"
            self.report.errors.append(msg)
            self.log(f"[red]{escape(msg)}[/red]")
            return None

    def measured(self, what: str, fn: Callable[[], Any]) -> dict[str, Any] | None:
        """``fn()`` as a dict with the share of the CPU other processes used meanwhile."""
        load = Interference([self.server.pid])
        res = self.attempt(what, fn)
        return {**asdict(res), "other_cpu_share": load.share()} if res is not None else None

    def topic(self, kind: str) -> str | None:
        name = f"bench-{kind}-{uuid.uuid4().hex[:8]}"
        return self.attempt(f"create {name}", lambda: create_topic(self.bs, name))

    def log(self, text: str) -> None:
        log(f"{self.report.name}: {text}")

    # -- one repetition, in steps so that run_systems can interleave the systems phase by phase --
    def begin_rep(self, rep: int) -> None:
        self.row = {"rep": rep}
        self.topics = {"acks1": self.topic("acks1"), "acksall": self.topic("acksall")}

    def rep_phase(self, phase: str, cfg: BenchConfig) -> None:
        """``phase``: one of :data:`PHASES` (the consume phases read produce_acks1's topic)."""
        topic = self.topics["acksall" if phase == "produce_acksall" else "acks1"]
        if topic is None or not self.server.alive():
            self.row[phase] = None
            return
        acks = -1 if phase == "produce_acksall" else 1
        if phase in CONSUMER_PHASES:
            measure: Callable[..., Throughput] = functools.partial(measure_consume, phase_name=phase)
        else:
            measure = functools.partial(measure_produce, acks=acks)
        self.row[phase] = self.measured(
            f"rep {self.row['rep']} {phase}", functools.partial(measure, self.bs, topic, cfg, self.cpu)
        )

    def end_rep(self, cfg: BenchConfig) -> None:
        # Dropping the topics keeps the disk (ours, noida) and memory (Tansu) of later phases small.
        notes = [e for e in (delete_topic(self.bs, t) for t in self.topics.values() if t) if e]
        self.finish_rep(self.row | ({"notes": notes} if notes else {}), cfg.reps)

    def finish_rep(self, row: dict[str, Any], reps: int) -> None:
        phases = [row[p] for p in PHASES if row.get(p)]
        shares = [x["other_cpu_share"] for x in phases if x["other_cpu_share"] is not None]
        row["other_cpu_share"] = max(shares) if shares else None
        self.report.reps.append(row)
        self.log(
            f"rep {row['rep']}/{reps}: " + ", ".join(map(_describe, phases)) + _load(row["other_cpu_share"])
        )

    def latency(self, what: str, fn: Callable[[], Latency]) -> dict[str, Any] | None:
        lat = self.measured(what, fn)
        if lat is not None:
            ms = [
                f"{k} " + ("—" if lat[f"{k}_ms"] is None else f"{lat[f'{k}_ms']:.2f} ms")
                for k in ("p50", "p99", "max")
            ]
            text = f"{what} at {lat['achieved_rate']:,.0f} msgs/s: " + ", ".join(ms)
            text += f" [red]{lat['errors']} errors[/red]" if lat["errors"] else ""
            self.log(text + _load(lat["other_cpu_share"]))
        return lat

    def quietest_latency(self, acks: int, cfg: BenchConfig) -> dict[str, Any] | None:
        best: dict[str, Any] | None = None
        for attempt in range(1, cfg.latency_attempts + 1):
            t = self.topic(f"latency{'all' if acks == -1 else acks}") if self.server.alive() else None
            if t is None:
                break
            measure = functools.partial(measure_latency, self.bs, t, cfg, self.cpu, acks)
            lat = self.latency(f"latency acks={acks}", measure)
            delete_topic(self.bs, t)
            if lat is None:
                continue
            lat["attempt"] = attempt
            share = lat["other_cpu_share"]
            if best is None or (share is not None and share < (best["other_cpu_share"] or 0.0)):
                best = lat
            if _quiet(lat):
                break
        return best


def _describe(x: dict[str, Any]) -> str:
    text = f"{x['phase'].replace('_', ' ')} {x['msgs_s']:,.0f} msgs/s"
    if x["broker_cpu_us_per_msg"] is not None:
        text += f" ({x['broker_cpu_us_per_msg']:.2f} µs/msg)"
    if x["errors"]:
        text += f" [red]{x['errors']} errors: {escape(x['detail'])}[/red]"
    return text


def _load(share: float | None) -> str:
    if share is None or share <= BUSY_SHARE:
        return ""
    return f" [yellow](other processes used {share:.0%} of the CPU)[/yellow]"


def _quiet(x: dict[str, Any]) -> bool:
    share = x.get("other_cpu_share")
    return share is None or share <= BUSY_SHARE


def start_sessions(
    launchers: list[Launcher], workdir: Path, running: contextlib.ExitStack
) -> tuple[dict[str, SystemReport], list[Session]]:
    """Start every available system (each stopped when ``running`` closes); a system that is not
    available or does not start is a report with the reason, and the others still run."""
    reports: dict[str, SystemReport] = {}
    sessions: list[Session] = []
    for launcher in launchers:
        reason = launcher.unavailable()
        report = reports[launcher.name] = SystemReport(
            launcher.name, launcher.label, reason is None, reason or ""
        )
        report.persists = launcher.persists
        if reason is not None:
            log(f"[yellow]{launcher.name}: not available ({escape(reason)})[/yellow]")
            continue
        report.version = launcher.version()
        try:
            server = launcher.start(workdir / launcher.name)
        except Exception as exc:
            report.errors.append(f"start: {type(exc).__name__}: {exc}")
            log(f"[red]{launcher.name}: could not start: {escape(str(exc))}[/red]")
            continue
        running.callback(server.stop)
        sessions.append(Session(report, server))
        log(f"{launcher.name}: started at {server.bootstrap} (pid {server.pid})")
    return reports, sessions


def _rss_phase(launcher: Launcher, cfg: BenchConfig, workdir: Path, report: SystemReport) -> None:
    # A fresh instance: after the throughput phases a memory-only broker (Tansu) holds millions
    # of records, which is not what this figure is about.
    server = launcher.start(workdir)
    s = Session(report, server)
    try:
        time.sleep(1.0)  # start-up allocations settle before the idle reading
        topic = f"bench-p{cfg.partitions}-{uuid.uuid4().hex[:8]}"
        measure = functools.partial(measure_partitions_rss, server.bootstrap, topic, cfg, server.pid)
        res = s.attempt(f"{cfg.partitions} partitions", measure)
        if res is not None:
            report.partitions_rss = asdict(res)
            rss = f"{res.rss_mb:.0f} MB" if res.rss_mb is not None else "n/a"
            errors = f" [red]{res.errors} errors[/red]" if res.errors else ""
            s.log(f"{cfg.partitions} partitions created in {res.create_s:.2f} s, RSS {rss}{errors}")
        if not launcher.restartable:
            delete_topic(server.bootstrap, topic, timeout=120)  # not our broker: leave it clean
            report.notes.append("RSS measured on an already-used broker, not a fresh instance")
    finally:
        t = time.perf_counter()
        server.stop()
        report.stop_after_partitions_s = time.perf_counter() - t


def run_systems(launchers: list[Launcher], cfg: BenchConfig, workdir: Path) -> dict[str, SystemReport]:
    """Every phase against every available system, repetitions in :func:`rotation` order (all
    brokers run at once; an idle broker costs the others nothing measurable). A failing phase
    or broker is recorded and the rest still run."""
    with contextlib.ExitStack() as running:
        reports, sessions = start_sessions(launchers, workdir, running)
        for rep in range(1, cfg.reps + 1):
            order = [s for s in rotation(sessions, rep) if s.server.alive()]
            for s in [s for s in sessions if s not in order]:
                s.report.errors.append(f"rep {rep}: server is not running")
            for s in order:
                s.begin_rep(rep)
            for phase in PHASES:
                for s in order:
                    s.rep_phase(phase, cfg)
            for s in order:
                s.end_rep(cfg)
        for acks in (1, -1):
            for s in sessions:
                lat = s.quietest_latency(acks, cfg)
                if lat is not None:
                    s.report.latency.append(lat)
    for launcher in launchers:
        report = reports[launcher.name]
        if not cfg.rss_phase or not report.available or any(e.startswith("start:") for e in report.errors):
            continue
        try:
            _rss_phase(launcher, cfg, workdir / f"{launcher.name}-rss", report)
        except Exception as exc:  # cannot start a fresh instance
            report.errors.append(f"{cfg.partitions} partitions: {type(exc).__name__}: {exc}")
    for report in reports.values():
        summarise(report)
    return reports


def summarise(report: SystemReport, rss: bool = True) -> None:
    """Medians over the repetitions. A phase with errors does not count, nor, when at least one
    repetition ran on a quiet machine, a repetition during which other processes were busy."""
    f = report.figures
    quiet = [r for r in report.reps if _quiet(r)]
    reps = quiet or report.reps
    report.reps_used = [r["rep"] for r in reps]

    def med(key: str, phase: str, attr: str) -> None:
        values = [rep[phase][attr] for rep in reps if rep.get(phase) and rep[phase]["errors"] == 0]
        f[key], report.spread[key] = median(values), spread(values)

    for phase in ("produce_acks1", "produce_acksall", "consume"):
        med(f"{phase}_msgs_s", phase, "msgs_s")
        med(f"{phase}_mb_s", phase, "mb_s")
    med("consume_short_backoff_msgs_s", "consume_short_backoff", "msgs_s")
    med("consume_tuned_msgs_s", "consume_tuned", "msgs_s")
    med("broker_cpu_us_per_msg_produce", "produce_acks1", "broker_cpu_us_per_msg")
    med("broker_cpu_us_per_msg_produce_acksall", "produce_acksall", "broker_cpu_us_per_msg")
    med("broker_cpu_us_per_msg_consume", "consume", "broker_cpu_us_per_msg")
    med("broker_cpu_us_per_msg_consume_tuned", "consume_tuned", "broker_cpu_us_per_msg")
    # Who set the pace: cores busy in the client process and in the broker during the phase.
    prod = [r["produce_acks1"] for r in reps if r.get("produce_acks1")]
    f["client_cores_produce"] = median(
        p["client_cpu_s"] / p["seconds"] for p in prod if p["client_cpu_s"] is not None
    )
    f["broker_cores_produce"] = median(
        (p["broker_cpu_s"] - (p["broker_cpu_after_s"] or 0.0)) / p["seconds"]
        for p in prod
        if p["broker_cpu_s"] is not None
    )
    for lat in report.latency:
        if lat["errors"]:
            continue
        suffix = "" if lat["acks"] == 1 else "_acksall"
        f[f"p50_ms_10k{suffix}"], f[f"p99_ms_10k{suffix}"] = lat["p50_ms"], lat["p99_ms"]
        if lat["acks"] == 1:
            f["broker_cpu_us_per_msg_10k"] = lat["broker_cpu_us_per_msg"]
    if (pr := report.partitions_rss) is not None:
        f["rss_mb_idle"] = pr["rss_idle_mb"]
        f["rss_mb_1000_partitions"] = pr["rss_mb"] if pr["errors"] == 0 else None
        f["create_1000_partitions_s"] = pr["create_s"]
    if rss:
        f["stop_1000_partitions_s"] = report.stop_after_partitions_s
    busy = f"other processes used more than {BUSY_SHARE:.0%} of the CPU"
    if quiet and len(quiet) < len(report.reps):
        report.notes.append(
            f"medians over repetitions {', '.join(map(str, report.reps_used))} only: {busy} during the others"
        )
    elif report.reps and not quiet:
        report.notes.append(f"every repetition ran while {busy}: throughput figures are unreliable")
    if busy_lat := [str(x["acks"]) for x in report.latency if not _quiet(x)]:
        report.notes.append(f"latency phase(s) with acks={', '.join(busy_lat)} ran while {busy}")


def ratios(primary: SystemReport, peer: SystemReport) -> dict[str, float | None]:
    """primary/peer for every figure (>1 is better for throughput, worse for the rest)."""
    out: dict[str, float | None] = {}
    for key, (_, _, higher) in FIGURES.items():
        if higher is not None:
            a, b = primary.figures.get(key), peer.figures.get(key)
            out[key] = a / b if a is not None and b else None
    return out


# (goal, figure, target, higher is better, the peer the ratio is taken against or None for the
# figure itself). A goal against a peer that did not run is left out.
GOALS: tuple[tuple[str, str, float, bool, str | None], ...] = (
    ("produce acks=1 throughput / Tansu >= 1.0x", "produce_acks1_msgs_s", 1.0, True, "tansu"),
    ("produce acks=all throughput / Tansu >= 1.0x", "produce_acksall_msgs_s", 1.0, True, "tansu"),
    ("consume throughput (default settings) / Tansu >= 1.0x", "consume_msgs_s", 1.0, True, "tansu"),
    ("produce acks=1 throughput / Apache Kafka >= 1.0x", "produce_acks1_msgs_s", 1.0, True, "kafka"),
    ("produce acks=all throughput / Apache Kafka >= 1.0x", "produce_acksall_msgs_s", 1.0, True, "kafka"),
    ("consume throughput (default settings) / Apache Kafka >= 1.0x", "consume_msgs_s", 1.0, True, "kafka"),
    ("broker CPU per produced message (acks=1) <= 1.0 µs", "broker_cpu_us_per_msg_produce", 1, False, None),
    (
        "broker CPU per produced message (acks=all) <= 1.0 µs",
        *("broker_cpu_us_per_msg_produce_acksall", 1, False, None),
    ),
    ("p99 produce latency at 10k msgs/s (acks=1) <= 5 ms", "p99_ms_10k", 5.0, False, None),
    ("p99 produce latency at 10k msgs/s (acks=all) <= 5 ms", "p99_ms_10k_acksall", 5.0, False, None),
    ("broker RSS with 1,000 partitions <= 300 MB", "rss_mb_1000_partitions", 300.0, False, None),
)


def compare(primary: Launcher, peers: list[Launcher], cfg: BenchConfig) -> dict[str, Any]:
    """Benchmark ``primary`` and ``peers`` side by side; returns the JSON document."""
    info = machine_info("load.bench_broker")
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="sftraffic-bench-") as tmp:
        reports = run_systems([primary, *peers], cfg, Path(tmp))
    main = reports[primary.name]
    # ratios of the medians, ours/peer, for every peer that ran
    vs = {n: ratios(main, r) for n, r in reports.items() if n != primary.name and r.available}
    client_settings = {
        "producer": PRODUCER_SETTINGS,
        "latency_producer_overrides": {"linger.ms": cfg.latency_linger_ms},
    }
    return {
        "machine": info,
        "config": asdict(cfg),
        "client_settings": client_settings | {"consumer_phases": CONSUMER_PHASES},
        "primary": primary.name,
        "systems": {name: asdict(r) for name, r in reports.items()},
        "ratios": {f"{primary.name}/{n}": r for n, r in vs.items()},
        "goals": [
            verdict(name, vs.get(peer, {}).get(key) if peer else main.figures.get(key), target, higher)
            for name, key, target, higher, peer in GOALS
            if peer in (None, "tansu") or peer in vs  # against Tansu: n/a when it did not run
        ],
        "notes": notes(reports, cfg),
        "elapsed_s": time.perf_counter() - t0,
    }


def notes(reports: dict[str, SystemReport], cfg: BenchConfig) -> list[str]:
    out = [
        "All systems run on this machine with the client, sharing its cores; the Python client "
        "usually saturates first, so throughput partly measures the client and broker CPU/msg is "
        "the fair efficiency figure.",
        "MB/s counts value bytes (10^6 bytes). Consume: from assign() to the last message; "
        "'consume' with librdkafka's default fetch settings, 'consume, backoff 10 ms' with the "
        "defaults but fetch.queue.backoff.ms=10 (librdkafka stops fetching for that long, 1 s by "
        "default, whenever queued.min.messages=100,000 wait in its queue), "
        "'consume, tuned' with "
        + ", ".join(
            f"{k}={v}" for k, v in CONSUMER_TUNED_SETTINGS.items() if k.startswith(("fetch", "max", "queued"))
        )
        + ". Rates show the median over the repetitions and their range (min-max); ratios are "
        "ratios of the medians.",
        f"Repetitions are interleaved across systems; medians skip repetitions during which "
        f"other processes used more than {BUSY_SHARE:.0%} of the CPU (unless all did), and such a "
        f"latency phase is run again (at most {cfg.latency_attempts} runs in all, the quietest kept).",
        f"Broker CPU per message includes what the broker still does after a phase, until it has "
        f"been idle for {cfg.idle_window_s:g} s (at most {SETTLE_S:g} s).",
        f"Latency: librdkafka msg.latency() (produce() to delivery report) at "
        f"{cfg.latency_rate:,} msgs/s, linger.ms={cfg.latency_linger_ms:g} (throughput phases: "
        f"linger.ms={PRODUCER_SETTINGS['linger.ms']}); percentiles are nearest-rank.",
    ]
    stores = {True: "persists records to disk (page cache, no fsync per batch by default)"}
    stores[False] = "memory storage only; nothing reaches the disk"
    out += [
        f"{r.name}: {stores[r.persists]}." for r in reports.values() if r.available and r.persists is not None
    ]
    if cfg.count < 200_000:
        out.append(f"Only {cfg.count:,} messages per phase: broker CPU/msg is indicative (use >= 200,000).")
    return out


# -- output ---------------------------------------------------------------------------------
def _fmt(key: str, v: float | None) -> str:
    if v is None:
        return "—"
    unit = FIGURES[key][1]
    if unit == "msgs/s":
        return f"{v:,.0f}"
    if unit in ("MB/s", "MB", "s", "cores"):
        return f"{v:,.{1 if unit.startswith('MB') else 2}f}"
    return f"{v:.3f}" if v < 10 else f"{v:,.1f}"


def _short(v: float) -> str:
    """A rate in few characters: 854k, 1.10M."""
    return f"{v / 1e6:.2f}M" if v >= 1e6 else f"{v / 1e3:.0f}k" if v >= 1e3 else f"{v:.0f}"


def _cell(key: str, system: dict[str, Any]) -> str:
    """The median, and for rates measured more than once their range: 603,114 (552k-611k)."""
    text = _fmt(key, system["figures"].get(key))
    sp = system.get("spread", {}).get(key)
    if sp and sp["n"] > 1 and FIGURES[key][1] == "msgs/s":
        text += f" ({_short(sp['min'])}-{_short(sp['max'])})"
    return text


BEFORE_AFTER = {
    "produce_acks1_msgs_s": "produce acks=1",
    "produce_acksall_msgs_s": "acks=all",
    "consume_msgs_s": "consume",
    "consume_short_backoff_msgs_s": "consume backoff 10 ms",
    "consume_tuned_msgs_s": "consume tuned",
    "broker_cpu_us_per_msg_produce": "broker CPU µs/msg acks=1",
    "broker_cpu_us_per_msg_produce_acksall": "acks=all",
    "p99_ms_10k": "p99 @10k/s",
}


def _ratio(r: float | None) -> str:
    return "—" if r is None else f"{r:.2f}x"


def render(doc: dict[str, Any], console: Console) -> None:
    systems: dict[str, dict[str, Any]] = doc["systems"]
    cfg = doc["config"]
    avail = [n for n, s in systems.items() if s["available"]]
    title = f"{cfg['count']:,} msgs/phase, {cfg['reps']} rep(s), {cfg['value_size']}-byte values"
    rows = [
        [label.replace("1,000", f"{cfg['partitions']:,}"), unit + {True: " ↑", False: " ↓", None: ""}[higher]]
        + [_cell(key, systems[n]) for n in avail]
        + [_ratio(r.get(key)) for r in doc["ratios"].values()]
        for key, (label, unit, higher) in FIGURES.items()
    ]
    persists = [{True: "yes", False: "no (memory)", None: "?"}[systems[n]["persists"]] for n in avail]
    rows.append(["persists to disk", "", *persists, *["" for _ in doc["ratios"]]])
    columns = "|".join(["figure", "unit", *(f">{n}" for n in [*avail, *doc["ratios"]])])
    console.print(table(f"Broker benchmark ({title})", columns, *rows))
    for n, s in systems.items():
        if not s["available"]:
            console.print(f"[yellow]{n}: not available[/yellow] ({escape(s['reason'])})")
        for e in s["errors"]:
            console.print(f"[red]{n}: {escape(e)}[/red]")
        for note in s["notes"]:
            console.print(f"[dim]{n}: {escape(note)}[/dim]")
    for key, r in doc["ratios"].items():
        if key.endswith("/ours-baseline"):
            cells = ", ".join(f"{label} {_ratio(r.get(k))}" for k, label in BEFORE_AFTER.items())
            console.print(f"[bold]before/after[/bold] {key} ({systems['ours-baseline']['version']}): {cells}")
    print_goals(console, doc["goals"])
    for line in doc["notes"]:
        console.print(f"[dim]• {line}[/dim]")
    print_footer(console, doc)


def check(args: argparse.Namespace, error: Callable[[str], Any]) -> None:
    """``--peers`` into ``peer_names`` and ``baselines`` (ours@DIR, --baseline-src)."""
    try:
        names = parse_peers(args.peers, [*PEERS, "ours@DIR"])
    except ValueError as exc:
        error(str(exc))
    args.peer_names = [n for n in names if not n.startswith("ours@")]
    args.baselines = [n.split("@", 1)[1] for n in names if n.startswith("ours@")]
    args.baselines += [args.baseline_src] if args.baseline_src else []
    if len(args.baselines) > 1:
        error("one baseline checkout at a time (ours@DIR / --baseline-src)")
    if args.broker_pid is not None and not args.external:
        error("--broker-pid needs --external")


def run(args: argparse.Namespace) -> dict[str, Any]:
    primary = ExternalLauncher(args.external, args.broker_pid) if args.external else OursLauncher()
    peers = [OursLauncher(src) for src in args.baselines] + [PEERS[n]() for n in args.peer_names]
    return compare(primary, peers, BenchConfig.of(args.quick, args.count, args.reps))


def ok(doc: dict[str, Any]) -> bool:
    """Peers that fail are reported, not fatal."""
    main_report = doc["systems"][doc["primary"]]
    return bool(main_report["available"] and not main_report["errors"])


if __name__ == "__main__":
    from load.scenarios import main

    raise SystemExit(main("broker"))
