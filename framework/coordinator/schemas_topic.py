"""The broker's reader of the schema registry's ``_schemas`` topic, for schema validation.

Confluent Server asks a schema registry over HTTP (``confluent.schema.registry.url``); the
registry here keeps its state in ``_schemas`` on this very store, so the broker reads that
topic's local replica instead, with no URL and no client: :class:`SchemasTopic` applies its
records, up to the partition's high watermark (committed records only), to a
:class:`~framework.coordinator.schema_ids.SchemaIds`, from the log's start the first time
and from where it stopped afterwards. Reading is lazy: :meth:`SchemasTopic.check` first
reads what was committed since the last call (two integer compares when nothing was), so a
schema the registry has just registered (it answers once the record is committed) is valid
for the producer's next batch. A batch refused for an unknown id is checked once more after
:meth:`SchemasTopic.refresh` read on to the log end (a follower replica learns the high
watermark one fetch after the records).

A log that no longer holds the next offset to read (truncated, its start moved past it by
DeleteRecords, or a new log object after the topic was re-created or the replica moved) is
read again from its start into a new :class:`SchemaIds`.

A broker without a replica of ``_schemas`` (a cluster of more than its replication factor,
or before the registry first started) knows no id: with validation on, its topics refuse
every non-null key or value, with a message saying why.

Thread-safety: none; the broker calls :meth:`check` on its event loop (the produce path).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from framework.coordinator.schema_ids import SchemaIds
from framework.protocol import records as rb
from framework.storage.log import Log

__all__ = ["TOPIC", "SchemasPartition", "SchemasTopic"]

TOPIC = "_schemas"
READ_BYTES = 1 << 20
MAX_CACHED_CHECKS = 10_000  # topics whose SchemaCheck is kept (then the cache starts again)
_NO_REPLICA = "this broker holds no replica of {} (is the schema registry running?)"
log = logging.getLogger("sftraffic.schemas")


class SchemasPartition(Protocol):
    """What the reader needs of the ``_schemas`` partition (the replication layer's Partition)."""

    @property
    def log(self) -> Log: ...

    @property
    def high_watermark(self) -> int: ...


class SchemasTopic:
    def __init__(self, find: Callable[[], SchemasPartition | None], topic: str = TOPIC) -> None:
        """``find``: the local replica of ``topic``'s partition 0, or None when there is none."""
        self.topic = topic
        self._find = find
        self.ids = SchemaIds()
        self._log: Log | None = None
        self.next_offset = 0  # the next offset to apply
        self.records = 0  # records applied (since the last rebuild)
        # (topic, key, value) -> (the SchemaIds, whether a replica was here, the check made)
        self._checks: dict[tuple[str, bool, bool], tuple[SchemaIds, bool, rb.SchemaCheck]] = {}

    def catch_up(self) -> bool:
        """Apply what the partition committed since the last call; True when it has a replica here."""
        p = self._find()
        if p is None:
            return False
        lg, hw = p.log, p.high_watermark
        if hw == self.next_offset and lg is self._log:
            return True
        self._read_to(lg, hw)
        return True

    def refresh(self) -> bool:
        """Before refusing a batch for an unknown id: read on to the replica's log end (a
        follower learns the high watermark a fetch after the records, and a schema registered
        that instant is worth accepting); True when that applied any record."""
        p = self._find()
        if p is None:
            return False
        before = (self._log, self.next_offset)
        self._read_to(p.log, max(p.high_watermark, p.log.log_end_offset))
        return (self._log, self.next_offset) != before

    def _read_to(self, lg: Log, upper: int) -> None:
        if lg is not self._log or not lg.log_start_offset <= self.next_offset <= lg.log_end_offset:
            if self._log is not None:
                log.info("%s: log changed under the schema id reader; reading it again", self.topic)
            self._log, self.ids, self.next_offset, self.records = lg, SchemaIds(), lg.log_start_offset, 0
        if upper > self.next_offset:
            self._read(lg, upper)

    def _read(self, lg: Log, upper: int) -> None:
        offset = self.next_offset
        for nxt, recs in lg.decoded_batches(offset, upper, READ_BYTES):
            for r in recs:
                self.ids.apply(r.key, r.value)
                self.records += 1
            offset = nxt
        self.next_offset = max(offset, self.next_offset)

    def check(self, topic: str, key: bool, value: bool) -> rb.SchemaCheck:
        """The schema check of a batch for ``topic`` (TopicNameStrategy subjects), after
        catching up with ``_schemas``; ``key`` / ``value``: which sides are validated."""
        here = self.catch_up()
        cached = self._checks.get((topic, key, value))
        if cached is not None and cached[0] is self.ids and cached[1] == here:
            return cached[2]  # its sets are the current ones (changed in place)
        note = "" if here else _NO_REPLICA.format(self.topic)
        ks, vs = f"{topic}-key", f"{topic}-value"
        ids = self.ids
        check = rb.SchemaCheck(
            key_subject=ks,
            key_ids=ids.ids(ks) if key else None,
            value_subject=vs,
            value_ids=ids.ids(vs) if value else None,
            note=note,
        )
        if len(self._checks) >= MAX_CACHED_CHECKS:
            self._checks.clear()
        self._checks[(topic, key, value)] = (ids, here, check)
        return check
