"""The clients of ``sftraffic chaos --workload transactions``: transactional producers, live
readers, the final read. confluent-kafka only, so a run works against any Kafka cluster.

* :class:`TxnProducerWorker`: a thread committing transactions of ``per_txn`` records, record
  ``i`` of transaction ``n`` to partition ``(n + i) % partitions`` (so each spans several
  partitions and their leaders), at most ``rate`` records per second. Every ``abort_every``-th
  is aborted on purpose once its records are acknowledged (in the logs, awaiting their abort
  marker). After an abortable error the transaction is aborted; after a fatal one (fenced, or
  the abort itself failing) the outcome is ``unknown`` and a new client with the same
  ``transactional.id`` starts (its ``init_transactions`` fences the old one and ends its
  transaction).
* :class:`TxnReader`: a consumer (no group: ``assign`` from the beginning) at ``isolation``,
  recording every record it reads.
* :func:`final_txn_read`: waits until no transaction is open (every partition's last stable
  offset has reached its high watermark), then reads every partition to its end at ``isolation``.

The outcomes and reads go into one :class:`~chaos.txn_checker.TxnHistory` (under a lock).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

from chaos.txn_checker import ABORTED, COMMITTED, UNKNOWN, TxnHistory, TxnRead
from chaos.workload import quiet_logger, record

TXN_TIMEOUT_MS = 10_000


class TxnRecorder:
    """The history of a transactional run, written by several threads."""

    def __init__(self, history: TxnHistory) -> None:
        self.history = history
        self.lock = threading.Lock()
        self.errors: list[str] = []  # client errors (each led to an abort or a new client)
        self.begun = 0

    def outcome(self, txn: str, outcome: str) -> None:
        with self.lock:
            self.history.outcomes[txn] = outcome

    def read(self, reader: str, partition: int, offset: int, value: str) -> None:
        with self.lock:
            self.history.reads.append(TxnRead(reader, partition, offset, value))

    def error(self, text: str) -> None:
        with self.lock:
            self.errors.append(text)


class TxnProducerWorker(threading.Thread):
    """One transactional producer committing (and aborting) transactions until stopped."""

    def __init__(
        self,
        name: str,
        bootstrap: str,
        topic: str,
        partitions: int,
        rate: float,
        recorder: TxnRecorder,
        *,
        per_txn: int = 12,
        abort_every: int = 5,
        transactional_id: str | None = None,
    ) -> None:
        super().__init__(name=f"chaos-txn-{name}", daemon=True)
        self.logical = name
        self.topic = topic
        self.partitions = partitions
        self.rate = rate
        self.recorder = recorder
        self.per_txn = per_txn
        self.abort_every = abort_every
        self.conf: dict[str, Any] = {
            "bootstrap.servers": bootstrap,
            "transactional.id": transactional_id or f"{topic}-{name}",
            "transaction.timeout.ms": TXN_TIMEOUT_MS,
            "message.timeout.ms": TXN_TIMEOUT_MS,
            "request.timeout.ms": 10_000,
            "socket.timeout.ms": 10_000,
            "linger.ms": 2,
            "logger": quiet_logger(),
        }
        self.halt = threading.Event()
        self.producers = 0  # clients started (1 + how many times one was replaced)
        self.n = 0

    def _producer(self) -> Producer | None:
        """A new client, its transactions initialised (retried through faults); None: stopped."""
        while not self.halt.is_set():
            p = Producer(self.conf)
            try:
                p.init_transactions(30)
                self.producers += 1
                return p
            except KafkaException as exc:
                self.recorder.error(f"{self.logical} init: {exc.args[0]}")
                time.sleep(0.5)
        return None

    def run(self) -> None:
        p = self._producer()
        t0 = time.monotonic()
        while p is not None and not self.halt.is_set():
            due = (time.monotonic() - t0) * self.rate / self.per_txn  # transactions by now
            if self.n >= due:
                time.sleep(min(0.05, (self.n - due + 1) * self.per_txn / self.rate))
                continue
            self.n += 1
            txn = f"{self.logical}:{self.n}"
            if not self._one(p, txn):
                p = self._producer()

    def _one(self, p: Producer, txn: str) -> bool:
        """One transaction; False when this client cannot go on (a new one is needed)."""
        try:
            p.begin_transaction()
            for i in range(self.per_txn):
                self._produce(p, f"{txn}:{i}", (self.n + i) % self.partitions)
            if self.n % self.abort_every == 0:  # aborted on purpose, once its records are in the logs
                p.flush(30)
                p.abort_transaction(30)
                self.recorder.outcome(txn, ABORTED)
                return True
            self._commit(p)
            self.recorder.outcome(txn, COMMITTED)
            return True
        except KafkaException as exc:
            err: Any = exc.args[0]
            self.recorder.error(f"{txn}: {err}")
            if err.txn_requires_abort():
                try:
                    p.abort_transaction(30)
                    self.recorder.outcome(txn, ABORTED)
                    return True
                except KafkaException as again:
                    self.recorder.error(f"{txn} abort: {again.args[0]}")
            self.recorder.outcome(txn, UNKNOWN)  # fatal, or the abort failed: a new client
            return False

    def _produce(self, p: Producer, value: str, partition: int) -> None:
        while True:
            try:
                p.produce(self.topic, value=value.encode(), partition=partition)
                return
            except BufferError:
                p.poll(0.05)

    @staticmethod
    def _commit(p: Producer) -> None:
        """Commit; a retriable error (a timeout) is retried, as librdkafka allows."""
        for attempt in range(3):
            try:
                p.commit_transaction(30)
                return
            except KafkaException as exc:
                if not exc.args[0].retriable() or attempt == 2:
                    raise

    def outcomes_seen(self) -> bool:
        """Has a transaction of this producer ended (committed or aborted)?"""
        return self.n > 1 or (self.n == 1 and f"{self.logical}:1" in self.recorder.history.outcomes)

    def stop(self, timeout: float = 120) -> None:
        self.halt.set()
        self.join(timeout)


class TxnReader(threading.Thread):
    """A consumer reading every partition from the beginning at ``isolation``."""

    def __init__(
        self, name: str, bootstrap: str, topic: str, partitions: int, isolation: str, recorder: TxnRecorder
    ) -> None:
        super().__init__(name=f"chaos-{name}", daemon=True)
        self.reader = name
        self.recorder = recorder
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"chaos-{name}-{topic}",  # required by the client; never joined
                "enable.auto.commit": False,
                "isolation.level": isolation,
                "logger": quiet_logger(),
            }
        )
        self.consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        self.halt = threading.Event()
        self.errors = 0

    def run(self) -> None:
        while not self.halt.is_set():
            for m in self.consumer.consume(1000, timeout=0.2):
                if m.error() is not None:
                    self.errors += 1
                    continue
                self.recorder.read(self.reader, *record(m))
        self.consumer.close()

    def stop(self) -> None:
        self.halt.set()
        self.join(15)


def _consumer(bootstrap: str, topic: str, isolation: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"chaos-final-{topic}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "logger": quiet_logger(),
        }
    )


def final_txn_read(
    bootstrap: str, topic: str, partitions: int, isolation: str, timeout: float = 120
) -> tuple[list[tuple[int, int, str]], bool]:
    """Every record at ``isolation`` once no transaction is open: (records as (partition,
    offset, value), whether every partition was read to its high watermark within ``timeout``)."""
    deadline = time.monotonic() + timeout
    committed = _consumer(bootstrap, topic, "read_committed")
    uncommitted = _consumer(bootstrap, topic, "read_uncommitted")
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    try:
        while True:  # the last stable offsets (read_committed's high) up to the high watermarks
            marks = [uncommitted.get_watermark_offsets(tp, timeout=30, cached=False) for tp in tps]
            low, high = [m[0] for m in marks], [m[1] for m in marks]
            stable = [committed.get_watermark_offsets(tp, timeout=30, cached=False)[1] for tp in tps]
            if stable == high or time.monotonic() > deadline:
                break
            time.sleep(0.5)
    finally:
        committed.close()
        uncommitted.close()
    c = _consumer(bootstrap, topic, isolation)
    out: list[tuple[int, int, str]] = []
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        while True:
            for m in c.consume(10_000, timeout=0.5):
                if m.error() is None:
                    out.append(record(m))
            positions = [tp.offset for tp in c.position(tps)]
            # a partition with nothing to read has no position (OFFSET_INVALID)
            if all(
                pos >= h or (pos < 0 and h <= lo) for pos, h, lo in zip(positions, high, low, strict=True)
            ):
                return out, stable == high
            if time.monotonic() > deadline:
                return out, False
    finally:
        c.close()
