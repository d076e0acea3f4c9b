"""Consumer-group benchmark: group throughput and rebalance time after a member is lost.

Everything runs on 127.0.0.1 against a fresh broker of ours (``BrokerProcess``, default group
settings: ``group.initial.rebalance.delay.ms`` 3000, so that the four members of a new group
land in the same first generation).

**(a) Group throughput.** A 12-partition topic is preloaded with N 100-byte values (4M; 200k
with ``--quick``) by one confluent-kafka producer (acks=1, 1 MB batches, round-robin over the
partitions), then read by a group of 4 consumer *processes* (multiprocessing, spawn;
confluent-kafka ``Consumer``, ``subscribe()``, ``auto.offset.reset=earliest``, batches from
``consume(num_messages=...)``, settings in ``CONSUMER_SETTINGS``; the members' cyclic GC is off,
see ``_throughput_member``, ``--client-gc`` keeps it). The members are started and
connected first, then subscribe at the same moment. Each member notes the time of its first
and last batch (CLOCK_MONOTONIC, shared by all processes); the group rate is N divided by the
time from the earliest first batch to the latest last batch, once the members together have
consumed N. CPU: each member's own user+system time between its first and last batch
(``os.times()``: Python and librdkafka threads), the broker's from /proc/PID/stat over the
phase, both per message, and what every other process on the machine used meanwhile (from
/proc/stat: on a shared 2-core machine that decides the figure). ``--profile DIR`` adds one run,
not counted in the figures, during which py-spy samples the broker (Python frames) and member 0
(``--native``: C frames too, which pauses it per sample), and lists where the samples fall.

**(b) Rebalance after member loss.** A producer in this process writes ~2,000 msgs/s
round-robin to a 12-partition topic. 4 member processes (``session.timeout.ms`` 6000,
``heartbeat.interval.ms`` 1000, librdkafka's default eager assignors) report every
assignment and the first message they get from each assigned partition through a
multiprocessing queue. Once the group is stable and every partition is being consumed, one
member is SIGKILLed (it cannot leave the group); the figure is the time from the kill until
every partition the killed member owned has been assigned to a survivor *and* that survivor
has received a message from it. Repeated 3 times (a new group each time); median reported.

Goals (from the issues): (a) >= 1,000,000 msgs/s for the group; (b) <= session timeout + 3 s.

Usage::

    python -m load.bench_groups [--quick | --smoke] [--json FILE] [--profile DIR]
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing as mp
import os
import queue
import signal
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from rich.console import Console

from load.harness import services
from load.harness.kafka import EndOffsets, create_topic, producer, quiet_logger
from load.harness.procfs import cpu_seconds, machine_busy_seconds, own_cpu
from load.harness.profiler import Profiler
from load.harness.report import document, goal, loadavg, log, parser, print_goals, sized, table
from load.harness.runner import Processes, run_main
from load.harness.stats import median

VALUE_SIZE = 100
PARTITIONS = 12
MEMBERS = 4
THROUGHPUT_GOAL = 1_000_000  # msgs/s for the whole group
REBALANCE_MARGIN_S = 3.0  # goal: session timeout + this

PRODUCER_SETTINGS: dict[str, Any] = {
    "acks": 1,
    "linger.ms": 20,
    "batch.size": 1_048_576,
    "batch.num.messages": 100_000,
    "queue.buffering.max.messages": 2_000_000,
    "queue.buffering.max.kbytes": 2_097_151,
    "compression.type": "none",
    "enable.idempotence": False,
}
# Throughput consumers: big fetches (a 100-byte message costs the broker the same whether 1k or
# 100k go in one response), a deep prefetch queue, and no 1 s fetch backoff when it is full.
CONSUMER_SETTINGS: dict[str, Any] = {
    "fetch.min.bytes": 1,
    "fetch.wait.max.ms": 100,
    "fetch.max.bytes": 52_428_800,
    "max.partition.fetch.bytes": 4_194_304,
    "queued.min.messages": 500_000,
    "queued.max.messages.kbytes": 262_144,
    "fetch.queue.backoff.ms": 10,
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "enable.partition.eof": False,
}
BATCH = 10_000  # consume(num_messages=...)


# -- (a) throughput --------------------------------------------------------------------------------
def preload(bootstrap: str, topic: str, count: int) -> dict[str, Any]:
    """Write ``count`` values round-robin over the topic's partitions; checks the end offsets."""
    p, failures = producer(bootstrap, **PRODUCER_SETTINGS)
    value, produce, poll = os.urandom(VALUE_SIZE), p.produce, p.poll
    t0 = time.perf_counter()
    chunk, sent = 1000, 0  # chunks of 1,000 per partition: librdkafka fills one partition's batch at a time
    while sent < count:
        part = (sent // chunk) % PARTITIONS
        for _ in range(min(chunk, count - sent)):
            try:
                produce(topic, value, partition=part)
            except BufferError:
                poll(0.005)
                produce(topic, value, partition=part)
        sent += min(chunk, count - sent)
        poll(0)
    left = p.flush(300)
    seconds = time.perf_counter() - t0
    end = EndOffsets(bootstrap, [topic], PARTITIONS).total()
    if failures or left or end != count:
        raise RuntimeError(
            f"preload: {len(failures)} failed, {left} undelivered, end offsets {end} != {count}: "
            + (failures[0] if failures else "")
        )
    return {"messages": count, "seconds": round(seconds, 2), "msgs_s": round(count / seconds)}


def _throughput_member(
    idx: int,
    bootstrap: str,
    topic: str,
    group: str,
    settings: dict[str, Any],
    batch: int,
    counts: Any,
    ready: Any,
    start: Any,
    stop: Any,
    results: Any,
    gc_off: bool,
) -> None:
    from confluent_kafka import Consumer

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if gc_off:
        # Every confluent-kafka Message is a GC-tracked object: with 10k-message batches the
        # cyclic collector runs constantly and traverses them (~20% of the client's CPU in
        # py-spy --native). Nothing here makes cycles; reference counting frees the messages.
        gc.disable()
    assigns: list[list[int]] = []
    assigned_at: list[float] = []
    conf = {"group.id": group, "client.id": f"bench-member-{idx}", "auto.offset.reset": "earliest"}
    c = Consumer({"bootstrap.servers": bootstrap, "logger": quiet_logger(), **conf, **settings})
    c.list_topics(topic, timeout=10)  # connected and metadata known before the clock starts
    ready.put(idx)
    start.wait()

    def on_assign(_c: Any, parts: list[Any]) -> None:
        assigns.append(sorted(p.partition for p in parts))
        assigned_at.append(time.monotonic())

    c.subscribe([topic], on_assign=on_assign)
    n = errors = 0
    first_err = ""
    t_first = t_last = None
    cpu_first = 0.0
    consume = c.consume
    clock = time.monotonic
    while not stop.is_set():
        msgs = consume(batch, 0.2)
        if not msgs:
            continue
        now = clock()
        if t_first is None:
            t_first, cpu_first = now, own_cpu()
        if msgs[-1].error() is None:
            n += len(msgs)
        else:
            for m in msgs:
                if m.error() is None:
                    n += 1
                else:
                    errors += 1
                    first_err = first_err or str(m.error())
        counts[idx] = n
        t_last = now
    # read once after the loop (the idle wait for the stop signal adds next to nothing), not per
    # batch: a times() syscall per batch showed up in native profiles
    cpu_last = own_cpu()
    results.put(
        {
            "member": idx,
            "pid": os.getpid(),
            "messages": n,
            "errors": errors,
            "error": first_err,
            "t_first": t_first,
            "t_last": t_last,
            "cpu_s": cpu_last - cpu_first,
            "assignments": assigns,
            "t_assigned": assigned_at[0] if assigned_at else None,
        }
    )
    c.close()


def measure_group_throughput(
    bootstrap: str,
    topic: str,
    count: int,
    broker_pid: int,
    *,
    gc_off: bool = True,
    profile_dir: Path | None = None,
    expected_rate: float = 500_000,
    timeout: float = 600.0,
) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    counts = ctx.Array("q", MEMBERS, lock=False)
    ready, results = ctx.Queue(), ctx.Queue()
    start, stop = ctx.Event(), ctx.Event()
    group = f"bench-throughput-{uuid.uuid4().hex[:8]}"
    conf, batch = CONSUMER_SETTINGS, BATCH
    args = [
        (i, bootstrap, topic, group, conf, batch, counts, ready, start, stop, results, gc_off)
        for i in range(MEMBERS)
    ]
    procs = [ctx.Process(target=_throughput_member, args=a, daemon=True) for a in args]
    for p in procs:
        p.start()
    out: dict[str, Any] = {
        "group": group,
        "messages_expected": count,
        "consumer_settings": conf,
        "batch": batch,
    }
    out["client_gc_disabled"] = gc_off
    try:
        for _ in procs:
            ready.get(timeout=120)
        broker_cpu0 = cpu_seconds(broker_pid)
        t_start = time.monotonic()
        start.set()
        profilers: dict[str, Profiler] = {}
        deadline = t_start + timeout
        last_total, last_progress = 0, time.monotonic()
        t_flow: float | None = None  # when this loop first saw messages consumed
        broker_cpu_flow = broker_cpu0
        busy_flow = machine_busy_seconds()
        while True:
            total = sum(counts)
            now = time.monotonic()
            if total >= count:
                break
            if t_flow is None and total > 0:
                t_flow, broker_cpu_flow, busy_flow = now, cpu_seconds(broker_pid), machine_busy_seconds()
            if profile_dir is not None and not profilers and total > 0:
                # profile the middle of the phase: started once messages flow, for ~60% of the
                # expected remaining time
                secs = max(2.0, min(20.0, 0.6 * (count - total) / expected_rate))
                broker_out, member_out = profile_dir / "groups-broker.txt", profile_dir / "groups-member0.txt"
                profilers["broker"] = Profiler(broker_pid, broker_out, secs, focus=("framework/",))
                profilers["member0"] = Profiler(procs[0].pid or 0, member_out, secs, 100, "--native")
            if total != last_total:
                last_total, last_progress = total, now
            if now - last_progress > 30 or now > deadline:
                out["error"] = f"stalled at {total}/{count} messages"
                break
            time.sleep(0.02)
        broker_cpu1 = cpu_seconds(broker_pid)
        busy_done = machine_busy_seconds()
        t_done = time.monotonic()
        stop.set()
        members = [results.get(timeout=60) for _ in procs]
    finally:
        stop.set()
        for p in procs:
            p.join(30)
            if p.is_alive():
                p.kill()
    members.sort(key=lambda m: m["member"])
    got = sum(m["messages"] for m in members)
    firsts = [m["t_first"] for m in members if m["t_first"] is not None]
    lasts = [m["t_last"] for m in members if m["t_last"] is not None]
    assigned = [m.pop("t_assigned") for m in members if m.get("t_assigned") is not None]
    seconds = max(lasts) - min(firsts) if firsts and lasts else float("nan")
    client_cpu = sum(m["cpu_s"] for m in members)
    broker_cpu = broker_cpu1 - broker_cpu0
    for m in members:
        first, last = m.pop("t_first"), m.pop("t_last")
        span = last - first if first is not None else 0.0
        m["msgs_s"] = round(m["messages"] / span) if span > 0 else None
        m["cores"] = round(m["cpu_s"] / span, 2) if span > 0 else None
        m["cpu_us_per_msg"] = round(m["cpu_s"] / m["messages"] * 1e6, 3) if m["messages"] else None

    def per(x: float, d: float | None, digits: int | None, scale: float = 1.0) -> float | None:
        """x * scale / d rounded (to an int with ``digits`` None); None unless d > 0."""
        return round(x * scale / d, digits) if d is not None and d > 0 else None

    flow_s = t_done - t_flow if t_flow is not None and t_done > t_flow else None
    broker_flow, busy = broker_cpu1 - broker_cpu_flow, busy_done - busy_flow
    seconds_ok = seconds if seconds > 0 else None
    out |= {
        "messages": got,
        "seconds": round(seconds, 3),
        "msgs_s": per(got, seconds_ok, None),
        "mb_s": per(got * VALUE_SIZE, seconds_ok, 1, 1e-6),
        "join_to_first_message_s": round(min(firsts) - t_start, 3) if firsts else None,
        "client_cpu_s": round(client_cpu, 2),
        "client_cpu_us_per_msg": per(client_cpu, got, 3, 1e6),
        "client_cores": per(client_cpu, seconds_ok, 2),
        "broker_cpu_s": round(broker_cpu, 2),
        "broker_cpu_us_per_msg": per(broker_cpu, got, 3, 1e6),
        # per message: from the start signal (join included) to the end; cores: while flowing
        "broker_cores": per(broker_flow, flow_s, 2),
        "msgs_s_from_assignment": per(got, max(lasts) - min(assigned) if assigned and lasts else None, None),
        # every process on the machine while messages flowed; "other" is what was left after
        # the broker and the members: other work on a shared machine competing for the cores
        "machine_busy_cores": per(busy, flow_s, 2),
        "other_processes_cores": per(busy - broker_flow - client_cpu, flow_s, 2),
        "members": members,
        "rebalances": sum(len(m["assignments"]) for m in members) - MEMBERS,
        "errors": sum(m["errors"] for m in members) + max(0, count - got if "error" in out else 0),
    }
    if profilers:
        out["profiles"] = {name: p.summary() for name, p in profilers.items()}
    return out


# -- (b) rebalance after member loss -----------------------------------------------------------
def _rebalance_member(
    idx: int,
    bootstrap: str,
    topic: str,
    group: str,
    session_ms: int,
    heartbeat_ms: int,
    events: Any,
    stop: Any,
) -> None:
    from confluent_kafka import Consumer

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    seen: set[int] = set()
    clock = time.monotonic

    def on_assign(_c: Any, parts: list[Any]) -> None:
        seen.clear()
        events.put(("assign", idx, clock(), sorted(p.partition for p in parts)))

    def on_revoke(_c: Any, parts: list[Any]) -> None:
        events.put(("revoke", idx, clock(), sorted(p.partition for p in parts)))

    conf = {"group.id": group, "client.id": f"bench-rebalance-{idx}", "auto.offset.reset": "latest"}
    conf |= {"session.timeout.ms": session_ms, "heartbeat.interval.ms": heartbeat_ms, "fetch.wait.max.ms": 50}
    conf |= {"enable.auto.commit": True, "auto.commit.interval.ms": 1000, "logger": quiet_logger()}
    c = Consumer({"bootstrap.servers": bootstrap, **conf})
    c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    events.put(("ready", idx, clock(), os.getpid()))
    while not stop.is_set():
        for m in c.consume(1000, 0.05):
            part = m.partition()
            if m.error() is None and part is not None and part not in seen:
                seen.add(part)
                events.put(("first", idx, clock(), part))
    c.close()


class SteadyProducer(threading.Thread):
    """Round-robin over all partitions at about ``rate`` msgs/s until stopped."""

    def __init__(self, bootstrap: str, topic: str, rate: int) -> None:
        super().__init__(daemon=True, name="steady-producer")
        from confluent_kafka import Producer

        self.topic, self.rate, self.sent, self.halt = topic, rate, 0, threading.Event()
        self.p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "logger": quiet_logger()})

    def run(self) -> None:
        value, step, t0, i = os.urandom(VALUE_SIZE), 0.01, time.monotonic(), 0
        per_step = max(PARTITIONS, round(self.rate * step))
        while not self.halt.is_set():
            for _ in range(per_step):
                self.p.produce(self.topic, value, partition=self.sent % PARTITIONS)
                self.sent += 1
            self.p.poll(0)
            i += 1
            delay = t0 + i * step - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        self.p.flush(10)


