"""Produce validation benchmark: what walking every produced batch's records costs (the leader's
``records.check_records``, Kafka's LogValidator), end to end and per batch, in one run.

Goals, per codec: with validation >= 0.8x the throughput without and at most 0.2 µs more
broker CPU per message; the compiled record walk under 0.2 µs per record.

How it measures, in full: ``docs/benchmarks.md``, "bench validation".
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import random
import re
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from framework.protocol import record_walk
from framework.protocol import records as rb
from framework.storage.log import Log
from framework.storage.log_config import LogConfig
from load.harness.kafka import EndOffsets, create_topic, producer
from load.harness.procfs import BUSY_SHARE, Interference, PhaseCpu
from load.harness.profiler import Profiler, count_collapsed
from load.harness.report import document, log, verdict
from load.harness.runner import Processes, rotation
from load.harness.stats import median, rounded, spread
from load.peers import OursLauncher, Server

CODECS = ("lz4", "zstd", "none")
GOAL_RATIO = 0.8
# broker CPU per message that validation adds (with - without): the walk, and for compressed
# batches their decompression, which the broker did not do before (Kafka's validator does)
GOAL_ADDED_CPU_US = 0.2
GOAL_WALK_US = 0.1  # the compiled walk, µs per record ("well under 0.2")
KEYS = 1000
VALUES = 4096  # distinct values cycled through (generating one per message would cost more than the broker)
MB = 1_000_000
BATCH_RECORDS = (500, 4000)
PRODUCER_SETTINGS: dict[str, Any] = {
    "acks": 1,
    "linger.ms": 5,
    "batch.size": 1_048_576,
    "batch.num.messages": 100_000,
    "queue.buffering.max.messages": 2_000_000,
    "queue.buffering.max.kbytes": 2_097_151,
    "enable.idempotence": False,
}


def sensor_events(n: int = VALUES, seed: int = 15) -> list[bytes]:
    """JSON sensor events like the demo's traffic topic (~190 bytes, varied digits)."""
    rnd = random.Random(seed)
    roads = ["US-101", "I-280", "Market St", "Geary Blvd", "Van Ness Ave", "Embarcadero"]
    out = []
    for i in range(n):
        event = {
            "sensor_id": f"sf-{rnd.randrange(10_000):05d}",
            "ts": 1_763_700_000_000 + i * 37,
            "road": rnd.choice(roads),
            "lane": rnd.randrange(1, 5),
            "speed_kmh": round(rnd.uniform(0, 110), 1),
            "occupancy": round(rnd.random(), 3),
            "vehicles": rnd.randrange(0, 40),
            "status": rnd.choice(["ok", "ok", "ok", "degraded"]),
        }
        out.append(json.dumps(event, separators=(",", ":")).encode())
    return out


KEY_BYTES = [b"sf-%05d" % i for i in range(KEYS)]


# -- 1. end to end ---------------------------------------------------------------------------------
def measure_produce(
    server: Server, topic: str, codec: str, count: int, values: list[bytes]
) -> dict[str, Any]:
    """Produce ``count`` events (one warm-up before); see the module docstring."""
    p, failures = producer(server.bootstrap, **PRODUCER_SETTINGS, **{"compression.type": codec})
    p.produce(topic, b"warm-up", partition=0)
    if p.flush(30) != 0:
        raise TimeoutError("warm-up message not delivered in 30 s")
    produce, mask, nbytes = p.produce, len(values) - 1, 0
    noise = Interference([server.pid])
    phase = PhaseCpu(server.cpu_seconds)
    t0 = time.perf_counter()
    for i in range(count):
        v = values[i & mask]
        nbytes += len(v)
        while True:
            try:
                produce(topic, v, KEY_BYTES[i % KEYS], partition=0)
                break
            except BufferError:
                p.poll(0.005)
    undelivered = p.flush(max(60.0, count / 10_000))
    seconds = time.perf_counter() - t0
    client_s = phase.client_done()
    cpu_s, us_per_msg, _after = phase.settle(count)
    stored = EndOffsets(server.bootstrap, [topic], 1).total() - 1
    errors = len(failures) + undelivered + abs(stored - count)
    return {
        "codec": codec,
        "messages": count,
        "seconds": round(seconds, 3),
        "msgs_s": round(count / seconds),
        "mb_s": round(nbytes / seconds / MB, 2),
        "broker_cpu_s": None if cpu_s is None else round(cpu_s, 2),
        "broker_cpu_us_per_msg": None if us_per_msg is None else round(us_per_msg, 3),
        "client_cores": round(client_s / seconds, 2),
        "other_cpu_share": None if (s := noise.share()) is None else round(s, 3),
        "errors": errors,
        "detail": failures[0] if failures else (f"{stored} stored of {count}" if stored != count else ""),
    }


