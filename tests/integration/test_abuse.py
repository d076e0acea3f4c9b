"""Abuse from 127.0.0.1 while a well-behaved client produces.

One broker with a PLAINTEXT and a SASL_PLAINTEXT listener (SCRAM-SHA-256 user ``alice``). A
confluent-kafka producer logged in as alice sends 100 messages/s for the whole module and times
each acknowledgement; its quiet p99 is measured first. Each test then throws one kind of abuse
at the broker and checks that (a) every message of the good client is acknowledged, (b) its p99
during the abuse stays within ``max(2 x quiet p99, quiet p99 + 100 ms)`` (2x alone is too
tight: on a shared 2-core machine a quiet p99 of a few ms doubles from scheduling noise alone, and with
the load average at 5-7 from other jobs, clusters of 40-115 ms latencies came every few seconds
while the broker used 19 % of a core (10,000 failed logins: 4.8 s of broker CPU in 25 s), so a
+50 ms floor flaked; +100 ms keeps the test about stalls of the broker, which it still catches:
a 100 ms stall of the event loop in every second of abuse puts > 1 % of the messages past it),
(c) the broker's RSS (VmRSS) stays under its
quiet figure + 100 MB, and (d) the abusive connections are closed by the limit meant for them:

* 1,000 idle connections (500 per listener): ``connections.authentication.timeout.ms`` closes
  the SASL ones, ``connections.max.idle.ms`` the PLAINTEXT ones; ``max.connections.per.ip``
  refuses those beyond it;
* slowloris (an ApiVersions request sent one byte per second) on both listeners;
* oversized size prefixes (2 GiB, 2 GiB - 1, -1, and 100 MiB: below socket.request.max.bytes
  but above what an unauthenticated SASL connection may send) -- refused without allocating;
* requests other than ApiVersions/SaslHandshake before authenticating;
* requests piled up behind long polls: 40 connections each park a Fetch (3 s) and send 8 x 1 MiB
  more requests behind it (320 MiB held if read) -- ``queued.max.request.bytes`` (16 MiB) stops
  reading them; here the good client waits for the pool like everyone (as in Kafka), so only
  its acknowledgements and the RSS are checked, not its p99;
* 10,000 failed logins: SCRAM exchanges with a wrong proof, 250 connections at a time (an
  attacker needs no PBKDF2 to send a wrong proof, so neither does the test), each answered
  after ``connection.failed.authentication.delay.ms`` (100 ms here) and closed. Run
  concurrently, the delay costs the attacker time but the test only ~10 s.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import os
import struct
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from framework.protocol.frames import decode_response, encode_request
from framework.protocol.messages.api_versions import ApiVersionsRequest
from framework.protocol.messages.metadata import MetadataRequest
from framework.protocol.messages.produce import ProduceRequest
from framework.protocol.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from framework.protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse
from testing import BrokerProcess, free_port, wait_for
from tests.support.brokers import quiet_logger
from tests.support.security import users_add

# a good client's p99 held to a bound while others abuse the broker: measured alone (serial)
pytestmark = [
    pytest.mark.integration,
    pytest.mark.serial,
    pytest.mark.sftraffic_only(reason="starts a broker with its own listeners and users"),
]

PASSWORD = "alice-Secret-0123456789"
TOPIC = "abuse-good"
RATE = 100  # good messages per second
PER_IP = 1100
TIMEOUT_S = 3.0  # connections.authentication.timeout.ms and connections.max.idle.ms
RSS_MARGIN = 100 * 1024 * 1024
FAILED_LOGINS = 10_000
QUEUED_MAX = 16 * 2**20  # queued.max.request.bytes
CONCURRENT_LOGINS = 250


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def p99(values: list[float]) -> float:
    s = sorted(values)
    return s[max(0, -(-len(s) * 99 // 100) - 1)]


class GoodClient:
    """A producer at RATE messages/s on its own thread; (sent, acked, error) per message, and
    the broker's RSS sampled every 100 ms."""

    def __init__(self, bootstrap: str, pid: int) -> None:
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "SCRAM-SHA-256",
                "sasl.username": "alice",
                "sasl.password": PASSWORD,
                "linger.ms": 0,
                "logger": quiet_logger(),
            }
        )
        self.pid = pid
        self.sent: list[float] = []
        self.acked: dict[int, tuple[float, Any]] = {}
        self.rss: list[tuple[float, int]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="good-producer", daemon=True)

    def _run(self) -> None:
        period = 1.0 / RATE
        nxt = time.monotonic()
        next_rss = nxt
        while not self.stop.is_set():
            now = time.monotonic()
            if now >= nxt:
                i = len(self.sent)
                self.sent.append(now)
                self.producer.produce(TOPIC, b"x" * 100, on_delivery=functools.partial(self._acked, i))
                nxt += period
            if now >= next_rss:
                self.rss.append((now, rss(self.pid)))
                next_rss = now + 0.1
            self.producer.poll(max(0.0, min(nxt, next_rss) - time.monotonic()))
        self.producer.flush(30)

    def _acked(self, i: int, err: Any, msg: Any) -> None:
        # librdkafka's own produce-to-ack latency: not inflated by this process holding the GIL
        lat = msg.latency()
        self.acked[i] = (time.monotonic() - self.sent[i] if lat is None else lat, err)

    def mark(self) -> int:
        return len(self.sent)

    def window(self, start: int, end: int) -> list[float]:
        """Produce-to-ack latencies (s) of messages start..end once all are acknowledged; fails on
        an error."""
        wait_for(lambda: all(i in self.acked for i in range(start, end)), 30, what="acknowledgements")
        errors = [self.acked[i][1] for i in range(start, end) if self.acked[i][1] is not None]
        assert not errors, errors[:3]
        return [self.acked[i][0] for i in range(start, end)]

    def max_rss(self, since: float) -> int:
        return max(v for t, v in self.rss if t >= since)


