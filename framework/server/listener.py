"""The Kafka listener: one asyncio protocol object per client connection.

Framing without extra copies: small frames are read into a 256 KiB ring and copied out once;
a frame bigger than that gets its own buffer that the kernel fills directly (asyncio's
``BufferedProtocol``), so a 1 MiB produce request is received with no copy in Python and its
batches are patched and written to disk from that buffer.

Requests on one connection are processed in order, one at a time, like Kafka's request
channel; a handler that must wait (fetch long-poll, acks=all) suspends only its connection.
A malformed frame or an unknown API closes that connection only, with one log line.

Metrics: every request answered (or not, as acks=0 produce) is observed in the latency
histogram by API, and every error code of every response sent is counted
(``metrics.count_errors``); frames that close the connection count as bad frames.

Listeners and security: one server socket per named listener (``listeners``), each
with its security protocol. SSL and SASL_SSL connections are TLS (Python's ``ssl``; the
handshake is bounded by ``connections.authentication.timeout.ms``); on SSL a client
certificate names the principal (``ssl.principal.mapping.rules``). On SASL_PLAINTEXT and
SASL_SSL a connection must authenticate (SaslHandshake, SaslAuthenticate: its
:class:`SaslServerSession`) within that timeout, and may send nothing but ApiVersions and
those two before it has: anything else closes it. A SASL error answer closes the connection
once written; a session past its lifetime (``connections.max.reauth.ms``) is closed at its
next request unless that request re-authenticates. Limits: ``max.connections`` (the
inter-broker listener is exempt, as in Kafka), ``max.connections.per.ip`` (one connection too
many is closed at once) and ``connections.max.idle.ms`` (a sweep closes connections without a
request for that long). Every request's :class:`RequestContext` carries the connection's
principal and listener name.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import struct
import time
import types
from collections import deque
from collections.abc import Awaitable, Coroutine, Generator, Sequence
from typing import Any, TypeVar

from framework.errors import StoreError
from framework.protocol import codec
from framework.protocol.error_codes import ErrorCode
from framework.protocol.frames import encode_response, parse_request_header, peek_header
from framework.protocol.messages.fetch import FetchResponse
from framework.security import quotas as client_quotas
from framework.security.listener_security import ListenerSecurity
from framework.security.listeners import Endpoint
from framework.security.principal import ANONYMOUS, KafkaPrincipal
from framework.security.sasl import SaslServerSession
from framework.security.ssl_principal import subject_dn
from framework.server import metrics
from framework.server.context import NO_RESPONSE, BrokerServices, ClientSoftware, RequestContext
from framework.server.errors import kafka_error
from framework.server.handlers import api_versions
from framework.server.memory_pool import RequestMemoryPool
from framework.server.rate_limited_log import RateLimitedLog
from framework.server.router import Route, routes

log = logging.getLogger("sftraffic.server")
R = TypeVar("R")

RING = 256 * 1024
FIRST_RING = 16 * 1024  # a connection's ring until a frame needs more (1,000 idle ones: 16 MB)
MAX_QUEUED = 32
_SIZE = struct.Struct(">i")
API_VERSIONS = 18
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
PRODUCE = 0
FETCH = 1
# requests no client quota applies to: the handshake, and a throttled client's way back in
QUOTA_EXEMPT = frozenset({API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE})
BEFORE_AUTHENTICATION = frozenset({API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE})

security_log = RateLimitedLog(logging.getLogger("sftraffic.security"))


class KafkaListener:
    """The Kafka listener sockets (one per named listener) and their open connections."""

    def __init__(self, services: BrokerServices, security: ListenerSecurity | None = None) -> None:
        self.services = services
        self.security = security or ListenerSecurity()
        self.max_frame: int = services.config.int("socket.request.max.bytes")
        self.max_unauthenticated: int = services.config.int("sasl.server.max.receive.size")
        self.memory = RequestMemoryPool(services.config.int("queued.max.request.bytes"))
        self.connections: set[KafkaConnection] = set()
        self.servers: list[asyncio.base_events.Server] = []
        self.clients = 0  # connections counted against max.connections
        self.per_ip: dict[str, int] = {}
        self._sweeper: asyncio.Task[None] | None = None

    async def start(self, endpoints: Sequence[Endpoint]) -> dict[str, int]:
        """Listen on every endpoint; returns each listener's port (the one chosen for port 0)."""
        loop = asyncio.get_running_loop()
        ports: dict[str, int] = {}
        for ep in endpoints:
            sec = self.security
            tls = (sec.sasl_ssl_context if ep.uses_sasl else sec.ssl_context) if ep.uses_ssl else None
            if ep.uses_ssl and tls is None:
                raise StoreError(f"listener {ep}: no TLS context (ssl.keystore.location)")
            try:
                server = await loop.create_server(
                    lambda ep=ep: KafkaConnection(self, ep),
                    ep.host or None,
                    ep.port,
                    reuse_address=True,
                    backlog=1024,
                    ssl=tls,
                    ssl_handshake_timeout=self.security.auth_timeout_s if tls is not None else None,
                )
            except OSError as exc:
                self.close()
                raise StoreError(f"cannot listen on {ep}: {exc.strerror}") from None
            self.servers.append(server)
            ports[ep.name] = int(server.sockets[0].getsockname()[1])
        self._sweeper = loop.create_task(self._sweep_idle())
        return ports

    async def _sweep_idle(self) -> None:
        idle = self.security.idle_s
        while True:
            await asyncio.sleep(min(max(idle / 4, 0.25), 30.0))
            now = time.monotonic()
            for conn in list(self.connections):
                if not conn.busy and not conn.queue and now - conn.last_active > idle:
                    security_log(
                        logging.INFO,
                        f"closing connection from {conn.peer} on {conn.endpoint.name}: idle for "
                        f"more than connections.max.idle.ms={idle * 1000:.0f}",
                    )
                    conn.close()

    def close(self) -> None:
        """Stop accepting and close every connection (requests in flight are dropped)."""
        for server in self.servers:
            server.close()
        if self._sweeper is not None:
            self._sweeper.cancel()
        for conn in list(self.connections):
            conn.close()

    async def wait_closed(self, timeout: float) -> None:
        for server in self.servers:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(timeout):
                    await server.wait_closed()

    # -- connection limits -------------------------------------------------------------------
    def admit(self, conn: KafkaConnection, ip: str) -> str | None:
        """Count a new connection; the reason to refuse it when a limit is reached."""
        sec = self.security
        exempt = conn.endpoint.name == sec.inter_broker
        if not exempt and self.clients >= sec.max_connections:
            return f"max.connections={sec.max_connections} reached"
        if self.per_ip.get(ip, 0) >= sec.max_connections_per_ip:
            return f"max.connections.per.ip={sec.max_connections_per_ip} reached for {ip}"
        if not exempt:
            self.clients += 1
        self.per_ip[ip] = self.per_ip.get(ip, 0) + 1
        return None

    def release(self, conn: KafkaConnection, ip: str) -> None:
        if conn.endpoint.name != self.security.inter_broker:
            self.clients -= 1
        n = self.per_ip.get(ip, 0) - 1
        if n > 0:
            self.per_ip[ip] = n
        else:
            self.per_ip.pop(ip, None)


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(self, listener: KafkaListener, endpoint: Endpoint) -> None:
        self.listener = listener
        self.endpoint = endpoint
        self.services = listener.services
        self.max_frame = listener.max_frame
        self.ring = bytearray(FIRST_RING)
        self.ring_mv = memoryview(self.ring)
        self.rstart = 0
        self.rend = 0
        self.big: bytearray | None = None
        self.big_mv: memoryview | None = None
        self.big_got = 0
        self.queue: deque[bytearray] = deque()
        self.busy = False
        self.write_paused = False
        self.read_paused = False
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.ip = ""
        self.admitted = False
        self.task: asyncio.Task[None] | None = None
        self.routes = routes()
        self.principal: KafkaPrincipal = ANONYMOUS
        self.sasl: SaslServerSession | None = None
        self.software = ClientSoftware()  # set by ApiVersions v3+
        self.deadline: asyncio.TimerHandle | None = None
        self.last_active = time.monotonic()
        # client quotas: who sent the request being served (user, client id, its size, its
        # handler's time); ``muted`` while the connection sits out a throttle time
        self.quota_who: tuple[str, str, int, float, bool] | None = None
        self.muted = False
        # queued.max.request.bytes: bytes reserved in the listener's pool for this connection's
        # frames (queued, in flight, or being read into ``big``), the in-flight one's size, and
        # whether reading waits for the pool
        self.held = 0
        self.inflight = 0
        self.pool_paused = False

    # -- asyncio protocol ------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert hasattr(transport, "write"), transport  # uvloop's TCPTransport is no asyncio.Transport
        self.transport = transport  # type: ignore[assignment]
        self.transport.set_write_buffer_limits(high=8 * 1024 * 1024)  # type: ignore[union-attr]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        peer = transport.get_extra_info("peername")
        if peer:
            self.peer = f"{peer[0]}:{peer[1]}"
            self.ip = str(peer[0])
        refused = self.listener.admit(self, self.ip)
        if refused is not None:
            security_log(logging.WARNING, f"refusing connection from {self.peer}: {refused}")
            self.transport.abort()  # type: ignore[union-attr]
            return
        self.admitted = True
        self.listener.connections.add(self)
        self._authenticate_transport(transport)

    def _authenticate_transport(self, transport: asyncio.BaseTransport) -> None:
        """What the connection is before any request: its certificate's principal (SSL), or a
        SASL session with a deadline (SASL_PLAINTEXT, SASL_SSL)."""
        sec = self.listener.security
        ep = self.endpoint
        if ep.uses_sasl:
            self.sasl = sec.sasl_session()
            self.deadline = asyncio.get_running_loop().call_later(sec.auth_timeout_s, self._auth_deadline)
        elif ep.uses_ssl:
            cert = transport.get_extra_info("peercert")
            if cert:
                try:
                    dn = subject_dn(cert.get("subject", ()))
                    self.principal = KafkaPrincipal("User", sec.mapper.name(dn))
                except StoreError as exc:
                    security_log(logging.WARNING, f"closing TLS connection from {self.peer}: {exc.message}")
                    self.transport.abort()  # type: ignore[union-attr]

    def _auth_deadline(self) -> None:
        if self.sasl is not None and not self.sasl.authenticated:
            security_log(
                logging.INFO,
                f"closing connection from {self.peer} on {self.endpoint.name}: not authenticated "
                f"within connections.authentication.timeout.ms",
            )
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.admitted:
            self.admitted = False
            self.listener.release(self, self.ip)
        if self.deadline is not None:
            self.deadline.cancel()
        self.listener.connections.discard(self)
        if self.services.authz is not None:
            self.services.authz.forget(self.peer)  # its decision cache goes with it
        if self.services.shares is not None:
            self.services.shares.connection_closed(self.peer)  # its share sessions end (KIP-932)
        self.listener.memory.forget(self._memory_freed)
        self._drop_queue()
        if self.big is not None:
            self._give_back(len(self.big))
            self.big = self.big_mv = None
        if self.task is not None and not self.task.done():
            self.task.cancel()  # its _finish gives the in-flight frame's bytes back

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        self._process()

    def get_buffer(self, sizehint: int) -> memoryview:
        if self.big_mv is not None:
            return self.big_mv[self.big_got :]
        if self.rend == len(self.ring):
            n = self.rend - self.rstart
            self.ring[:n] = self.ring[self.rstart : self.rend]
            self.rstart, self.rend = 0, n
        return self.ring_mv[self.rend :]

    def buffer_updated(self, nbytes: int) -> None:
        if self.big is not None:
            self.big_got += nbytes
            if self.big_got == len(self.big):
                frame = self.big
                self.big = None
                self.big_mv = None
                self._enqueue(frame)
            return
        self.rend += nbytes
        self._extract()

    def eof_received(self) -> bool | None:
        return None

    def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    # -- framing ---------------------------------------------------------------------------
    def _extract(self) -> None:
        ring = self.ring
        while self.rend - self.rstart >= 4:
            size = _SIZE.unpack_from(ring, self.rstart)[0]
            if size < 8 or size > self.max_frame:
                self._bad(f"frame size {size} outside [8, socket.request.max.bytes={self.max_frame}]")
                return
            if (
                self.sasl is not None
                and not self.sasl.authenticated
                and size > self.listener.max_unauthenticated
            ):
                self._refuse(
                    f"frame size {size} before authenticating on {self.endpoint.name} "
                    f"(sasl.server.max.receive.size={self.listener.max_unauthenticated})"
                )
                return
            avail = self.rend - self.rstart - 4
            if (avail >= size or size + 4 > RING) and not self._reserve(size):
                return
            if avail >= size:
                start = self.rstart + 4
                frame = bytearray(self.ring_mv[start : start + size])
                self.rstart = start + size
                self._enqueue(frame)
                if self.transport is None or self.transport.is_closing():
                    return
            elif size + 4 > RING:
                big = bytearray(size)
                big[:avail] = self.ring_mv[self.rstart + 4 : self.rend]
                self.big = big
                self.big_mv = memoryview(big)
                self.big_got = avail
                self.rstart = self.rend = 0
                return
            elif size + 4 > len(ring):
                self._grow_ring()
                ring = self.ring
                break
            else:
                break
        if self.rstart == self.rend:
            self.rstart = self.rend = 0

    def _grow_ring(self) -> None:
        """Replace the first small ring by a full one (pending bytes moved to its start)."""
        n = self.rend - self.rstart
        ring = bytearray(RING)
        ring[:n] = self.ring_mv[self.rstart : self.rend]
        self.ring, self.ring_mv = ring, memoryview(ring)
        self.rstart, self.rend = 0, n

    def _enqueue(self, frame: bytearray) -> None:
        self.last_active = time.monotonic()  # the idle clock counts requests, not bytes (slowloris)
        self.queue.append(frame)
        if not self.busy:
            self._process()
        if len(self.queue) >= MAX_QUEUED and not self.read_paused and self.transport is not None:
            self.read_paused = True
            self.transport.pause_reading()

    def _process(self) -> None:
        while self.queue and not self.busy and not self.write_paused and not self.muted:
            t = self.transport
            if t is None or t.is_closing():
                self._drop_queue()
                return
            frame = self.queue.popleft()
            self.inflight = len(frame)
            self._handle(frame)
            if not self.busy:
                self._answered()
        if self.read_paused and len(self.queue) < MAX_QUEUED // 2 and self.transport is not None:
            self.read_paused = False
            if not self.muted and not self.pool_paused:
                self.transport.resume_reading()

    # -- queued.max.request.bytes ---------------------------------------------------------------
    def _reserve(self, size: int) -> bool:
        """Take the next frame's bytes from the listener's pool, or stop reading until it has them."""
        memory = self.listener.memory
        if memory.try_reserve(size):
            self.held += size
            return True
        if not self.pool_paused:
            self.pool_paused = True
            if self.transport is not None:
                self.transport.pause_reading()
            memory.wait(self._memory_freed)
        return False

    def _memory_freed(self) -> None:
        self.pool_paused = False
        t = self.transport
        if t is None or t.is_closing():
            return
        self._extract()  # the frame that waited may sit whole in the ring already
        if not self.pool_paused and not self.read_paused and not self.muted:
            t.resume_reading()

    def _give_back(self, n: int) -> None:
        if n:
            self.held -= n
            self.listener.memory.release(n)

    def _answered(self) -> None:
        n, self.inflight = self.inflight, 0
        self._give_back(n)

    def _drop_queue(self) -> None:
        n = sum(map(len, self.queue))
        self.queue.clear()
        self._give_back(n)

    def _bad(self, why: str) -> None:
        metrics.BAD_FRAMES.inc()
        log.warning("closing connection from %s: %s", self.peer, why)
        if self.transport is not None:
            self.transport.abort()

    def _refuse(self, why: str) -> None:
        """Close a connection that asks for what it may not (rate-limited log: abuse is cheap)."""
        metrics.BAD_FRAMES.inc()
        security_log(logging.WARNING, f"closing connection from {self.peer}: {why}")
        if self.transport is not None:
            self.transport.abort()

    # -- requests --------------------------------------------------------------------------
    def _handle(self, frame: bytearray) -> None:
        """Decode one request and run its handler (see :meth:`_run`)."""
        t0 = time.perf_counter()
        try:
            api_key, version, corr = peek_header(frame)
        except codec.DecodeError as exc:
            self._bad(str(exc))
            return
        route = self._admit(api_key, version, corr, t0)
        if route is None:
            return
        mv = memoryview(frame)
        try:
            header, pos = parse_request_header(mv, route.entry.request_flexible(version))
            req: Any
            req, _ = codec.decode(route.entry.request, version, mv, pos)
        except (codec.DecodeError, IndexError, ValueError, struct.error) as exc:
            self._bad(f"malformed {route.entry.name} v{version} request: {exc}")
            return
        principal = self.principal
        if self.sasl is not None and self.sasl.principal is not None:
            principal = self.sasl.principal
        ctx = RequestContext(
            self.services,
            header,
            self.peer,
            principal=principal,
            listener=self.endpoint.name,
            sasl=self.sasl,
            software=self.software,
        )
        self._run(route, ctx, req, len(frame), t0)

    def _admit(self, api_key: int, version: int, corr: int, t0: float) -> Route[Any, Any] | None:
        """The route of a request this connection may send, at a version served; None when it
        may not (the connection is closed) or it was answered here (ApiVersions, unknown version)."""
        route = self.routes.get(api_key)
        if route is None:
            self._bad(f"unknown or unsupported API key {api_key}")
            return None
        if self.sasl is not None and api_key not in BEFORE_AUTHENTICATION:
            if not self.sasl.authenticated:
                self._refuse(f"{route.entry.name} before authenticating on listener {self.endpoint.name}")
                return None
            if self.sasl.expired():
                self._refuse(f"SASL session expired (connections.max.reauth.ms) on {self.endpoint.name}")
                return None
        if not route.min_version <= version <= route.max_version:
            if api_key == API_VERSIONS:
                self._unsupported_api_versions(version, corr)
                self._observe(route, t0)
                return None
            self._bad(
                f"{route.entry.name} v{version} is not supported "
                f"(this broker serves v{route.min_version}-v{route.max_version})"
            )
            return None
        return route

    def _run(self, route: Route[Any, Any], ctx: RequestContext, req: Any, size: int, t0: float) -> None:
        """Run the handler eagerly: a coroutine that returns without suspending is answered at
        once; one that suspends goes on in a Task, and the connection is busy until it answers
        (:mod:`framework.server.router`)."""
        corr = ctx.header.correlation_id
        coro = route.handle(ctx, req)
        try:
            waiting = coro.send(None)
        except StopIteration as done:
            resp = done.value
        except Exception as exc:
            resp = self._failed(route, req, ctx.version, exc)
        else:
            self._charge(route, ctx, req, size, t0)
            self.busy = True
            rest = _resumed(coro, waiting)
            self.task = asyncio.get_running_loop().create_task(self._finish(route, req, ctx, rest, t0))
            return
        self._charge(route, ctx, req, size, t0)
        self._answer(route, ctx.version, corr, resp, t0)

    def _charge(self, route: Route[Any, Any], ctx: RequestContext, req: Any, size: int, t0: float) -> None:
        """Note whose quotas the request is charged to once answered (:meth:`_throttle`): its
        user and client id, its size and its handler's time so far."""
        quotas = self.services.quotas
        key = route.entry.key
        if quotas is None or not quotas.active or key in QUOTA_EXEMPT:
            self.quota_who = None
            return
        follower = key == FETCH and max(req.replica_id, req.replica_state.replica_id) >= 0
        client_id = ctx.header.client_id or ""
        self.quota_who = (ctx.principal.name, client_id, size, time.perf_counter() - t0, follower)

    def _answer(self, route: Route[Any, Any], version: int, corr: int, resp: Any, t0: float) -> None:
        if resp is NO_RESPONSE:
            throttle = self._throttle(route, 0)  # acks=0: recorded and muted, no answer to carry it
            if throttle:
                self._mute(throttle)
        else:
            self._send(route, version, corr, resp)
        self._observe(route, t0)

    def _failed(self, route: Route[Any, Any], req: Any, version: int, exc: Exception) -> Any:
        """The answer to a request whose handler raised: its Kafka error, or a logged bug."""
        named = kafka_error(exc)
        if named is None:
            log.error("%s v%d from %s failed", route.entry.name, version, self.peer, exc_info=exc)
            named = ErrorCode.UNKNOWN_SERVER_ERROR, "internal error"
        return route.error_response(req, *named)

    async def _finish(
        self, route: Route[Any, Any], req: Any, ctx: RequestContext, rest: Awaitable[Any], t0: float
    ) -> None:
        try:
            try:
                resp = await rest
            except Exception as exc:
                resp = self._failed(route, req, ctx.version, exc)
            self._answer(route, ctx.version, ctx.header.correlation_id, resp, t0)
        finally:
            self.busy = False
            self.task = None
            self._answered()
        self._process()

    def _send(self, route: Route[Any, Any], version: int, corr: int, resp: Any) -> None:
        metrics.count_errors(route.entry, resp)
        t = self.transport
        if t is None or t.is_closing():
            return
        try:
            parts = encode_response(route.entry.key, version, corr, resp)
            throttle = 0
            if self.quota_who is not None:
                throttle = self._throttle(route, sum(map(len, parts)))
                if throttle and route.entry.key == FETCH and not resp.error_code:
                    # Kafka answers a throttled fetch empty (its bytes unrecorded): the client
                    # fetches the same offsets again once the throttle time has passed
                    resp = FetchResponse(throttle_time_ms=throttle, session_id=0)
                    parts = encode_response(route.entry.key, version, corr, resp)
                elif route.throttle_field and throttle > resp.throttle_time_ms:
                    resp.throttle_time_ms = throttle
                    parts = encode_response(route.entry.key, version, corr, resp)
        except codec.EncodeError:
            log.exception("cannot encode %s v%d response", route.entry.name, version)
            self._bad("internal encoding error")
            return
        t.writelines(parts)
        if throttle:
            self._mute(throttle)
        self.last_active = time.monotonic()
        if route.entry.key in (SASL_HANDSHAKE, SASL_AUTHENTICATE) and resp.error_code:
            t.close()  # a failed or out-of-order SASL step ends the connection (once written)

    # -- client quotas ------------------------------------------------------------------------
    def _throttle(self, route: Route[Any, Any], response_bytes: int) -> int:
        """Record what the request cost against the client's quotas (Kafka: Produce by its
        size, Fetch by its answer's, every request by its handler's time); the throttle time
        in ms it earned, the longest of them. The request is served all the same."""
        quotas, who = self.services.quotas, self.quota_who
        self.quota_who = None
        if quotas is None or who is None:
            return 0
        user, client_id, request_bytes, handler_s, follower = who
        if follower:
            return 0  # replication is not a client's (Kafka: ClusterAction is exempt)
        now = time.monotonic()
        throttle = quotas.record(client_quotas.REQUEST_PERCENTAGE, user, client_id, handler_s * 100, now)
        key = route.entry.key
        if key == PRODUCE:
            throttle = max(
                throttle, quotas.record(client_quotas.PRODUCER_BYTE_RATE, user, client_id, request_bytes, now)
            )
        elif key == FETCH:
            throttle = max(
                throttle,
                quotas.record(client_quotas.CONSUMER_BYTE_RATE, user, client_id, response_bytes, now),
            )
            if throttle:
                quotas.unrecord(client_quotas.CONSUMER_BYTE_RATE, user, client_id, response_bytes)
        return throttle

    def _mute(self, throttle_ms: int) -> None:
        """Read no further request for ``throttle_ms`` (Kafka mutes the channel, KIP-219)."""
        t = self.transport
        if t is None or t.is_closing() or self.muted:
            return
        self.muted = True
        t.pause_reading()
        asyncio.get_running_loop().call_later(throttle_ms / 1000, self._unmute)

    def _unmute(self) -> None:
        self.muted = False
        t = self.transport
        if t is None or t.is_closing():
            return
        if not self.read_paused and not self.pool_paused:
            t.resume_reading()
        if not self.busy:
            self._process()

    def _observe(self, route: Route[Any, Any], t0: float) -> None:
        name = route.entry.name
        metrics.child(metrics.REQUEST_LATENCY, name).observe(time.perf_counter() - t0)

    def _unsupported_api_versions(self, version: int, corr: int) -> None:
        resp = api_versions.unsupported_version_response()
        route = self.routes[API_VERSIONS]
        self._send(route, 0, corr, resp)


@types.coroutine
def _resumed(coro: Coroutine[Any, Any, R], waiting: Any) -> Generator[Any, Any, R]:
    """The rest of a handler's coroutine, run eagerly until it suspended on ``waiting``, for a
    Task to drive: what the coroutine yields goes to the Task, what the Task sends or throws in
    (a result, a cancellation) goes to the coroutine."""
    while True:
        try:
            sent = yield waiting
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:
            try:
                waiting = coro.throw(exc)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
        else:
            try:
                waiting = coro.send(sent)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
