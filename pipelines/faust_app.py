"""faust-streaming on the store: per-road-segment vehicle counts and congestion alerts.

Run: ``faust -A pipelines.faust_app worker`` (or ``sftraffic pipeline faust``) with
``SFTRAFFIC_BOOTSTRAP`` pointing at the store. Tables are backed by compacted changelog
topics (``sftraffic-faust-segment_counts-changelog``...), so a restarted worker restores them.

Values are JSON or Avro (Confluent's wire format, :class:`EventCodec`), so the app runs on
either format of the demo.

Exactly right after a crash: faust is at-least-once (a SIGKILLed worker reprocesses events
after its last commit, and re-sends them to the repartition topic). Every table update is
made idempotent by the per-sensor sequence number carried in each event: a segment's state
remembers the last ``seq`` counted for each of its sensors and skips anything not newer, so
counts are exact however often an event is delivered.
"""

from __future__ import annotations

import json
import os
from typing import Any

import faust
from faust.serializers import codecs

from sensors.layout import topic

BOOTSTRAP = os.environ.get("SFTRAFFIC_BOOTSTRAP", "127.0.0.1:9092")
TRAFFIC_TOPIC = os.environ.get("SFTRAFFIC_TRAFFIC_TOPIC", topic("traffic"))
APP_ID = os.environ.get("SFTRAFFIC_FAUST_APP", "sftraffic-faust")
PARTITIONS = int(os.environ.get("SFTRAFFIC_FAUST_PARTITIONS", "4"))
CONGESTION_KMH = float(os.environ.get("SFTRAFFIC_CONGESTION_KMH", "20"))
SESSION_TIMEOUT_S = float(os.environ.get("SFTRAFFIC_FAUST_SESSION_TIMEOUT", "10"))
WINDOW_MS = 60_000
KEEP_WINDOWS = 15

app = faust.App(
    APP_ID,
    broker=f"kafka://{BOOTSTRAP}",
    store="memory://",
    topic_partitions=PARTITIONS,
    topic_replication_factor=1,
    web_enabled=False,
    broker_commit_every=200,
    broker_commit_interval=0.5,
    producer_acks=-1,
    consumer_auto_offset_reset="earliest",
    # a crashed worker's partitions move after this long (faust's default is 60 s)
    broker_session_timeout=SESSION_TIMEOUT_S,
    broker_heartbeat_interval=1.0,
)


class EventCodec(codecs.Codec):
    """The traffic events as JSON or as Avro in Confluent's wire format (``sftraffic up --format
    avro``: writer's schema from ``$SFTRAFFIC_REGISTRY``); written back (the repartition topic)
    as JSON."""

    decoder: Any = None

    def _loads(self, s: bytes) -> Any:
        if s[:1] == b"\x00":
            if EventCodec.decoder is None:
                from sensors.avro import AvroDecoder

                EventCodec.decoder = AvroDecoder(
                    os.environ.get("SFTRAFFIC_REGISTRY", "http://127.0.0.1:8081")
                )
            return EventCodec.decoder.decode(s)
        return json.loads(s)

    def _dumps(self, s: Any) -> bytes:
        return json.dumps(s, separators=(",", ":")).encode()


codecs.register("sftraffic_event", EventCodec())
traffic = app.topic(TRAFFIC_TOPIC, key_type=bytes, value_serializer="sftraffic_event")
segment_counts = app.Table("segment_counts", default=dict, partitions=PARTITIONS)
congestion_alerts = app.Table("congestion_alerts", default=dict, partitions=PARTITIONS)


def apply_event(state: dict[str, Any], event: dict[str, Any]) -> dict[str, Any] | None:
    """Fold one traffic event into a segment's state; None when it was already counted."""
    sensor = event["sensor_id"]
    seen = dict(state.get("seen", {}))
    if event["seq"] <= seen.get(sensor, -1):
        return None
    seen[sensor] = event["seq"]
    minute = event["event_time"] // WINDOW_MS * WINDOW_MS
    windows = {int(k): v for k, v in state.get("windows", {}).items()}
    windows[minute] = windows.get(minute, 0) + 1
    for old in sorted(windows)[:-KEEP_WINDOWS]:
        del windows[old]
    n = state.get("count", 0) + 1
    ewma = state.get("speed_ewma", event["speed_kmh"]) * 0.9 + event["speed_kmh"] * 0.1
    return {
        "count": n,
        "seen": seen,
        "windows": {str(k): v for k, v in windows.items()},
        "speed_ewma": round(ewma, 3),
        "last_event_time": max(state.get("last_event_time", 0), event["event_time"]),
    }


@app.agent(traffic)
async def count_vehicles(events: faust.Stream) -> None:  # type: ignore[type-arg]
    async for event in events.group_by(lambda e: e["segment_id"], name="segment"):
        seg = event["segment_id"]
        new = apply_event(segment_counts[seg], event)
        if new is None:
            continue
        segment_counts[seg] = new
        if new["speed_ewma"] < CONGESTION_KMH:
            congestion_alerts[seg] = {
                "segment_id": seg,
                "speed_ewma": new["speed_ewma"],
                "since": new["last_event_time"],
            }
        elif congestion_alerts.get(seg):
            congestion_alerts[seg] = {}


def main() -> None:
    app.main()


if __name__ == "__main__":
    main()
