"""faust-streaming on the store: per-road-segment vehicle counts and congestion alerts.

Run: ``faust -A pipelines.faust_app worker`` (or ``sftraffic pipeline faust``) with
``SFTRAFFIC_BOOTSTRAP`` pointing at the store. Tables are backed by compacted changelog
topics (``sftraffic-faust-segment_counts-changelog``...), so a restarted worker restores them.

Values are JSON or Avro (Confluent's wire format, :class:`EventCodec`), so the app runs on
either format of the demo.

Exactly once: the app runs with ``processing_guarantee="exactly_once"``
(``$SFTRAFFIC_FAUST_GUARANTEE=at_least_once`` turns it off). faust-streaming then gives each
source partition an aiokafka transactional producer (transactional id
``<app>-<topic group>-<partition>``): the records an agent sends (the repartition topic), the
tables' changelog records and the consumed offsets (``send_offsets_to_transaction``) of that
partition are committed together every ``broker_commit_every`` events or
``broker_commit_interval``, and its consumers read at ``read_committed``. A SIGKILLed worker's
open transactions are aborted when a new worker takes its partitions (its producers fence the
old ones), and the events after its last committed offsets are processed again.

Three more faults of faust-streaming 0.15.3's commit path, worked around here
(:func:`_commit_only_open_transactions` replaces its ``commit_transactions``):

* **Forwards of in-flight events.** A commit (every 200 events or 0.5 s, in its own task)
  sends the offsets of the events *acked* so far, while agents go on processing: the
  transaction may already hold the ``group_by`` forward of an event not acked yet (it is acked
  when its stream takes the next one). A kill before the next commit left that event's forward
  committed and its offset not: it was forwarded again after the restart (1-2 of 16,000 per
  test run; 375 of 824 commits of one run held such forwards). Events of
  :data:`FORWARD_ONLY_TOPICS` (the traffic topic: ``group_by``'s source stream does nothing but
  forward them) are fully processed once their forward is in the transaction, so their source
  offset is now committed up to the last event whose forward the transaction holds (recorded
  by :func:`_send_in_the_source_transaction` right after the send returns: the send appended
  the record under the lock that faust's sends and commits of a transactional id share, and
  nothing yields in between). Repeats are rarer, not gone: none in 11 test runs of 13. The
  one traced (4 repeats) was no restart: the new worker wrote the last event of each traffic
  partition twice, each through its own producer, copies interleaved two by two and both
  committed, as if a produce retry were appended twice (a duplicate idempotence missed; not
  investigated yet).
* **Table changelog records** are queued by ``send_soon`` and sent by a background task; the
  commit did not wait for them, so the offsets of an acked event could be committed in a
  transaction without its changelog record (lost if the worker died before the next commit).
  The producer buffer is flushed before each commit.
* The stop path's second commit (below).

The per-sensor sequence number carried in each event still guards the tables (and is what
makes counts exact with ``at_least_once``): a segment's state remembers the last ``seq``
counted for each of its sensors and skips anything not newer. An agent that does more than
forward an event before it is acked (e.g. a table update and a send) is *not* covered by the
first workaround: faust commits the offsets it acked with whatever the transaction holds, so
such an agent must make its effects idempotent (as the ``seq`` does here).

faust-streaming 0.15.3 picks the transaction of a record it sends by the *destination*
partition (``<app>-<group>-<partition of the topic written>``), while the consumed offsets are
committed in the transaction of the *source* partition. The records ``group_by`` sends to the
repartition topic (keyed by segment, so in another partition than the event's) were then
committed apart from the offsets of the events they came from: a worker SIGKILLed between the
two commits lost events (the test counted 1993-1999 of 2000 per segment). Kafka Streams uses
one producer per task, i.e. per source partition, for everything the task writes;
:func:`_send_in_the_source_transaction` does the same: a record sent while an event is being
processed goes into the transaction of that event's partition (table changelogs, written to the
event's partition, are unchanged).

faust-streaming 0.15.3 also ends the transactions twice when a worker stops (``App._stop_consumer``
and ``Consumer.on_stop`` both run ``wait_empty``); the second time its producers are no longer
in a transaction and aiokafka raises ``IllegalOperation`` from the stop path.
:func:`_commit_only_open_transactions` makes that second commit skip such producers: there is
nothing of theirs to commit (a send outside a transaction fails, so no output can be pending).
"""

from __future__ import annotations

import json
import os
import weakref
from typing import Any

import faust
from aiokafka.structs import TopicPartition
from faust.serializers import codecs
from faust.types import StreamT

from sensors.layout import topic

