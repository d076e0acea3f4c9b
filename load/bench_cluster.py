"""Replication benchmark: a 3-broker cluster of ours and Apache Kafka's 3-node KRaft cluster, side
by side on 127.0.0.1 (ours: ``ClusterProcesses``; Kafka: ``deploy.kafka.KafkaCluster(nodes=3)``,
every node broker and controller, ``-Xmx1g`` each: 3 GiB of this 2-core, 24 GiB machine).

Goals: RF3 acks=all throughput >= 1.0x Kafka's 3-node cluster; a SIGTERMed broker of ours exits within 5 s.

How it measures, in full: ``docs/benchmarks.md``, "bench cluster".
"""

from __future__ import annotations

import contextlib
import itertools
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deploy.kafka import KafkaCluster
from load.harness.kafka import admin, create_topic, produce_blocking, quiet_logger
from load.harness.procfs import Interference, PhaseCpu, probe, rest_cores
from load.harness.profiler import Profiler
from load.harness.report import document, goal, log
from load.harness.runner import rotation
from load.harness.stats import spread
from load.peers import KafkaLauncher
from testing import BrokerProcess, ClusterProcesses, wait_for

SYSTEMS = ("ours", "kafka")
PHASES = ("throughput", "failover", "stopping")
KAFKA_HEAP = "1g"  # as load.peers' kafka peer
OURS_SESSION_MS, KAFKA_SESSION_MS = 3000, 9000  # the default broker.session.timeout.ms of each


@dataclass
class Cluster:
    """A running 3-node cluster of either system, as the phases see it: ``nodes`` are
    ``ManagedProcess`` es with a ``node_id`` (``BrokerProcess`` or ``KafkaNode``)."""

    system: str
    bootstrap: str
    nodes: list[Any]
    wait_registered: Callable[[int, float], None]
    clean_code: int  # exit code of a clean stop after SIGTERM
    clean_line: str  # ... and the line it logs ("{id}": the node id)
    controller_line: str  # what a node logs when it becomes the controller ("{id}")

    def node(self, node_id: int) -> Any:
        return next(n for n in self.nodes if n.node_id == node_id)

    def cpu(self) -> float | None:
        """CPU seconds of all its nodes (None when one is not running)."""
        cpu = [probe(n.pid if n.alive() else None)() for n in self.nodes]
        return None if None in cpu else sum(c for c in cpu if c is not None)

    def stopped_cleanly(self, node: Any, code: int) -> bool:
        return code == self.clean_code and self.clean_line.format(id=node.node_id) in node.logs()

    def controller(self) -> int | None:
        """The node that logged becoming the controller last (both systems' log lines start with
        a sortable date and time; a Kafka node's whole log is in its file)."""
        found = []
        for n in self.nodes:
            text = n.log.read_text(errors="replace") if n.log is not None and n.log.exists() else n.logs()
            mark = self.controller_line.format(id=n.node_id)
            found += [(ln.lstrip("[")[:23], n.node_id) for ln in text.splitlines() if mark in ln]
        return max(found)[1] if found else None


@contextlib.contextmanager
def running(system: str, root: Path, overrides: Mapping[str, object] | None = None) -> Iterator[Cluster]:
    """A 3-node cluster of ``system`` in ``root``, stopped at the end of the block."""
    if system == "ours":
        with ClusterProcesses(root, 3, overrides) as c:
            lines = ("stopped cleanly", "node {id} is the controller")
            yield Cluster(system, c.bootstrap, list(c.brokers), c.wait_registered, 0, *lines)
        return
    k = KafkaCluster(3, root, heap=KAFKA_HEAP, overrides=overrides)
    k.start(timeout=180)
    try:
        lines = (
            "[BrokerServer id={id}] shut down completed",
            "[QuorumController id={id}] Becoming the active",
        )
        yield Cluster(system, k.bootstrap, list(k.nodes), k.wait_registered, 143, *lines)
    finally:
        k.stop()


