"""Every benchmark declared as data, one runner and one command line for them all.

A :class:`Scenario` names a benchmark (its module ``load.bench_<name>``), what ``--quick`` and
``--smoke`` mean for it, its workload sizes per mode, its other options and the figures the
console shows (``figures``: keys of its JSON, rendered by
:func:`load.harness.report.render_figures` with its goals and errors). The module gives
``run(args) -> doc`` (the JSON document; every process it starts is stopped on exit, Ctrl-C or
SIGTERM), and optionally ``render(doc, console)`` (a table of its own instead),
``check(args, error)`` (options that depend on each other), ``ok(doc)`` (the exit code's test;
default: no errors) and ``markdown(doc)`` (its section of the docs page; default: its goals).

``sftraffic bench NAME ...`` and ``python -m load.bench_NAME ...`` parse the same options
(:func:`parser`) and run the same :func:`run`: render, the JSON (``--json``), the docs page
(``--publish``) and the exit code (0, 1 with errors, 2 bad options, 130 interrupted).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"  # not in git: docs/benchmarks.md is the record
MODES = ("full", "quick", "smoke")

# (flag, kind, help): kind a type (default None), bool (a switch) or the default value itself
Option = tuple[str, Any, str]
# key -> (full, quick, smoke, help): a workload size by mode, also an option (--key)
Sizes = Mapping[str, tuple[Any, Any, Any, str]]
CALLBACK_FIGURES = ("calls", "errors", "p50_ms", "p95_ms", "p99_ms", "max_ms")  # of bench dashboard's


@dataclass(frozen=True)
class Scenario:
    name: str
    help: str
    quick: str
    smoke: str | None = None
    sizes: Sizes = field(default_factory=dict)
    options: tuple[Option, ...] = ()
    # the JSON's keys the console shows (modules without their own ``render``)
    figures: tuple[str, ...] = ()

    @property
    def module(self) -> ModuleType:
        return importlib.import_module(f"load.bench_{self.name.replace('-', '_')}")


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "broker",
        "the Kafka-API part alone against Kafka-API peers (Tansu, noida-db, Apache Kafka, ours@DIR)",
        "small counts for CI (under a minute)",
        options=(
            ("--peers", "tansu,noida", "comma-separated: tansu, noida, kafka, ours@DIR, or 'none'"),
            ("--baseline-src", str, "also run our broker from the checkout DIR as ours-baseline"),
            ("--count", int, "messages per produce phase (default 1,000,000; quick 50,000)"),
            ("--reps", int, "repetitions of the throughput phases (default 3; quick 1)"),
            ("--broker-pid", int, "with --external: pid of that broker here, for CPU and RSS figures"),
            ("--external", "external", ": measure this already-running broker instead of ours (PLAINTEXT)"),
        ),
    ),
    Scenario(
        "cluster",
        "3-node clusters, ours and Apache Kafka's: RF3 throughput, failover silence, SIGTERM to exit",
        "50k messages, 2 repetitions, 5 stops (instead of 200k, 3, 20)",
        sizes={
            "count": (200_000, 50_000, None, "messages per throughput run"),
            "reps": (3, 2, None, "throughput repetitions (the order of the systems alternates)"),
            "stops": (20, 5, None, "SIGTERMs per system in the stopping phase"),
        },
        options=(
            ("--phases", "throughput,failover,stopping", "phases to run"),
            ("--no-kafka", bool, "ours alone (Apache Kafka's columns n/a)"),
            ("--profile", bool, "py-spy on broker 1 in one more RF3 acks=all run when ours misses the goal"),
        ),
        figures=(
            "throughput.summary",
            "throughput.ratios",
            "throughput.single_acks1_msgs_s",
            "throughput.single_acks_all_msgs_s",
            "failover",
            "stopping",
            "not_run",
        ),
    ),
    Scenario(
        "java-perf",
        "Kafka's own perf tools against ours and Apache Kafka",
        "50,000 records, 2 repetitions (instead of 1,000,000 and 3)",
        sizes={
            "records": (1_000_000, 50_000, None, "records per phase"),
            "reps": (3, 2, None, "repetitions (the order of the systems alternates)"),
        },
        options=(
            ("--record-size", 100, "bytes per record"),
            ("--partitions", 1, "partitions of each phase's topic"),
            ("--profile", bool, "py-spy on our broker in one more run of each phase whose goal it missed"),
        ),
        figures=("summary", "ratios", "not_run", "profile"),
    ),
    Scenario(
        "groups",
        "a 4-member consumer group's read rate; the rebalance after a member is SIGKILLed",
        "200k messages",
        "tiny: 100k messages, one rebalance (tests)",
        sizes={
            "count": (4_000_000, 200_000, 100_000, "messages to preload"),
            "rebalance_reps": (3, 3, 1, "rebalance repetitions"),
        },
        options=(
            ("--reps", 1, "throughput repetitions"),
            ("--session-timeout-ms", 6000, "session timeout of the rebalance members"),
            ("--heartbeat-ms", 1000, "heartbeat interval of the rebalance members"),
            ("--rate", 2000, "msgs/s produced during the rebalance phase"),
            ("--client-gc", bool, "leave the members' cyclic GC on (default: off, see code)"),
            ("--profile", str, "DIR: py-spy the broker and a member during (a)"),
        ),
        figures=("preload", "throughput", "rebalance"),
    ),
    Scenario(
        "share",
        "a 4-member share group (KIP-932) reading a preloaded topic, ours against Apache Kafka",
        "200k records, 2 repetitions",
        "20k records, 1 repetition, ours only (a test of the benchmark)",
        sizes={
            "records": (1_000_000, 200_000, 20_000, "records to preload"),
            "reps": (3, 2, 1, "repetitions (the order of the systems alternates)"),
        },
        options=(("--peers", "kafka", "kafka, or 'none' (ours alone)"),),
        figures=("summary", "ratios", "not_run"),
    ),
    Scenario(
        "transactions",
        "transactional against idempotent produce; read_committed against read_uncommitted",
        "3 s phases, 2 repetitions",
        "1 s phases, 1 repetition (a test of the benchmark)",
        sizes={
            "seconds": (8.0, 3.0, 1.0, "seconds of each produce phase"),
            "reps": (3, 2, 1, "repetitions (the order alternates)"),
        },
        figures=("median", "transactional_vs_idempotent", "read_committed_vs_read_uncommitted"),
    ),
    Scenario(
        "security",
        "PLAINTEXT, SASL_SSL and SSL throughput and broker CPU",
        "200k messages, 2 repetitions",
        "20k messages, 1 repetition (a test of the benchmark)",
        sizes={
            "count": (1_000_000, 200_000, 20_000, "messages per phase"),
            "reps": (4, 2, 1, "repetitions"),
        },
        figures=("summary", "authorizer"),
    ),
    Scenario(
        "authorizer",
        "broker CPU per message with 1,000 ACLs against the authorizer off",
        "500k/60k messages, 2 repetitions",
        "300k/20k messages, 1 repetition (a test of the benchmark)",
        sizes={
            "count": (3_000_000, 500_000, 300_000, "messages per batched phase"),
            "reps": (5, 2, 1, "repetitions"),
            "small_count": (300_000, 60_000, 20_000, "messages per small-batch phase"),
        },
        figures=("in_process", "summary"),
    ),
    Scenario(
        "validation",
        "the cost of produce validation",
        "100,000 messages per phase, 2 repetitions",
        "tiny: 20,000 messages, 1 repetition (tests)",
        sizes={
            "count": (500_000, 100_000, 20_000, "messages per produce phase"),
            "reps": (3, 2, 1, "repetitions"),
            "batches": (40, 15, 3, "batches timed per codec and size in process"),
        },
        options=(
            ("--baseline-src", str, "DIR: our broker from this checkout too, as ours-baseline"),
            ("--profile", bool, "py-spy ours during its last lz4 phase"),
            ("--profile-dir", "load/results/profiles", "where py-spy writes"),
        ),
        figures=("summary", "ratios", "per_batch", "walk", "profile.parts"),
    ),
    Scenario(
        "reassign",
        "partition moves under a replication throttle against the duration it implies",
        "10 MB per partition, ~10 s (instead of 50 MB, ~25 s)",
        "2 partitions x 2 MB, ~4 s (tests)",
        options=(
            ("--brokers", 3, "brokers in the cluster"),
            ("--voters", 0, "Raft voters among them, brokers 1..N (0: all); the others are observers"),
            ("--new", 1, "brokers that start empty and receive the replicas"),
            ("--partitions", 6, "partitions moved"),
            ("--rf", 2, "replication factor"),
            ("--mb", 50.0, "MB per partition"),
            ("--rate", int, "throttle in bytes/s (default: what makes the move take --target-s)"),
            ("--target-s", 25.0, "the throttle-implied duration to aim at when --rate is not given"),
            ("--baseline", bool, "first move an equal topic without a throttle"),
        ),
        figures=("results",),
    ),
    Scenario(
        "mirror",
        "`sftraffic mirror`'s throughput and lag",
        "100k records, 10 s of lag",
        "20k records, 3 s of lag (a test of the benchmark)",
        sizes={
            "records": (500_000, 100_000, 20_000, "records preloaded for the throughput phase"),
            "seconds": (20.0, 10.0, 3.0, "seconds of the steady-rate lag phase"),
        },
        options=(
            ("--rate", 10_000, "msgs/s of the lag phase"),
            ("--exactly-once", bool, "run the mirror with --exactly-once"),
        ),
        figures=("throughput_msgs_per_s", "mirror_cpu_cores", "lag"),
    ),
    Scenario(
        "fleet",
        "events/s the sensor fleet gets acknowledged",
        "300 simulated seconds per run",
        "tiny: 30 simulated seconds, one worker (tests)",
        sizes={"duration": (1800.0, 300.0, 30.0, "simulated seconds per run")},
        options=(
            ("--start", "2026-11-18T07:30", "simulated start (a Wednesday's morning rush hour, PST)"),
            ("--profile", str, "DIR: py-spy the fleet workers for 8 s of each run"),
            ("--formats", "json", "comma-separated value formats: json, avro (starts sftraffic registry)"),
            ("--workers", "1,2", "comma-separated worker counts to run"),
            ("--reps", 1, "repetitions per worker count, the formats alternating; figures are medians"),
        ),
        figures=("medians", "avro_json_cpu_per_event"),
    ),
    Scenario(
        "dashboard",
        "sensor event to visible on the dashboard; callback latency",
        "20 markers, 15 page ticks, 15 rounds",
        "tiny: 5 markers, 3 ticks, 2 rounds (tests)",
        sizes={
            "markers": (40, 20, 5, "marker readings"),
            "ticks": (40, 15, 3, "page ticks, 2 s apart"),
            "rounds": (30, 15, 2, "rounds of one-at-a-time callbacks"),
        },
        options=(
            ("--start", "rush", "the fleet's simulated start: 'rush' or ISO 8601"),
            ("--profile", str, "DIR: py-spy the dashboard during the page-like phase"),
        ),
        figures=tuple(
            ["visibility", "during"]
            + [f"callbacks.{h}.{k}" for h in ("page", "isolated") for k in CALLBACK_FIGURES]
        ),
    ),
    Scenario(
        "pipeline",
        "Spark streaming input rate and end-to-end latency; a batch job",
        "smaller counts (about 8 minutes)",
        "a tiny run for the tests (about a minute)",
        options=(
            ("--events", int, "traffic events of the streaming backlog (full 12,000,000)"),
            ("--batch-events", int, "traffic events of the batch phase (full 10,000,000)"),
            ("--max-offsets-per-trigger", int, "streaming admission control (full 1,000,000)"),
            ("--live-rate", int, "events/s of the live fleet (full 5,000)"),
            ("--live-seconds", float, "length of the live phase (full 360)"),
            ("--live-window", str, "window of the live job (full: the job's default, 1 minute)"),
            ("--live-watermark", str, "watermark of the live job (full: the job's default, 2 minutes)"),
            ("--live-job", ("correlation", "aggregates"), "the live phase's job"),
            ("--batch-jobs", str, "comma-separated: aggregates,correlation,anomalies,all"),
            ("--phases", "stream,live,batch", "which phases to run"),
            ("--master", "local[2]", "Spark master"),
            ("--py-spy", bool, "profile the Python workers during the stream phase"),
            ("--jfr", bool, "profile the Spark JVM (Java Flight Recorder) likewise"),
            ("--spark-conf", list, "KEY=VALUE: an extra Spark setting (repeatable)"),
        ),
        figures=(
            "stream.backlog.input_rows",
            "stream.sustained_events_per_s",
            "stream.overall_events_per_s",
            "stream.first_batch_s",
            "stream.durations.share_of_trigger",
            "live.kept_up",
            "live.batches.seconds",
            "live.latency.raw_s",
            "live.latency.after_close_s",
            "batch.jobs",
        ),
    ),
    Scenario(
        "spark-source",
        "our Spark data source against Spark's own Kafka connector",
        "a smoke run: 40k events, 2 repetitions (about 2 minutes)",
        options=(
            ("--events", int, "traffic events of the backlog (full 12,000,000)"),
            ("--reps", int, "repetitions, each the Python source then the JVM connector (full 2)"),
            ("--max-offsets-per-trigger", int, "offsets per source and micro-batch (full 1,000,000)"),
            ("--master", str, "Spark master (default local[2])"),
            ("--py-spy", bool, "profile the Python workers during the Python-source runs"),
            ("--store", ("ours", "kafka"), "ours, or Apache Kafka (deploy.kafka, single node)"),
        ),
        figures=("sources", "ratio_python_over_jvm", "ratio_by_rep"),
    ),
    Scenario(
        "registry",
        "the schema registry's GET-by-id latency and CPU",
        "10 s at 1,000/s, 100 schemas",
        "3 s at 300/s, 20 schemas (a test of the benchmark)",
        sizes={
            "rate": (1000.0, 1000.0, 300.0, "requests per second"),
            "duration": (30.0, 10.0, 3.0, "seconds of load"),
            "schemas": (200, 100, 20, "schemas registered first"),
            "connections": (16, 16, 8, "client connection pool"),
            "client": ("lean", "lean", "lean", "lean (asyncio protocol, keep-alive) or aiohttp"),
        },
        options=(("--auth", bool, "also measure a second instance with an --auth-file (Basic credentials)"),),
        figures=("register_ms", "get_by_id", "get_by_id_auth", "auth_ratios"),
    ),
    Scenario(
        "avro-decode",
        "Avro decoding in Spark against JSON",
        "200k events, 3 repetitions",
        "20k events, one repetition (a test of the benchmark)",
        sizes={
            "events": (400_000, 200_000, 20_000, "traffic events decoded per format and repetition"),
            "reps": (5, 3, 1, "repetitions (formats alternate)"),
        },
        figures=(
            "events_per_cpu_s",
            "us_per_event",
            "bytes_per_event",
            "ratio_avro_json",
            "ratio_avro_v1_v2_json",
            "ratio_avro_per_record_json",
        ),
    ),
    Scenario(
        "schema-validation",
        "broker-side schema id validation",
        "500,000 values, 3 repetitions of each",
        "20,000 values, 1 repetition (a test of the benchmark)",
        sizes={
            "count": (1_000_000, 500_000, 20_000, "values per phase"),
            "reps": (3, 3, 1, "repetitions of each phase"),
            "values": (1000, 1000, 100, "distinct Avro values cycled through"),
        },
        options=(("--profile", bool, "py-spy on the broker during the last 'on' phase"),),
        figures=("values", "in_process", "summary"),
    ),
)
BY_NAME = {s.name: s for s in SCENARIOS}


def _add(p: argparse.ArgumentParser, flag: str, kind: Any, text: str) -> None:
    if kind == "external":
        from deploy.local.external import add_external

        add_external(p, what=text)
    elif kind is bool:
        p.add_argument(flag, action="store_true", help=text)
    elif kind is list:
        p.add_argument(flag, action="append", default=[], help=text)
    elif isinstance(kind, tuple):
        p.add_argument(flag, choices=kind, help=f"{text}: {', '.join(kind)}")
    elif isinstance(kind, type):
        p.add_argument(flag, type=kind, help=text)
    else:
        p.add_argument(flag, type=type(kind), default=kind, help=f"{text} (default {kind})")


def fill(p: argparse.ArgumentParser, s: Scenario) -> argparse.ArgumentParser:
    """The options of ``s`` on ``p``: the mode, --json, --publish, its sizes and options."""
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help=s.quick)
    if s.smoke:
        size.add_argument("--smoke", action="store_true", help=s.smoke)
    p.add_argument("--json", metavar="FILE", help="write the results as JSON")
    p.add_argument("--publish", action="store_true", help="write the run's section of docs/benchmarks.md")
    for key, (full, quick, smoke, text) in s.sizes.items():
        shown = "/".join(str(v) for v in (full, quick, smoke) if v is not None)
        _add(p, f"--{key.replace('_', '-')}", type(full), f"{text} (full/quick/smoke {shown})")
    for option in s.options:
        _add(p, *option)
    p.set_defaults(scenario=s)
    return p


def parser(name: str) -> argparse.ArgumentParser:
    """``python -m load.bench_NAME``: the scenario's options alone."""
    s = BY_NAME[name]
    module = f"load.bench_{name.replace('-', '_')}"
    return fill(argparse.ArgumentParser(prog=f"python -m {module}", description=f"Benchmark: {s.help}."), s)


