"""Dashboard benchmark: how soon a sensor reading shows on the dashboard, and how fast the
dashboard's Dash callbacks answer, with a live fleet of 10,000 sensors.

Goals: (a) p95 <= 5 s; (b) p95 <= 100 ms.

How it measures, in full: ``docs/benchmarks.md``, "bench dashboard".
"""

from __future__ import annotations

import argparse
import datetime as dt
import http.client
import json
import random
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from dashboard.demo_data import iso, seed_results
from load.harness import procfs, services
from load.harness.profiler import Profiler
from load.harness.report import document, goal, loadavg, log
from load.harness.runner import Processes
from load.harness.stats import percentile, rounded
from sensors.layout import STREAM
from testing import ManagedProcess, free_port, wait_for

SENSORS = 10_000
PARTITIONS = 6
RESULT_TOPICS = ("traffic_aggregates", "traffic_weather", "weather_effects", "congestion_alerts")
VISIBLE_GOAL_S = 5.0
CALLBACK_GOAL_MS = 100.0
PAGE_INTERVAL_S = 2.0  # the dashboard's dcc.Interval
BROWSER_CONNECTIONS = 6
PST = dt.timezone(dt.timedelta(hours=-8))


# a bus on Market St; each marker gets its own sensor id, time and speed
MARKER = {"type": "traffic", "seq": 0, "segment_id": "market-st-03", "road": "Market St", "lat": 37.78}
MARKER |= {"lon": -122.41, "direction": "E", "lane": 1, "vehicle_class": "bus", "weight_kg": 12000.0}
MARKER |= {"axle_count": 2, "axle_distances_m": [5.9]}


def rush_hour_start(now_ms: int | None = None) -> int:
    """The latest weekday 08:00 PST at or before now (ms)."""
    now = dt.datetime.fromtimestamp((now_ms or time.time() * 1000) / 1000, tz=PST)
    t = now.replace(hour=8, minute=0, second=0, microsecond=0)
    if t > now:
        t -= dt.timedelta(days=1)
    while t.weekday() >= 5:
        t -= dt.timedelta(days=1)
    return int(t.timestamp() * 1000)


# -- HTTP --------------------------------------------------------------------------------------
class Http:
    """One keep-alive connection (as a browser tab keeps them)."""

    def __init__(self, port: int, timeout: float = 30.0) -> None:
        self.port = port
        self.timeout = timeout
        self.conn: http.client.HTTPConnection | None = None

    def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        for attempt in (0, 1):
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
            try:
                headers = {"Content-Type": "application/json"} if body is not None else {}
                self.conn.request(method, path, body=body, headers=headers)
                r = self.conn.getresponse()
                return r.status, r.read()
            except (OSError, http.client.HTTPException):
                self.conn.close()
                self.conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def get_json(self, path: str) -> tuple[int, Any]:
        status, data = self.request("GET", path)
        try:
            return status, json.loads(data) if data else None
        except ValueError:
            return status, None

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


# -- (a) reading to dashboard --------------------------------------------------------------------
def measure_visibility(
    bootstrap: str, http_port: int, markers: int, sim_clock: Callable[[], int], timeout: float = 30.0
) -> dict[str, Any]:
    from sensors.publish import KafkaSink

    sink = KafkaSink(bootstrap, client_id="bench-markers", extra={"delivery.report.only.error": False})
    topic = f"{STREAM}.traffic"
    web = Http(http_port)
    run_id = uuid.uuid4().hex[:6]
    rows: list[dict[str, Any]] = []
    try:
        for i in range(markers):
            sid = f"bench-marker-{run_id}-{i:03d}"
            speed = round(20 + i * 0.731 + random.random() / 100, 3)
            sim_ms = sim_clock()
            ev = MARKER | {"sensor_id": sid, "event_time": sim_ms, "speed_kmh": speed}
            acked: list[float] = []

            def on_delivery(err: Any, _msg: Any, acked: list[float] = acked) -> None:
                if err is None:
                    acked.append(time.monotonic())

            data, t0 = json.dumps(ev).encode(), time.monotonic()
            sink.producer.produce(topic, data, sid.encode(), timestamp=sim_ms, on_delivery=on_delivery)
            seen, polls = None, 0
            while time.monotonic() - t0 < timeout:
                sink.producer.poll(0)
                status, body = web.get_json(f"/api/sensor/{sid}")
                polls += 1
                if status == 200 and body and body.get("speed_kmh") == speed:
                    seen = time.monotonic()
                    break
                time.sleep(0.025)
            sink.producer.flush(10)
            row = {"sensor_id": sid, "speed_kmh": speed, "visible_s": round(seen - t0, 4) if seen else None}
            rows.append(row | {"acked_s": round(acked[0] - t0, 4) if acked else None, "polls": polls})
            time.sleep(random.uniform(0.2, 0.5))
    finally:
        web.close()
        sink.flush(10)
    vis = [r["visible_s"] for r in rows if r["visible_s"] is not None]
    acks = [r["acked_s"] for r in rows if r["acked_s"] is not None]
    out = {"markers": markers, "seen": len(vis), "p50_s": percentile(vis, 50), "p95_s": percentile(vis, 95)}
    out |= {
        "max_s": max(vis, default=None),
        "ack_p50_s": percentile(acks, 50),
        "ack_p95_s": percentile(acks, 95),
    }
    return out | {"rows": rows}


