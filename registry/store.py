"""The registry's durable state: the ``_schemas`` topic read by a thread, written by the leader.

:class:`KafkaStore` keeps a :class:`~registry.state.RegistryState` equal to the topic
read from its start: a reader thread (a confluent-kafka consumer assigned partition 0, no
group) applies every record in order under :attr:`lock` and advances :attr:`applied` (the next
offset to apply). :meth:`sync` waits until the reader has applied everything up to the
partition's high watermark, so a request that needs an up-to-date answer asks for it;
:meth:`write` produces records (acks=all, idempotent) and returns once the reader has applied
them, so the writer's state comes from the topic exactly like every other instance's.

Thread-safety: :attr:`state` is read and changed only with :attr:`lock` held; the blocking
calls (:meth:`sync`, :meth:`write`, :meth:`start`) are meant for a worker thread
(``asyncio.to_thread``).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from registry.errors import RegistryError
from registry.state import Record, RegistryState

__all__ = ["KafkaStore"]

log = logging.getLogger("sftraffic.registry.store")


class KafkaStore:
    def __init__(
        self,
        bootstrap: str,
        topic: str = "_schemas",
        client_config: Mapping[str, Any] | None = None,
        replication_factor: int | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.topic = topic
        self.timeout = timeout
        self.replication_factor = replication_factor
        self.common: dict[str, Any] = {"bootstrap.servers": bootstrap, **(client_config or {})}
        self.state = RegistryState()
        self.lock = threading.Lock()
        self.applied = 0  # the next offset the reader applies
        self._progress = threading.Condition(self.lock)
        self._stop = threading.Event()
        self._reader: threading.Thread | None = None
        self._consumer: Consumer | None = None
        self._watermarks: Consumer | None = None
        self._watermark_lock = threading.Lock()
        self._producer: Producer | None = None
        self.reader_error: str | None = None
        self.refused: set[int] = set()  # offsets of records the state refused (recent ones)

    # -- life cycle -------------------------------------------------------------------------------
    def start(self) -> None:
        """Create the topic when missing, start the reader and read the topic to its end."""
        self.ensure_topic()
        group = f"schema-registry-reader-{uuid.uuid4().hex[:8]}"
        reader = {
            **self.common,
            "group.id": group,
            "enable.auto.commit": False,
            "enable.partition.eof": False,
        }
        self._consumer = Consumer(reader)
        self._consumer.assign([TopicPartition(self.topic, 0, OFFSET_BEGINNING)])
        self._watermarks = Consumer({**self.common, "group.id": group, "enable.auto.commit": False})
        self._producer = Producer({**self.common, "acks": "all", "enable.idempotence": True, "linger.ms": 0})
        self._reader = threading.Thread(target=self._read, name="registry-reader", daemon=True)
        self._reader.start()
        self.sync()

    def close(self) -> None:
        self._stop.set()
        if self._reader is not None:
            self._reader.join(timeout=5)
        for c in (self._consumer, self._watermarks):
            if c is not None:
                c.close()
        if self._producer is not None:
            self._producer.flush(5)

    def ensure_topic(self) -> None:
        admin = AdminClient(dict(self.common))
        md = admin.list_topics(timeout=self.timeout)
        if self.topic in md.topics and md.topics[self.topic].error is None:
            return
        rf = self.replication_factor or min(3, max(1, len(md.brokers)))
        new = NewTopic(
            self.topic, num_partitions=1, replication_factor=rf, config={"cleanup.policy": "compact"}
        )
        try:
            admin.create_topics([new])[self.topic].result(self.timeout)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
        log.info("created topic %s (replication factor %d, compacted)", self.topic, rf)

    # -- reading ----------------------------------------------------------------------------------
    def _read(self) -> None:
        assert self._consumer is not None
        while not self._stop.is_set():
            try:
                first = self._consumer.poll(0.2)  # returns at the first record
                if first is None:
                    continue
                msgs = [first, *self._consumer.consume(500, 0)]  # and whatever else is there
            except KafkaException as exc:  # pragma: no cover - noted, the loop goes on
                self.reader_error = str(exc)
                continue
            with self.lock:
                for m in msgs:
                    err, offset = m.error(), m.offset()
                    if err is not None or offset is None:
                        if err is not None and err.code() != KafkaError._PARTITION_EOF:
                            self.reader_error = str(err)
                        continue
                    if not self.state.apply(m.key(), m.value()):
                        if len(self.refused) > 10_000:
                            self.refused.clear()
                        self.refused.add(offset)
                        log.warning(
                            "record at offset %d of %s contradicts an earlier one: refused",
                            offset,
                            self.topic,
                        )
                    self.applied = offset + 1
                self._progress.notify_all()

    def high_watermark(self) -> int:
        assert self._watermarks is not None
        with self._watermark_lock:
            try:
                _, hi = self._watermarks.get_watermark_offsets(
                    TopicPartition(self.topic, 0), timeout=self.timeout, cached=False
                )
            except KafkaException as exc:
                raise RegistryError.store_error(f"cannot read the end of {self.topic}: {exc}") from exc
        return int(hi)

    def wait_applied(self, offset: int, timeout: float | None = None) -> None:
        """Block until every record before ``offset`` is applied; 50002 when that takes too long."""
        deadline = time.monotonic() + (timeout or self.timeout)
        with self._progress:
            while self.applied < offset:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RegistryError.timeout(
                        f"the registry read {self.topic} up to {self.applied}, not {offset}"
                    )
                self._progress.wait(min(left, 0.5))

    def sync(self) -> None:
        """Read the topic up to its current end (what every instance had written before now)."""
        self.wait_applied(self.high_watermark())

    # -- writing ----------------------------------------------------------------------------------
    def write(self, records: Sequence[Record]) -> bool:
        """Produce ``records`` in order and wait until the reader has applied them; False when
        the state refused one (another writer's record came first: plan again)."""
        if not records:
            return True
        assert self._producer is not None
        results: list[Any] = []

        def delivered(err: Any, msg: Any) -> None:
            results.append(err if err is not None else msg.offset())

        for key, value in records:
            self._producer.produce(self.topic, key=key, value=value, partition=0, on_delivery=delivered)
        left = self._producer.flush(self.timeout)
        if left or len(results) != len(records):
            raise RegistryError.timeout(f"writing to {self.topic}: {left} record(s) not delivered")
        errors = [r for r in results if not isinstance(r, int)]
        if errors:
            raise RegistryError.store_error(f"writing to {self.topic}: {errors[0]}")
        self.wait_applied(max(results) + 1)
        with self.lock:
            return not any(o in self.refused for o in results)
