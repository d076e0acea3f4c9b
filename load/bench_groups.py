"""Consumer-group benchmark: group throughput and rebalance time after a member is lost.

Goals: (a) >= 1,000,000 msgs/s for the group; (b) <= session timeout + 3 s.

How it measures, in full: ``docs/benchmarks.md``, "bench groups".
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

from load.harness import services
from load.harness.kafka import EndOffsets, create_topic, producer, quiet_logger
from load.harness.procfs import cpu_seconds, machine_busy_seconds, own_cpu
from load.harness.profiler import Profiler
from load.harness.report import document, goal, loadavg, log
from load.harness.runner import Processes
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
        phase = _Phase(broker_pid, count, time.monotonic())
        start.set()
        profilers = phase.watch(counts, out, procs[0].pid or 0, profile_dir, expected_rate, timeout)
        stop.set()
        members = [results.get(timeout=60) for _ in procs]
    finally:
        stop.set()
        for p in procs:
            p.join(30)
            if p.is_alive():
                p.kill()
    out |= _group_figures(sorted(members, key=lambda m: m["member"]), phase, count, "error" in out)
    if profilers:
        out["profiles"] = {name: p.summary() for name, p in profilers.items()}
    return out


def _per(x: float, d: float | None, digits: int | None, scale: float = 1.0) -> float | None:
    """x * scale / d rounded (to an int with ``digits`` None); None unless d > 0."""
    return round(x * scale / d, digits) if d is not None and d > 0 else None


class _Phase:
    """The clock and CPU readings of one throughput phase: at the start signal, when messages
    first flow, and when the group has consumed them all."""

    def __init__(self, broker_pid: int, count: int, t_start: float) -> None:
        self.broker_pid, self.count, self.t_start = broker_pid, count, t_start
        self.broker_cpu0 = self.broker_cpu_flow = cpu_seconds(broker_pid)
        self.busy_flow = machine_busy_seconds()
        self.t_flow: float | None = None  # when the watch loop first saw messages consumed
        self.broker_cpu1, self.busy_done, self.t_done = 0.0, self.busy_flow, t_start

    def watch(
        self,
        counts: Any,
        out: dict[str, Any],
        member0_pid: int,
        profile_dir: Path | None,
        expected_rate: float,
        timeout: float,
    ) -> dict[str, Profiler]:
        """Until the members' counts reach ``count`` (or stall: ``out["error"]``)."""
        profilers: dict[str, Profiler] = {}
        count, deadline = self.count, self.t_start + timeout
        last_total, last_progress = 0, time.monotonic()
        while True:
            total = sum(counts)
            now = time.monotonic()
            if total >= count:
                break
            if self.t_flow is None and total > 0:
                self.t_flow, self.broker_cpu_flow = now, cpu_seconds(self.broker_pid)
                self.busy_flow = machine_busy_seconds()
            if profile_dir is not None and not profilers and total > 0:
                # profile the middle of the phase: started once messages flow, for ~60% of the
                # expected remaining time
                secs = max(2.0, min(20.0, 0.6 * (count - total) / expected_rate))
                broker_out, member_out = profile_dir / "groups-broker.txt", profile_dir / "groups-member0.txt"
                profilers["broker"] = Profiler(self.broker_pid, broker_out, secs, focus=("framework/",))
                profilers["member0"] = Profiler(member0_pid, member_out, secs, 100, "--native")
            if total != last_total:
                last_total, last_progress = total, now
            if now - last_progress > 30 or now > deadline:
                out["error"] = f"stalled at {total}/{count} messages"
                break
            time.sleep(0.02)
        self.broker_cpu1, self.busy_done = cpu_seconds(self.broker_pid), machine_busy_seconds()
        self.t_done = time.monotonic()
        return profilers