def _produce(bootstrap: str, topic: str, n: int, acks: str) -> float:
    """msgs/s of ``n`` values, first produce() to the last acknowledgement (a delivery callback
    per message, as when the figures of 2026-11-23 were taken)."""
    from confluent_kafka import Producer

    conf = {"acks": acks, "enable.idempotence": acks == "all", "linger.ms": 5, "batch.size": 1_000_000}
    conf |= {"queue.buffering.max.messages": 1_000_000, "logger": quiet_logger()}
    p = Producer({"bootstrap.servers": bootstrap, **conf})
    done = [0]

    def cb(err: Any, _msg: Any) -> None:
        done[0] += err is None

    value = b"x" * 100
    t0 = time.perf_counter()
    for i in range(n):
        produce_blocking(p, topic, value, 0.01, key=str(i % 1000).encode(), on_delivery=cb)
    p.flush(120)
    dt = time.perf_counter() - t0
    if done[0] != n:
        raise RuntimeError(f"only {done[0]} of {n} acknowledged")
    return n / dt


def _measured(c: Cluster, n: int, acks: str, rest: float | None) -> dict[str, Any]:
    """One produce run on ``c``'s topic "tp": msgs/s, the cluster's CPU per message, interference."""
    cpu, load = PhaseCpu(c.cpu, rest or 0.0), Interference([n.pid for n in c.nodes])
    rate = _produce(c.bootstrap, "tp", n, acks)
    share = load.share()
    _used, per_msg, _after = cpu.settle(n, timeout=3.0, window=0.5)  # followers catching up (acks=1)
    above = cpu.above_rest(n)
    return {
        "msgs_s": round(rate),
        "cluster_cpu_us_per_msg": round(per_msg, 3) if per_msg is not None else None,
        "cluster_cpu_us_per_msg_above_rest": round(above, 3) if above is not None else None,
        "rest_cores": round(rest, 3) if rest is not None else None,
        "other_cpu_share": round(share, 3) if share is not None else None,
    }


FIGURES = {"1": "rf3_acks1", "all": "rf3_acks_all"}


def _profile(c: Cluster, root: Path, n: int) -> dict[str, Any]:
    """One acks=all run of ours with py-spy on broker 1; where its samples fell."""
    broker = c.node(1)
    spy = Profiler(broker.pid, root / "py-spy-broker-1.txt", None, 100, focus=("framework/",))
    try:
        rate = _produce(c.bootstrap, "tp", n, "all")
    finally:
        prof = spy.summary()
    prof.pop("file", None)
    return {"broker": 1, "msgs_s": round(rate), "py_spy": prof}