# -- (b) callbacks ---------------------------------------------------------------------------------
def _walk_layout(node: Any, props: dict[tuple[str, str], Any], types: dict[str, str]) -> None:
    if isinstance(node, list):
        for x in node:
            _walk_layout(x, props, types)
    elif isinstance(node, dict) and "props" in node:
        p = node["props"]
        cid = p.get("id")
        if isinstance(cid, str):
            types[cid] = node.get("type", "")
            for k, v in p.items():
                props[(cid, k)] = v
        for k, v in p.items():
            if k != "id":
                _walk_layout(v, props, types)


def _outputs(spec: str) -> Any:
    def one(s: str) -> dict[str, str]:
        cid, _, prop = s.rpartition(".")
        return {"id": cid, "property": prop}

    if spec.startswith(".."):
        return [one(s) for s in spec.strip(".").split("...")]
    return one(spec)


def tick_callbacks(web: Http) -> tuple[str, list[dict[str, Any]], dict[tuple[str, str], Any]]:
    """(interval id, callbacks fired by its tick, layout property values) from the app itself."""
    _, deps = web.get_json("/_dash-dependencies")
    _, layout = web.get_json("/_dash-layout")
    props: dict[tuple[str, str], Any] = {}
    types: dict[str, str] = {}
    _walk_layout(layout, props, types)
    interval = next(cid for cid, t in types.items() if t == "Interval")
    cbs = [
        d
        for d in deps
        if any(i["id"] == interval and i["property"] == "n_intervals" for i in d["inputs"])
        and not d.get("clientside_function")
    ]
    return interval, cbs, props


def callback_body(cb: dict[str, Any], props: dict[tuple[str, str], Any], interval: str, n: int) -> bytes:
    def val(i: dict[str, str]) -> dict[str, Any]:
        key = (i["id"], i["property"])
        return {
            "id": i["id"],
            "property": i["property"],
            "value": n if key == (interval, "n_intervals") else props.get(key),
        }

    body = {
        "output": cb["output"],
        "outputs": _outputs(cb["output"]),
        "inputs": [val(i) for i in cb["inputs"]],
        "changedPropIds": [f"{interval}.n_intervals"],
        "state": [val(s) for s in cb["state"]],
    }
    return json.dumps(body).encode()


def _timed(web: Http, name: str, body: bytes) -> dict[str, Any]:
    t0 = time.perf_counter()
    status, data = web.request("POST", "/_dash-update-component", body)
    ms = (time.perf_counter() - t0) * 1000
    return {"callback": name, "ms": ms, "status": status, "bytes": len(data)}