class Abused:
    def __init__(self, tmp: Path) -> None:
        data = tmp / "data"
        users_add(data, "alice", PASSWORD, "SCRAM-SHA-256")
        self.plain, self.sasl = free_port(), free_port()
        self.broker = BrokerProcess(
            data,
            port=self.plain,
            overrides={
                "listeners": f"PLAINTEXT://127.0.0.1:{self.plain},SASL_PLAINTEXT://127.0.0.1:{self.sasl}",
                "sasl.enabled.mechanisms": "SCRAM-SHA-256",
                "connections.authentication.timeout.ms": int(TIMEOUT_S * 1000),
                "connections.max.idle.ms": int(TIMEOUT_S * 1000),
                "connection.failed.authentication.delay.ms": 100,
                "max.connections.per.ip": PER_IP,
                "queued.max.request.bytes": QUEUED_MAX,
            },
        ).start()
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{self.plain}", "logger": quiet_logger()})
        admin.create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=1)])[TOPIC].result(30)
        self.good = GoodClient(f"127.0.0.1:{self.sasl}", self.broker.pid)
        self.good.thread.start()
        wait_for(lambda: 0 in self.good.acked, 30, what="the first acknowledgement")  # logged in
        t0, start = time.monotonic(), self.good.mark()
        time.sleep(3.0)  # the quiet phase is a duration, not an event
        quiet = self.good.window(start, self.good.mark())
        self.quiet_p99 = p99(quiet)
        self.quiet_rss = self.good.max_rss(t0)
        self.bound = max(2 * self.quiet_p99, self.quiet_p99 + 0.100)

    def close(self) -> None:
        self.good.stop.set()
        self.good.thread.join(40)
        self.broker.stop()

    @contextlib.contextmanager
    def serving(self, what: str) -> Iterator[None]:
        """The good client's figures during the block: all acknowledged, p99 and RSS bounded."""
        t0, start = time.monotonic(), self.good.mark()
        yield
        time.sleep(max(0.0, 1.0 - (time.monotonic() - t0)))  # at least one second of samples
        lat = self.good.window(start, self.good.mark())
        got = p99(lat)
        peak = self.good.max_rss(t0)
        ms, mib = 1000, 2**20
        print(
            f"{what}: {len(lat)} good messages, p99 {got * ms:.1f} ms (quiet {self.quiet_p99 * ms:.1f} ms, "
            f"bound {self.bound * ms:.1f} ms); RSS peak {peak / mib:.0f} MiB "
            f"(quiet {self.quiet_rss / mib:.0f})"
        )
        assert got <= self.bound, (what, got, self.quiet_p99)
        assert peak <= self.quiet_rss + RSS_MARGIN, (what, peak, self.quiet_rss)
        assert self.broker.alive()