def throughput(root: Path, n: int, reps: int, systems: list[str], profile: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"messages": n, "value_bytes": 100, "repetitions": reps, "systems": systems}
    runs: list[dict[str, Any]] = []
    order: list[list[str]] = []
    with contextlib.ExitStack() as stack:
        clusters = {s: stack.enter_context(running(s, root / f"tp-{s}")) for s in systems}
        for c in clusters.values():
            create_topic(c.bootstrap, "tp", 6, 3, {"min.insync.replicas": "2"}, 60)
            for acks in FIGURES:  # unmeasured: connections, metadata, and the JVMs' JIT (C2)
                _produce(c.bootstrap, "tp", max(20_000, n), acks)
        for rep in range(1, reps + 1):
            seq = rotation(systems, rep)
            order.append(seq)
            rest = {s: rest_cores(clusters[s].cpu, 2.0) for s in seq}
            for acks, s in itertools.product(("1", "all"), seq):
                row = {"rep": rep, "system": s, "acks": acks} | _measured(clusters[s], n, acks, rest[s])
                runs.append(row)
                log(
                    f"rep {rep} {s} RF3 acks={acks}: {row['msgs_s']:,} msgs/s, "
                    f"{row['cluster_cpu_us_per_msg_above_rest']} µs/msg of the brokers above rest, "
                    f"others {row['other_cpu_share']}"
                )
        summary = {
            s: {
                f"{FIGURES[acks]}_{key}": spread(
                    r[key] for r in runs if r["system"] == s and r["acks"] == acks
                )
                for acks in FIGURES
                for key in ("msgs_s", "cluster_cpu_us_per_msg_above_rest", "other_cpu_share")
            }
            for s in systems
        }
        r = ratios(summary)
        if profile and "ours" in clusters and (x := r.get("rf3_acks_all")) is not None and x < 1.0:
            out["profile"] = _profile(clusters["ours"], root, n)
            log(f"py-spy, our broker 1 during RF3 acks=all: {out['profile']['py_spy'].get('self', '')}")
    out |= {"order": order, "runs": runs, "summary": summary, "ratios": {"ours/kafka": r}}
    if "ours" in summary:  # the figures under their names of 2026-11-23: ours' medians
        for name in FIGURES.values():
            med = summary["ours"][f"{name}_msgs_s"]
            out[f"cluster_{name}_msgs_s"] = med["median"] if med else None
        with BrokerProcess(root / "single") as b:
            create_topic(b.bootstrap, "tp", 6, 1, timeout=30)
            _produce(b.bootstrap, "tp", 20_000, "1")
            out["single_acks1_msgs_s"] = round(_produce(b.bootstrap, "tp", n, "1"))
            out["single_acks_all_msgs_s"] = round(_produce(b.bootstrap, "tp", n, "all"))
    return out


def ratios(summary: dict[str, Any]) -> dict[str, float | None]:
    """ours/kafka of the medians: msgs/s (higher is better), CPU per message (lower is)."""

    def med(s: str, key: str) -> float | None:
        sp = summary.get(s, {}).get(key)
        return sp["median"] if sp else None

    out: dict[str, float | None] = {}
    for name in FIGURES.values():
        for key, label in (("msgs_s", name), ("cluster_cpu_us_per_msg_above_rest", f"{name}_cpu_per_msg")):
            a, b = med("ours", f"{name}_{key}"), med("kafka", f"{name}_{key}")
            out[label] = round(a / b, 3) if a is not None and b else None
    return out


def _read_back(bootstrap: str, group: str, acked: dict[bytes, int]) -> tuple[set[bytes], int]:
    """Every key read back from the topic "fo" until the acknowledged ones are all in, and the
    number of duplicates."""
    from confluent_kafka import Consumer

    conf = {"group.id": group, "auto.offset.reset": "earliest", "logger": quiet_logger()}
    consumer = Consumer({"bootstrap.servers": bootstrap, **conf})
    consumer.subscribe(["fo"])
    seen: set[bytes] = set()
    dup = 0

    def all_seen() -> bool:
        nonlocal dup
        for m in consumer.consume(5000, 0.5):
            if m.error() is None and (key := m.key()) is not None:
                dup += key in seen
                seen.add(key)
        return all(k in seen for k in acked)

    wait_for(all_seen, 90, 0, "every acknowledged message to be read back")
    consumer.close()
    return seen, dup


