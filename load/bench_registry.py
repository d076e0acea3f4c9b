"""Schema registry benchmark: ``GET /schemas/ids/{id}`` latency at a fixed request rate (goal:
p99 <= 5 ms at 1,000 requests/s), and what a registration costs.

How it measures, in full: ``docs/benchmarks.md``, "bench registry".
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import gc
import json
import random
import tempfile
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import aiohttp

from deploy.local.registry import RegistryProcess
from load.harness.procfs import cpu_seconds, own_cpu
from load.harness.report import document, goal, log
from load.harness.runner import Processes
from load.harness.stats import summary
from registry.auth import user_entry
from testing import BrokerProcess

GOAL_P99_MS = 5.0
CT = "application/vnd.schemaregistry.v1+json"


def schema(i: int) -> str:
    return json.dumps(
        {
            "type": "record",
            "name": f"Event{i}",
            "namespace": "bench",
            "fields": [{"name": "id", "type": "long"}, {"name": f"f{i}", "type": "string", "default": ""}],
        }
    )


USER, PASSWORD = "bench", "bench-password"
AUTH_HEADER = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()


async def register(url: str, n: int) -> tuple[list[int], list[float]]:
    ids, lat = [], []
    async with aiohttp.ClientSession(headers={"Content-Type": CT}) as s:
        for i in range(n):
            t = time.perf_counter()
            async with s.post(
                f"{url}/subjects/bench-{i}-value/versions", data=json.dumps({"schema": schema(i)})
            ) as r:
                body = await r.json(content_type=None)
                if r.status != 200:
                    raise RuntimeError(f"registration {i}: {r.status} {body}")
            lat.append((time.perf_counter() - t) * 1000)
            ids.append(int(body["id"]))
    return ids, lat


class _Connection(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection of the lean client: one request at a time, the answer
    read up to its Content-Length (the registry always sends one). ~10x less CPU per request
    than aiohttp's client, which on a 2-core machine shared with the registry is its noise."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.need = -1  # the whole answer's length once its head is read
        self.status = 0
        self.done: asyncio.Future[int] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def request(self, raw: bytes) -> asyncio.Future[int]:
        assert self.transport is not None
        self.done = asyncio.get_running_loop().create_future()
        self.buf.clear()
        self.need = -1
        self.transport.write(raw)
        return self.done

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if self.need < 0:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self.buf[:end]).lower()
            self.status = int(head[9:12])
            at = head.find(b"\r\ncontent-length:")
            length = int(head[at + 17 : head.find(b"\r\n", at + 2)]) if at >= 0 else 0
            self.need = end + 4 + length
        if len(self.buf) >= self.need and self.done is not None and not self.done.done():
            self.done.set_result(self.status)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.done is not None and not self.done.done():
            self.done.set_exception(ConnectionError(str(exc or "closed by the registry")))


async def _paced(n: int, rate: float, start: Callable[[float, int], Coroutine[Any, Any, None]]) -> float:
    """Start request ``i`` (``start(due, i)``) at its due time ``t0 + i / rate``, open loop (a
    slow answer never delays the next start); the seconds from ``t0`` until all were answered."""
    tasks: set[asyncio.Task[None]] = set()
    gc.collect()
    gc.freeze()  # the client's own collections stay short (its pauses would count as latency)
    t0 = time.perf_counter() + 0.05
    for i in range(n):
        due = t0 + i / rate
        while (delay := due - time.perf_counter()) > 0:  # a timer may fire up to 1 ms early
            await asyncio.sleep(delay)
        task = asyncio.create_task(start(due, i))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    while tasks:
        await asyncio.gather(*tasks)
    took = time.perf_counter() - t0
    gc.unfreeze()
    return took


def _result(n: int, took: float, lat: list[float], lag: list[float], errors: list[str]) -> dict[str, Any]:
    return {
        "requests": n,
        "achieved_rate": round(n / took, 1),
        "latency_ms": summary(lat),
        "client_lag_ms": summary(lag),
        "errors": len(errors),
    }


async def open_loop_lean(
    url: str, ids: list[int], rate: float, duration: float, connections: int, auth: bool = False
) -> dict[str, Any]:
    """:func:`open_loop` with :class:`_Connection`: ``connections`` keep-alive connections, a
    request waiting for a free one when all are busy (its latency still counts from its due time)."""
    n = int(rate * duration)
    lat: list[float] = []
    lag: list[float] = []
    errors: list[str] = []
    rng = random.Random(1)
    hostport = url.split("//", 1)[1].rstrip("/")
    host, _, port = hostport.rpartition(":")
    head = f"Host: {hostport}\r\nAccept: {CT}\r\n" + (f"Authorization: {AUTH_HEADER}\r\n" if auth else "")
    raws = [f"GET /schemas/ids/{rng.choice(ids)} HTTP/1.1\r\n{head}\r\n".encode() for _ in range(n)]
    loop = asyncio.get_running_loop()
    free: asyncio.Queue[_Connection] = asyncio.Queue()
    opened = []
    for _ in range(connections):
        _, conn = await loop.create_connection(_Connection, host, int(port))
        opened.append(conn)
        free.put_nowait(conn)

    async def one(due: float, raw: bytes) -> None:
        lag.append((time.perf_counter() - due) * 1000)
        conn = await free.get()
        try:
            status = await conn.request(raw)
            if status != 200:
                errors.append(str(status))
            free.put_nowait(conn)
        except ConnectionError as exc:
            errors.append(type(exc).__name__)
        lat.append((time.perf_counter() - due) * 1000)

    took = await _paced(n, rate, lambda due, i: one(due, raws[i]))
    for conn in opened:
        if conn.transport is not None:
            conn.transport.close()
    return _result(n, took, lat, lag, errors)


async def open_loop(
    url: str, ids: list[int], rate: float, duration: float, connections: int, auth: bool = False
) -> dict[str, Any]:
    n = int(rate * duration)
    lat: list[float] = []
    lag: list[float] = []  # how late the client itself started each request (its own share)
    errors: list[str] = []
    rng = random.Random(1)
    urls = [f"{url}/schemas/ids/{rng.choice(ids)}" for _ in range(n)]
    conn = aiohttp.TCPConnector(limit=connections)
    headers = {"Accept": CT, **({"Authorization": AUTH_HEADER} if auth else {})}
    async with aiohttp.ClientSession(connector=conn, headers=headers) as s:

        async def one(due: float, target: str) -> None:
            lag.append((time.perf_counter() - due) * 1000)
            try:
                async with s.get(target) as r:
                    await r.read()
                    if r.status != 200:
                        errors.append(str(r.status))
            except aiohttp.ClientError as exc:
                errors.append(type(exc).__name__)
            lat.append((time.perf_counter() - due) * 1000)

        took = await _paced(n, rate, lambda due, i: one(due, urls[i]))
    return _result(n, took, lat, lag, errors)


def run_loop(coro: Any) -> Any:
    """``coro`` on uvloop (a third of the default loop's CPU per request: the client shares the
    machine with the registry, so its cost is the registry's noise), asyncio's loop without it."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop comes with the registry extra
        return asyncio.run(coro)
    return uvloop.run(coro)


def run(args: argparse.Namespace) -> dict[str, Any]:
    cfg = dict(args.sizes)
    doc = document("registry", args, cfg)
    with tempfile.TemporaryDirectory(prefix="bench-registry-") as tmp, Processes() as procs:
        broker = procs.start(
            BrokerProcess(Path(tmp) / "broker", overrides={"group.initial.rebalance.delay.ms": 0})
        )
        reg = procs.start(RegistryProcess(broker.bootstrap, log=Path(tmp) / "registry.log"))
        log(f"registering {cfg['schemas']} schemas")
        ids, reg_lat = asyncio.run(register(reg.url, cfg["schemas"]))
        doc["register_ms"] = summary(reg_lat)
        doc["get_by_id"] = res = get_by_id(reg, ids, cfg, auth=False)
        if args.auth:
            auth_file = Path(tmp) / "auth.json"
            may = [{"username": USER, "operation": "Read", "resource": "Subject:bench-"}]
            auth_file.write_text(json.dumps({"users": [user_entry(USER, PASSWORD)], "permissions": may}))
            secured = procs.start(
                RegistryProcess(
                    broker.bootstrap,
                    extra_args=["--auth-file", str(auth_file)],
                    log=Path(tmp) / "registry-auth.log",
                    name="registry-auth",
                )
            )
            doc["get_by_id_auth"] = with_auth = get_by_id(secured, ids, cfg, auth=True)
            doc["auth_ratios"] = {
                "p99": _ratio(with_auth["latency_ms"].get("p99"), res["latency_ms"].get("p99")),
                "registry_cpu_per_request": _ratio(
                    with_auth["registry_cpu_us_per_request"], res["registry_cpu_us_per_request"]
                ),
            }
        for key in ("get_by_id", "get_by_id_auth"):
            if doc.get(key, {}).get("errors"):
                doc["errors"].append(f"{key}: {doc[key]['errors']} failed requests")
    p99 = res["latency_ms"].get("p99")
    doc["goals"] = [
        goal(f"GET /schemas/ids/{{id}} p99 at {cfg['rate']}/s", p99, GOAL_P99_MS, "ms", higher=False)
    ]
    if args.auth:
        p99_auth = doc["get_by_id_auth"]["latency_ms"].get("p99")
        doc["goals"].append(
            goal(
                f"the same with Basic auth, p99 at {cfg['rate']}/s", p99_auth, GOAL_P99_MS, "ms", higher=False
            )
        )
    return doc


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def get_by_id(reg: RegistryProcess, ids: list[int], cfg: dict[str, Any], auth: bool) -> dict[str, Any]:
    """The open-loop GET /schemas/ids/{id} phase against ``reg`` (after a 1 s warm-up)."""
    load = open_loop_lean if cfg["client"] == "lean" else open_loop
    run_loop(load(reg.url, ids, cfg["rate"], 1.0, cfg["connections"], auth))  # warm-up
    how = " with Basic auth" if auth else ""
    log(f"GET /schemas/ids/{{id}} at {cfg['rate']}/s for {cfg['duration']} s{how}")
    r0, c0 = cpu_seconds(reg.pid), own_cpu()
    res: dict[str, Any] = run_loop(load(reg.url, ids, cfg["rate"], cfg["duration"], cfg["connections"], auth))
    r1, c1 = cpu_seconds(reg.pid), own_cpu()
    res["registry_cpu_us_per_request"] = round((r1 - r0) / res["requests"] * 1e6, 1)
    res["client_cpu_us_per_request"] = round((c1 - c0) / res["requests"] * 1e6, 1)
    return res


if __name__ == "__main__":
    from load.scenarios import main

    raise SystemExit(main("registry"))