BOOTSTRAP = os.environ.get("SFTRAFFIC_BOOTSTRAP", "127.0.0.1:9092")
TRAFFIC_TOPIC = os.environ.get("SFTRAFFIC_TRAFFIC_TOPIC", topic("traffic"))
APP_ID = os.environ.get("SFTRAFFIC_FAUST_APP", "sftraffic-faust")
PARTITIONS = int(os.environ.get("SFTRAFFIC_FAUST_PARTITIONS", "4"))
CONGESTION_KMH = float(os.environ.get("SFTRAFFIC_CONGESTION_KMH", "20"))
SESSION_TIMEOUT_S = float(os.environ.get("SFTRAFFIC_FAUST_SESSION_TIMEOUT", "10"))
WINDOW_MS = 60_000
KEEP_WINDOWS = 15


# events of these topics are fully processed once their forward is sent (group_by's source
# stream does nothing else with them): their offsets may be committed with the forwards
FORWARD_ONLY_TOPICS = {TRAFFIC_TOPIC}
# per transactional producer (aiokafka's, one per source partition and assignment): source
# partition -> offset after the last event of a forward-only topic whose forward it holds
_FORWARDED: weakref.WeakKeyDictionary[Any, dict[Any, int]] = weakref.WeakKeyDictionary()


def _commit_only_open_transactions() -> None:
    """faust's ``commit_transactions`` (aiokafka driver), with three changes (see above): it
    flushes the producer buffer first (table changelog records of acked events, queued by
    ``send_soon``, into the transaction their offsets are committed in); it skips producers not
    in a transaction; it commits a forward-only source partition's offset up to the last event
    whose forward the transaction holds (read under the lock that sends and commits share)."""
    from faust.transport.drivers import aiokafka as driver

    original = driver.Producer.commit_transactions
    if getattr(original, "_sftraffic", False):
        return

    async def commit_transactions(
        self: Any, tid_to_offset_map: Any, group_id: str, start_new_transaction: bool = True
    ) -> None:
        if self.buffer.state == "running":  # (not on the stop path: it flushes on its own)
            await self.buffer.flush()
        for tid, offsets in tid_to_offset_map.items():
            async with self._trn_locks[tid]:
                p = self._transaction_producers.get(tid)
                if p is None:
                    driver.logger.warning(f"Commit invoked for unknown transaction {tid}")
                    continue
                if p._txn_manager is not None and not p._txn_manager.is_in_transaction():
                    continue  # ended before (the stop path's second commit): nothing of its own
                merged = dict(offsets)
                for tp, upto in _FORWARDED.get(p, {}).items():
                    merged[tp] = max(merged.get(tp, upto), upto)
                await p.send_offsets_to_transaction(merged, group_id)
                await p.commit_transaction()
                if start_new_transaction:
                    await p.begin_transaction()

    commit_transactions._sftraffic = True  # type: ignore[attr-defined]
    driver.Producer.commit_transactions = commit_transactions  # type: ignore[method-assign]


def _send_in_the_source_transaction() -> None:
    """Send in the transaction of the event being processed (see the module docstring)."""
    from faust.transport.consumer import TransactionManager

    original = TransactionManager.send
    if getattr(original, "_sftraffic", False):
        return

    async def send(
        self: Any,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        partition: int | None,
        timestamp: float | None,
        headers: Any,
        *,
        transactional_id: str | None = None,
    ) -> Any:
        event = faust.current_event()
        if event is None:
            return await original(self, topic, key, value, partition, timestamp, headers)
        source = event.message
        tid = f"{self.app.conf.id}-{self.app.assignor.group_for_topic(source.topic)}-{source.partition}"
        p = self.consumer.key_partition(topic, key, partition)
        fut = await self.producer.send(topic, key, value, p, timestamp, headers, transactional_id=tid)
        if source.topic in FORWARD_ONLY_TOPICS:  # in the transaction now (appended under its lock)
            producer = self.producer._transaction_producers.get(tid)
            if producer is not None:
                done = _FORWARDED.setdefault(producer, {})
                tp = TopicPartition(source.topic, source.partition)  # aiokafka's, as the offsets'
                done[tp] = max(done.get(tp, 0), source.offset + 1)
        return fut

    send._sftraffic = True  # type: ignore[attr-defined]
    TransactionManager.send = send  # type: ignore[method-assign]


_commit_only_open_transactions()
_send_in_the_source_transaction()

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
    # transactions: a producer per source partition; changelog, repartition and
    # output records are committed with the source offsets; consumers read_committed
    processing_guarantee=os.environ.get("SFTRAFFIC_FAUST_GUARANTEE", "exactly_once"),
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
async def count_vehicles(events: StreamT[Any]) -> None:
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