def measure_rebalance(
    bootstrap: str,
    topic: str,
    *,
    session_ms: int = 6000,
    heartbeat_ms: int = 1000,
    settle_s: float = 2.0,
    timeout_s: float = 60.0,
) -> dict[str, Any]:
    """One repetition: a stable 4-member group, one SIGKILLed, until its partitions flow again."""
    ctx = mp.get_context("spawn")
    events, stop = ctx.Queue(), ctx.Event()
    group = f"bench-rebalance-{uuid.uuid4().hex[:8]}"
    args = [(i, bootstrap, topic, group, session_ms, heartbeat_ms, events, stop) for i in range(MEMBERS)]
    procs = [ctx.Process(target=_rebalance_member, args=a, daemon=True) for a in args]
    for p in procs:
        p.start()
    assignment: dict[int, list[int]] = {}  # member -> current partitions
    flowing: dict[int, set[int]] = {i: set() for i in range(MEMBERS)}  # since its last assignment
    log: list[tuple[str, int, float, Any]] = []
    dead: set[int] = set()

    def drain(until: float) -> None:
        while True:
            left = until - time.monotonic()
            try:
                ev = events.get(timeout=max(0.0, min(left, 0.1))) if left > 0 else events.get_nowait()
            except queue.Empty:
                if time.monotonic() >= until:
                    return
                continue
            kind, idx, _t, arg = ev
            if idx in dead:
                continue
            log.append(ev)
            if kind in ("assign", "revoke"):
                assignment[idx], flowing[idx] = list(arg) if kind == "assign" else [], set()
            elif kind == "first":
                flowing[idx].add(arg)

    def stable() -> bool:
        owned = [p for parts in assignment.values() for p in parts]
        return (
            len(assignment) == MEMBERS
            and sorted(owned) == list(range(PARTITIONS))
            and all(set(assignment[i]) <= flowing[i] and assignment[i] for i in assignment)
        )

    out: dict[str, Any] = {
        "group": group,
        "session_timeout_ms": session_ms,
        "heartbeat_interval_ms": heartbeat_ms,
    }
    try:
        deadline = time.monotonic() + 120
        while not stable():
            if time.monotonic() > deadline:
                raise RuntimeError(f"group never stable: {assignment}, flowing {flowing}")
            drain(time.monotonic() + 0.2)
        drain(time.monotonic() + settle_s)  # a few heartbeats in the stable generation
        if not stable():
            raise RuntimeError(f"group rebalanced while settling: {assignment}")
        victim = 0
        lost = sorted(assignment[victim])
        os.kill(procs[victim].pid or 0, signal.SIGKILL)
        t_kill = time.monotonic()
        dead.add(victim)
        del assignment[victim]
        flowing.pop(victim)
        out |= {"victim_partitions": lost, "assignment_before": {str(k): v for k, v in assignment.items()}}
        log_from = len(log)
        assigned_at: dict[int, float] = {}
        consumed_at: dict[int, float] = {}
        end = t_kill + timeout_s
        while len(consumed_at) < len(lost) and time.monotonic() < end:
            drain(time.monotonic() + 0.05)
            for kind, _idx, t, arg in log[log_from:]:
                if kind == "assign":
                    for p in arg:
                        if p in lost and p not in assigned_at:
                            assigned_at[p] = t
                elif kind == "first" and arg in lost and arg in assigned_at and arg not in consumed_at:
                    consumed_at[arg] = t
            log_from = len(log)
        revokes = [t for kind, _i, t, _a in log if kind == "revoke" and t > t_kill]

        def since_kill(times: dict[int, float]) -> float | None:  # to the last of the lost partitions
            return round(max(times.values()) - t_kill, 3) if len(times) == len(lost) else None

        out["detected_s"] = round(min(revokes) - t_kill, 3) if revokes else None
        out["assigned_s"], out["recovered_s"] = since_kill(assigned_at), since_kill(consumed_at)
        out["assignment_after"] = {str(k): v for k, v in assignment.items()}
        if out["recovered_s"] is None:
            out["error"] = (
                f"partitions {sorted(set(lost) - set(consumed_at))} not consumed within {timeout_s}s"
            )
    finally:
        stop.set()
        for p in procs:
            p.join(20)
            if p.is_alive():
                p.kill()
                p.join(5)
    return out


