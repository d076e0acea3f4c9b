"""The transaction coordinator as a part of the broker: its state topic and where ids live.

:class:`TransactionService` owns the :class:`TransactionCoordinator` (the state machine, tested
on its own with fakes) and the :class:`TxnLogStore` that keeps its state in
``__transaction_state``. It answers which broker coordinates a transactional id (the leader
of the id's ``__transaction_state`` partition; this broker on a single node) and is told by
the replica manager when this broker starts or stops leading one of those partitions: it
then loads the partition's transactions (resuming the markers of those found prepared), or
forgets them. The coordinator epoch written into markers is the partition's leader epoch, so
a deposed coordinator's markers are refused (TRANSACTION_COORDINATOR_FENCED).

As in Kafka, the topic is created on first use (FindCoordinator or InitProducerId for a
transactional id), with ``transaction.state.log.*`` settings (the replication factor at most
the live brokers).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from framework import config as cfg
from framework.clock import Clock
from framework.coordinator.groups import Scheduler
from framework.coordinator.offsets_topic import OffsetsPartitions
from framework.coordinator.transaction_log import TOPIC, TxnLogStore
from framework.coordinator.transactions import MarkerWriter, TransactionCoordinator, TxnConfig
from framework.errors import StoreError
from framework.metadata.admin import MetadataAdmin
from framework.metadata.cache import MetadataCache, Node
from framework.protocol.error_codes import ErrorCode

log = logging.getLogger("sftraffic.transactions")
CREATE_RETRY_S = 5.0  # a creation not applied by then (no quorum, too few brokers) is asked again


class TransactionService:
    def __init__(
        self,
        config: cfg.BrokerConfig,
        cache: MetadataCache,
        admin: MetadataAdmin,
        partitions: OffsetsPartitions,
        scheduler: Scheduler,
        markers: MarkerWriter,
        next_producer_id: Callable[[], int],
        clock: Clock,
    ) -> None:
        self.config = config
        self.cache = cache
        self.admin = admin
        self.partitions = partitions
        self.clock = clock
        self.store = TxnLogStore(partitions, self._partition_count, clock)
        self._asked_until = 0.0
        self.coordinator = TransactionCoordinator(
            scheduler,
            self.store,
            markers,
            next_producer_id,
            TxnConfig(
                max_timeout_ms=config.int("transaction.max.timeout.ms"),
                id_expiration_ms=config.int("transactional.id.expiration.ms"),
            ),
            clock,
        )

    def _partition_count(self) -> int:
        t = self.cache.topics.get(TOPIC)
        return t.partitions if t is not None else self.config.int("transaction.state.log.num.partitions")

    # -- where transactional ids live ----------------------------------------------------------
    def coordinator_node(self, transactional_id: str, listener: str | None = None) -> Node | None:
        """The broker leading the id's __transaction_state partition (None: none now)."""
        if TOPIC not in self.cache.topics:
            self.ensure_topic()  # created on first use, as Kafka does
            if self.cache.clustered:
                return None
            self.load_all()  # a single node applied the change already
        if not self.cache.clustered:
            return self.cache.nodes(listener)[0]
        return self.cache.leader_node(TOPIC, self.store.partition_for(transactional_id), listener)

    def coordinator_error(self, transactional_id: str) -> ErrorCode:
        if not self.cache.clustered:
            if TOPIC not in self.cache.topics:
                self.coordinator_node(transactional_id)
            return ErrorCode.NONE
        node = self.coordinator_node(transactional_id)
        if node is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if node.node_id != self.cache.node_id:
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.NONE

    def check_coordinator(self, transactional_id: str) -> None:
        code = self.coordinator_error(transactional_id)
        if code:
            raise StoreError(
                f"broker {self.cache.node_id} does not coordinate transactional id {transactional_id!r}",
                code,
            )

    # -- the state topic -----------------------------------------------------------------------
    def ensure_topic(self) -> None:
        """Create __transaction_state when missing (the change is not awaited)."""
        now = self.clock.monotonic()
        if TOPIC in self.cache.topics or now < self._asked_until:
            return
        self._asked_until = now + CREATE_RETRY_S  # cluster: the quorum applies it meanwhile
        rf = min(self.config.int("transaction.state.log.replication.factor"), len(self.cache.broker_ids()))
        self.admin.create_topic(
            TOPIC,
            self.config.int("transaction.state.log.num.partitions"),
            rf,
            {
                "cleanup.policy": "compact",
                "segment.bytes": self.config.int("transaction.state.log.segment.bytes"),
                "min.insync.replicas": min(self.config.int("transaction.state.log.min.isr"), rf),
            },
            internal=True,
        ).detach()

    def _load(self, index: int) -> int:
        p, records = self.store.read_partition(index)
        epoch = int(getattr(p, "leader_epoch", 0))
        return self.coordinator.load(index, epoch, records)

    def load_all(self) -> None:
        """Single node: every partition of the topic is led here."""
        n = sum(self._load(i) for i in range(self._partition_count()) if TOPIC in self.cache.topics)
        if n:
            log.info("transaction coordinator loaded %d transactional id(s)", n)

    def on_leadership(self, index: int, leading: bool) -> None:
        """The replica manager: this broker now leads (or no longer leads) partition ``index``."""
        if leading:
            self.coordinator.begin_load(index)
            n = self._load(index)
            log.info("transaction coordinator for %s-%d: loaded %d transactional id(s)", TOPIC, index, n)
        else:
            self.coordinator.unload(index)

    # -- housekeeping --------------------------------------------------------------------------
    def periodic(self) -> list[tuple[int, Callable[[], None]]]:
        c = self.config
        work: list[tuple[int, Callable[[], None]]] = [
            (
                c.int("transaction.abort.timed.out.transaction.cleanup.interval.ms"),
                self.abort_timed_out,
            ),
            (
                c.int("transaction.remove.expired.transaction.cleanup.interval.ms"),
                self.expire_ids,
            ),
        ]
        return work

    def abort_timed_out(self) -> None:
        self.coordinator.abort_timed_out()

    def expire_ids(self) -> None:
        self.coordinator.expire_transactional_ids()
