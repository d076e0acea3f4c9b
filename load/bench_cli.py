"""``sftraffic bench``: our event store side by side with its peers, in one run, one table.

Exit code 0 when our system ran (goals are reported, not asserted), 1 when it failed, 2 for a
bad command line, 130 when interrupted.

How it measures, in full: ``docs/benchmarks.md``, "bench (side by side)".
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from deploy.local.external import add_external
from framework.cli.common import require_modules

# the gateway path of "our system": a paho publisher, the fleet's sensor events (numpy, msgspec)
require_modules("paho", "msgspec", "numpy")

KAFKA_PEERS = ("tansu", "noida")
STREAM_PEERS = ("redis", "nats")
ALL_PEERS = (*KAFKA_PEERS, *STREAM_PEERS, "mosquitto")

# (peer, minimum ours/peer produce ratio): the project's throughput goals.
PRODUCE_GOALS: tuple[tuple[str, float], ...] = (
    ("tansu", 1.0),
    ("noida", 2.0),
    ("redis", 4.0),
    ("nats", 10.0),
)
GATEWAY_GOAL = 1.0
RESULTS = Path(__file__).resolve().parent / "results"  # not in git: docs/benchmarks.md is the record

LABELS = {
    "ours": "sftraffic (ours)",
    "external": "external broker",
    "tansu": "Tansu",
    "noida": "noida-db",
    "redis": "Redis Streams",
    "nats": "NATS JetStream",
    "mosquitto": "Mosquitto QoS 1 publish",
    "gateway": "gateway path (ours)",
}


EPILOG = """\
examples:
  sftraffic bench --quick --json bench.json        # ours and every installed peer, about a minute
  sftraffic bench --external 127.0.0.1:9092 --broker-pid "$(pgrep -f kafka.Kafka)" --peers none"""


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "bench",
        help="benchmark the store side by side with Tansu, noida-db, Redis, NATS, Mosquitto",
        description="Benchmark our store and gateway side by side with the peers installed here "
        "(127.0.0.1 only); prints one comparison table and the goals.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--quick", action="store_true", help="tiny counts, about a minute (CI)")
    p.add_argument(
        "--json", metavar="FILE", help="write all results as JSON to FILE, and their chart to FILE with .png"
    )
    p.add_argument(
        "--publish",
        action="store_true",
        help="write the table and the chart into docs/benchmarks.md and docs/img (JSON: load/results/)",
    )
    p.add_argument(
        "--peers", default=",".join(ALL_PEERS), help="comma-separated peers, or 'none' (default: %(default)s)"
    )
    add_external(
        p,
        aliases=("--bootstrap", "-b"),
        what=": the Kafka benchmark and the gateway path measure it (PLAINTEXT; e.g. Apache Kafka, Redpanda)",
    )
    p.add_argument("--broker-pid", type=int, help="with --external: its pid here, for CPU figures")
    p.add_argument(
        "--count", type=int, help="messages per Kafka produce phase (default 1,000,000; quick 50,000)"
    )
    p.add_argument("--reps", type=int, help="repetitions of every throughput phase (default 3; quick 1)")
    p.add_argument(
        "--latency-seconds",
        type=float,
        help="seconds of every latency phase, Kafka and stream stores (default 10; quick 2)",
    )
    p.set_defaults(func=run)
    from load.scenarios import SCENARIOS, fill, prepare
    from load.scenarios import run as run_scenario

    title = "one benchmark alone (default: all side by side)"
    names = p.add_subparsers(dest="name", metavar="SCENARIO", title=title)
    for s in SCENARIOS:
        one = fill(names.add_parser(s.name, help=s.help, description=f"Benchmark: {s.help}."), s)
        one.set_defaults(func=lambda args, one=one: run_scenario(prepare(args, one.error)))


def run(args: argparse.Namespace) -> int:
    from load.harness.runner import run_main
    from load.peers import parse_peers

    try:
        peers = parse_peers(args.peers, ALL_PEERS)
    except ValueError as exc:
        print(f"sftraffic bench: {exc}", file=sys.stderr)
        return 2
    if args.broker_pid is not None and not args.external:
        print("sftraffic bench: --broker-pid needs --external", file=sys.stderr)
        return 2
    from deploy.local import external
    from framework.errors import StoreError

    try:  # a bad --external address, no broker there: one line before anything is measured
        conn = external.external_connection(args)
        if conn is not None:
            external.check(conn)
    except StoreError as exc:
        print(f"sftraffic bench: {exc.message}", file=sys.stderr)
        return 2
    if args.publish and not args.json:
        args.json = str(RESULTS / f"bench-{time.strftime('%Y-%m-%d')}.json")
    code = run_main(
        lambda: run_bench(args, peers), render, args.json, lambda doc: doc["ok"], "sftraffic bench"
    )
    if args.json and code != 130:  # interrupted: no JSON was written
        from load.harness.chart import write_next_to

        write_next_to(args.json)
        if args.publish:
            publish(args.json)
    return code


# -- running --------------------------------------------------------------------------------
def run_bench(args: argparse.Namespace, peers: list[str]) -> dict[str, Any]:
    from load import bench_broker, bench_mqtt, bench_streams
    from load.harness.procfs import BUSY_SHARE
    from load.harness.report import log
    from load.peers import PEERS, ExternalLauncher, Launcher, OursLauncher

    quick = bool(args.quick)
    t0 = time.perf_counter()
    reps = args.reps or (1 if quick else 3)
    latency = {"latency_seconds": args.latency_seconds} if args.latency_seconds else {}
    kcfg = bench_broker.BenchConfig.of(quick, args.count, reps, rss_phase=not quick, **latency)
    small: dict[str, Any] = {
        "count": 20_000,
        "nats_count": 20_000,
        "latency_seconds": 2.0,
        "idle_window_s": 0.5,
    }
    scfg = bench_streams.StreamsConfig(reps=reps, quick=quick, **((small if quick else {}) | latency))
    small = {"count": 3_000, "sensors": 500, "idle_window_s": 0.5, "store_timeout_s": 60.0}
    mcfg = bench_mqtt.MqttConfig(reps=reps, quick=quick, **(small if quick else {}))
    primary: Launcher = ExternalLauncher(args.external, args.broker_pid) if args.external else OursLauncher()

    kafka_names = [n for n in peers if n in KAFKA_PEERS]
    log(f"[bold]Kafka API[/bold]: {primary.name} + {', '.join(kafka_names) or 'no peer'}")
    kafka = bench_broker.compare(primary, [PEERS[n]() for n in kafka_names], kcfg)

    streams: dict[str, Any] = {}
    if stream_names := [n for n in peers if n in STREAM_PEERS]:
        log(f"[bold]stream stores[/bold]: {', '.join(stream_names)}")
        with tempfile.TemporaryDirectory(prefix="sftraffic-bench-streams-") as tmp:
            launchers = [bench_streams.STREAM_PEERS[n]() for n in stream_names]
            streams = {n: asdict(r) for n, r in bench_streams.run_streams(launchers, scfg, Path(tmp)).items()}

    mqtt: dict[str, Any] | None = None
    if "mosquitto" in peers:
        log("[bold]MQTT edge[/bold]: Mosquitto alone vs the gateway path")
        with tempfile.TemporaryDirectory(prefix="sftraffic-bench-mqtt-") as tmp:
            try:
                mrep = bench_mqtt.run_mqtt(mcfg, Path(tmp), args.external, args.broker_pid)
            except Exception as exc:  # a bug or an environment problem: report, keep the rest
                msg = f"{type(exc).__name__}: {exc}"
                mrep = bench_mqtt.MqttReport(config=asdict(mcfg), errors=[msg], gateway_errors=[msg])
                log(f"[red]mqtt: {msg}[/red]")
        mqtt = asdict(mrep)

    doc = summarise(kafka, streams, mqtt, peers)
    busy, total = busy_phases(kafka, streams, mqtt)
    if busy:
        doc["notes"].append(
            f"{busy} of {total} measured phases ran while other processes used more than "
            f"{BUSY_SHARE:.0%} of the CPU: the figures are noisy (see details)."
        )
    if quick:
        doc["notes"].append("--quick: tiny counts and one repetition; the figures are indicative only.")
    doc["details"] = {"kafka": kafka, "streams": streams, "mqtt": mqtt}
    doc["config"] = {"quick": quick, "kafka": asdict(kcfg), "streams": asdict(scfg), "mqtt": asdict(mcfg)}
    doc["machine"] = {**kafka["machine"], "command": shlex.join(["sftraffic", *sys.argv[1:]])}
    doc["elapsed_s"] = time.perf_counter() - t0
    return doc


def busy_phases(
    kafka: dict[str, Any], streams: dict[str, Any], mqtt: dict[str, Any] | None
) -> tuple[int, int]:
    """(phases during which other processes were busy, phases) over every system's repetitions."""
    from load.bench_broker import PHASES
    from load.harness.procfs import BUSY_SHARE

    shares: list[float | None] = []
    for rep in [*kafka["systems"].values(), *streams.values()]:
        for row in rep["reps"]:
            shares += [row[p].get("other_cpu_share") for p in PHASES if row.get(p)]
        shares += [lat.get("other_cpu_share") for lat in rep["latency"]]
    shares += [r["other_cpu_share"] for r in mqtt["runs"]] if mqtt is not None else []
    return sum(1 for s in shares if s is not None and s > BUSY_SHARE), len(shares)