def _summary(calls: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [c["ms"] for c in calls if c["status"] in (200, 204)]
    per: dict[str, Any] = {}
    for name in sorted({c["callback"] for c in calls}):
        ms = [c["ms"] for c in calls if c["callback"] == name and c["status"] in (200, 204)]
        size = [c["bytes"] for c in calls if c["callback"] == name]
        per[name] = {"calls": len(ms), **{f"p{q}_ms": rounded(percentile(ms, q), 1) for q in (50, 95)}}
        per[name] |= {
            "max_ms": rounded(max(ms, default=None), 1),
            "response_kb": round(statistics.mean(size) / 1024, 1),
        }
    out = {
        "calls": len(calls),
        "errors": len(calls) - len(ok),
        **{f"p{q}_ms": rounded(percentile(ok, q), 1) for q in (50, 95, 99)},
    }
    return out | {"max_ms": rounded(max(ok, default=None), 1), "per_callback": per}


def measure_callbacks(
    http_port: int, ticks: int, rounds: int, dash_pid: int, profile_dir: Path | None
) -> dict[str, Any]:
    web = Http(http_port)
    interval, cbs, props = tick_callbacks(web)
    names = [c["output"].strip(".").split("...")[0] for c in cbs]
    out: dict[str, Any] = {"interval_id": interval, "callbacks": names}
    # as the page: every tick, all callbacks at once over BROWSER_CONNECTIONS connections
    conns = [Http(http_port) for _ in range(BROWSER_CONNECTIONS)]
    free = list(conns)
    lock = threading.Lock()

    def send(name: str, body: bytes) -> dict[str, Any]:
        with lock:
            c = free.pop()
        try:
            return _timed(c, name, body)
        finally:
            with lock:
                free.append(c)

    profiler = None
    if profile_dir is not None:
        seconds, focus = (
            min(30.0, ticks * PAGE_INTERVAL_S),
            ("dashboard/", "plotly/", "dash/", "flask/", "werkzeug/"),
        )
        profiler = Profiler(dash_pid, profile_dir / "dashboard.txt", seconds, focus=focus)
    page_calls: list[dict[str, Any]] = []
    tick_ms: list[float] = []
    cpu0 = procfs.cpu_seconds(dash_pid)
    t_start = time.monotonic()
    with ThreadPoolExecutor(BROWSER_CONNECTIONS) as pool:
        for k in range(ticks):
            due = t_start + k * PAGE_INTERVAL_S
            time.sleep(max(0.0, due - time.monotonic()))
            t0 = time.perf_counter()
            futs = [
                pool.submit(send, n, callback_body(cb, props, interval, 1000 + k))
                for n, cb in zip(names, cbs, strict=True)
            ]
            page_calls += [f.result() for f in futs]
            tick_ms.append((time.perf_counter() - t0) * 1000)
    page_s = time.monotonic() - t_start
    cpu1 = procfs.cpu_seconds(dash_pid)
    out["page"] = _summary(page_calls) | {"ticks": ticks}
    out["page"] |= {f"all_callbacks_of_a_tick_p{q}_ms": rounded(percentile(tick_ms, q), 1) for q in (50, 95)}
    out["page"]["dashboard_cores"] = round((cpu1 - cpu0) / page_s, 2)
    if profiler is not None:
        out["profile"] = profiler.summary()
    # one at a time
    iso_calls: list[dict[str, Any]] = []
    for k in range(rounds):
        for n, cb in zip(names, cbs, strict=True):
            iso_calls.append(_timed(web, n, callback_body(cb, props, interval, 5000 + k)))
            time.sleep(0.02)
    out["isolated"] = _summary(iso_calls) | {"rounds": rounds}
    for c in conns:
        c.close()
    web.close()
    return out


# -- orchestration -------------------------------------------------------------------------------
def run(args: argparse.Namespace) -> dict[str, Any]:
    from sensors.cli import parse_start
    from sensors.layout import ensure_layout

    markers, ticks, rounds = dict(args.sizes).values()
    seed_minutes = 10 if args.smoke else 120
    sim_start = rush_hour_start() if args.start == "rush" else parse_start(args.start)
    lookback_h = max(3, int((time.time() * 1000 - sim_start + seed_minutes * 60_000) / 3_600_000) + 2)
    config = {
        "sensors": SENSORS,
        "fleet_speed": 1.0,
        "simulated_start": iso(sim_start),
        "seeded_result_minutes": seed_minutes,
        "dashboard_lookback_h": lookback_h,
        "markers": markers,
        "page_ticks": ticks,
        "isolated_rounds": rounds,
    }
    doc = document("dashboard", args, config)
    children: dict[str, ManagedProcess] = {}
    with tempfile.TemporaryDirectory(prefix="sftraffic-bench-dashboard-") as tmpdir, Processes() as running:
        broker = running.start(services.broker(Path(tmpdir)))
        try:
            b = broker.bootstrap
            ensure_layout(b, partitions=PARTITIONS, extra_topics={f"{STREAM}.{t}": {} for t in RESULT_TOPICS})
            doc["seeded_records"] = seed_results(b, sim_start, seed_minutes)
            log(f"fleet of {SENSORS:,} sensors live from {iso(sim_start)}, dashboard ...")
            fleet_args = (
                f"--sensors {SENSORS} --speed 1 --start {iso(sim_start)} --partitions {PARTITIONS} --quiet"
            )
            children["fleet"] = running.add(services.fleet(b, *fleet_args.split())).launch()
            wall0 = time.time()
            port = free_port()
            dash = running.add(services.dashboard(b, port, "--lookback", f"{lookback_h}h"))
            children["dashboard"] = dash.launch()
            web = Http(port, timeout=5)
            t_ready = time.monotonic()
            wait_for(lambda: _live(web, children), 120, 0.2, "the dashboard with live data")
            doc["dashboard_ready_s"] = round(time.monotonic() - t_ready, 1)
            time.sleep(2.0)  # a couple of health rounds, the fleet at its pace

            def simulated_now() -> int:
                return sim_start + int((time.time() - wall0) * 1000)

            _measure(args, doc, web, broker, children, simulated_now)
            doc["errors"] += [
                f"{n} exited early: {c.tail().splitlines()}" for n, c in children.items() if not c.alive()
            ]
        except Exception as exc:
            doc["errors"].append(f"{type(exc).__name__}: {exc}")
            doc["logs"] = {name: c.tail(30).splitlines() for name, c in children.items()}
    return _judge(doc)


def _live(web: Http, children: dict[str, ManagedProcess]) -> bool:
    """Whether the dashboard is up with live data (raises if it or the fleet exited)."""
    if not all(c.alive() for c in children.values()):
        raise RuntimeError("process exited while waiting for the dashboard with live data")
    try:
        status, h = web.get_json("/api/health")
    except OSError:
        return False
    return status == 200 and h["store_ok"] and h["events_seen"] > 0 and h["segments_with_data"] >= 100


def _measure(
    args: argparse.Namespace,
    doc: dict[str, Any],
    web: Http,
    broker: Any,
    children: dict[str, ManagedProcess],
    simulated_now: Callable[[], int],
) -> None:
    """(a) and (b), and what every process used meanwhile (``doc["during"]``)."""
    markers, ticks, rounds = dict(args.sizes).values()

    def cpu_now() -> dict[str, float]:  # the fleet and the dashboard with their children
        cpu = {n: procfs.cpu_seconds(c.pid, descendants=True) for n, c in children.items()}
        return cpu | {"broker": broker.cpu_seconds(), "bench client": procfs.own_cpu()}

    _, h0 = web.get_json("/api/health")
    cpu, busy0 = cpu_now(), procfs.machine_busy_seconds() or 0.0
    t0 = time.monotonic()
    log(f"(a) {markers} marker readings to /api/sensor/<id> ...")
    doc["visibility"] = measure_visibility(broker.bootstrap, web.port, markers, simulated_now)
    log(f"(b) callbacks: {ticks} page ticks, {rounds} rounds one at a time ...")
    profile = Path(args.profile) if args.profile else None
    doc["callbacks"] = measure_callbacks(web.port, ticks, rounds, children["dashboard"].pid, profile)
    elapsed = time.monotonic() - t0
    _, h1 = web.get_json("/api/health")
    web.close()
    cpu1, busy = cpu_now(), (procfs.machine_busy_seconds() or 0.0) - busy0
    ours = sum(cpu1[k] - cpu[k] for k in cpu)
    doc["during"] = {
        "seconds": round(elapsed, 1),
        "events_seen_by_dashboard_per_s": round((h1["events_seen"] - h0["events_seen"]) / elapsed),
        "cores": {k: round((cpu1[k] - cpu[k]) / elapsed, 2) for k in cpu},
        "other_processes_cores": round((busy - ours) / elapsed, 2),
        "loadavg_after": loadavg(),
    }


def _judge(doc: dict[str, Any]) -> dict[str, Any]:
    """The errors the figures show, and the goals."""
    vis, cb = doc.get("visibility") or {}, doc.get("callbacks") or {}
    if vis and vis["seen"] < vis["markers"]:
        doc["errors"].append(f"{vis['markers'] - vis['seen']} markers never showed on the dashboard")
    for how in ("page", "isolated"):
        if cb.get(how, {}).get("errors"):
            doc["errors"].append(f"{cb[how]['errors']} callback requests failed ({how})")
    page, isolated = (cb.get(how, {}).get("p95_ms") for how in ("page", "isolated"))
    doc["goals"] = [
        goal("sensor reading visible on the dashboard, p95", vis.get("p95_s"), VISIBLE_GOAL_S, "s", False),
        goal("callback latency p95, as the page sends them", page, CALLBACK_GOAL_MS, "ms", False),
        goal("callback latency p95, one at a time", isolated, CALLBACK_GOAL_MS, "ms", False),
    ]
    return doc


if __name__ == "__main__":
    from load.scenarios import main

    raise SystemExit(main("dashboard"))