def _group_figures(members: list[dict[str, Any]], ph: _Phase, count: int, stalled: bool) -> dict[str, Any]:
    got = sum(m["messages"] for m in members)
    firsts = [m["t_first"] for m in members if m["t_first"] is not None]
    lasts = [m["t_last"] for m in members if m["t_last"] is not None]
    assigned = [m.pop("t_assigned") for m in members if m.get("t_assigned") is not None]
    seconds = max(lasts) - min(firsts) if firsts and lasts else float("nan")
    client_cpu = sum(m["cpu_s"] for m in members)
    broker_cpu = ph.broker_cpu1 - ph.broker_cpu0
    for m in members:
        first, last = m.pop("t_first"), m.pop("t_last")
        span = last - first if first is not None else 0.0
        m["msgs_s"] = round(m["messages"] / span) if span > 0 else None
        m["cores"] = round(m["cpu_s"] / span, 2) if span > 0 else None
        m["cpu_us_per_msg"] = round(m["cpu_s"] / m["messages"] * 1e6, 3) if m["messages"] else None
    flow_s = ph.t_done - ph.t_flow if ph.t_flow is not None and ph.t_done > ph.t_flow else None
    broker_flow = ph.broker_cpu1 - ph.broker_cpu_flow
    done, flow = ph.busy_done, ph.busy_flow
    busy = done - flow if done is not None and flow is not None else float("nan")
    seconds_ok = seconds if seconds > 0 else None
    return {
        "messages": got,
        "seconds": round(seconds, 3),
        "msgs_s": _per(got, seconds_ok, None),
        "mb_s": _per(got * VALUE_SIZE, seconds_ok, 1, 1e-6),
        "join_to_first_message_s": round(min(firsts) - ph.t_start, 3) if firsts else None,
        "client_cpu_s": round(client_cpu, 2),
        "client_cpu_us_per_msg": _per(client_cpu, got, 3, 1e6),
        "client_cores": _per(client_cpu, seconds_ok, 2),
        "broker_cpu_s": round(broker_cpu, 2),
        "broker_cpu_us_per_msg": _per(broker_cpu, got, 3, 1e6),
        # per message: from the start signal (join included) to the end; cores: while flowing
        "broker_cores": _per(broker_flow, flow_s, 2),
        "msgs_s_from_assignment": _per(got, max(lasts) - min(assigned) if assigned and lasts else None, None),
        # every process on the machine while messages flowed; "other" is what was left after
        # the broker and the members: other work on a shared machine competing for the cores
        "machine_busy_cores": _per(busy, flow_s, 2),
        "other_processes_cores": _per(busy - broker_flow - client_cpu, flow_s, 2),
        "members": members,
        "rebalances": sum(len(m["assignments"]) for m in members) - MEMBERS,
        "errors": sum(m["errors"] for m in members) + max(0, count - got if stalled else 0),
    }


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

    conf: dict[str, Any] = {"group.id": group, "client.id": f"bench-rebalance-{idx}"}
    conf["auto.offset.reset"] = "latest"
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