# -- summary --------------------------------------------------------------------------------
# Summary key -> figure key of a load.bench_broker.SystemReport.
ROW = {
    "produce_msgs_s": "produce_acks1_msgs_s",
    "produce_acksall_msgs_s": "produce_acksall_msgs_s",
    "consume_msgs_s": "consume_msgs_s",
    "p50_ms": "p50_ms_10k",
    "p99_ms": "p99_ms_10k",
    "p99_ms_acksall": "p99_ms_10k_acksall",
    "server_cpu_us_per_msg_produce": "broker_cpu_us_per_msg_produce",
    "server_cpu_us_per_msg_consume": "broker_cpu_us_per_msg_consume",
    "client_cores_produce": "client_cores_produce",
    "server_cores_produce": "broker_cores_produce",
    "rss_mb_idle": "rss_mb_idle",  # Kafka-API brokers, full runs only
    "rss_mb_1000_partitions": "rss_mb_1000_partitions",
}
RATIOS = {"produce": "produce_msgs_s", "consume": "consume_msgs_s", "p99": "p99_ms"}
RATIOS["produce_acksall"] = "produce_acksall_msgs_s"


def _row_from_report(report: dict[str, Any], kind: str) -> dict[str, Any]:
    start_errors = [e for e in report["errors"] if e.startswith("start:")]
    return {
        **{k: report.get(k) for k in ("label", "version", "available", "errors", "persists")},
        "kind": kind,
        "ran": report["available"] and not start_errors,
        "reason": report["reason"] or "; ".join(start_errors),
        **{key: report["figures"].get(figure) for key, figure in ROW.items()},
    }