# -- orchestration -------------------------------------------------------------------------------
SIZES = {"count": (4_000_000, 200_000, 100_000), "rebalance_reps": (3, 3, 1)}  # full, --quick, --smoke


def run(args: argparse.Namespace) -> dict[str, Any]:
    count, reps = sized(args, SIZES).values()
    session_ms = args.session_timeout_ms
    config = {
        "messages": count,
        "value_size": VALUE_SIZE,
        "partitions": PARTITIONS,
        "members": MEMBERS,
        "producer_settings": PRODUCER_SETTINGS,
        "rebalance_reps": reps,
        "session_timeout_ms": session_ms,
        "heartbeat_interval_ms": args.heartbeat_ms,
        "rebalance_produce_rate": args.rate,
    }
    doc = document("groups", args, config)
    overrides = {"group.min.session.timeout.ms": session_ms} if session_ms < 6000 else {}
    profile_dir = Path(args.profile) if args.profile else None
    with tempfile.TemporaryDirectory(prefix="sftraffic-bench-groups-") as tmp, Processes() as running:
        broker = running.start(services.broker(Path(tmp), **overrides))
        try:
            topic = create_topic(broker.bootstrap, f"bench-groups-{uuid.uuid4().hex[:6]}", PARTITIONS)
            log(f"preloading {count:,} messages into {PARTITIONS} partitions ...")
            doc["preload"] = preload(broker.bootstrap, topic, count)
            runs: list[dict[str, Any]] = []
            doc["throughput_runs"] = runs

            def med(key: str) -> float | None:
                return median(r[key] for r in runs if r.get(key))

            # with --profile, one more run under py-spy (which slows member 0): kept apart
            for rep in range(args.reps + (1 if profile_dir else 0)):
                profiled = rep == args.reps
                which = "profiled run" if profiled else f"run {rep + 1}/{args.reps}"
                log(f"group of {MEMBERS} consuming {count:,} messages ({which}) ...")
                res = measure_group_throughput(
                    broker.bootstrap,
                    topic,
                    count,
                    broker.pid,
                    gc_off=not args.client_gc,
                    profile_dir=profile_dir if profiled else None,
                    expected_rate=med("msgs_s") or 500_000,
                )
                if res.get("error"):
                    doc["errors"].append(res["error"])
                if profiled:
                    doc["profiled_run"] = res
                else:
                    runs.append(res)
            doc["throughput"] = {"msgs_s": med("msgs_s")}
            doc["throughput"] |= {k: med(k) or 0 for k in ("broker_cpu_us_per_msg", "client_cpu_us_per_msg")}
            doc["throughput"]["loadavg_after"] = loadavg()
            rtopic = create_topic(broker.bootstrap, f"bench-rebalance-{uuid.uuid4().hex[:6]}", PARTITIONS)
            steady = SteadyProducer(broker.bootstrap, rtopic, args.rate)
            steady.start()
            doc["rebalance_runs"] = []
            try:
                for rep in range(reps):
                    log(f"rebalance after SIGKILL of a member (run {rep + 1}/{reps}) ...")
                    try:
                        res = measure_rebalance(
                            broker.bootstrap, rtopic, session_ms=session_ms, heartbeat_ms=args.heartbeat_ms
                        )
                    except Exception as exc:  # one bad repetition is reported, the others still run
                        res = {"error": f"{type(exc).__name__}: {exc}"}
                    doc["rebalance_runs"].append(res)
                    if res.get("error"):
                        doc["errors"].append(res["error"])
            finally:
                steady.halt.set()
                steady.join(20)
            recovered = [r["recovered_s"] for r in doc["rebalance_runs"] if r.get("recovered_s") is not None]
            doc["rebalance"] = {"recovered_s": recovered, "median_s": median(recovered)}
            doc["rebalance"] |= {
                "max_s": max(recovered, default=None),
                "produced": steady.sent,
                "loadavg_after": loadavg(),
            }
        finally:
            doc["broker_log_tail"] = broker.tail(20).splitlines() if doc["errors"] else []
    target_s = session_ms / 1000 + REBALANCE_MARGIN_S
    doc["goals"] = [
        goal("group throughput, 4 members", doc["throughput"]["msgs_s"], THROUGHPUT_GOAL, "msgs/s", True),
        goal("rebalance after member loss (median)", doc["rebalance"]["median_s"], target_s, "s", False),
    ]
    return doc