def failover(
    root: Path,
    system: str,
    session_ms: int | None,
    how: str = "kill",
    rate: int = 2000,
    seconds: float = 12.0,
) -> dict[str, Any]:
    """``session_ms``: the broker.session.timeout.ms to set, None for the system's default."""
    from confluent_kafka import Producer

    session = session_ms or (OURS_SESSION_MS if system == "ours" else KAFKA_SESSION_MS)
    overrides = {"broker.session.timeout.ms": session_ms} if session_ms else None
    with running(system, root / f"fo-{system}-{how}-{session}", overrides) as c:
        create_topic(c.bootstrap, "fo", 3, 3, {"min.insync.replicas": "2"}, 60)
        client = admin(c.bootstrap)
        leader = client.list_topics("fo", timeout=10).topics["fo"].partitions[0].leader
        conf = {"acks": "all", "enable.idempotence": True, "linger.ms": 1, "message.timeout.ms": 120_000}
        p = Producer({"bootstrap.servers": c.bootstrap, "logger": quiet_logger(), **conf})
        acked, acks_p0, errors = dict[bytes, int](), list[float](), list[str]()

        def cb(err: Any, msg: Any) -> None:
            if err is not None:
                errors.append(str(err))
                return
            acked[msg.key()] = msg.partition()
            if msg.partition() == 0:
                acks_p0.append(time.monotonic())

        t0, killed_t, i, controller = time.monotonic(), 0.0, 0, None
        while time.monotonic() - t0 < seconds or (
            killed_t and time.monotonic() - killed_t < session / 1000 + 6
        ):
            now = time.monotonic()
            if not killed_t and now >= t0 + seconds / 3:
                controller = c.controller()
                c.node(leader).signal(signal.SIGTERM if how == "term" else signal.SIGKILL)
                killed_t = now
            while i < (now - t0) * rate:
                p.produce("fo", key=str(i).encode(), value=b"v" * 100, partition=i % 3, on_delivery=cb)
                i += 1
            p.poll(0.005)
        p.flush(120)
        # acks of batches sent before the kill may still arrive just after it: the figure is the
        # longest silence between two consecutive acknowledgements of partition 0
        acks_p0.sort()
        gap = max((b - a for a, b in itertools.pairwise(acks_p0)), default=float("nan"))
        new_leader = client.list_topics("fo", timeout=10).topics["fo"].partitions[0].leader
        seen, dup = _read_back(c.bootstrap, f"audit-{how}-{session}", acked)
        return {
            "system": system,
            "signal": "SIGTERM" if how == "term" else "SIGKILL",
            "broker_session_timeout_ms": session,
            "session_timeout_is_default": session_ms is None,
            "rate_msgs_s": rate,
            "produced": i,
            "acknowledged": len(acked),
            "delivery_errors": len(errors),
            "killed_leader": leader,
            "controller": controller,  # the metadata quorum's leader just before the signal
            "killed_was_controller": controller == leader,
            "new_leader": new_leader,
            "partition0_unavailable_s": round(gap, 2),
            "lost": sum(1 for k in acked if k not in seen),
            "duplicates": dup,
        }


# (signal, ours' broker.session.timeout.ms, Kafka's): None is the system's default, "n/a" not run
FAILOVERS: list[tuple[str, int | None, int | str | None]] = [
    (
        "kill",
        None,
        "n/a: Kafka's crash failover is measured with its defaults (broker.session.timeout.ms 9 s, "
        "the next run); 3 s is ours' default",
    ),
    ("kill", KAFKA_SESSION_MS, None),
    ("term", None, None),
]


