"""The run of ``sftraffic chaos``: a Jepsen-style check of a cluster of ours (or any Kafka cluster).

A run:

1. starts a local cluster of ``--brokers`` brokers (``ClusterProcesses``; in network
   namespaces when link cuts are asked for, see ``chaos/netns.py``), or, with
   ``--external HOST:PORT`` (``--bootstrap``: its deprecated alias), uses an existing one
   (PLAINTEXT) that it acts on through ``--kill-cmd`` ... templates;
2. creates a topic (``--partitions``, replication factor min(3, brokers), min.insync.replicas 2)
   and runs, for ``--duration`` seconds, ``--producers`` producers (``--acks``, idempotent
   unless ``--no-idempotence``) writing unique values, a live reader, and the nemesis (one
   fault every 5-10 s: see ``chaos/nemesis.py``);
3. heals (restarts, resumes, reconnects everything), collects the outstanding delivery
   reports, waits for every ISR to be whole, reads every partition to its high watermark;
4. judges the history (``chaos/checker.py``): lost, duplicated, misplaced, order, reads
   (vanished or changed), ack gap, ISR, foreign values, unacknowledged-but-present;
   with ``--workload transactions`` the writers are transactional producers (transactions of
   ``--txn-records`` records over several partitions, every fifth aborted on purpose) and two
   live readers read at ``--isolation`` (read_committed; read_uncommitted is a broken setup
   that must fail): ``chaos/txn_workload.py``, judged by ``chaos/txn_checker.py`` (aborted
   reads G1a, torn transactions, lost commits, duplicates, per-reader offsets, foreign);
5. returns the verdict, figures and timeline as one JSON document (``chaos/cli.py`` prints
   the table and writes ``--json``).

The seed (``--seed``, random by default and always printed) fixes the nemesis schedule.
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException
from rich.console import Console

from chaos import netns
from chaos.checker import FAIL, INFO, PASS, Check, History, Verdict, check_isr, judge
from chaos.nemesis import KINDS, CommandTarget, Event, LocalTarget, Nemesis, Target
from chaos.txn_checker import ABORTED, COMMITTED, UNKNOWN, TxnHistory
from chaos.txn_checker import judge as judge_transactions
from chaos.txn_workload import TxnProducerWorker, TxnReader, TxnRecorder, final_txn_read
from chaos.workload import (
    ProducerWorker,
    Reader,
    Recorder,
    admin,
    create_topic,
    final_read,
    leaders,
    partition_states,
)
from deploy.local import external
from framework.errors import StoreError
from testing import ClusterProcesses, ProcessError, wait_for

INTERNAL_TOPICS = ["__consumer_offsets"]


class SetupError(RuntimeError):
    """The run could not start (bad options, no cluster); exit code 2."""


# -- options ---------------------------------------------------------------------------------
def _interval(text: str) -> tuple[float, float]:
    lo, sep, hi = text.partition("-")
    try:
        bounds = (float(lo), float(hi if sep else lo))
    except ValueError:
        raise SetupError(f"--interval {text!r}: expected MIN-MAX seconds, e.g. 5-10") from None
    if not 0 < bounds[0] <= bounds[1]:
        raise SetupError(f"--interval {text!r}: expected 0 < MIN <= MAX")
    return bounds


def _overrides(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        k, sep, v = item.partition("=")
        if not sep:
            raise SetupError(f"--override {item!r}: expected KEY=VALUE")
        out[k.strip()] = v.strip()
    return out


def choose_kinds(asked: str | None, supported: tuple[str, ...], local: bool) -> tuple[list[str], str | None]:
    """The faults to inject, and a note when a default one is left out."""
    if asked:
        kinds = [k.strip() for k in asked.split(",") if k.strip()]
        unknown = [k for k in kinds if k not in KINDS]
        if unknown:
            raise SetupError(f"--nemesis: unknown {', '.join(unknown)} (choose among {', '.join(KINDS)})")
        missing = [k for k in kinds if k not in supported]
        if missing:
            why = "needs network namespaces (root)" if local else "has no command template (or is local-only)"
            raise SetupError(f"--nemesis {','.join(missing)}: {why}")
        return kinds, None
    kinds = list(supported)
    if not kinds:
        raise SetupError("no fault available: give --kill-cmd, --term-cmd or --pause-cmd/--resume-cmd")
    left = [k for k in KINDS if k not in supported]
    return kinds, (f"not injecting {', '.join(left)}" if left else None)


# -- the run ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Stage:
    """What a run acts on, once set up: the cluster, the faults to inject, the test topic."""

    target: Target
    bootstrap: str
    kinds: list[str]
    topic: str
    brokers: int
    rf: int
    min_isr: int


class Run:
    """One chaos run: set up, act, heal, judge. ``doc`` is the JSON document."""

    def __init__(self, args: argparse.Namespace, console: Console) -> None:
        self.args = args
        self.console = console
        self.seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 10**9)
        self.interval = _interval(args.interval)
        if args.acks not in ("all", "-1") and not args.no_idempotence:
            raise SetupError(
                f"--acks {args.acks} needs --no-idempotence (an idempotent producer uses acks=all)"
            )
        if args.workload == "transactions" and (args.no_idempotence or args.acks not in ("all", "-1")):
            raise SetupError("--workload transactions: transactional producers are idempotent with acks=all")
        self.cluster: ClusterProcesses | None = None
        self.data_dir: Path | None = None
        self.temp_dir = False
        self.notes: list[str] = []
        self.t0 = time.monotonic()

    def clock(self) -> float:
        return time.monotonic() - self.t0

    def say(self, text: str) -> None:
        self.console.print(f"[dim]{self.clock():7.1f}s[/] {text}")

    # -- set up ------------------------------------------------------------------------------
    def start_local(self) -> tuple[Target, str, list[str]]:
        a = self.args
        wants_links = a.nemesis is None or "partition" in a.nemesis.split(",")
        reason = netns.unavailable_reason() if wants_links else "not asked for"
        if a.nemesis is not None and wants_links and reason is not None:
            raise SetupError(f"--nemesis partition needs network namespaces: {reason}")
        if a.data_dir:
            self.data_dir = Path(a.data_dir)
            self.data_dir.mkdir(parents=True, exist_ok=True)
        else:
            self.data_dir = Path(tempfile.mkdtemp(prefix="sftraffic-chaos-"))
            self.temp_dir = True
        overrides = _overrides(a.override)
        if a.workload == "transactions":  # 50 partitions x RF 3 is slow to create on a small machine
            overrides.setdefault("transaction.state.log.num.partitions", "3")
        if reason is None:
            try:
                cluster = netns.NetnsCluster(self.data_dir, a.brokers, overrides, logs=self.data_dir)
            except netns.NetnsError as exc:
                raise SetupError(f"could not build the brokers' network namespaces: {exc}") from None
            self.cluster = cluster
            where = f"in network namespaces, subnet {cluster.network.subnet}.0/24"
        else:
            if a.nemesis is None:
                self.notes.append(f"no link cuts: {reason}")
            self.cluster = ClusterProcesses(self.data_dir, a.brokers, overrides)
            for b in self.cluster.brokers:
                b.log = self.data_dir / f"broker-{b.node_id}.log"
            where = "on 127.0.0.1"
        self.say(f"starting {a.brokers} brokers {where} (data and logs in {self.data_dir})")
        try:
            self.cluster.start(90)
        except (ProcessError, TimeoutError) as exc:
            raise SetupError(f"the local cluster did not start: {exc}") from None
        target = LocalTarget(self.cluster)
        return target, self.cluster.bootstrap, list(target.kinds)

    def attach_remote(self) -> tuple[Target, str, list[str]]:
        a = self.args
        try:  # a bad address, no broker there: one line at once
            conn = external.external_connection(a)
            if conn is not None:
                external.check(conn)
        except StoreError as exc:
            raise SetupError(exc.message) from None
        try:
            md = admin(a.external).list_topics(timeout=15)
        except Exception as exc:
            raise SetupError(f"no answer from {a.external}: {exc}") from None
        registered = sorted(md.brokers)
        nodes = [int(n) for n in a.nodes.split(",")] if a.nodes else registered

        def live() -> list[int]:
            try:
                return sorted(admin(a.external).list_topics(timeout=5).brokers)
            except Exception:
                return []

        templates = {
            "kill": a.kill_cmd,
            "term": a.term_cmd,
            "start": a.start_cmd,
            "pause": a.pause_cmd,
            "resume": a.resume_cmd,
        }
        target = CommandTarget(nodes, templates, live)
        self.say(f"existing cluster {a.external}: brokers {registered}, acting on {nodes}")
        return target, a.external, list(target.kinds)

    # -- act, heal, judge --------------------------------------------------------------------
    def execute(self) -> dict[str, Any]:
        """Set up, then run the workload asked for; the run's JSON document."""
        stage = self.set_up()
        if self.args.workload == "transactions":
            return self._transactions(stage)
        return self._produce(stage)

    def set_up(self) -> Stage:
        """The cluster (started or attached), the faults to inject, and the test topic, created
        and with a leader and a whole ISR for every partition."""
        a = self.args
        target, bootstrap, supported = self.attach_remote() if a.external else self.start_local()
        kinds, note = choose_kinds(a.nemesis, tuple(supported), local=not a.external)
        if note:
            self.notes.append(note)
        brokers = len(target.nodes) if a.external else a.brokers
        rf = min(a.replication_factor, brokers)
        min_isr = min(a.min_insync, rf)
        topic = f"chaos-{self.seed}-{int(time.time())}"
        self.say(
            f"seed {self.seed}; topic {topic}: {a.partitions} partitions, RF {rf}, "
            f"min.insync.replicas {min_isr}"
        )
        for n in self.notes:
            self.say(f"[yellow]{n}[/]")
        try:
            create_topic(bootstrap, topic, a.partitions, rf, min_isr)
        except KafkaException as exc:
            raise SetupError(f"could not create {topic}: {exc}") from None
        self._wait_whole(bootstrap, topic, 60, "a leader and a whole ISR for every partition")
        return Stage(target, bootstrap, kinds, topic, brokers, rf, min_isr)

    # -- the produce workload ----------------------------------------------------------------
    def _produce(self, s: Stage) -> dict[str, Any]:
        """The produce workload (``chaos/workload.py``), judged by ``chaos/checker.py``."""
        a = self.args
        history = History(partitions=a.partitions)
        self.t0 = time.monotonic()
        recorder = Recorder(history, self.clock)
        reader = Reader(s.bootstrap, s.topic, a.partitions, recorder)
        reader.start()
        producers = self._producers(s, recorder)
        history.start = self.clock()
        for w in producers:
            w.start()
        nemesis = self._nemesis(s)
        self._progress(a.duration, lambda: self._produce_progress(recorder))
        nemesis.stop()
        for w in producers:
            w.stop_producing()
        history.end = self.clock()
        self.say(f"stopped writing: {len(history.sent)} sent, {len(history.acks)} acknowledged; healing")
        timeline = self._heal(s.target, nemesis)
        undelivered = sum(w.finish(60) for w in producers)
        whole = self._wait_whole(s.bootstrap, s.topic, a.heal_timeout, "every ISR whole", fail=False)
        reader.stop()
        self.say(f"final read ({len(history.acks)} acknowledged, {undelivered} without a delivery report)")
        history.final, marks, complete = final_read(s.bootstrap, s.topic, a.partitions)
        history.states = partition_states(s.bootstrap, [s.topic, *INTERNAL_TOPICS])
        verdict = self._produce_verdict(history, recorder, reader, marks, complete)
        figures = {
            "sent": len(history.sent),
            "acknowledged": len(history.acks),
            "delivery_errors": len(history.failed),
            "reads": len(history.reads),
            "final_records": sum(len(r) for r in history.final.values()),
            "watermarks": {p: list(m) for p, m in marks.items()},
        }
        return self._document(s, verdict, figures, whole, timeline)

    def _producers(self, s: Stage, recorder: Recorder) -> list[ProducerWorker]:
        a = self.args
        return [
            ProducerWorker(
                f"p{i + 1}",
                s.bootstrap,
                s.topic,
                a.partitions,
                a.rate,
                recorder,
                acks=a.acks,
                idempotence=not a.no_idempotence,
            )
            for i in range(a.producers)
        ]

    @staticmethod
    def _produce_progress(recorder: Recorder) -> str:
        h = recorder.history
        return f"{len(h.sent)} sent, {len(h.acks)} acknowledged, {len(h.reads)} read"

    def _produce_verdict(
        self,
        history: History,
        recorder: Recorder,
        reader: Reader,
        marks: dict[int, tuple[int, int]],
        complete: bool,
    ) -> Verdict:
        """The checker's verdict, with the clients' errors and (if it fell short) the final read."""
        a = self.args
        verdict = judge(
            history, exactly_once=not a.no_idempotence and a.acks in ("all", "-1"), max_gap=a.max_gap
        )
        clients = Check(
            "client errors",
            INFO if recorder.fatal or reader.errors else PASS,
            f"{len(recorder.fatal)} fatal producer errors (each started a new producer), "
            f"{reader.errors} reader errors",
            {"producer_fatal": len(recorder.fatal), "reader_errors": reader.errors},
            recorder.fatal[:10],
        )
        extra = [clients]
        if not complete:
            extra.insert(
                0,
                Check(
                    "final read", FAIL, f"not every record below the high watermarks {marks} could be read"
                ),
            )
        return Verdict([*verdict.checks, *extra])

    # -- the transactions workload -----------------------------------------------------------
    def _transactions(self, s: Stage) -> dict[str, Any]:
        """The transactions workload (``chaos/txn_workload.py``), judged by ``chaos/txn_checker.py``."""
        a = self.args
        history = TxnHistory(per_txn=a.txn_records, isolation=a.isolation)
        recorder = TxnRecorder(history)
        self.t0 = time.monotonic()
        readers = [
            TxnReader(f"reader{i + 1}", s.bootstrap, s.topic, a.partitions, a.isolation, recorder)
            for i in range(2)
        ]
        producers = [
            TxnProducerWorker(
                f"t{i + 1}", s.bootstrap, s.topic, a.partitions, a.rate, recorder, per_txn=a.txn_records
            )
            for i in range(a.producers)
        ]
        for w in [*readers, *producers]:
            w.start()
        self._await_first_transactions(producers, recorder)
        nemesis = self._nemesis(s)
        self._progress(a.duration, lambda: self._txn_progress(history))
        nemesis.stop()
        self.say("stopped the faults; healing, then letting the open transactions end")
        timeline = self._heal(s.target, nemesis)
        for w in producers:
            w.stop()
        stuck = [w.logical for w in producers if w.is_alive()]
        whole = self._wait_whole(s.bootstrap, s.topic, a.heal_timeout, "every ISR whole", fail=False)
        for r in readers:
            r.stop()
        self.say(f"final read at {a.isolation} ({len(history.outcomes)} transactions)")
        history.final, history.final_complete = final_txn_read(
            s.bootstrap, s.topic, a.partitions, a.isolation
        )
        verdict = self._txn_verdict(s, history, recorder, readers, producers, stuck)
        counts = Counter(history.outcomes.values())
        figures = {
            "transactions": len(history.outcomes),
            "committed": counts[COMMITTED],
            "aborted": counts[ABORTED],
            "unknown": counts[UNKNOWN],
            "reads": len(history.reads),
            "final_records": len(history.final),
        }
        config = {"isolation": a.isolation, "records_per_transaction": a.txn_records}
        return self._document(s, verdict, figures, whole, timeline, config)

    def _await_first_transactions(self, producers: list[TxnProducerWorker], recorder: TxnRecorder) -> None:
        """Faults start once every producer has its producer id (the transaction coordinators
        and __transaction_state in place), as a running application would have."""
        try:
            wait_for(lambda: all(w.outcomes_seen() for w in producers), 90, 0.2, "a first transaction each")
        except TimeoutError:
            raise SetupError(f"no transaction ended within 90 s: {recorder.errors[:3]}") from None
        self.say("every producer has ended a transaction: faults start")

    @staticmethod
    def _txn_progress(history: TxnHistory) -> str:
        counts = Counter(history.outcomes.values())
        return f"transactions {dict(counts)}, {len(history.reads)} records read"

    def _txn_verdict(
        self,
        s: Stage,
        history: TxnHistory,
        recorder: TxnRecorder,
        readers: list[TxnReader],
        producers: list[TxnProducerWorker],
        stuck: list[str],
    ) -> Verdict:
        """The transactional checker's verdict, with the ISRs after healing and the clients' errors."""
        states = partition_states(s.bootstrap, [s.topic, *INTERNAL_TOPICS, "__transaction_state"])
        verdict = judge_transactions(history)
        isr = check_isr(History(partitions=self.args.partitions, states=states))
        clients = Check(
            "client errors",
            FAIL if stuck else (INFO if recorder.errors else PASS),
            f"{len(recorder.errors)} producer errors (each an abort or a new client), "
            f"{sum(r.errors for r in readers)} reader errors"
            + (f"; producers {stuck} did not stop" if stuck else ""),
            {"producer_errors": len(recorder.errors), "clients": sum(w.producers for w in producers)},
            recorder.errors[:10],
        )
        return Verdict([*verdict.checks, isr, clients])

    # -- steps both workloads share ----------------------------------------------------------
    def _wait_whole(self, bootstrap: str, topic: str, timeout: float, what: str, fail: bool = True) -> bool:
        def whole() -> bool:
            try:
                states = partition_states(bootstrap, [topic], 5)
            except Exception:
                return False
            return bool(states) and all(s.whole for s in states)

        try:
            wait_for(whole, timeout, 0.5, what)
        except TimeoutError:
            if fail:
                raise SetupError(f"no {what} after {timeout:.0f} s") from None
            return False
        return True

    def _progress(self, duration: float, line: Callable[[], str]) -> None:
        end = time.monotonic() + duration
        while (left := end - time.monotonic()) > 0:
            time.sleep(min(10.0, left))
            self.say(f"[dim]{line()}[/]")

    def _nemesis(self, s: Stage) -> Nemesis:
        nemesis = Nemesis(
            s.target,
            s.kinds,
            random.Random(self.seed),
            self.clock,
            self.interval,
            describe=lambda: leaders(s.bootstrap, s.topic),
            on_event=lambda e: self.say(_event_line(e)),
        )
        nemesis.start()
        return nemesis

    def _heal(self, target: Target, nemesis: Nemesis) -> list[Event]:
        """Heal everything; the timeline of faults and heals."""
        healed = target.heal()
        for h in healed:
            self.say(f"heal: {h}")
        return [*nemesis.events, *(Event(round(self.clock(), 3), "heal", None, h) for h in healed)]

    def _config(self, s: Stage) -> dict[str, Any]:
        a = self.args
        return {
            "mode": "existing cluster" if a.external else "local",
            "workload": a.workload,
            "bootstrap": s.bootstrap,
            "brokers": s.brokers,
            "topic": s.topic,
            "partitions": a.partitions,
            "replication_factor": s.rf,
            "min_insync_replicas": s.min_isr,
            "producers": a.producers,
            "rate_per_producer": a.rate,
            "acks": a.acks,
            "idempotence": not a.no_idempotence,
            "duration_s": a.duration,
            "nemesis": s.kinds,
            "interval_s": list(self.interval),
            "data_dir": str(self.data_dir) if self.data_dir else None,
        }

    def _document(
        self,
        s: Stage,
        verdict: Verdict,
        figures: dict[str, Any],
        whole: bool,
        timeline: list[Event],
        config: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The run's JSON document: ``figures`` are the workload's, ``config`` adds to the run's."""
        return {
            "command": "sftraffic chaos",
            "passed": verdict.passed,
            "seed": self.seed,
            "config": {**self._config(s), **(config or {})},
            "notes": self.notes,
            "figures": {
                **figures,
                "isr_whole_after_heal": whole,
                "faults": sum(1 for e in timeline if e.action in KINDS),
            },
            "checks": verdict.to_json()["checks"],
            "timeline": [asdict(e) for e in timeline],
        }

    def close(self, passed: bool) -> None:
        if self.cluster is not None:
            if isinstance(self.cluster, netns.NetnsCluster):
                self.cluster.destroy()
            else:
                self.cluster.stop()
        if self.temp_dir and self.data_dir is not None:
            if passed:
                shutil.rmtree(self.data_dir, ignore_errors=True)
            else:
                self.console.print(f"broker data and logs kept in {self.data_dir}")


def _event_line(e: Event) -> str:
    node = f"broker {e.node}" if e.node is not None else ""
    colour = "red" if e.action in ("kill", "term", "pause", "partition", "error") else "green"
    return f"[{colour}]{e.action}[/] {node} {e.detail}".rstrip()