def prepare(args: argparse.Namespace, error: Callable[[str], Any]) -> argparse.Namespace:
    """The sizes of this run's mode where the command line gives none (``args.sizes``), then
    the module's own ``check``."""
    from load.harness.report import mode

    s: Scenario = args.scenario
    i = MODES.index(mode(args))
    args.sizes = {}
    for key, values in s.sizes.items():
        if getattr(args, key, None) is None:
            setattr(args, key, values[i])
        args.sizes[key] = getattr(args, key)
    check = getattr(s.module, "check", None)
    if check is not None:
        check(args, error)
    return args


def parse_args(name: str, argv: list[str] | None = None) -> argparse.Namespace:
    p = parser(name)
    return prepare(p.parse_args(argv), p.error)


def run(args: argparse.Namespace) -> int:
    """Run the scenario ``args.scenario``: render, JSON, docs page, exit code."""
    from load.harness import report
    from load.harness.runner import run_main

    s: Scenario = args.scenario
    mod = s.module
    if args.publish and not args.json:
        args.json = str(RESULTS / f"{s.name}-{time.strftime('%Y-%m-%d')}.json")
    ok: Callable[[dict[str, Any]], bool] = getattr(mod, "ok", lambda doc: not doc["errors"])
    render = getattr(mod, "render", None) or partial(report.render_figures, title=s.help, figures=s.figures)
    code: int = run_main(lambda: mod.run(args), render, args.json, ok, f"bench {s.name}")
    if args.publish and code != 130:
        doc = json.loads(Path(args.json).read_text())
        markdown = getattr(mod, "markdown", None)
        report.publish(s.name, markdown(doc) if markdown else report.goals_markdown(s.help, doc))
    return code


def main(name: str, argv: list[str] | None = None) -> int:
    """``python -m load.bench_NAME``: the same run as ``sftraffic bench NAME``."""
    return run(parse_args(name, argv if argv is not None else sys.argv[1:]))