@pytest.fixture(scope="module")
def abused(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Abused]:
    a = Abused(tmp_path_factory.mktemp("abuse"))
    yield a
    a.close()


# -- raw connections ----------------------------------------------------------------------------
Conn = tuple[asyncio.StreamReader, asyncio.StreamWriter]


async def connect(port: int) -> Conn:
    return await asyncio.open_connection("127.0.0.1", port)


async def closed_within(conn: Conn, timeout: float, since: float | None = None) -> float | None:
    """Seconds until the broker closes ``conn`` (reading until EOF; counted from ``since``, else
    from now), None if it did not within ``timeout``."""
    t0 = time.monotonic() if since is None else since
    try:
        async with asyncio.timeout(timeout):
            while await conn[0].read(65536):
                pass
    except TimeoutError:
        return None
    except (ConnectionResetError, BrokenPipeError):
        pass
    finally:
        conn[1].close()
    return time.monotonic() - t0


async def call(conn: Conn, corr: int, req: Any, version: int, resp_cls: Any) -> Any:
    conn[1].write(encode_request(req.API_KEY, version, corr, "abuser", req))
    head = await conn[0].readexactly(4)
    body = await conn[0].readexactly(struct.unpack(">i", head)[0])
    return decode_response(body, corr, req.API_KEY, version, resp_cls)


def run(coro: Awaitable[Any]) -> Any:
    async def main() -> Any:
        return await coro

    return asyncio.run(main())


async def bounded(n: int, limit: int, fn: Callable[[int], Awaitable[Any]]) -> list[Any]:
    sem = asyncio.Semaphore(limit)

    async def one(i: int) -> Any:
        async with sem:
            return await fn(i)

    return await asyncio.gather(*(one(i) for i in range(n)))


# -- the abuse ----------------------------------------------------------------------------------
def test_idle_connections_are_closed_and_the_per_ip_limit_refuses(abused: Abused) -> None:
    async def abuse() -> tuple[list[float | None], list[float | None]]:
        t0 = time.monotonic()
        idle = [await connect(abused.sasl if i % 2 else abused.plain) for i in range(1000)]
        extra = [await connect(abused.sasl) for _ in range(200)]
        refused = await asyncio.gather(*(closed_within(c, 1.0) for c in extra))
        closes = await asyncio.gather(*(closed_within(c, TIMEOUT_S + 6, t0) for c in idle))
        return refused, closes

    with abused.serving("1,000 idle connections"):
        refused, closes = run(abuse())
    n_refused = sum(r is not None for r in refused)
    # the good client holds one or two connections; everything past PER_IP is refused at once
    assert 200 - (PER_IP - 1000) <= n_refused <= 200 - (PER_IP - 1000) + 3, n_refused
    assert all(c is not None for c in closes), sum(c is None for c in closes)
    assert min(c for c in closes if c is not None) >= TIMEOUT_S - 0.2  # closed by the limits, not at once
    assert f"max.connections.per.ip={PER_IP} reached" in abused.broker.logs()


def test_slowloris_is_cut_off(abused: Abused) -> None:
    request = encode_request(18, 0, 1, "slowloris", ApiVersionsRequest())

    async def slow(port: int) -> float:
        conn = await connect(port)
        t0 = time.monotonic()
        try:
            for b in request:
                conn[1].write(bytes([b]))
                await conn[1].drain()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(1.0):  # one byte a second, or sooner EOF
                        if not await conn[0].read(1):
                            break
        except (ConnectionResetError, BrokenPipeError):
            pass
        conn[1].close()
        return time.monotonic() - t0

    async def abuse() -> list[float]:
        return await asyncio.gather(*(slow(abused.sasl if i % 2 else abused.plain) for i in range(100)))

    with abused.serving("slowloris"):
        lived = run(abuse())
    assert len(request) > TIMEOUT_S + 8  # the request would take longer than the limits
    assert all(TIMEOUT_S - 1.5 <= t <= TIMEOUT_S + 3.0 for t in lived), sorted(lived)[::10]


