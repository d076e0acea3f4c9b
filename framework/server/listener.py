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
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import socket
import struct
import time
from collections import deque
from typing import Any

from framework.errors import StoreError
from framework.protocol import codec
from framework.protocol.errors import ErrorCode
from framework.protocol.frames import encode_response, parse_request_header, peek_header
from framework.server import metrics
from framework.server.context import BrokerServices, RequestContext
from framework.server.errors import kafka_error
from framework.server.handlers import api_versions
from framework.server.router import Route, routes

log = logging.getLogger("sftraffic.server")

RING = 256 * 1024
MAX_QUEUED = 32
_SIZE = struct.Struct(">i")
API_VERSIONS = 18


class KafkaListener:
    """The Kafka listener socket and its open connections."""

    def __init__(self, services: BrokerServices) -> None:
        self.services = services
        self.max_frame: int = services.config["socket.request.max.bytes"]
        self.connections: set[KafkaConnection] = set()
        self.server: asyncio.base_events.Server | None = None

    async def start(self, host: str, port: int) -> int:
        """Listen on host:port; returns the port (the one chosen when ``port`` is 0)."""
        loop = asyncio.get_running_loop()
        try:
            self.server = await loop.create_server(
                lambda: KafkaConnection(self), host, port, reuse_address=True, backlog=1024
            )
        except OSError as exc:
            raise StoreError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
        return int(self.server.sockets[0].getsockname()[1])

    def close(self) -> None:
        """Stop accepting and close every connection (requests in flight are dropped)."""
        if self.server is not None:
            self.server.close()
        for conn in list(self.connections):
            conn.close()

    async def wait_closed(self, timeout: float) -> None:
        if self.server is not None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(timeout):
                    await self.server.wait_closed()


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(self, listener: KafkaListener) -> None:
        self.listener = listener
        self.services = listener.services
        self.max_frame = listener.max_frame
        self.ring = bytearray(RING)
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
        self.task: asyncio.Task[None] | None = None
        self.routes = routes()

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
        self.listener.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.listener.connections.discard(self)
        self.queue.clear()
        if self.task is not None and not self.task.done():
            self.task.cancel()

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        self._process()

    def get_buffer(self, sizehint: int) -> memoryview:
        if self.big_mv is not None:
            return self.big_mv[self.big_got :]
        if self.rend == RING:
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
            avail = self.rend - self.rstart - 4
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
            else:
                break
        if self.rstart == self.rend:
            self.rstart = self.rend = 0

    def _enqueue(self, frame: bytearray) -> None:
        self.queue.append(frame)
        if not self.busy:
            self._process()
        if len(self.queue) >= MAX_QUEUED and not self.read_paused and self.transport is not None:
            self.read_paused = True
            self.transport.pause_reading()

    def _process(self) -> None:
        while self.queue and not self.busy and not self.write_paused:
            t = self.transport
            if t is None or t.is_closing():
                self.queue.clear()
                return
            frame = self.queue.popleft()
            self._handle(frame)
        if self.read_paused and len(self.queue) < MAX_QUEUED // 2 and self.transport is not None:
            self.read_paused = False
            self.transport.resume_reading()

    def _bad(self, why: str) -> None:
        metrics.BAD_FRAMES.inc()
        log.warning("closing connection from %s: %s", self.peer, why)
        if self.transport is not None:
            self.transport.abort()

    # -- requests --------------------------------------------------------------------------
    def _handle(self, frame: bytearray) -> None:
        t0 = time.perf_counter()
        try:
            api_key, version, corr = peek_header(frame)
        except codec.DecodeError as exc:
            self._bad(str(exc))
            return
        route = self.routes.get(api_key)
        if route is None:
            self._bad(f"unknown or unsupported API key {api_key}")
            return
        if not route.min_version <= version <= route.max_version:
            if api_key == API_VERSIONS:
                self._unsupported_api_versions(version, corr)
                self._observe(route, t0)
                return
            self._bad(
                f"{route.entry.name} v{version} is not supported "
                f"(this broker serves v{route.min_version}-v{route.max_version})"
            )
            return
        mv = memoryview(frame)
        try:
            header, pos = parse_request_header(mv, route.entry.request_flexible(version))
            req: Any
            req, _ = codec.decode(route.entry.request, version, mv, pos)
        except (codec.DecodeError, IndexError, ValueError, struct.error) as exc:
            self._bad(f"malformed {route.entry.name} v{version} request: {exc}")
            return
        ctx = RequestContext(self.services, header, self.peer)
        try:
            resp = route.handle(ctx, req)
        except Exception as exc:
            resp = self._failed(route, req, version, exc)
        if resp is None:
            self._observe(route, t0)
            return
        if inspect.isawaitable(resp):
            self.busy = True
            self.task = asyncio.get_running_loop().create_task(
                self._finish(route, req, header.api_version, corr, resp, t0)
            )
            return
        self._send(route, version, corr, resp)
        self._observe(route, t0)

    def _failed(self, route: Route, req: Any, version: int, exc: Exception) -> Any:
        """The answer to a request whose handler raised: its Kafka error, or a logged bug."""
        named = kafka_error(exc)
        if named is None:
            log.error("%s v%d from %s failed", route.entry.name, version, self.peer, exc_info=exc)
            named = ErrorCode.UNKNOWN_SERVER_ERROR, "internal error"
        return self._error(route, req, *named)

    def _error(self, route: Route, req: Any, code: int, message: str) -> Any:
        if route.error_response is None:
            self._bad(f"{route.entry.name} failed: {message}")
            return None
        return route.error_response(req, code, message)

    async def _finish(self, route: Route, req: Any, version: int, corr: int, aw: Any, t0: float) -> None:
        try:
            try:
                resp = await aw
            except Exception as exc:
                resp = self._failed(route, req, version, exc)
            if resp is not None:
                self._send(route, version, corr, resp)
            self._observe(route, t0)
        finally:
            self.busy = False
            self.task = None
        self._process()

    def _send(self, route: Route, version: int, corr: int, resp: Any) -> None:
        metrics.count_errors(route.entry, resp)
        t = self.transport
        if t is None or t.is_closing():
            return
        try:
            parts = encode_response(route.entry.key, version, corr, resp)
        except codec.EncodeError:
            log.exception("cannot encode %s v%d response", route.entry.name, version)
            self._bad("internal encoding error")
            return
        t.writelines(parts)

    def _observe(self, route: Route, t0: float) -> None:
        name = route.entry.name
        metrics.child(metrics.REQUEST_LATENCY, name).observe(time.perf_counter() - t0)

    def _unsupported_api_versions(self, version: int, corr: int) -> None:
        resp = api_versions.unsupported_version_response()
        route = self.routes[API_VERSIONS]
        self._send(route, 0, corr, resp)