def _mqtt_rows(mqtt: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The Mosquitto and gateway-path rows: only produce msgs/s and server CPU."""
    f = mqtt["figures"]
    ran = mqtt["available"] and not (mqtt["errors"] and not mqtt["runs"])
    base = dict.fromkeys(ROW) | {"kind": "mqtt", "available": mqtt["available"], "reason": mqtt["reason"]}
    mosquitto = base | {
        "label": "Mosquitto, QoS 1 publish (paho, no subscriber)",
        "version": mqtt["versions"].get("mosquitto"),
        "persists": None,
        "ran": ran,
        "errors": [e for e in mqtt["errors"] if e not in mqtt["gateway_errors"]],
        "produce_msgs_s": f.get("mosquitto_qos1_msgs_s"),
        "server_cpu_us_per_msg_produce": f.get("mosquitto_cpu_us_per_msg"),
    }
    gateway = base | {
        "label": "gateway path: paho → Mosquitto → sftraffic gateway → store, until stored",
        "version": None,
        "persists": None,
        "ran": ran and any(r["system"] == "gateway" for r in mqtt["runs"]),
        "errors": mqtt["gateway_errors"],
        "produce_msgs_s": f.get("gateway_msgs_s"),
        "server_cpu_us_per_msg_produce": f.get("gateway_cpu_us_per_msg"),
        **{k: f.get(k) for k in ("gateway_cores", "gateway_puback_msgs_s", "store_after_puback_s")},
        "broker_cpu_us_per_msg": f.get("gateway_broker_cpu_us_per_msg"),
        "mosquitto_cpu_us_per_msg": f.get("gateway_mosquitto_cpu_us_per_msg"),
    }
    return {"mosquitto": mosquitto, "gateway": gateway}


def _div(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def summarise(
    kafka: dict[str, Any], streams: dict[str, Any], mqtt: dict[str, Any] | None, peers: list[str]
) -> dict[str, Any]:
    from load.harness.report import verdict

    primary = kafka["primary"]
    systems = {name: _row_from_report(rep, "kafka") for name, rep in kafka["systems"].items()}
    systems |= {name: _row_from_report(rep, "stream") for name, rep in streams.items()}
    systems |= _mqtt_rows(mqtt) if mqtt is not None else {}
    ours = systems[primary]
    ratios: dict[str, dict[str, float | None]] = {}
    for name in [n for n in peers if n in systems and systems[n]["ran"]]:
        s = systems[name]
        if name == "mosquitto":
            ratios[f"{primary}/mosquitto"] = {
                "gateway_path": _div(systems["gateway"]["produce_msgs_s"], s["produce_msgs_s"])
            }
        else:
            ratios[f"{primary}/{name}"] = {r: _div(ours[key], s[key]) for r, key in RATIOS.items()}
    goals: list[dict[str, Any]] = []
    for name, target in (*PRODUCE_GOALS, ("mosquitto", GATEWAY_GOAL)):
        r = ratios.get(f"{primary}/{name}")
        key, what = (
            ("gateway_path", "gateway path") if name == "mosquitto" else ("produce", "produce throughput")
        )
        g = verdict(f"{what} >= {target:g}x {LABELS[name]}", (r or {}).get(key), target, True)
        goals.append(g | {"peer": name, "why_not": None if r else _why_not(systems.get(name), name, peers)})
    primary_ok = ours["ran"] and not ours["errors"] and (ours["produce_msgs_s"] or 0) > 0
    primary_ok = primary_ok and (ours["consume_msgs_s"] or 0) > 0
    gateway_failed = mqtt is not None and mqtt["available"] and bool(mqtt["gateway_errors"])
    return {
        "primary": primary,
        "ok": bool(primary_ok and not gateway_failed),
        "systems": systems,
        "ratios": ratios,
        "goals": goals,
        "not_run": {n: (s["reason"] or "; ".join(s["errors"])) for n, s in systems.items() if not s["ran"]},
        "notes": [
            "ratios are ours/peer: above 1 is better for throughput, below 1 is better for p99.",
            "All systems share this machine's cores with their clients; Python clients (redis-py, "
            "nats-py, paho) saturate before the servers do, so throughput is partly a client figure; "
            "server CPU µs/msg is the efficiency figure.",
            "Redis and NATS have one acknowledgement mode (reply once stored): their produce figure "
            "is also their acks=all figure.",
            "gateway path: msgs/s until every message is in the store; its CPU column is the gateway "
            "process's.",
        ],
    }


def _why_not(system: dict[str, Any] | None, name: str, peers: list[str]) -> str:
    if name not in peers:
        return "not selected (--peers)"
    if system is None:
        return "not run"
    return system["reason"] or "; ".join(system["errors"]) or "no figures"


# -- output ---------------------------------------------------------------------------------
def _num(v: float | None, unit: str = "") -> str:
    if v is None:
        return "—"
    if unit == "msgs/s":
        return f"{v:,.0f}"
    if unit == "x":
        return f"{v:.2f}x"
    return f"{v:.2f}" if v < 100 else f"{v:,.0f}"


def render(doc: dict[str, Any], console: Any) -> None:
    from rich.markup import escape

    from load.harness.report import print_footer, table

    cfg, primary = doc["config"], doc["primary"]
    k, s, m = cfg["kafka"], cfg["streams"], cfg["mqtt"]
    title = (
        f"sftraffic bench{' --quick' if cfg['quick'] else ''}: Kafka {k['count']:,} msgs/phase, "
        f"Redis {s['count']:,}, NATS {s['nats_count']:,}, MQTT {m['count']:,}; "
        f"{k['reps']} rep(s), 100-byte values (MQTT: sensor JSON)"
    )
    columns = "system|^stores|>produce\nmsgs/s ↑|>acks=all\nmsgs/s ↑|>consume\nmsgs/s ↑|"
    columns += f">p99 ms\n@{k['latency_rate'] // 1000}k/s ↓|>server CPU\nµs/msg ↓|"
    columns += "|".join(f">{primary}/peer\n{x}" for x in ("produce ↑", "consume ↑", "p99 ↓", "acks=all ↑"))
    rows = []
    for name, sys_ in [(n, x) for n, x in doc["systems"].items() if x["ran"]]:
        r = doc["ratios"].get(f"{primary}/{name}", {})
        ratio_cells = [
            _num(r.get(key), "x") if name not in (primary, "gateway") else ""
            for key in ("produce", "consume", "p99", "produce_acksall")
        ]
        if name == "mosquitto":
            ratio_cells = [_num(r.get("gateway_path"), "x") + " ‡", "", "", ""]
        label = LABELS.get(name, name)
        if name == primary == "external":
            label = f"external {sys_['label'].rsplit(' ', 1)[-1]}"  # "already-running broker at H:P"
        stores = {True: "disk", False: "memory", None: ""}[sys_["persists"]]
        rates = [_num(sys_[f"{key}_msgs_s"], "msgs/s") for key in ("produce", "produce_acksall", "consume")]
        cpu = _num(sys_["server_cpu_us_per_msg_produce"]) + (" †" if name == "gateway" else "")
        rows.append([label, stores, *rates, _num(sys_["p99_ms"]), cpu, *ratio_cells])
    caption = "↑ higher is better, ↓ lower is better; ratios: ours/peer"
    console.print(table(title, columns, *rows, caption=caption))
    gw = doc["systems"].get("gateway")
    if gw is not None and gw["ran"]:
        console.print(
            f"† gateway path: gateway process {_num(gw['server_cpu_us_per_msg_produce'])} µs/msg "
            f"({_num(gw['gateway_cores'])} cores), broker {_num(gw['broker_cpu_us_per_msg'])} µs/msg, "
            f"Mosquitto {_num(gw['mosquitto_cpu_us_per_msg'])} µs/msg; publisher's PUBACKs at "
            f"{_num(gw['gateway_puback_msgs_s'], 'msgs/s')} msgs/s, last message stored "
            f"{_num(gw['store_after_puback_s'])} s after the last PUBACK."
        )
        console.print("‡ gateway path msgs/s / Mosquitto QoS 1 publish msgs/s.")
    for name, reason in doc["not_run"].items():
        console.print(f"[yellow]{LABELS.get(name, name)}: not run[/yellow] — {escape(reason)}")
    for name, sys_ in doc["systems"].items():
        for e in sys_["errors"] if sys_["ran"] else []:
            console.print(f"[red]{LABELS.get(name, name)}: {escape(e)}[/red]")
    console.print("[bold]Goals[/bold] (reported, not asserted):")
    for g in doc["goals"]:
        if g["met"] is None:
            console.print(f"  [yellow]n/a [/yellow] {g['goal']}: {escape(g['why_not'] or 'no figure')}")
        else:
            console.print(f"  {'[green]PASS' if g['met'] else '[red]FAIL'}[/] {g['goal']}: {g['value']:.2f}x")
    for line in doc["notes"]:
        console.print(f"[dim]• {escape(line)}[/dim]")
    print_footer(console, doc)


# -- the docs page --------------------------------------------------------------------------
def _short_version(version: str | None) -> str:
    import re

    found = re.search(r"(\d+)\.(\d+)", version or "")
    return f" {found[1]}.{found[2]}" if found else ""


def markdown(doc: dict[str, Any], image: str) -> str:
    """The side-by-side section of the docs' benchmarks page: the run, its chart, its table."""
    from load.harness.report import run_line

    cfg, primary = doc["config"], doc["primary"]
    k, s = cfg["kafka"], cfg["streams"]
    busy = next((n.split(":")[0] for n in doc["notes"] if "measured phases ran while" in n), None)
    head = f"{run_line(doc)}. {k['count']:,} messages of 100 bytes per Kafka phase (Redis {s['count']:,}, "
    head += f"NATS {s['nats_count']:,}), {k['reps']} repetitions" + (f"; {busy}." if busy else ".")
    shown = [n for n, x in doc["systems"].items() if x["ran"] and x["kind"] != "mqtt"]
    alt = f"sftraffic bench, {run_line(doc).rsplit(', ', 1)[-1]}: "
    alt += ", ".join(LABELS.get(n, n) for n in shown)
    rows = [
        "| system | stores | produce msgs/s | acks=all msgs/s | consume msgs/s | "
        f"p99 ms @{k['latency_rate'] // 1000}k/s | server CPU µs/msg | "
        f"{primary}/peer produce | consume | p99 | acks=all |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in shown:
        x, r = doc["systems"][name], doc["ratios"].get(f"{primary}/{name}", {})
        label = LABELS.get(name, name) + ("" if name == primary else _short_version(x["version"]))
        cells = [label, {True: "disk", False: "memory", None: ""}[x["persists"]]]
        cells += [_num(x[f"{key}_msgs_s"], "msgs/s") for key in ("produce", "produce_acksall", "consume")]
        cells += [_num(x["p99_ms"]), _num(x["server_cpu_us_per_msg_produce"])]
        cells += [_num(r.get(key), "x") if r else "" for key in RATIOS]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join([head, "", f"![{alt}]({image})", "", *rows])


def publish(json_path: str | Path, page: Path | None = None) -> Path:
    """The run's chart into the page's img/ and its section of the docs' benchmarks page."""
    import json
    import re

    from load.harness import chart, report

    page = page or report.DOCS_PAGE
    doc = json.loads(Path(json_path).read_text())
    image = f"img/bench-{doc['machine']['started_at'][:10]}.png"
    old = report.section(page.read_text(), "side-by-side") or ""
    chart.render(doc, page.parent / image)
    for link in set(re.findall(r"\]\((img/bench-[^)]+\.png)\)", old)) - {image}:
        (page.parent / link).unlink(missing_ok=True)  # the previous run's chart
    return report.publish("side-by-side", markdown(doc, image), page)
