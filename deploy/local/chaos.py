"""``sftraffic chaos``: a Jepsen-style checker for a cluster of ours (or any Kafka cluster).

A run:

1. starts a local cluster of ``--brokers`` brokers (``ClusterProcesses``; in network
   namespaces when link cuts are asked for, see ``deploy/local/netns.py``), or, with
   ``--bootstrap``, uses an existing one that it acts on through ``--kill-cmd`` ... templates;
2. creates a topic (``--partitions``, replication factor min(3, brokers), min.insync.replicas 2)
   and runs, for ``--duration`` seconds, ``--producers`` producers (``--acks``, idempotent
   unless ``--no-idempotence``) writing unique values, a live reader, and the nemesis (one
   fault every 5-10 s: see ``chaos_nemesis.py``);
3. heals (restarts, resumes, reconnects everything), collects the outstanding delivery
   reports, waits for every ISR to be whole, reads every partition to its high watermark;
4. judges the history (``chaos_checker.py``): lost, duplicated, misplaced, order, reads
   (vanished or changed), ack gap, ISR, foreign values, unacknowledged-but-present;
   with ``--workload transactions`` the writers are transactional producers (transactions of
   ``--txn-records`` records over several partitions, every fifth aborted on purpose) and two
   live readers read at ``--isolation`` (read_committed; read_uncommitted is a broken setup
   that must fail): ``chaos_txn_workload.py``, judged by ``chaos_txn_checker.py`` (aborted
   reads G1a, torn transactions, lost commits, duplicates, per-reader offsets, foreign);
5. prints the verdict table and writes ``--json``. Exit code 0 only when every check passes
   (1 otherwise, 2 when the run could not be set up).

The seed (``--seed``, random by default and always printed) fixes the nemesis schedule.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException
from rich.console import Console
from rich.table import Table

from deploy.local import netns
from deploy.local.chaos_checker import FAIL, INFO, PASS, Check, History, Verdict, check_isr, judge
from deploy.local.chaos_nemesis import KINDS, CommandTarget, Event, LocalTarget, Nemesis, Target
from deploy.local.chaos_txn_checker import ABORTED, COMMITTED, UNKNOWN, TxnHistory
from deploy.local.chaos_txn_checker import judge as judge_transactions
from deploy.local.chaos_txn_workload import TxnProducerWorker, TxnReader, TxnRecorder, final_txn_read
from deploy.local.chaos_workload import (
    ProducerWorker,
    Reader,
    Recorder,
    admin,
    create_topic,
    final_read,
    leaders,
    partition_states,
)
from deploy.local.process import ClusterProcesses, ProcessError, wait_for

INTERNAL_TOPICS = ["__consumer_offsets"]


class SetupError(RuntimeError):
    """The run could not start (bad options, no cluster); exit code 2."""


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "chaos",
        help="Jepsen-style check: faults while producing and reading, then a verdict on loss, "
        "duplication, order, reads and ISRs",
        description="A Jepsen-style checker: faults (kill, pause, term, link cuts) while producers "
        "write and a reader reads, then a verdict on loss, duplication, order, reads and ISRs. "
        "Starts a local cluster unless --bootstrap is given.",
    )
    p.add_argument("--duration", type=float, default=60, help="seconds of faults and writes (default 60)")
    p.add_argument("--brokers", type=int, default=3, help="local cluster size (default 3)")
    p.add_argument("--partitions", type=int, default=6, help="partitions of the test topic (default 6)")
    p.add_argument("--replication-factor", type=int, default=3, help="capped at --brokers (default 3)")
    p.add_argument("--min-insync", type=int, default=2, help="min.insync.replicas (default 2)")
    p.add_argument("--producers", type=int, default=2, help="concurrent producers (default 2)")
    p.add_argument("--rate", type=float, default=200, help="messages/s per producer (default 200)")
    p.add_argument(
        "--acks", default="all", choices=["all", "1", "0", "-1"], help="producer acks (default all)"
    )
    p.add_argument("--no-idempotence", action="store_true", help="producers without enable.idempotence")
    p.add_argument(
        "--workload",
        default="produce",
        choices=["produce", "transactions"],
        help="produce: unique values, checked for loss, duplication, order (default); transactions: "
        "transactional producers (multi-partition transactions, some aborted) and read_committed "
        "readers, checked for aborted reads (G1a), torn transactions, lost commits, duplicates",
    )
    p.add_argument(
        "--isolation",
        default="read_committed",
        choices=["read_committed", "read_uncommitted"],
        help="the transactions workload's readers (read_uncommitted: a broken setup, shows G1a)",
    )
    p.add_argument(
        "--txn-records",
        type=int,
        default=12,
        help="records per transaction (transactions workload, default 12)",
    )
    p.add_argument("--seed", type=int, help="fixes the nemesis schedule (default: random, printed)")
    p.add_argument(
        "--nemesis",
        help=f"comma-separated faults among {','.join(KINDS)} (default: every one the target "
        "supports; partition needs root for network namespaces)",
    )
    p.add_argument(
        "--interval", default="5-10", metavar="MIN-MAX", help="seconds between faults (default 5-10)"
    )
    p.add_argument(
        "--max-gap", type=float, default=30, help="longest acceptable silence of a partition, s (default 30)"
    )
    p.add_argument(
        "--heal-timeout", type=float, default=120, help="seconds to wait for whole ISRs after healing"
    )
    p.add_argument(
        "--data-dir", help="local brokers' data and logs (default: a temporary directory, kept on failure)"
    )
    p.add_argument(
        "--override",
        "-o",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="local broker config (repeatable)",
    )
    p.add_argument("--json", metavar="PATH", help="write the verdict, figures and timeline as JSON")
    remote = p.add_argument_group("an existing cluster ({node} is replaced by the broker id)")
    remote.add_argument("--bootstrap", help="HOST:PORT,... of an existing cluster: start nothing")
    remote.add_argument("--nodes", help="broker ids to act on (default: every broker Metadata lists)")
    remote.add_argument("--kill-cmd", help="SIGKILL a broker, e.g. 'ssh b{node} pkill -9 -f kafka'")
    remote.add_argument("--term-cmd", help="stop a broker gracefully (SIGTERM)")
    remote.add_argument("--start-cmd", help="start a killed/stopped broker (default: its supervisor does)")
    remote.add_argument("--pause-cmd", help="SIGSTOP a broker")
    remote.add_argument("--resume-cmd", help="SIGCONT a paused broker")
    p.set_defaults(func=run)


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
        try:
            md = admin(a.bootstrap).list_topics(timeout=15)
        except Exception as exc:
            raise SetupError(f"no answer from {a.bootstrap}: {exc}") from None
        registered = sorted(md.brokers)
        nodes = [int(n) for n in a.nodes.split(",")] if a.nodes else registered

        def live() -> list[int]:
            try:
                return sorted(admin(a.bootstrap).list_topics(timeout=5).brokers)
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
        self.say(f"existing cluster {a.bootstrap}: brokers {registered}, acting on {nodes}")
        return target, a.bootstrap, list(target.kinds)

    # -- act, heal, judge --------------------------------------------------------------------
    def execute(self) -> dict[str, Any]:
        a = self.args
        target, bootstrap, supported = self.attach_remote() if a.bootstrap else self.start_local()
        kinds, note = choose_kinds(a.nemesis, tuple(supported), local=not a.bootstrap)
        if note:
            self.notes.append(note)
        brokers = len(target.nodes) if a.bootstrap else a.brokers
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

        if a.workload == "transactions":
            return self._transactions(target, bootstrap, kinds, topic, brokers, rf, min_isr)
        history = History(partitions=a.partitions)
        self.t0 = time.monotonic()
        recorder = Recorder(history, self.clock)
        reader = Reader(bootstrap, topic, a.partitions, recorder)
        reader.start()
        producers = [
            ProducerWorker(
                f"p{i + 1}",
                bootstrap,
                topic,
                a.partitions,
                a.rate,
                recorder,
                acks=a.acks,
                idempotence=not a.no_idempotence,
            )
            for i in range(a.producers)
        ]
        history.start = self.clock()
        for w in producers:
            w.start()
        nemesis = self._nemesis(target, kinds, bootstrap, topic)
        self._progress(a.duration, lambda: self._produce_progress(recorder))
        nemesis.stop()
        for w in producers:
            w.stop_producing()
        history.end = self.clock()
        self.say(f"stopped writing: {len(history.sent)} sent, {len(history.acks)} acknowledged; healing")
        timeline = self._heal(target, nemesis)
        undelivered = sum(w.finish(60) for w in producers)
        whole = self._wait_whole(bootstrap, topic, a.heal_timeout, "every ISR whole", fail=False)
        reader.stop()
        self.say(f"final read ({len(history.acks)} acknowledged, {undelivered} without a delivery report)")
        history.final, marks, complete = final_read(bootstrap, topic, a.partitions)
        history.states = partition_states(bootstrap, [topic, *INTERNAL_TOPICS])
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
        verdict = Verdict([*verdict.checks, *extra])
        return {
            "command": "sftraffic chaos",
            "passed": verdict.passed,
            "seed": self.seed,
            "config": self._config(bootstrap, brokers, topic, rf, min_isr, kinds),
            "notes": self.notes,
            "figures": {
                "sent": len(history.sent),
                "acknowledged": len(history.acks),
                "delivery_errors": len(history.failed),
                "reads": len(history.reads),
                "final_records": sum(len(r) for r in history.final.values()),
                "watermarks": {p: list(m) for p, m in marks.items()},
                "isr_whole_after_heal": whole,
                "faults": sum(1 for e in timeline if e.action in KINDS),
            },
            "checks": verdict.to_json()["checks"],
            "timeline": [asdict(e) for e in timeline],
        }

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

    @staticmethod
    def _produce_progress(recorder: Recorder) -> str:
        h = recorder.history
        return f"{len(h.sent)} sent, {len(h.acks)} acknowledged, {len(h.reads)} read"

    def _nemesis(self, target: Target, kinds: list[str], bootstrap: str, topic: str) -> Nemesis:
        nemesis = Nemesis(
            target,
            kinds,
            random.Random(self.seed),
            self.clock,
            self.interval,
            describe=lambda: leaders(bootstrap, topic),
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

    def _config(
        self, bootstrap: str, brokers: int, topic: str, rf: int, min_isr: int, kinds: list[str]
    ) -> dict[str, Any]:
        a = self.args
        return {
            "mode": "existing cluster" if a.bootstrap else "local",
            "workload": a.workload,
            "bootstrap": bootstrap,
            "brokers": brokers,
            "topic": topic,
            "partitions": a.partitions,
            "replication_factor": rf,
            "min_insync_replicas": min_isr,
            "producers": a.producers,
            "rate_per_producer": a.rate,
            "acks": a.acks,
            "idempotence": not a.no_idempotence,
            "duration_s": a.duration,
            "nemesis": kinds,
            "interval_s": list(self.interval),
            "data_dir": str(self.data_dir) if self.data_dir else None,
        }

    def _transactions(
        self,
        target: Target,
        bootstrap: str,
        kinds: list[str],
        topic: str,
        brokers: int,
        rf: int,
        min_isr: int,
    ) -> dict[str, Any]:
        """The transactions workload (``chaos_txn_workload.py``), judged by ``chaos_txn_checker.py``."""
        a = self.args
        history = TxnHistory(per_txn=a.txn_records, isolation=a.isolation)
        recorder = TxnRecorder(history)
        self.t0 = time.monotonic()
        readers = [
            TxnReader(f"reader{i + 1}", bootstrap, topic, a.partitions, a.isolation, recorder)
            for i in range(2)
        ]
        producers = [
            TxnProducerWorker(
                f"t{i + 1}", bootstrap, topic, a.partitions, a.rate, recorder, per_txn=a.txn_records
            )
            for i in range(a.producers)
        ]
        for w in [*readers, *producers]:
            w.start()
        # faults once every producer has its producer id (the transaction coordinators and
        # __transaction_state in place), as a running application would be
        try:
            wait_for(lambda: all(w.outcomes_seen() for w in producers), 90, 0.2, "a first transaction each")
        except TimeoutError:
            raise SetupError(f"no transaction ended within 90 s: {recorder.errors[:3]}") from None
        self.say("every producer has ended a transaction: faults start")
        nemesis = self._nemesis(target, kinds, bootstrap, topic)

        def line() -> str:
            counts = Counter(history.outcomes.values())
            return f"transactions {dict(counts)}, {len(history.reads)} records read"

        self._progress(a.duration, line)
        nemesis.stop()
        self.say("stopped the faults; healing, then letting the open transactions end")
        timeline = self._heal(target, nemesis)
        for w in producers:
            w.stop()
        stuck = [w.logical for w in producers if w.is_alive()]
        whole = self._wait_whole(bootstrap, topic, a.heal_timeout, "every ISR whole", fail=False)
        for r in readers:
            r.stop()
        self.say(f"final read at {a.isolation} ({len(history.outcomes)} transactions)")
        history.final, history.final_complete = final_txn_read(bootstrap, topic, a.partitions, a.isolation)
        states = partition_states(bootstrap, [topic, *INTERNAL_TOPICS, "__transaction_state"])
        verdict = judge_transactions(history)
        isr = check_isr(History(partitions=a.partitions, states=states))
        clients = Check(
            "client errors",
            FAIL if stuck else (INFO if recorder.errors else PASS),
            f"{len(recorder.errors)} producer errors (each an abort or a new client), "
            f"{sum(r.errors for r in readers)} reader errors"
            + (f"; producers {stuck} did not stop" if stuck else ""),
            {"producer_errors": len(recorder.errors), "clients": sum(w.producers for w in producers)},
            recorder.errors[:10],
        )
        verdict = Verdict([*verdict.checks, isr, clients])
        counts = Counter(history.outcomes.values())
        return {
            "command": "sftraffic chaos",
            "passed": verdict.passed,
            "seed": self.seed,
            "config": {
                **self._config(bootstrap, brokers, topic, rf, min_isr, kinds),
                "isolation": a.isolation,
                "records_per_transaction": a.txn_records,
            },
            "notes": self.notes,
            "figures": {
                "transactions": len(history.outcomes),
                "committed": counts[COMMITTED],
                "aborted": counts[ABORTED],
                "unknown": counts[UNKNOWN],
                "reads": len(history.reads),
                "final_records": len(history.final),
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


def render(doc: dict[str, Any], console: Console) -> None:
    c = doc["config"]
    if c.get("workload") == "transactions":
        f = doc["figures"]
        what = (
            f"transactions ({f['committed']} committed, {f['aborted']} aborted, {f['unknown']} unknown), "
            f"readers {c['isolation']}"
        )
    else:
        what = f"acks={c['acks']}, idempotence {'on' if c['idempotence'] else 'off'}"
    table = Table(
        title=f"sftraffic chaos: seed {doc['seed']}, {c['brokers']} brokers, {what}, "
        f"{c['duration_s']:.0f} s, "
        f"{doc['figures']['faults']} faults ({','.join(c['nemesis'])})",
        title_justify="left",
    )
    table.add_column("check")
    table.add_column("result")
    table.add_column("figures")
    colours = {PASS: "green", FAIL: "bold red", INFO: "yellow"}
    for ch in doc["checks"]:
        table.add_row(ch["name"], f"[{colours[ch['status']]}]{ch['status']}[/]", ch["summary"])
    console.print(table)
    for ch in doc["checks"]:
        if ch["status"] == FAIL and ch["examples"]:
            console.print(f"[bold red]{ch['name']}[/] e.g. {json.dumps(ch['examples'][:3])}")
    verdict = "[bold green]PASS[/]" if doc["passed"] else "[bold red]FAIL[/]"
    console.print(f"verdict: {verdict}")


def run(args: argparse.Namespace) -> int:
    console = Console(highlight=False)
    try:
        r = Run(args, console)
    except SetupError as exc:
        console.print(f"sftraffic chaos: {exc}")
        return 2
    doc: dict[str, Any] | None = None
    try:
        doc = r.execute()
    except SetupError as exc:
        console.print(f"sftraffic chaos: {exc}")
        return 2
    finally:
        r.close(passed=doc is not None and doc["passed"])
    render(doc, console)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(doc, indent=2))
        console.print(f"JSON: {args.json}")
    return 0 if doc["passed"] else 1
