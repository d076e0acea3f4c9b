"""Decode rate of the Spark data source's Python workers, Avro against JSON (issue 20: Avro ≥ JSON).

Real fleet traffic events (``SensorFleet``, 10,000 sensors, a weekday morning) are encoded
both ways the fleet sends them: JSON (msgspec, ``--format json``) and Confluent-framed Avro
(:class:`sensors.avro.AvroEncoder`'s compiled encoder, ``--format avro``). Each list is then
decoded by the data source's own code, batch by batch as ``pipelines.source.read_range`` does
(``BATCH_ROWS`` values per call): ``JsonValues.column`` for ``valueFormat=json`` and
``AvroValues.column`` for ``valueFormat=avro``, both with the correlation job's pruned
``valueSchema`` and required fields, Avro with the job's reader schema (``valueAvroSchema``).
The writer's schema is put in the source's per-worker cache beforehand (what its first fetch
from the registry leaves there), so no registry runs. Formats alternate, ``--reps`` times; a
rate is events / CPU seconds of this process (``time.process_time``: other work on the machine
does not count). ``avro_v1_v2`` is every other event written with the v2 schema (two schema
ids in every batch, the evolution story); ``avro_per_record`` is the same Avro decoded record
by record (the source's path for the values of a damaged batch, JSON values among Avro, and its
only path before the columnar decoder). Figures: per format the median with min and max, the ratio
Avro/JSON of the medians (goal ≥ 1.0) and µs per event.

Usage::

    python -m load.bench_avro_decode --json load/results/avro-decode-$(date +%F).json [--quick]
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from rich.console import Console

from load.harness.report import document, goal, log, parser, print_footer, print_goals, sized, table
from load.harness.runner import run_main
from load.harness.stats import spread

GOAL_RATIO = 1.0
# avro: the source's path for Avro values (each schema id's columns at once); avro_per_record:
# its path for the values that one does not cover (damage, JSON among Avro), the only one before
FORMATS = ("json", "avro", "avro_v1_v2", "avro_per_record")
REGISTRY = "http://127.0.0.1:9"
SCHEMA_ID = 7
SCHEMA_ID_V2 = 8


def events(n: int, seed: int = 5) -> list[dict[str, Any]]:
    """``n`` traffic events of the fleet (10,000 sensors from 07:30 on a weekday)."""
    from sensors.fleet import SensorFleet
    from sensors.model import ModelConfig

    fleet = SensorFleet(10_000, ModelConfig(seed=seed), infrastructure=False)
    t = 1_795_502_078_000 - 1_795_502_078_000 % 1000
    out: list[dict[str, Any]] = []
    while len(out) < n:
        out += [ev for topic, _, ev, _ in fleet.tick(t) if topic.endswith(".traffic")]
        t += 1000
    return out[:n]


def decoders() -> tuple[Any, Any]:
    """The source's decoders for traffic as the correlation job configures them (json, avro)."""
    from pipelines import schemas, source, transforms
    from pipelines.jobs import TRAFFIC_FIELDS
    from sensors.avro import TRAFFIC, TRAFFIC_V2

    vs = transforms.pruned(schemas.TRAFFIC, schemas.TRAFFIC_REQUIRED, TRAFFIC_FIELDS).json()
    required = schemas.TRAFFIC_REQUIRED
    source.remember_writer_schema(REGISTRY, SCHEMA_ID, TRAFFIC)
    source.remember_writer_schema(REGISTRY, SCHEMA_ID_V2, TRAFFIC_V2)
    return (
        source.JsonValues(vs, required),
        source.AvroValues(vs, REGISTRY, json.dumps(TRAFFIC), required),
    )


def encoded(evs: list[dict[str, Any]]) -> dict[str, list[bytes]]:
    import struct

    import msgspec

    from sensors.avro import TRAFFIC, TRAFFIC_V2, compile_encoder

    enc = msgspec.json.Encoder().encode
    avro = compile_encoder(TRAFFIC, struct.pack(">bI", 0, SCHEMA_ID))
    v2 = compile_encoder(TRAFFIC_V2, struct.pack(">bI", 0, SCHEMA_ID_V2))
    return {
        "json": [enc(e) for e in evs],
        "avro": [avro(e) for e in evs],
        # v1 and v2 producers side by side (issue 20's evolution story), every other event
        "avro_v1_v2": [(v2 if i % 2 else avro)({**e, "road_surface": "wet"}) for i, e in enumerate(evs)],
    }


