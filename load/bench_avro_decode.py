"""Decode rate of the Spark data source's Python workers, Avro against JSON (goal: Avro ≥ JSON).

How it measures, in full: ``docs/benchmarks.md``, "bench avro-decode".
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from load.harness.report import document, goal, log
from load.harness.stats import spread

GOAL_RATIO = 1.0
# avro: the source's path for Avro values (each schema id's columns at once); avro_per_record:
# its path for the values that one does not cover (damage, JSON among Avro)
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
    from pipelines import source, spark_schemas, transforms
    from pipelines.jobs import TRAFFIC_FIELDS
    from sensors.avro import TRAFFIC, TRAFFIC_V2

    vs = transforms.pruned(spark_schemas.TRAFFIC, spark_schemas.TRAFFIC_REQUIRED, TRAFFIC_FIELDS).json()
    required = spark_schemas.TRAFFIC_REQUIRED
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
        # v1 and v2 producers side by side (a schema evolving), every other event
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

    cfg = dict(args.sizes)
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


if __name__ == "__main__":
    from load.scenarios import main

    raise SystemExit(main("avro-decode"))
