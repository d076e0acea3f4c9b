"""A TCP proxy on 127.0.0.1 that injects faults into Kafka traffic (tests only).

It forwards whole frames between clients and one broker and, at random, either drops a
broker response and cuts the connection (the request *was* applied: a client retry is a
duplicate unless the producer is idempotent) or cuts the connection before forwarding a
request (the request is lost). Point clients at the proxy and give the broker the proxy's
address as its advertised listener so that Metadata keeps clients on the proxy.
"""

from __future__ import annotations

import random
import socket
import struct
import threading
from dataclasses import dataclass


@dataclass
class FaultStats:
    connections: int = 0
    requests: int = 0
    responses_dropped: int = 0
    requests_dropped: int = 0


class FaultProxy:
    def __init__(
        self,
        target: tuple[str, int],
        drop_response: float = 0.0,
        drop_request: float = 0.0,
        seed: int = 42,
        fault_api_keys: frozenset[int] = frozenset({0}),
    ) -> None:
        self.target = target
        self.drop_response = drop_response
        self.drop_request = drop_request
        self.rnd = random.Random(seed)
        self.fault_api_keys = fault_api_keys  # only these requests are faulted (0 = Produce)
        self.stats = FaultStats()
        self.enabled = threading.Event()
        self.enabled.set()
        self._lock = threading.Lock()
        self._srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._srv.bind(("127.0.0.1", 0))
        self._srv.listen(64)
        self.port = self._srv.getsockname()[1]
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _chance(self, p: float) -> bool:
        with self._lock:
            return self.enabled.is_set() and self.rnd.random() < p

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._srv.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self.stats.connections += 1
            Pair(self, client, upstream).start()

    def close(self) -> None:
        self._closed = True
        self._srv.close()


def _read_frame(sock: socket.socket) -> bytes | None:
    head = _exact(sock, 4)
    if head is None:
        return None
    (n,) = struct.unpack(">i", head)
    body = _exact(sock, n)
    return None if body is None else head + body


def _exact(sock: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        try:
            chunk = sock.recv(min(n - len(buf), 1 << 20))
        except OSError:
            return None
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


class Pair:
    """One client connection and its upstream; requests and responses matched in order."""

    def __init__(self, proxy: FaultProxy, client: socket.socket, upstream: socket.socket) -> None:
        self.proxy = proxy
        self.client = client
        self.upstream = upstream
        self.pending: list[int] = []  # api keys of requests awaiting a response, in order
        self.lock = threading.Lock()
        self.dead = threading.Event()

    def start(self) -> None:
        threading.Thread(target=self._up, daemon=True).start()
        threading.Thread(target=self._down, daemon=True).start()

    def _kill(self) -> None:
        self.dead.set()
        for s in (self.client, self.upstream):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def _up(self) -> None:
        while not self.dead.is_set():
            frame = _read_frame(self.client)
            if frame is None:
                return self._kill()
            api_key = struct.unpack_from(">h", frame, 4)[0]
            if api_key in self.proxy.fault_api_keys and self.proxy._chance(self.proxy.drop_request):
                with self.proxy._lock:
                    self.proxy.stats.requests_dropped += 1
                return self._kill()
            with self.lock:
                self.pending.append(api_key)
            with self.proxy._lock:
                self.proxy.stats.requests += 1
            try:
                self.upstream.sendall(frame)
            except OSError:
                return self._kill()

    def _down(self) -> None:
        while not self.dead.is_set():
            frame = _read_frame(self.upstream)
            if frame is None:
                return self._kill()
            with self.lock:
                api_key = self.pending.pop(0) if self.pending else -1
            if api_key in self.proxy.fault_api_keys and self.proxy._chance(self.proxy.drop_response):
                with self.proxy._lock:
                    self.proxy.stats.responses_dropped += 1
                return self._kill()
            try:
                self.client.sendall(frame)
            except OSError:
                return self._kill()