def decode_all(dec: Any, values: list[bytes], batch: int) -> int:
    rows = 0
    for i in range(0, len(values), batch):
        col = dec.column(values[i : i + batch])
        rows += len(col)
    return rows


def run(args: argparse.Namespace) -> dict[str, Any]:
    from pipelines.source import BATCH_ROWS

    cfg = sized(args, {"events": (400_000, 200_000, 20_000), "reps": (5, 3, 1)})
    cfg["batch_rows"] = BATCH_ROWS
    doc = document("avro_decode", args, cfg)
    log(f"{cfg['events']:,} fleet traffic events, encoded as JSON and Avro")
    values = encoded(events(cfg["events"]))
    doc["bytes_per_event"] = {f: round(sum(map(len, v)) / len(v), 1) for f, v in values.items()}
    dec_json, dec_avro = decoders()
    _, per_record = decoders()
    per_record.column = per_record._per_record  # what a damaged batch or JSON among Avro takes
    decs = {"json": dec_json, "avro": dec_avro, "avro_v1_v2": dec_avro, "avro_per_record": per_record}
    values["avro_per_record"] = values["avro"]
    # the same answer both ways (a benchmark of a decoder that drops rows proves nothing)
    a, b = dec_json.column(values["json"][:1000]), dec_avro.column(values["avro"][:1000])
    if a.to_pylist() != b.to_pylist():
        doc["errors"].append("JSON and Avro decode to different rows")
    if dec_avro.column(values["avro_v1_v2"][:1000]).to_pylist() != a.to_pylist():
        doc["errors"].append("JSON and Avro v1/v2 decode to different rows")
    rates: dict[str, list[float]] = {f: [] for f in FORMATS}
    for rep in range(cfg["reps"]):
        for fmt in FORMATS if rep % 2 == 0 else FORMATS[::-1]:
            t0 = time.process_time()
            n = decode_all(decs[fmt], values[fmt], BATCH_ROWS)
            took = time.process_time() - t0
            rates[fmt].append(round(n / took))
            log(f"rep {rep + 1} {fmt}: {n / took:,.0f} events/s ({took / n * 1e6:.2f} µs an event)")
    doc["events_per_cpu_s"] = {f: spread(r) for f, r in rates.items()}
    mj = doc["events_per_cpu_s"]["json"]["median"]
    ma = doc["events_per_cpu_s"]["avro"]["median"]
    doc["us_per_event"] = {f: round(1e6 / doc["events_per_cpu_s"][f]["median"], 3) for f in FORMATS}
    ratio = round(ma / mj, 3)
    doc["ratio_avro_json"] = ratio
    doc["ratio_avro_v1_v2_json"] = round(doc["events_per_cpu_s"]["avro_v1_v2"]["median"] / mj, 3)
    doc["ratio_avro_per_record_json"] = round(doc["events_per_cpu_s"]["avro_per_record"]["median"] / mj, 3)
    doc["goals"] = [goal("decode events/s, Avro / JSON (medians)", ratio, GOAL_RATIO, "x", higher=True)]
    return doc


def render(doc: dict[str, Any], console: Console) -> None:
    rows = []
    for fmt in FORMATS:
        s = doc["events_per_cpu_s"][fmt]
        rows.append(
            (
                fmt,
                f"{s['median']:,.0f}",
                f"{s['min']:,.0f}",
                f"{s['max']:,.0f}",
                s["n"],
                doc["us_per_event"][fmt],
                doc["bytes_per_event"][fmt if fmt in doc["bytes_per_event"] else "avro"],
            )
        )
    console.print(
        table(
            f"data source decode, traffic, {doc['config']['batch_rows']:,} values a batch",
            "format|>events/CPU s (median)|>min|>max|>n|>µs/event|>bytes/event",
            *rows,
        )
    )
    print_goals(console, doc.get("goals", []))
    print_footer(console, doc)


def main(argv: list[str] | None = None) -> int:
    p = parser(
        "avro_decode",
        __doc__,
        "200k events, 3 repetitions",
        "20k events, one repetition (a test of the benchmark)",
        ("--events", int, "traffic events decoded per format and repetition"),
        ("--reps", int, "repetitions (formats alternate)"),
    )
    args = p.parse_args(argv)
    return run_main(lambda: run(args), render, args.json, name="bench_avro_decode")


if __name__ == "__main__":
    raise SystemExit(main())