def render(doc: dict[str, Any], console: Console) -> None:
    m, pre = doc["machine"], doc.get("preload", {})
    rows = [
        (
            "preload (1 producer, acks=1)",
            f"{pre.get('msgs_s', 0):,} msgs/s",
            f"{pre.get('messages', 0):,} msgs",
        )
    ]
    for i, r in enumerate(doc.get("throughput_runs", []), 1):
        detail = f"{r['messages']:,} msgs in {r['seconds']} s; client {r['client_cores']} cores "
        detail += f"{r['client_cpu_us_per_msg']} µs/msg; broker {r['broker_cores']} cores "
        detail += f"{r['broker_cpu_us_per_msg']} µs/msg; other processes {r['other_processes_cores']} cores; "
        detail += f"rebalances {r['rebalances']}"
        rows.append((f"group of {MEMBERS} consume, run {i}", f"{r.get('msgs_s') or 0:,} msgs/s", detail))
    for i, r in enumerate(doc.get("rebalance_runs", []), 1):
        detail = f"detected {r.get('detected_s')} s, assigned {r.get('assigned_s')} s, "
        detail += f"partitions {r.get('victim_partitions')}"
        rows.append(
            (f"rebalance after SIGKILL, run {i}", f"{r.get('recovered_s')} s", r.get("error") or detail)
        )
    title = f"consumer groups — {m['cpu_model']}, {m['cores']} cores, load {m['loadavg_at_start']}"
    console.print(table(title, "figure|>value|detail", *rows))
    print_goals(console, doc["goals"])
    for name, prof in ((doc.get("profiled_run") or {}).get("profiles") or {}).items():
        console.print(f"[dim]py-spy {name}: " + ", ".join(f"{f} {p}%" for f, p in prof.get("self", [])[:5]))


def main(argv: list[str] | None = None) -> int:
    p = parser(
        "groups",
        __doc__,
        "200k messages",
        "tiny: 100k messages, one rebalance (tests)",
        ("--count", int, "messages to preload (default 4M)"),
        ("--reps", 1, "throughput repetitions"),
        ("--rebalance-reps", int, "rebalance repetitions (default 3)"),
        ("--session-timeout-ms", 6000, "session timeout of the rebalance members"),
        ("--heartbeat-ms", 1000, "heartbeat interval of the rebalance members"),
        ("--rate", 2000, "msgs/s produced during the rebalance phase"),
        ("--client-gc", bool, "leave the members' cyclic GC on (default: off, see code)"),
        ("--profile", str, "DIR: py-spy the broker and a member during (a)"),
    )
    args = p.parse_args(argv)
    return run_main(lambda: run(args), render, args.json, name="bench_groups")


if __name__ == "__main__":
    raise SystemExit(main())
