"""Exactly-once result writes for the streaming queries' ``foreachBatch`` sinks.

Spark replays a micro-batch (same batch id, same offsets, same rows) when the application
stopped after the sink ran and before Spark committed the batch to its checkpoint. A sink must
then write nothing twice. Writing the results, then a ledger file with the batch id, is not
enough: a crash between the two would emit every window of that batch again.

:class:`TransactionalSink` writes a batch's result records **and** its batch id in one Kafka
transaction (KIP-98): the results go to their topics, the id to the ledger topic
``<stream>.pipeline_batches`` (partition 0, key = the transactional id, value
``{"query", "batch_id", "checkpoint_id", "committed_ms"}``), then the transaction commits. Either both are
visible to a ``read_committed`` reader or neither is; there is no step after the sink.

* **Transactional id**: ``sftraffic-pipeline-<query>-<10 hex of the checkpoint path's
  SHA-256>``, stable across restarts of one query over one checkpoint, distinct between data
  dirs. ``init_transactions`` at start fences a previous incarnation (a zombie driver) and
  aborts the transaction it left open, so its results never become visible.
* **The committed batch id** is then read back from the ledger at ``read_committed`` (the last
  record of our key; found near the end, the whole partition read only when not there). A
  batch with an id at or below it was committed: the replay is skipped. Otherwise the batch is
  written in a new transaction.
* **A new checkpoint is a new query**: the markers carry the id Spark keeps in the checkpoint's
  ``metadata`` file, and only markers with this checkpoint's id count. A query whose checkpoint
  was deleted starts again at batch 0 and must not be skipped by the markers of the old one.
* Results are collected by the driver (they are small), so one producer per query writes
  them; nothing is written from executors. Readers of the result topics must read with
  ``isolation.level=read_committed`` (the dashboard and the tests do), else they also see the
  records of aborted attempts.
* **Parquet history** (local output dirs): a batch's files are written to
  ``<output>/<name>/_pending/<query>-<batch id>/`` (overwritten by a replay; Spark and pyarrow
  skip ``_`` paths), and moved into ``<output>/<name>/`` (named ``<query>-<batch id>-<part>``)
  after the commit; at start a pending batch at or below the committed id is moved in (a crash
  after the commit), any other deleted (an aborted attempt). So the history holds each batch
  once too. On a cluster file system (``s3a://``, ``hdfs://``) files are appended directly, and
  a replayed batch's rows may be there twice.
* **The backfill** (:func:`pipelines.jobs.run_backfill`) is one more user: query ``backfill``,
  its "checkpoint" ``<checkpoint dir>/backfill`` with the event-time range as its id, the whole
  range as batch 0, and a longer ``transaction_timeout_s`` (its batch jobs run while the
  transaction is open).
* Fault injection for tests: with ``$SFTRAFFIC_PIPELINE_KILL_BEFORE_COMMIT`` set to a query's
  name, the process SIGKILLs itself after the batch's results and ledger record were produced
  and acknowledged and before the commit: the crash point the ledger file could not cover.

Thread-safety: one sink per query, used from that query's ``foreachBatch`` thread only.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sensors.layout import topic

log = logging.getLogger("sftraffic.pipeline.sink")

LEDGER = "pipeline_batches"  # a topic of the application's stream
KILL_ENV = "SFTRAFFIC_PIPELINE_KILL_BEFORE_COMMIT"
TIMEOUT_S = 60.0


def transactional_id(query: str, checkpoint_dir: str) -> str:
    """Stable per query and checkpoint: the same after a restart, another in another data dir."""
    where = checkpoint_dir if "://" in checkpoint_dir else str(Path(checkpoint_dir).resolve())
    return f"sftraffic-pipeline-{query}-{hashlib.sha256(where.encode()).hexdigest()[:10]}"


def _checkpoint_id(checkpoint_dir: str) -> str | None:
    """The query id Spark wrote into ``<checkpoint>/metadata`` (None: not local, or none yet)."""
    if "://" in checkpoint_dir:
        return None
    try:
        first = (Path(checkpoint_dir) / "metadata").read_text().splitlines()[0]
        return str(json.loads(first)["id"])
    except (OSError, IndexError, ValueError, KeyError, TypeError):
        return None


class TransactionalSink:
    """One query's results and batch ids, written together in one transaction per batch."""

    def __init__(
        self,
        bootstrap: str,
        query: str,
        checkpoint_dir: str,
        output_dir: str | None = None,
        ledger: str | None = None,
        transaction_timeout_s: float = TIMEOUT_S,
    ) -> None:
        from confluent_kafka import Producer

        from framework.client.producer import producer_config
        from framework.client.security import client_security
        from sensors.publish import _quiet

        self.bootstrap, self.query = bootstrap, query
        self.ledger = ledger or topic(LEDGER)
        self.tid = transactional_id(query, checkpoint_dir)
        extra = {
            **client_security(),
            "logger": _quiet(),
            "transactional.id": self.tid,
            "transaction.timeout.ms": int(transaction_timeout_s * 1000),
        }
        self.p = Producer(producer_config(bootstrap, client_id=f"sftraffic-pipeline-{query}", extra=extra))
        self.p.init_transactions(TIMEOUT_S)  # fences an older incarnation, aborts its transaction
        self.checkpoint_id = _checkpoint_id(checkpoint_dir)
        self.committed = self._last_committed()
        self.output = None if output_dir is None or "://" in output_dir else Path(output_dir)
        self._batch = -1
        self._staged: list[Path] = []
        self._recover_pending()
        log.info("%s: transactional id %s, last committed batch %s", query, self.tid, self.committed)

    # -- the ledger ----------------------------------------------------------------------------
    def _last_committed(self) -> int:
        """The highest batch id committed under our transactional id (-1: none)."""
        from confluent_kafka import Consumer, KafkaError, TopicPartition

        from framework.client.security import client_security
        from sensors.publish import _quiet

        c = Consumer(
            {
                **client_security(),
                "bootstrap.servers": self.bootstrap,
                "group.id": f"sftraffic-spark-ledger-{self.query}",  # assign only, never commits
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "enable.partition.eof": True,
                "logger": _quiet(),
            }
        )
        try:
            part = TopicPartition(self.ledger, 0)
            low, high = c.get_watermark_offsets(part, timeout=TIMEOUT_S, cached=False)
            start = max(low, high - 1024)
            while True:
                found = self._scan(c, start, KafkaError, TopicPartition)
                if found is not None or start <= low:
                    return -1 if found is None else found
                start = low  # not near the end: read it all
        finally:
            c.close()

    def _scan(self, c: Any, start: int, kafka_error: Any, tp: Any) -> int | None:
        c.assign([tp(self.ledger, 0, start)])
        best: int | None = None
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            for m in c.consume(500, timeout=0.5):
                err = m.error()
                if err is not None:
                    if err.code() == kafka_error._PARTITION_EOF:
                        return best
                    continue
                if m.key() == self.tid.encode():
                    marker = json.loads(m.value())
                    if self.checkpoint_id is not None and marker.get("checkpoint_id") != self.checkpoint_id:
                        continue  # an earlier checkpoint's batches
                    best = max(best if best is not None else -1, int(marker["batch_id"]))
        raise TimeoutError(f"reading the ledger {self.ledger} took over {TIMEOUT_S:.0f} s")

    # -- the Parquet history ---------------------------------------------------------------------
    def stage(self, name: str) -> str | None:
        """Where the open batch writes its ``name`` files (mode overwrite); None: append them to
        ``<output>/<name>`` directly (no local output dir)."""
        if self.output is None:
            return None
        path = self.output / name / "_pending" / f"{self.query}-{self._batch}"
        self._staged.append(path)
        return str(path)

    def _publish(self, staged: Path) -> None:
        """Move a committed batch's data files into place (again after a crash: idempotent)."""
        import shutil

        batch = staged.name
        for f in sorted(staged.glob("part-*")):
            os.replace(f, staged.parent.parent / f"{batch}-{f.name}")
        shutil.rmtree(staged, ignore_errors=True)

    def _recover_pending(self) -> None:
        import shutil

        if self.output is None:
            return
        for staged in self.output.glob(f"*/_pending/{self.query}-*"):
            n = staged.name.rsplit("-", 1)[1]
            if n.isdigit() and int(n) <= self.committed:
                self._publish(staged)
            else:
                shutil.rmtree(staged, ignore_errors=True)

    # -- writing -------------------------------------------------------------------------------
    def done(self, batch_id: int) -> bool:
        """Was this batch committed already (a replay to skip)?"""
        return batch_id <= self.committed

    def send(self, topic_name: str, records: list[tuple[str | None, str]]) -> None:
        """Produce ``(key, json)`` records into the open transaction (acknowledged at commit)."""
        for key, value in records:
            k = None if key is None else key.encode()
            while True:
                try:
                    self.p.produce(topic_name, value.encode(), k)
                    break
                except BufferError:
                    self.p.poll(0.05)

    def write(self, batch_id: int, fill: Callable[[TransactionalSink], None]) -> bool:
        """Run ``fill(self)`` (which calls :meth:`send`) and record ``batch_id``, in one
        transaction; False (nothing written) when the batch was committed before."""
        from confluent_kafka import KafkaException

        if self.done(batch_id):
            log.info("%s: batch %d was committed before, skipped", self.query, batch_id)
            return False
        self._batch, self._staged = batch_id, []
        self.p.begin_transaction()
        try:
            fill(self)
            marker = {
                "query": self.query,
                "batch_id": batch_id,
                "checkpoint_id": self.checkpoint_id,
                "committed_ms": int(time.time() * 1000),
            }
            self.p.produce(self.ledger, json.dumps(marker).encode(), self.tid.encode(), partition=0)
            if os.environ.get(KILL_ENV) == self.query:
                self.p.flush(TIMEOUT_S)  # results and marker acknowledged, not committed
                os.kill(os.getpid(), signal.SIGKILL)
            self._commit()
        except KafkaException as exc:
            if exc.args[0].txn_requires_abort():
                self.p.abort_transaction(TIMEOUT_S)
            raise
        except BaseException:
            self.p.abort_transaction(TIMEOUT_S)
            raise
        self.committed = batch_id
        for staged in self._staged:
            self._publish(staged)
        return True

    def _commit(self) -> None:
        from confluent_kafka import KafkaException

        for attempt in range(5):
            try:
                self.p.commit_transaction(TIMEOUT_S)
                return
            except KafkaException as exc:
                if not exc.args[0].retriable() or attempt == 4:
                    raise

    def close(self) -> None:
        self.p.flush(TIMEOUT_S)


_SINKS: dict[tuple[str, str, str], TransactionalSink] = {}


def for_query(
    bootstrap: str, query: str, checkpoint_dir: str, output_dir: str | None = None
) -> TransactionalSink:
    """The query's sink, made on its first batch (one per query, checkpoint and store)."""
    key = (bootstrap, query, checkpoint_dir)
    if key not in _SINKS:
        _SINKS[key] = TransactionalSink(bootstrap, query, checkpoint_dir, output_dir)
    return _SINKS[key]