def failovers(root: Path, systems: list[str], errors: list[str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i, (how, ours, kafka) in enumerate(FAILOVERS, 1):
        for s in rotation(systems, i):
            session = ours if s == "ours" else kafka
            head = {"system": s, "signal": "SIGTERM" if how == "term" else "SIGKILL"}
            if isinstance(session, str):
                out.append(head | {"broker_session_timeout_ms": OURS_SESSION_MS, "n/a": session})
                continue
            try:
                res = failover(root, s, session, how)
            except Exception as exc:
                errors.append(f"failover {s} {how} {session}: {type(exc).__name__}: {exc}")
                out.append(head | {"error": errors[-1]})
                continue
            out.append(res)
            log(
                f"{s} {res['signal']} (session {res['broker_session_timeout_ms']} ms): partition 0 silent "
                f"{res['partition0_unavailable_s']} s, lost {res['lost']}, duplicates {res['duplicates']}"
            )
    return out


def stopping(root: Path, system: str, times: int) -> dict[str, Any]:
    """SIGTERM each broker in turn under acks=all traffic; seconds from the signal to the exit."""
    from confluent_kafka import Producer

    with running(system, root / f"stop-{system}") as c:
        create_topic(c.bootstrap, "st", 6, 3, {"min.insync.replicas": "2"}, 60)
        conf = {"acks": "all", "enable.idempotence": True, "linger.ms": 5, "logger": quiet_logger()}
        p = Producer({"bootstrap.servers": c.bootstrap, **conf})
        stop = threading.Event()
        failures: list[str] = []

        def on_delivery(err: Any, _msg: Any) -> None:
            if err is not None:
                failures.append(str(err))

        def write() -> None:
            while not stop.is_set():
                try:
                    p.produce("st", b"v" * 100, on_delivery=on_delivery)
                except BufferError:
                    pass
                p.poll(0.001)

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        exits: list[float] = []
        clean = 0
        try:
            for n in range(times):
                b = c.nodes[n % len(c.nodes)]
                t0 = time.monotonic()
                b.signal(signal.SIGTERM)
                assert b.proc is not None
                code = b.proc.wait(60)
                exits.append(time.monotonic() - t0)
                clean += c.stopped_cleanly(b, code)
                b.start(180)
                c.wait_registered(len(c.nodes), 120)
        finally:
            stop.set()
            writer.join(10)
            p.flush(60)
        return {
            "system": system,
            "stops": times,
            "sigterm_to_exit_max_s": round(max(exits), 2),
            "sigterm_to_exit_median_s": round(sorted(exits)[len(exits) // 2], 2),
            "stopped_cleanly": clean,
            "delivery_failures": len(failures),
        }


def run(args: Any) -> dict[str, Any]:
    cfg = dict(args.sizes)
    phases = [p.strip() for p in args.phases.split(",") if p.strip()]
    if unknown := set(phases) - set(PHASES):
        raise SystemExit(f"--phases: unknown {', '.join(sorted(unknown))}; known: {', '.join(PHASES)}")
    doc: dict[str, Any] = document("cluster", args, cfg | {"phases": phases, "kafka_heap": KAFKA_HEAP})
    doc["command"] = doc["machine"]["command"]
    systems, not_run = ["ours"], {}
    reason = "--no-kafka" if args.no_kafka else KafkaLauncher().unavailable()
    if reason is None:
        systems.append("kafka")
    else:
        not_run["kafka"] = f"n/a: {reason}"
    doc |= {"systems": systems, "not_run": not_run, "goals": []}
    errors: list[str] = doc["errors"]
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as tmp:
        root = Path(tmp)
        if "throughput" in phases:
            try:
                tp = doc["throughput"] = throughput(root, cfg["count"], cfg["reps"], systems, args.profile)
                ratio = tp["ratios"]["ours/kafka"]["rf3_acks_all"]
                doc["goals"].append(goal("RF3 acks=all produce ours/kafka", ratio, 1.0, "x", True))
            except Exception as exc:
                errors.append(f"throughput: {type(exc).__name__}: {exc}")
        if "failover" in phases:
            doc["failover"] = failovers(root, systems, errors)
        if "stopping" in phases:
            doc["stopping"] = {}
            for s in systems:
                try:
                    doc["stopping"][s] = st = stopping(root, s, cfg["stops"])
                except Exception as exc:
                    errors.append(f"stopping {s}: {type(exc).__name__}: {exc}")
                    continue
                if s == "ours":  # our broker's goal; Kafka's figure is reported beside it
                    worst = st["sigterm_to_exit_max_s"]
                    doc["goals"].append(goal("ours: SIGTERM to exit, max", worst, 5.0, "s", False))
                log(f"{s}: {st['stops']} stops, SIGTERM to exit max {st['sigterm_to_exit_max_s']} s")
    return doc


if __name__ == "__main__":
    from load.scenarios import main

    raise SystemExit(main("cluster"))