class _GroupView:
    """The group as its members report it: who owns which partitions, and which of them have
    delivered a message since the owner's last assignment (the killed member's reports dropped)."""

    def __init__(self, events: Any) -> None:
        self.events = events
        self.assignment: dict[int, list[int]] = {}  # member -> current partitions
        self.flowing: dict[int, set[int]] = {i: set() for i in range(MEMBERS)}  # since its last assignment
        self.log: list[tuple[str, int, float, Any]] = []
        self.dead: set[int] = set()

    def drain(self, until: float) -> None:
        while True:
            left = until - time.monotonic()
            events = self.events
            try:
                ev = events.get(timeout=max(0.0, min(left, 0.1))) if left > 0 else events.get_nowait()
            except queue.Empty:
                if time.monotonic() >= until:
                    return
                continue
            kind, idx, _t, arg = ev
            if idx in self.dead:
                continue
            self.log.append(ev)
            if kind in ("assign", "revoke"):
                self.assignment[idx], self.flowing[idx] = list(arg) if kind == "assign" else [], set()
            elif kind == "first":
                self.flowing[idx].add(arg)

    def stable(self) -> bool:
        assignment, flowing = self.assignment, self.flowing
        owned = [p for parts in assignment.values() for p in parts]
        return (
            len(assignment) == MEMBERS
            and sorted(owned) == list(range(PARTITIONS))
            and all(set(assignment[i]) <= flowing[i] and assignment[i] for i in assignment)
        )

    def settle(self, settle_s: float) -> None:
        deadline = time.monotonic() + 120
        while not self.stable():
            if time.monotonic() > deadline:
                raise RuntimeError(f"group never stable: {self.assignment}, flowing {self.flowing}")
            self.drain(time.monotonic() + 0.2)
        self.drain(time.monotonic() + settle_s)  # a few heartbeats in the stable generation
        if not self.stable():
            raise RuntimeError(f"group rebalanced while settling: {self.assignment}")

    def kill(self, victim: int, pid: int) -> tuple[list[int], float]:
        """SIGKILL a member (it cannot leave the group): its partitions and the time of the kill."""
        lost = sorted(self.assignment[victim])
        os.kill(pid, signal.SIGKILL)
        t_kill = time.monotonic()
        self.dead.add(victim)
        del self.assignment[victim]
        self.flowing.pop(victim)
        return lost, t_kill

    def recover(self, lost: list[int], end: float) -> tuple[dict[int, float], dict[int, float]]:
        """When each lost partition was assigned to a survivor, and when it first delivered there."""
        log_from = len(self.log)
        assigned_at: dict[int, float] = {}
        consumed_at: dict[int, float] = {}
        while len(consumed_at) < len(lost) and time.monotonic() < end:
            self.drain(time.monotonic() + 0.05)
            for kind, _idx, t, arg in self.log[log_from:]:
                if kind == "assign":
                    for p in arg:
                        if p in lost and p not in assigned_at:
                            assigned_at[p] = t
                elif kind == "first" and arg in lost and arg in assigned_at and arg not in consumed_at:
                    consumed_at[arg] = t
            log_from = len(self.log)
        return assigned_at, consumed_at


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
    view = _GroupView(events)
    out: dict[str, Any] = {
        "group": group,
        "session_timeout_ms": session_ms,
        "heartbeat_interval_ms": heartbeat_ms,
    }
    try:
        view.settle(settle_s)
        victim = 0
        lost, t_kill = view.kill(victim, procs[victim].pid or 0)
        before = {str(k): v for k, v in view.assignment.items()}
        out |= {"victim_partitions": lost, "assignment_before": before}
        assigned_at, consumed_at = view.recover(lost, t_kill + timeout_s)
        revokes = [t for kind, _i, t, _a in view.log if kind == "revoke" and t > t_kill]

        def since_kill(times: dict[int, float]) -> float | None:  # to the last of the lost partitions
            return round(max(times.values()) - t_kill, 3) if len(times) == len(lost) else None

        out["detected_s"] = round(min(revokes) - t_kill, 3) if revokes else None
        out["assigned_s"], out["recovered_s"] = since_kill(assigned_at), since_kill(consumed_at)
        out["assignment_after"] = {str(k): v for k, v in view.assignment.items()}
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
def run(args: argparse.Namespace) -> dict[str, Any]:
    count, reps = dict(args.sizes).values()
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
    with tempfile.TemporaryDirectory(prefix="sftraffic-bench-groups-") as tmp, Processes() as running:
        broker = running.start(services.broker(Path(tmp), **overrides))
        try:
            topic = create_topic(broker.bootstrap, f"bench-groups-{uuid.uuid4().hex[:6]}", PARTITIONS)
            log(f"preloading {count:,} messages into {PARTITIONS} partitions ...")
            doc["preload"] = preload(broker.bootstrap, topic, count)
            _throughput_phase(args, doc, broker, topic, count)
            _rebalance_phase(args, doc, broker.bootstrap, reps)
        finally:
            doc["broker_log_tail"] = broker.tail(20).splitlines() if doc["errors"] else []
    target_s = session_ms / 1000 + REBALANCE_MARGIN_S
    doc["goals"] = [
        goal("group throughput, 4 members", doc["throughput"]["msgs_s"], THROUGHPUT_GOAL, "msgs/s", True),
        goal("rebalance after member loss (median)", doc["rebalance"]["median_s"], target_s, "s", False),
    ]
    return doc


def _throughput_phase(
    args: argparse.Namespace, doc: dict[str, Any], broker: Any, topic: str, count: int
) -> None:
    """(a), ``args.reps`` times; with --profile one more run under py-spy (which slows member 0),
    kept apart."""
    profile_dir = Path(args.profile) if args.profile else None
    runs: list[dict[str, Any]] = []
    doc["throughput_runs"] = runs

    def med(key: str) -> float | None:
        return median(r[key] for r in runs if r.get(key))

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


def _rebalance_phase(args: argparse.Namespace, doc: dict[str, Any], bootstrap: str, reps: int) -> None:
    """(b), ``reps`` times on one topic a steady producer keeps writing to."""
    rtopic = create_topic(bootstrap, f"bench-rebalance-{uuid.uuid4().hex[:6]}", PARTITIONS)
    steady = SteadyProducer(bootstrap, rtopic, args.rate)
    steady.start()
    doc["rebalance_runs"] = []
    try:
        for rep in range(reps):
            log(f"rebalance after SIGKILL of a member (run {rep + 1}/{reps}) ...")
            try:
                res = measure_rebalance(
                    bootstrap, rtopic, session_ms=args.session_timeout_ms, heartbeat_ms=args.heartbeat_ms
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


if __name__ == "__main__":
    from load.scenarios import main

    raise SystemExit(main("groups"))