def end_to_end(
    servers: dict[str, Server], cfg: dict[str, Any], values: list[bytes], profile_dir: Path | None
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Phases on every system in rotation; returns (per system, per codec, the runs), profile."""
    runs: dict[str, Any] = {name: {c: [] for c in CODECS} for name in servers}
    profile = None
    for rep in range(1, cfg["reps"] + 1):
        for codec in CODECS:
            for name in rotation(list(servers), rep):
                s = servers[name]
                topic = create_topic(s.bootstrap, f"validation-{codec}-{rep}-{time.monotonic_ns()}")
                prof = None
                if profile_dir is not None and name == "ours" and codec == "lz4" and rep == cfg["reps"]:
                    assert s.pid is not None
                    out = profile_dir / "ours-lz4.txt"
                    prof = Profiler(s.pid, out, None, PROFILE_RATE, focus=("framework/",))
                res = measure_produce(s, topic, codec, cfg["count"], values)
                if prof is not None:
                    profile = prof.summary()
                    if "error" not in profile:
                        profile = where_time_goes(prof.out) | {"file": str(prof.out)}
                runs[name][codec].append(res)
                log(
                    f"rep {rep} {codec:4} {name:13} {res['msgs_s']:>9,} msgs/s  broker "
                    f"{res['broker_cpu_us_per_msg']} µs/msg  other {res['other_cpu_share']}"
                )
    return runs, profile


PROFILE_RATE = 250  # samples/s (py-spy's default 100 leaves a phase of ~1 s with a few dozen)

# where the broker's time goes in the profile: inclusive shares of these functions' frames
PROFILE_PARTS = {
    "record check (records.check_records: decompress, copy, walk)": ("check_records (framework/",),
    "decompression (records._inflate)": ("_inflate (framework/protocol/records.py",),
    "record walk as Python (record_walk.walk, parse_record)": (
        "walk (framework/protocol/record_walk.py",
        "parse_record (framework/",
    ),
    "header + CRC (validate_batches)": ("validate_batches (framework/",),
    "segment write (LogSegment.append)": ("LogSegment.append (framework/",),
    "request decode (codec)": ("framework/protocol/codec.py",),
    "response send (listener._send)": ("KafkaConnection._send (framework/",),
}


def where_time_goes(raw: Path) -> dict[str, Any]:
    """Shares (%) of the broker's samples: by part (PROFILE_PARTS) and by function (self)."""
    by_function = re.compile(r":\d+\)$")
    leaf, inclusive, total = count_collapsed(
        raw.read_text(errors="replace"), frame=lambda f: by_function.sub(")", f.strip())
    )
    if not total:
        return {"samples": 0}

    def pct(n: int) -> float:
        return round(100 * n / total, 1)

    parts = {
        name: pct(max((n for f, n in inclusive.items() if any(m in f for m in marks)), default=0))
        for name, marks in PROFILE_PARTS.items()
    }
    return {"samples": total, "parts": parts, "self": [(f, pct(n)) for f, n in leaf.most_common(10)]}


def _quiet(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The repetitions other processes left alone (all of them when none was quiet)."""
    quiet = [r for r in runs if r["other_cpu_share"] is not None and r["other_cpu_share"] <= BUSY_SHARE]
    return quiet or runs


def summarise(runs: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, by_codec in runs.items():
        for codec, rs in by_codec.items():
            use = _quiet(rs)
            cpu = spread(r["broker_cpu_us_per_msg"] for r in use)
            if cpu is not None:  # an even count's median is a mean: 0.16999999999999998
                cpu["median"] = round(cpu["median"], 3)
            out.setdefault(name, {})[codec] = {
                "msgs_s": spread(r["msgs_s"] for r in use),
                "mb_s": rounded(median(r["mb_s"] for r in use), 2),
                "broker_cpu_us_per_msg": cpu,
                "client_cores": rounded(median(r["client_cores"] for r in use), 2),
                "reps_used": len(use),
            }
    return out


def ratios(summary: dict[str, Any]) -> dict[str, Any]:
    if "ours-baseline" not in summary:
        return {}
    out: dict[str, Any] = {}
    for codec in CODECS:
        a, b = summary["ours"][codec], summary["ours-baseline"][codec]
        tp = a["msgs_s"]["median"] / b["msgs_s"]["median"] if a["msgs_s"] and b["msgs_s"] else None
        ca, cb = a["broker_cpu_us_per_msg"], b["broker_cpu_us_per_msg"]
        cpu = ca["median"] / cb["median"] if ca and cb and cb["median"] else None
        out[codec] = {
            "throughput": None if tp is None else round(tp, 3),
            "broker_cpu_per_msg": None if cpu is None else round(cpu, 2),
            "broker_cpu_added_us": round(ca["median"] - cb["median"], 3) if ca and cb else None,
            # what the throughput ratio would be with the broker, not the client, at 100 % CPU
            "broker_bound_throughput": None if not cpu else round(1 / cpu, 3),
        }
    return out


# -- 2. in process, per batch ----------------------------------------------------------------------
def _median_us(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1e6, 1)


def per_batch(values: list[bytes], batches: int) -> list[dict[str, Any]]:
    """Time the record check, the append path without it and with it, batch by batch."""
    out = []
    now = int(time.time() * 1000)
    for codec in CODECS:
        for n in BATCH_RECORDS:
            encoded = []
            for b in range(batches):
                recs = [(KEY_BYTES[(b * n + i) % KEYS], values[(b * n + i) % len(values)]) for i in range(n)]
                encoded.append(rb.build_batch(recs, timestamp_ms=now, compression=rb.CODECS_BY_NAME[codec]))
            check, plain, full = [], [], []
            with tempfile.TemporaryDirectory(prefix="sftraffic-bench-validation-") as tmp:
                config = LogConfig(segment_bytes=1 << 30)
                without, _ = Log.open(Path(tmp) / "without-0", "without", 0, config)
                with_check, _ = Log.open(Path(tmp) / "with-0", "with", 0, config)
                for data in encoded:
                    mv = memoryview(bytearray(data))
                    t0 = time.perf_counter()
                    h = rb.validate_batches(mv)
                    t1 = time.perf_counter()
                    rb.check_records(mv, 0, h[0])
                    t2 = time.perf_counter()
                    without.append(mv, h, now)
                    t3 = time.perf_counter()
                    check.append(t2 - t1)
                    plain.append((t1 - t0) + (t3 - t2))
                    mv2 = memoryview(bytearray(data))
                    t4 = time.perf_counter()
                    with_check.append_as_leader(mv2, now)
                    full.append(time.perf_counter() - t4)
                without.close()
                with_check.close()
            size = statistics.median(len(d) for d in encoded)
            row: dict[str, Any] = {
                "codec": codec,
                "records_per_batch": n,
                "batch_bytes": int(size),
                "check_us": _median_us(check),
                "append_without_check_us": _median_us(plain),
                "append_as_leader_us": _median_us(full),
            }
            row["check_us_per_record"] = round(row["check_us"] / n, 3)
            row["cpu_bound_ratio"] = round(row["append_without_check_us"] / row["append_as_leader_us"], 3)
            out.append(row)
            log(
                f"{codec:4} {n:5} records/batch: check {row['check_us']} µs, append without "
                f"{row['append_without_check_us']} µs, append_as_leader {row['append_as_leader_us']} µs"
            )
    return out


# -- 3. the walk alone, per record: compiled vs the same module as Python -------------------------
def walk_builds() -> dict[str, ModuleType]:
    """``compiled`` (the extension, when this install built it) and ``pure`` (record_walk.py run
    from its source under another name, whatever is installed)."""
    source = Path(rb.__file__).with_name("record_walk.py")
    spec = importlib.util.spec_from_file_location("framework.protocol._record_walk_source", source)
    assert spec is not None and spec.loader is not None
    pure = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pure)
    return ({"compiled": record_walk} if record_walk.COMPILED else {}) | {"pure": pure}


@contextlib.contextmanager
def walking_with(module: ModuleType) -> Iterator[None]:
    """``records.check_records`` walks with ``module`` meanwhile."""
    names = vars(rb)  # the module's namespace: check_records looks record_walk up there
    saved, names["record_walk"] = names["record_walk"], module
    try:
        yield
    finally:
        names["record_walk"] = saved


def walk_per_record(values: list[bytes], batches: int) -> list[dict[str, Any]]:
    """µs per record of the walk alone and of check_records, with each build of the walk."""
    out = []
    now = int(time.time() * 1000)
    # the broker's window with the default message.timestamp.before/after.max.ms (Long.MAX_VALUE)
    window: dict[str, Any] = {"min_timestamp": now - rb.LONG_MAX, "max_timestamp": now + rb.LONG_MAX}
    builds = walk_builds()
    for codec in CODECS:
        for n in BATCH_RECORDS:
            encoded = []
            for b in range(batches):
                recs = [(KEY_BYTES[(b * n + i) % KEYS], values[(b * n + i) % len(values)]) for i in range(n)]
                encoded.append(rb.build_batch(recs, timestamp_ms=now, compression=rb.CODECS_BY_NAME[codec]))
            row: dict[str, Any] = {"codec": codec, "records_per_batch": n}
            for name, module in builds.items():
                walk, check = [], []
                with walking_with(module):
                    for data in encoded:
                        mv = memoryview(bytearray(data))
                        h = rb.read_header(mv)
                        body = rb.decompress(h.compression, mv[rb.HEADER_SIZE :])
                        ts = h.base_timestamp
                        t0 = time.perf_counter()
                        module.walk(body, 0, len(body), n, ts, rb.LONG_MIN, h.max_timestamp, True)
                        t1 = time.perf_counter()
                        rb.check_records(mv, 0, h, require_key=True, **window)
                        check.append(time.perf_counter() - t1)
                        walk.append(t1 - t0)
                row[f"walk_{name}_us"] = round(statistics.median(walk) * 1e6 / n, 4)
                row[f"check_{name}_us"] = round(statistics.median(check) * 1e6 / n, 4)
            if "compiled" in builds:
                row["walk_speedup"] = round(row["walk_pure_us"] / row["walk_compiled_us"], 1)
            out.append(row)
            log(
                f"{codec:4} {n:5} records/batch, µs/record: "
                + ", ".join(f"{k} {v}" for k, v in row.items() if k.endswith(("_us", "speedup")))
            )
    return out


# -- the run -------------------------------------------------------------------------------------------
def run(args: argparse.Namespace) -> dict[str, Any]:
    cfg = dict(args.sizes)
    doc = document("validation", args, cfg | {"codecs": list(CODECS), "baseline_src": args.baseline_src})
    doc["config"]["walk"] = "compiled (mypyc)" if record_walk.COMPILED else "pure Python"
    values = sensor_events()
    doc["config"]["value_bytes_mean"] = round(sum(map(len, values)) / len(values), 1)
    launchers = [OursLauncher()] + ([OursLauncher(args.baseline_src)] if args.baseline_src else [])
    doc["systems"] = {lc.name: {"label": lc.label, "version": lc.version()} for lc in launchers}
    for lc in launchers:
        if (why := lc.unavailable()) is not None:
            doc["errors"].append(f"{lc.name}: {why}")
            return doc
    profile_dir = Path(args.profile_dir) if args.profile else None
    with tempfile.TemporaryDirectory(prefix="sftraffic-bench-validation-") as tmp, Processes() as running:
        servers = {}
        for lc in launchers:
            server = lc.start(Path(tmp) / lc.name)
            if server.proc is not None:
                running.add(server.proc)
            servers[lc.name] = server
        runs, profile = end_to_end(servers, cfg, values, profile_dir)
    doc["runs"] = runs
    doc["summary"] = summarise(runs)
    doc["ratios"] = ratios(doc["summary"])
    doc["profile"] = profile
    for name, by_codec in runs.items():
        for codec, rs in by_codec.items():
            doc["errors"] += [
                f"{name} {codec}: {r['errors']} errors {r['detail']}" for r in rs if r["errors"]
            ]
    log("per batch, in this process ...")
    doc["per_batch"] = per_batch(values, cfg["batches"])
    log("the walk alone, per record, in this process ...")
    doc["walk"] = walk_per_record(values, cfg["batches"])
    doc["goals"] = [
        verdict(
            f"{codec} produce throughput with validation / without",
            doc["ratios"].get(codec, {}).get("throughput"),
            GOAL_RATIO,
            True,
        )
        for codec in CODECS
    ] + [
        verdict(
            f"{codec} broker CPU µs per message added by validation (with - without)",
            doc["ratios"].get(codec, {}).get("broker_cpu_added_us"),
            GOAL_ADDED_CPU_US,
            False,
        )
        for codec in CODECS
    ]
    compiled = [r["walk_compiled_us"] for r in doc["walk"] if "walk_compiled_us" in r]
    worst = max(compiled, default=None)
    doc["goals"].append(verdict("record walk, compiled, µs/record (worst case)", worst, GOAL_WALK_US, False))
    return doc


if __name__ == "__main__":
    from load.scenarios import main

    raise SystemExit(main("validation"))
