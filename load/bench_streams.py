"""Stream-store peers of ``sftraffic bench``: Redis Streams and NATS JetStream on 127.0.0.1.

How it measures, in full: ``docs/benchmarks.md``, "Redis Streams and NATS JetStream (bench)".
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from load import bench_broker as kafka
from load.bench_broker import Latency, SystemReport, Throughput
from load.harness.procfs import IDLE_WINDOW_S, CpuProbe, Interference, PhaseCpu
from load.harness.runner import rotation
from load.peers import LOOPBACK, ChildLauncher, Server


@dataclass
class StreamsConfig:
    count: int = 500_000  # Redis messages per produce phase
    nats_count: int = 200_000  # NATS is ~3x slower per message from Python: keep phases similar
    reps: int = 3
    latency_rate: int = 10_000
    latency_seconds: float = 10.0
    # Messages that come due within one tick are sent together, as librdkafka does with the Kafka
    # latency phase's linger.ms (bench_broker.LATENCY_LINGER_MS).
    linger_ms: float = kafka.LATENCY_LINGER_MS
    value_size: int = kafka.VALUE_SIZE
    idle_window_s: float = IDLE_WINDOW_S
    redis_pipeline: int = 1000
    redis_read_batch: int = 1000
    nats_max_pending: int = 4000
    nats_fetch_batch: int = 1000
    quick: bool = False


# -- servers --------------------------------------------------------------------------------
class RedisLauncher(ChildLauncher):
    binary_name = "redis-server"
    binary_paths = ("/usr/bin/redis-server", "/usr/local/bin/redis-server")
    module = ("redis", "redis")
    ready_timeout = 30.0

    def __init__(self) -> None:
        super().__init__("redis", "Redis Streams (AOF, fsync every second)", persists=True)

    def command(self, binary: str, port: int, datadir: Path) -> list[str]:
        args = f"--port {port} --bind {LOOPBACK} --appendonly yes --appendfsync everysec --dir {datadir}"
        return [binary, *args.split(), "--save", ""]

    def probe(self, server: Server) -> bool:
        with contextlib.closing(_redis(server.port, socket_timeout=2)) as r:
            return bool(r.ping())


class NatsLauncher(ChildLauncher):
    binary_name = "nats-server"
    binary_paths = ("/usr/sbin/nats-server", "/usr/bin/nats-server", "/usr/local/bin/nats-server")
    module = ("nats", "nats-py")
    ready_timeout = 30.0

    def __init__(self) -> None:
        super().__init__("nats", "NATS JetStream (file storage, R1)", persists=True)

    def command(self, binary: str, port: int, datadir: Path) -> list[str]:
        return [binary, "-js", "-a", LOOPBACK, "-p", str(port), "-sd", str(datadir)]

    def probe(self, server: Server) -> bool:
        async def probe() -> bool:
            nc, js = await _nats_connect(server.port)
            try:
                await js.account_info()  # JetStream is up, not only the listener
                return True
            finally:
                await nc.close()

        return asyncio.run(probe())


STREAM_PEERS: dict[str, Callable[[], ChildLauncher]] = {"redis": RedisLauncher, "nats": NatsLauncher}


# -- Redis Streams --------------------------------------------------------------------------
def _redis(port: int, **kw: Any) -> Any:
    import redis

    return redis.Redis(host=LOOPBACK, port=port, **kw)


def redis_rep(port: int, cfg: StreamsConfig, cpu: CpuProbe | None = None) -> tuple[Throughput, Throughput]:
    """Produce to a fresh stream, read it back with a fresh group, delete it."""
    key = f"bench:{uuid.uuid4().hex[:10]}"
    with contextlib.closing(_redis(port)) as r:
        try:
            return redis_produce(r, key, cfg, cpu), redis_consume(r, key, cfg, cpu)
        finally:
            r.delete(key)


def redis_produce(r: Any, key: str, cfg: StreamsConfig, cpu: CpuProbe | None = None) -> Throughput:
    """XADD ``cfg.count`` values in pipelines of ``cfg.redis_pipeline``; timed to the last reply."""
    r.ping()  # connect outside the timing
    value = os.urandom(cfg.value_size)
    count, size = cfg.count, cfg.redis_pipeline
    errors, detail = 0, ""
    phase = PhaseCpu(cpu)
    t0 = time.perf_counter()
    sent = 0
    while sent < count:
        n = min(size, count - sent)
        p = r.pipeline(transaction=False)
        xadd = p.xadd
        for _ in range(n):
            xadd(key, {"d": value})
        for res in p.execute(raise_on_error=False):
            if isinstance(res, Exception):
                errors += 1
                detail = detail or str(res)
        sent += n
    seconds = time.perf_counter() - t0
    phase.client_done()
    stored = int(r.xlen(key))
    if stored != count - errors and not detail:
        detail = f"{stored} entries stored, {count} sent"
        errors = max(errors, count - stored)
    return kafka.throughput("produce_acks1", count, seconds, errors, phase, cfg, detail=detail)


def redis_consume(r: Any, key: str, cfg: StreamsConfig, cpu: CpuProbe | None = None) -> Throughput:
    """A fresh group reads ``key`` from the start: XREADGROUP COUNT n, then XACK of the batch."""
    group = f"g-{uuid.uuid4().hex[:6]}"
    r.xgroup_create(key, group, id="0")
    want = int(r.xlen(key))
    got, detail = 0, ""
    phase = PhaseCpu(cpu)
    t0 = time.perf_counter()
    while got < want:
        resp = r.xreadgroup(group, "c1", {key: ">"}, count=cfg.redis_read_batch)
        if not resp:
            detail = f"stream ended early at {got}/{want} entries"
            break
        entries = resp[0][1]
        got += len(entries)
        r.xack(key, group, *[e[0] for e in entries])
    seconds = time.perf_counter() - t0
    phase.client_done()
    return kafka.throughput("consume", got, seconds, want - got, phase, cfg, detail=detail)


def redis_latency(port: int, cfg: StreamsConfig, cpu: CpuProbe | None = None) -> Latency:
    """XADD at ``cfg.latency_rate``; every ``cfg.linger_ms`` what has come due goes in one pipeline."""
    key = f"bench:lat:{uuid.uuid4().hex[:10]}"
    with contextlib.closing(_redis(port)) as r:
        r.ping()
        value = {"d": os.urandom(cfg.value_size)}
        rate = cfg.latency_rate
        n = int(rate * cfg.latency_seconds)
        interval, tick = 1.0 / rate, cfg.linger_ms / 1000
        samples: list[float] = []
        errors = 0
        clock, sleep = time.perf_counter, time.sleep
        phase = PhaseCpu(cpu)
        t0 = clock()
        i = k = 0
        while i < n:
            k += 1
            delay = t0 + k * tick - clock()
            if delay > 0:
                sleep(delay)
            due = min(n, int((clock() - t0) / interval) + 1)  # messages scheduled until now
            if due <= i:
                continue
            p = r.pipeline(transaction=False)
            for _ in range(due - i):
                p.xadd(key, value)
            errors += sum(isinstance(x, Exception) for x in p.execute(raise_on_error=False))
            done = clock()
            samples.extend((done - (t0 + j * interval)) * 1000 for j in range(i, due))
            i = due
        lat = Latency.of(samples, n, clock() - t0, errors, phase, cfg)
        r.delete(key)
        return lat


# -- NATS JetStream -------------------------------------------------------------------------
async def _nats_connect(port: int, max_pending: int = 4000) -> tuple[Any, Any]:
    import nats

    url, pending = f"nats://{LOOPBACK}:{port}", 64 * 1024 * 1024
    nc = await nats.connect(url, connect_timeout=2, pending_size=pending, max_reconnect_attempts=0)
    return nc, nc.jetstream(publish_async_max_pending=max_pending)


async def _nats_stream(js: Any, tag: str) -> tuple[str, str]:
    from nats.js.api import StorageType, StreamConfig

    name = f"BENCH{tag}{uuid.uuid4().hex[:8].upper()}"
    subject = f"bench.{name.lower()}"
    await js.add_stream(StreamConfig(name=name, subjects=[subject], storage=StorageType.FILE, num_replicas=1))
    return name, subject


async def _nats_rep(port: int, cfg: StreamsConfig, cpu: CpuProbe | None) -> tuple[Throughput, Throughput]:
    """Publish ``cfg.nats_count`` to a fresh stream, then read them back with a pull consumer."""
    import nats.errors
    from nats.js.api import AckPolicy, ConsumerConfig

    nc, js = await _nats_connect(port, cfg.nats_max_pending)
    try:
        name, subject = await _nats_stream(js, "P")
        value = os.urandom(cfg.value_size)
        await (await js.publish_async(subject, value))  # warm-up: reply inbox, stream file
        count = cfg.nats_count
        failures: list[BaseException] = []

        def check(fut: asyncio.Future[Any]) -> None:
            if not fut.cancelled() and fut.exception() is not None:
                failures.append(fut.exception())  # type: ignore[arg-type]

        publish = js.publish_async
        phase = PhaseCpu(cpu)
        t0 = time.perf_counter()
        for _ in range(count):
            (await publish(subject, value)).add_done_callback(check)
        await js.publish_async_completed()
        seconds = time.perf_counter() - t0
        phase.client_done()
        stored = (await js.stream_info(name)).state.messages
        errors = len(failures)
        detail = str(failures[0]) if failures else ""
        if stored != count + 1 - errors:
            detail = detail or f"{stored} messages stored, {count + 1} published"
            errors = max(errors, count + 1 - stored)
        produced = kafka.throughput("produce_acks1", count, seconds, errors, phase, cfg, detail=detail)

        psub = await js.pull_subscribe(
            subject, durable="c1", config=ConsumerConfig(ack_policy=AckPolicy.ALL, max_ack_pending=-1)
        )
        got, detail = 0, ""
        phase = PhaseCpu(cpu)
        t0 = time.perf_counter()
        while got < stored:
            try:
                msgs = await psub.fetch(cfg.nats_fetch_batch, timeout=5)
            except nats.errors.TimeoutError:
                detail = f"no message for 5 s at {got}/{stored}"
                break
            got += len(msgs)
            await msgs[-1].ack()
        seconds = time.perf_counter() - t0
        phase.client_done()
        consumed = kafka.throughput("consume", got, seconds, stored - got, phase, cfg, detail=detail)
        await js.delete_stream(name)
        return produced, consumed
    finally:
        await nc.close()


async def _nats_latency(port: int, cfg: StreamsConfig, cpu: CpuProbe | None) -> Latency:
    nc, js = await _nats_connect(port, cfg.nats_max_pending)
    try:
        name, subject = await _nats_stream(js, "L")
        value = os.urandom(cfg.value_size)
        await (await js.publish_async(subject, value))
        rate = cfg.latency_rate
        n = int(rate * cfg.latency_seconds)
        interval, tick = 1.0 / rate, cfg.linger_ms / 1000
        samples: list[float] = []
        errors = [0]
        clock = time.perf_counter

        def done(fut: asyncio.Future[Any], scheduled: float) -> None:
            if fut.cancelled() or fut.exception() is not None:
                errors[0] += 1
            else:
                samples.append((clock() - scheduled) * 1000)

        phase = PhaseCpu(cpu)
        t0 = clock()
        i = k = 0
        while i < n:
            k += 1
            # Always yield (sleep(0) when late), so that the reader task takes the PubAcks.
            await asyncio.sleep(max(0.0, t0 + k * tick - clock()))
            due = min(n, int((clock() - t0) / interval) + 1)
            for j in range(i, due):
                fut = await js.publish_async(subject, value)
                fut.add_done_callback(lambda f, s=t0 + j * interval: done(f, s))
            i = max(i, due)
        sent_s = clock() - t0
        await asyncio.wait_for(js.publish_async_completed(), 60)
        lat = Latency.of(samples, n, sent_s, errors[0], phase, cfg)
        await js.delete_stream(name)
        return lat
    finally:
        await nc.close()


# -- orchestration ------------------------------------------------------------------------------
# a repetition (produce, then consume) and the latency phase, per server
REP: dict[str, Callable[..., Any]] = {"redis": redis_rep, "nats": lambda *a: asyncio.run(_nats_rep(*a))}
LATENCY: dict[str, Callable[..., Any]] = {"redis": redis_latency}
LATENCY["nats"] = lambda *a: asyncio.run(_nats_latency(*a))


def _finish(report: SystemReport) -> None:
    """Medians as for the Kafka brokers; the one produce figure also stands for acks=all."""
    kafka.summarise(report, rss=False)
    for key in (
        "produce_acks1_msgs_s",
        "produce_acks1_mb_s",
        "broker_cpu_us_per_msg_produce",
        "p50_ms_10k",
        "p99_ms_10k",
    ):
        acksall = key.replace("acks1", "acksall") if "acks1" in key else f"{key}_acksall"
        report.figures[acksall], report.spread[acksall] = report.figures.get(key), report.spread.get(key)
    if report.reps:
        report.notes.append(
            "one acknowledgement mode (reply once stored): its produce and latency figures are also "
            "used for acks=all"
        )


def run_streams(launchers: list[ChildLauncher], cfg: StreamsConfig, workdir: Path) -> dict[str, SystemReport]:
    """Every phase on every available server; repetitions in rotation order (A B, B A, ...)."""
    with contextlib.ExitStack() as running:
        reports, sessions = kafka.start_sessions(list(launchers), workdir, running)
        for rep in range(1, cfg.reps + 1):
            for s in rotation(sessions, rep):
                if not s.server.alive():
                    s.report.errors.append(f"rep {rep}: server is not running")
                    continue
                # produce then consume, under one Interference reading
                load = Interference([s.server.pid])
                res = s.attempt(
                    f"rep {rep}", functools.partial(REP[s.report.name], s.server.port, cfg, s.cpu)
                )
                if res is not None:
                    share = load.share()
                    row = {x.phase: {**asdict(x), "other_cpu_share": share} for x in res}
                    s.finish_rep({"rep": rep, **row}, cfg.reps)
        for s in sessions:
            lat = s.latency("latency", functools.partial(LATENCY[s.report.name], s.server.port, cfg, s.cpu))
            if lat is not None:
                s.report.latency.append({**lat, "attempt": 1})
    for report in reports.values():
        _finish(report)
    return reports
