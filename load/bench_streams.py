"""Stream-store peers of ``sftraffic bench``: Redis Streams and NATS JetStream on 127.0.0.1.

Each server is started here on a free loopback port with a fresh data directory, measured, and
stopped by its pid:

* Redis (``redis-server --save "" --appendonly yes --appendfsync everysec``): every write goes to
  the append-only file, fsynced once a second (like our broker's page-cache durability);
* NATS JetStream (``nats-server -js``): one file-storage stream per phase, one replica.

Figures (100-byte values, as ``load.bench_broker``), per repetition:

* produce msgs/s. Redis: XADD in non-transactional redis-py pipelines of 1,000, timed until the
  last reply. NATS: ``js.publish_async`` with up to 4,000 publishes in flight, timed until every
  PubAck (the server stored the message);
* consume msgs/s. Redis: one consumer of a fresh group, XREADGROUP COUNT 1,000 then XACK of the
  batch. NATS: a pull consumer (AckPolicy.ALL) fetching 1,000 at a time and acking the last
  message of each batch;
* latency at a fixed rate (10k msgs/s): publish to acknowledgement, from each message's
  scheduled send time, so a client that falls behind its schedule pays for it. Redis (a
  synchronous client) sends whatever is due in one pipeline; NATS publishes each message at its
  time and takes the PubAck's arrival;
* server CPU µs/msg (user+system of the server process from /proc/PID/stat) over each phase and
  until the server is idle again.

Both servers have one acknowledgement mode: the reply comes once the server has stored the
message. That one figure is therefore also their "acks=all" figure in the ratios.

The results are :class:`load.bench_broker.SystemReport` objects with the same figure keys as the
Kafka brokers', so ``sftraffic bench`` puts all systems in one table and computes ratios with
:func:`load.bench_broker.ratios`.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from load.bench_broker import (
    IDLE_WINDOW_S,
    LATENCY_LINGER_MS,
    MB,
    SETTLE_S,
    VALUE_SIZE,
    CpuProbe,
    Interference,
    Latency,
    SystemReport,
    Throughput,
    _after,
    _cpu,
    _describe,
    _describe_load,
    _log,
    _own_cpu,
    _per_msg_us,
    _settled_cpu,
    _summarise,
    percentile,
)
from load.peers import LOOPBACK, Launcher, RunningBroker, spawn_child


@dataclass
class StreamsConfig:
    count: int = 500_000  # Redis messages per produce phase
    nats_count: int = 200_000  # NATS is ~3x slower per message from Python: keep phases similar
    reps: int = 3
    latency_rate: int = 10_000
    latency_seconds: float = 10.0
    # Messages that come due within one tick are sent together, as librdkafka does with the Kafka
    # latency phase's linger.ms (bench_broker.LATENCY_LINGER_MS).
    linger_ms: float = LATENCY_LINGER_MS
    value_size: int = VALUE_SIZE
    idle_window_s: float = IDLE_WINDOW_S
    redis_pipeline: int = 1000
    redis_read_batch: int = 1000
    nats_max_pending: int = 4000
    nats_fetch_batch: int = 1000
    quick: bool = False


# -- servers --------------------------------------------------------------------------------
def _find(binary: str, *candidates: str) -> str:
    for cand in (shutil.which(binary), *candidates):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    raise FileNotFoundError(f"{binary} not found (apt-get install {binary}; ./run bench installs it)")


def _missing_module(module: str, dist: str) -> str | None:
    if importlib.util.find_spec(module) is None:
        return f"Python package {dist} is not installed (pip install {dist})"
    return None


def _version_line(cmd: list[str]) -> str | None:
    try:
        out = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr) else None


class ServerLauncher(Launcher):
    """A server binary from the OS packages, started on a free loopback port."""

    binary_name: str = ""
    binary_paths: tuple[str, ...] = ()
    module: tuple[str, str] = ("", "")  # (import name, distribution) of the Python client
    ready_timeout = 30.0

    def binary(self) -> str:
        return _find(self.binary_name, *self.binary_paths)

    def unavailable(self) -> str | None:
        try:
            self.binary()
        except OSError as exc:
            return str(exc)
        return _missing_module(*self.module)

    def command(self, binary: str, port: int, datadir: Path) -> list[str]:
        raise NotImplementedError

    def ready(self, port: int) -> bool:
        """True once the server answers a real request (a bound port is not enough)."""
        raise NotImplementedError

    def start(self, workdir: Path) -> RunningBroker:
        running, port = spawn_child(self.name, self.command, self.binary(), workdir)
        deadline = time.monotonic() + self.ready_timeout
        while True:
            if not running.alive():
                raise RuntimeError(f"{self.name} exited at start:\n{running.log_tail()}")
            try:
                with socket.create_connection((LOOPBACK, port), timeout=1):
                    pass
                if self.ready(port):
                    return running
            except Exception:
                pass
            if time.monotonic() > deadline:
                tail = running.log_tail()
                running.stop()
                raise RuntimeError(f"{self.name} not ready after {self.ready_timeout:g}s:\n{tail}")
            time.sleep(0.05)


class RedisLauncher(ServerLauncher):
    binary_name = "redis-server"
    binary_paths = ("/usr/bin/redis-server", "/usr/local/bin/redis-server")
    module = ("redis", "redis")

    def __init__(self) -> None:
        super().__init__("redis", "Redis Streams (AOF, fsync every second)", persists=True)

    def command(self, binary: str, port: int, datadir: Path) -> list[str]:
        return [
            binary,
            "--port",
            str(port),
            "--bind",
            LOOPBACK,
            "--save",
            "",
            "--appendonly",
            "yes",
            "--appendfsync",
            "everysec",
            "--dir",
            str(datadir),
        ]

    def ready(self, port: int) -> bool:
        import redis

        r = redis.Redis(host=LOOPBACK, port=port, socket_timeout=2)
        try:
            return bool(r.ping())
        finally:
            r.close()

    def version(self) -> str | None:
        with contextlib.suppress(OSError):
            return _version_line([self.binary(), "--version"])
        return None


class NatsLauncher(ServerLauncher):
    binary_name = "nats-server"
    binary_paths = ("/usr/sbin/nats-server", "/usr/bin/nats-server", "/usr/local/bin/nats-server")
    module = ("nats", "nats-py")

    def __init__(self) -> None:
        super().__init__("nats", "NATS JetStream (file storage, R1)", persists=True)

    def command(self, binary: str, port: int, datadir: Path) -> list[str]:
        return [binary, "-js", "-a", LOOPBACK, "-p", str(port), "-sd", str(datadir)]

    def ready(self, port: int) -> bool:
        async def probe() -> bool:
            import nats

            nc = await nats.connect(f"nats://{LOOPBACK}:{port}", connect_timeout=2, max_reconnect_attempts=0)
            try:
                await nc.jetstream().account_info()  # JetStream is up, not only the listener
                return True
            finally:
                await nc.close()

        return asyncio.run(probe())

    def version(self) -> str | None:
        with contextlib.suppress(OSError):
            return _version_line([self.binary(), "--version"])
        return None


STREAM_PEERS: dict[str, Callable[[], ServerLauncher]] = {"redis": RedisLauncher, "nats": NatsLauncher}


def _port(server: RunningBroker) -> int:
    return int(server.bootstrap.rpartition(":")[2])


def _settle(cpu: CpuProbe | None, cfg: StreamsConfig) -> tuple[float | None, float | None]:
    return _settled_cpu(cpu, SETTLE_S, cfg.idle_window_s)


def _throughput(
    phase: str,
    messages: int,
    seconds: float,
    errors: int,
    cpu0: float | None,
    settled: tuple[float | None, float | None],
    client_cpu: float,
    value_size: int,
    detail: str = "",
) -> Throughput:
    cpu_end, cpu_idle = settled
    cpu_s, per_msg = _per_msg_us(cpu0, cpu_idle, messages)
    good = max(0, messages - errors)
    return Throughput(
        phase=phase,
        messages=messages,
        seconds=seconds,
        msgs_s=good / seconds if seconds > 0 else 0.0,
        mb_s=good * value_size / seconds / MB if seconds > 0 else 0.0,
        errors=errors,
        broker_cpu_s=cpu_s,
        broker_cpu_us_per_msg=per_msg,
        broker_cpu_after_s=_after(cpu_end, cpu_idle),
        client_cpu_s=client_cpu,
        detail=detail,
    )


def _latency(
    rate: int, n: int, sent_s: float, ms: list[float], errors: int, per_msg: float | None, after: float | None
) -> Latency:
    ms.sort()
    return Latency(
        acks=1,
        target_rate=rate,
        achieved_rate=n / sent_s if sent_s > 0 else 0.0,
        messages=n,
        samples=len(ms),
        errors=errors,
        p50_ms=percentile(ms, 50),
        p90_ms=percentile(ms, 90),
        p99_ms=percentile(ms, 99),
        p999_ms=percentile(ms, 99.9),
        max_ms=ms[-1] if ms else float("nan"),
        broker_cpu_us_per_msg=per_msg,
        broker_cpu_after_s=after,
    )


# -- Redis Streams --------------------------------------------------------------------------
def redis_produce(port: int, key: str, cfg: StreamsConfig, cpu: CpuProbe | None = None) -> Throughput:
    """XADD ``cfg.count`` values in pipelines of ``cfg.redis_pipeline``; timed to the last reply."""
    import redis

    r = redis.Redis(host=LOOPBACK, port=port)
    try:
        r.ping()  # connect outside the timing
        value = os.urandom(cfg.value_size)
        count, size = cfg.count, cfg.redis_pipeline
        errors, detail = 0, ""
        cpu0, own0 = _cpu(cpu), _own_cpu()
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
        client_cpu = _own_cpu() - own0
        settled = _settle(cpu, cfg)
        stored = int(r.xlen(key))
        if stored != count - errors and not detail:
            detail = f"{stored} entries stored, {count} sent"
            errors = max(errors, count - stored)
        return _throughput(
            "produce_acks1", count, seconds, errors, cpu0, settled, client_cpu, cfg.value_size, detail
        )
    finally:
        r.close()


def redis_consume(port: int, key: str, cfg: StreamsConfig, cpu: CpuProbe | None = None) -> Throughput:
    """A fresh group reads ``key`` from the start: XREADGROUP COUNT n, then XACK of the batch."""
    import redis

    r = redis.Redis(host=LOOPBACK, port=port)
    try:
        group = f"g-{uuid.uuid4().hex[:6]}"
        r.xgroup_create(key, group, id="0")
        want = int(r.xlen(key))
        got, detail = 0, ""
        cpu0, own0 = _cpu(cpu), _own_cpu()
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
        client_cpu = _own_cpu() - own0
        settled = _settle(cpu, cfg)
        return _throughput(
            "consume", got, seconds, want - got, cpu0, settled, client_cpu, cfg.value_size, detail
        )
    finally:
        r.close()


def redis_latency(port: int, key: str, cfg: StreamsConfig, cpu: CpuProbe | None = None) -> Latency:
    """XADD at ``cfg.latency_rate``; every ``cfg.linger_ms`` what has come due goes in one pipeline."""
    import redis

    r = redis.Redis(host=LOOPBACK, port=port)
    try:
        r.ping()
        value = {"d": os.urandom(cfg.value_size)}
        rate = cfg.latency_rate
        n = int(rate * cfg.latency_seconds)
        interval, tick = 1.0 / rate, cfg.linger_ms / 1000
        samples: list[float] = []
        errors = 0
        clock, sleep = time.perf_counter, time.sleep
        cpu0 = _cpu(cpu)
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
        sent_s = clock() - t0
        cpu_end, cpu_idle = _settle(cpu, cfg)
        _, per_msg = _per_msg_us(cpu0, cpu_idle, n)
        return _latency(rate, n, sent_s, samples, errors, per_msg, _after(cpu_end, cpu_idle))
    finally:
        r.close()


def redis_cleanup(port: int, key: str) -> None:
    import redis

    r = redis.Redis(host=LOOPBACK, port=port)
    try:
        r.delete(key)
    finally:
        r.close()


# -- NATS JetStream -------------------------------------------------------------------------
async def _nats_connect(port: int, cfg: StreamsConfig) -> tuple[Any, Any]:
    import nats

    nc = await nats.connect(
        f"nats://{LOOPBACK}:{port}", pending_size=64 * 1024 * 1024, max_reconnect_attempts=0
    )
    return nc, nc.jetstream(publish_async_max_pending=cfg.nats_max_pending)


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

    nc, js = await _nats_connect(port, cfg)
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
        cpu0, own0 = _cpu(cpu), _own_cpu()
        t0 = time.perf_counter()
        for _ in range(count):
            (await publish(subject, value)).add_done_callback(check)
        await js.publish_async_completed()
        seconds = time.perf_counter() - t0
        client_cpu = _own_cpu() - own0
        settled = _settle(cpu, cfg)
        stored = (await js.stream_info(name)).state.messages
        errors = len(failures)
        detail = str(failures[0]) if failures else ""
        if stored != count + 1 - errors:
            detail = detail or f"{stored} messages stored, {count + 1} published"
            errors = max(errors, count + 1 - stored)
        produced = _throughput(
            "produce_acks1", count, seconds, errors, cpu0, settled, client_cpu, cfg.value_size, detail
        )

        psub = await js.pull_subscribe(
            subject, durable="c1", config=ConsumerConfig(ack_policy=AckPolicy.ALL, max_ack_pending=-1)
        )
        got, detail = 0, ""
        cpu0, own0 = _cpu(cpu), _own_cpu()
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
        client_cpu = _own_cpu() - own0
        settled = _settle(cpu, cfg)
        consumed = _throughput(
            "consume", got, seconds, stored - got, cpu0, settled, client_cpu, cfg.value_size, detail
        )
        await js.delete_stream(name)
        return produced, consumed
    finally:
        await nc.close()


async def _nats_latency(port: int, cfg: StreamsConfig, cpu: CpuProbe | None) -> Latency:
    nc, js = await _nats_connect(port, cfg)
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

        cpu0 = _cpu(cpu)
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
        cpu_end, cpu_idle = _settle(cpu, cfg)
        _, per_msg = _per_msg_us(cpu0, cpu_idle, n)
        await js.delete_stream(name)
        return _latency(rate, n, sent_s, samples, errors[0], per_msg, _after(cpu_end, cpu_idle))
    finally:
        await nc.close()


def nats_rep(port: int, cfg: StreamsConfig, cpu: CpuProbe | None = None) -> tuple[Throughput, Throughput]:
    return asyncio.run(_nats_rep(port, cfg, cpu))


def nats_latency(port: int, cfg: StreamsConfig, cpu: CpuProbe | None = None) -> Latency:
    return asyncio.run(_nats_latency(port, cfg, cpu))


# -- orchestration ------------------------------------------------------------------------------
class _StreamSession:
    def __init__(self, report: SystemReport, server: RunningBroker, console: Console) -> None:
        self.report = report
        self.server = server
        self.console = console
        self.port = _port(server)
        self.cpu: CpuProbe = server.cpu_seconds

    def log(self, text: str) -> None:
        _log(self.console, f"{self.report.name}: {text}")

    def fail(self, what: str, exc: BaseException) -> None:
        msg = f"{what}: {type(exc).__name__}: {exc}"
        if not self.server.alive():
            msg += f"\n  server exited; last log lines:\n{self.server.log_tail()}"
        self.report.errors.append(msg)
        self.log(f"[red]{escape(msg)}[/red]")

    def rep(self, rep: int, cfg: StreamsConfig) -> None:
        row: dict[str, Any] = {"rep": rep}
        load = Interference([self.server])
        try:
            if self.report.name == "redis":
                key = f"bench:{uuid.uuid4().hex[:10]}"
                produced = redis_produce(self.port, key, cfg, self.cpu)
                consumed = redis_consume(self.port, key, cfg, self.cpu)
                redis_cleanup(self.port, key)
            else:
                produced, consumed = nats_rep(self.port, cfg, self.cpu)
        except Exception as exc:
            self.fail(f"rep {rep}", exc)
            return
        share = load.share()
        row["produce_acks1"] = {**asdict(produced), "other_cpu_share": share}
        row["consume"] = {**asdict(consumed), "other_cpu_share": share}
        row["other_cpu_share"] = share
        self.report.reps.append(row)
        self.log(
            f"rep {rep}/{cfg.reps}: "
            + ", ".join(_describe(x) for x in (row["produce_acks1"], row["consume"]))
            + _describe_load(share)
        )

    def latency(self, cfg: StreamsConfig) -> None:
        load = Interference([self.server])
        try:
            if self.report.name == "redis":
                key = f"bench:lat:{uuid.uuid4().hex[:10]}"
                lat = redis_latency(self.port, key, cfg, self.cpu)
                redis_cleanup(self.port, key)
            else:
                lat = nats_latency(self.port, cfg, self.cpu)
        except Exception as exc:
            self.fail("latency", exc)
            return
        share = load.share()
        self.report.latency.append({**asdict(lat), "other_cpu_share": share, "attempt": 1})
        self.log(
            f"latency at {lat.achieved_rate:,.0f} msgs/s: p50 {lat.p50_ms:.2f} ms, "
            f"p99 {lat.p99_ms:.2f} ms, max {lat.max_ms:.2f} ms"
            + (f" [red]{lat.errors} errors[/red]" if lat.errors else "")
            + _describe_load(share)
        )


def _finish(report: SystemReport) -> None:
    """Medians as for the Kafka brokers; the one produce figure also stands for acks=all."""
    _summarise(report)
    f = report.figures
    for key in (
        "rss_mb_idle",
        "rss_mb_1000_partitions",
        "create_1000_partitions_s",
        "stop_1000_partitions_s",
    ):
        f.pop(key, None)
    f["produce_acksall_msgs_s"] = f.get("produce_acks1_msgs_s")
    f["produce_acksall_mb_s"] = f.get("produce_acks1_mb_s")
    f["broker_cpu_us_per_msg_produce_acksall"] = f.get("broker_cpu_us_per_msg_produce")
    f["p50_ms_10k_acksall"] = f.get("p50_ms_10k")
    f["p99_ms_10k_acksall"] = f.get("p99_ms_10k")
    if report.reps:
        report.notes.append(
            "one acknowledgement mode (reply once stored): its produce and latency figures are "
            "also used for acks=all"
        )


def run_streams(
    launchers: list[ServerLauncher], cfg: StreamsConfig, workdir: Path, console: Console
) -> dict[str, SystemReport]:
    """Every phase on every available server; repetitions interleaved (rep 1: A B, rep 2: B A)."""
    reports: dict[str, SystemReport] = {}
    sessions: list[_StreamSession] = []
    with contextlib.ExitStack() as running:
        for launcher in launchers:
            reason = launcher.unavailable()
            report = reports[launcher.name] = SystemReport(
                name=launcher.name,
                label=launcher.label,
                available=True,
                persists=launcher.persists,
                version=launcher.version() if reason is None else None,
            )
            if reason is not None:
                report.available, report.reason = False, reason
                _log(console, f"[yellow]{launcher.name}: not available ({escape(reason)})[/yellow]")
                continue
            try:
                server = launcher.start(workdir / launcher.name)
            except Exception as exc:
                report.errors.append(f"start: {type(exc).__name__}: {exc}")
                _log(console, f"[red]{launcher.name}: could not start: {escape(str(exc))}[/red]")
                continue
            running.callback(server.stop)
            sessions.append(_StreamSession(report, server, console))
            _log(console, f"{launcher.name}: started at {server.bootstrap} (pid {server.pid})")
        for rep in range(1, cfg.reps + 1):
            k = (rep - 1) % max(1, len(sessions))
            for s in sessions[k:] + sessions[:k]:
                if s.server.alive():
                    s.rep(rep, cfg)
                else:
                    s.report.errors.append(f"rep {rep}: server is not running")
        for s in sessions:
            if s.server.alive():
                s.latency(cfg)
    for report in reports.values():
        _finish(report)
    return reports