@pytest.mark.parametrize(
    "prefix",
    [0x80000000, 0x7FFFFFFF, 0xFFFFFFFF, 100 * 2**20],
    ids=["2GiB", "2GiB-1", "-1", "100MiB-unauthenticated"],
)
def test_oversized_size_prefixes_are_refused_without_allocating(abused: Abused, prefix: int) -> None:
    async def one(_: int) -> float | None:
        conn = await connect(abused.sasl)
        conn[1].write(struct.pack(">I", prefix) + b"\0" * 64)
        return await closed_within(conn, 3.0)

    with abused.serving(f"size prefix {prefix:#x}"):
        closes = run(bounded(50, 50, one))  # 50 x 100 MiB would be 5 GB if allocated
    assert all(c is not None for c in closes)


def test_requests_before_authenticating_close_the_connection(abused: Abused) -> None:
    async def one(i: int) -> float | None:
        conn = await connect(abused.sasl)
        conn[1].write(encode_request(3, 12, i, "abuser", MetadataRequest(topics=None)))
        return await closed_within(conn, 3.0)

    with abused.serving("requests before authenticating"):
        closes = run(bounded(300, 100, one))
    assert all(c is not None and c < 2.0 for c in closes)


def test_ten_thousand_failed_logins(abused: Abused) -> None:
    wrong_proof = base64.b64encode(os.urandom(32))

    async def fail(i: int) -> int:
        conn = await connect(abused.sasl)
        try:
            hs = await call(
                conn, 1, SaslHandshakeRequest(mechanism="SCRAM-SHA-256"), 1, SaslHandshakeResponse
            )
            assert hs.error_code == 0, hs
            nonce = base64.b64encode(os.urandom(18))
            first = await call(
                conn,
                2,
                SaslAuthenticateRequest(auth_bytes=b"n,,n=alice,r=" + nonce),
                2,
                SaslAuthenticateResponse,
            )
            assert first.error_code == 0, first
            server_nonce = dict(kv.split(b"=", 1) for kv in first.auth_bytes.split(b","))[b"r"]
            final = b"c=biws,r=" + server_nonce + b",p=" + wrong_proof
            resp = await call(conn, 3, SaslAuthenticateRequest(auth_bytes=final), 2, SaslAuthenticateResponse)
            assert await closed_within(conn, 3.0) is not None
            return int(resp.error_code)
        finally:
            conn[1].close()

    t0 = time.monotonic()
    with abused.serving(f"{FAILED_LOGINS} failed logins"):
        codes = run(bounded(FAILED_LOGINS, CONCURRENT_LOGINS, fail))
    print(f"{FAILED_LOGINS} failed logins in {time.monotonic() - t0:.1f} s")
    assert codes == [58] * FAILED_LOGINS  # SASL_AUTHENTICATION_FAILED, every one


def test_requests_piled_up_behind_long_polls_hold_bounded_memory(abused: Abused) -> None:
    from framework.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic

    empty = "abuse-empty"
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{abused.plain}", "logger": quiet_logger()})
    admin.create_topics([NewTopic(empty, num_partitions=1, replication_factor=1)])[empty].result(30)
    park = FetchRequest(
        max_wait_ms=3000,
        min_bytes=1,
        topics=[FetchTopic(topic=empty, partitions=[FetchPartition(partition=0, fetch_offset=0)])],
    )
    # a Produce header and 1 MiB of junk: held until its turn comes, then refused (malformed)
    junk = bytearray(encode_request(0, 9, 2, "abuser", ProduceRequest(acks=1, timeout_ms=1000)))
    junk += b"\xff" * 2**20
    struct.pack_into(">i", junk, 0, len(junk) - 4)

    async def one(i: int) -> float | None:
        conn = await connect(abused.plain)
        conn[1].write(encode_request(1, 12, 1, "abuser", park))
        for _ in range(8):
            conn[1].write(junk)
        with contextlib.suppress(ConnectionError):
            await conn[1].drain()
        return await closed_within(conn, 30.0)

    t0, start = time.monotonic(), abused.good.mark()
    closes = run(bounded(40, 40, one))
    end = abused.good.mark()
    peak = abused.good.max_rss(t0)
    mib = 2**20
    print(f"piled-up requests: RSS peak {peak / mib:.0f} MiB (quiet {abused.quiet_rss / mib:.0f})")
    assert all(c is not None for c in closes)  # each answered its fetch, then refused the junk
    assert peak <= abused.quiet_rss + QUEUED_MAX + RSS_MARGIN // 2, (peak, abused.quiet_rss)
    abused.good.window(start, end)  # every good message acknowledged, without an error
    assert abused.broker.alive()
