"""The group coordinator as a part of the broker: its state topic and where groups live.

:class:`GroupService` owns the :class:`GroupCoordinator` (the rebalance protocol, tested on
its own with a fake scheduler) and the :class:`OffsetsTopicStore` that keeps its state in
``__consumer_offsets``. It answers which broker coordinates a group (the leader of the
group's ``__consumer_offsets`` partition; this broker on a single node), and is told by the
replica manager when this broker starts or stops leading one of those partitions: it then
loads the partition's groups and offsets, or forgets them (their members move on).

It also makes sure the topic exists: at start on a single node; in a cluster, the controller
creates it once enough brokers have registered to give it its replication factor.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from framework import config as cfg
from framework.clock import Clock
from framework.coordinator.consumer_groups import ConsumerGroupConfig, ConsumerGroupCoordinator
from framework.coordinator.groups import GroupConfig, GroupCoordinator, GroupState, Scheduler
from framework.coordinator.offsets_topic import TOPIC, OffsetsPartitions, OffsetsTopicStore, partition_for
from framework.coordinator.share_groups import ShareGroupConfig, ShareGroupCoordinator
from framework.errors import StoreError
from framework.metadata.admin import MetadataAdmin
from framework.metadata.cache import MetadataCache, Node
from framework.protocol.error_codes import ErrorCode

log = logging.getLogger("sftraffic.groups")

OFFSETS_TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": 104_857_600}


class GroupService:
    def __init__(
        self,
        config: cfg.BrokerConfig,
        cache: MetadataCache,
        admin: MetadataAdmin,
        partitions: OffsetsPartitions,
        scheduler: Scheduler,
        clock: Clock,
    ) -> None:
        self.config = config
        self.cache = cache
        self.admin = admin
        self.store = OffsetsTopicStore(partitions, lambda: self.partition_count, clock)
        self.coordinator = GroupCoordinator(
            scheduler,
            self.store,
            GroupConfig(
                min_session_timeout_ms=config.int("group.min.session.timeout.ms"),
                max_session_timeout_ms=config.int("group.max.session.timeout.ms"),
                initial_rebalance_delay_ms=config.int("group.initial.rebalance.delay.ms"),
                max_size=config.int("group.max.size"),
                offsets_retention_ms=config.int("offsets.retention.minutes") * 60_000,
            ),
            clock,
            self._partition_exists,
        )
        # KIP-848 groups; their committed offsets are kept by the coordinator above
        self.consumer = ConsumerGroupCoordinator(
            scheduler,
            ConsumerGroupConfig(
                session_timeout_ms=config.int("group.consumer.session.timeout.ms"),
                heartbeat_interval_ms=config.int("group.consumer.heartbeat.interval.ms"),
                max_size=config.int("group.consumer.max.size"),
                assignors=tuple(config.list("group.consumer.assignors")),
            ),
            self._partition_count,
            lambda gid: self._classic_group_active(gid) or self.share.is_share_group(gid),
            lambda: [name for name, t in self.cache.topics.items() if not t.internal],
        )
        # KIP-932 share groups: their records' states are kept by the partition leaders
        self.share = ShareGroupCoordinator(
            scheduler,
            ShareGroupConfig(
                session_timeout_ms=config.int("group.share.session.timeout.ms"),
                heartbeat_interval_ms=config.int("group.share.heartbeat.interval.ms"),
                max_size=config.int("group.share.max.size"),
            ),
            self._partition_count,
            lambda gid: self._classic_group_active(gid) or self.consumer.is_consumer_group(gid),
        )

    @property
    def partition_count(self) -> int:
        """Partitions of ``__consumer_offsets``: the topic's, or offsets.topic.num.partitions
        before it exists (what a group id hashes over)."""
        t = self.cache.topics.get(TOPIC)
        return t.partitions if t is not None else self.config.int("offsets.topic.num.partitions")

    def _partition_exists(self, topic: str, partition: int) -> bool:
        t = self.cache.topics.get(topic)
        return t is not None and 0 <= partition < t.partitions

    def _partition_count(self, topic: str) -> int:
        t = self.cache.topics.get(topic)
        return t.partitions if t is not None else 0

    def _classic_group_active(self, group_id: str) -> bool:
        g = self.coordinator.groups.get(group_id)
        return g is not None and not g.is_(GroupState.EMPTY, GroupState.DEAD)

    # -- where groups live -------------------------------------------------------------------
    def coordinator_node(self, group_id: str, listener: str | None = None) -> Node | None:
        """The broker leading the group's __consumer_offsets partition (None: no leader now),
        at its address on ``listener``."""
        if not self.cache.clustered:
            return self.cache.nodes(listener)[0]
        t = self.cache.topics.get(TOPIC)
        if t is None:
            return None
        return self.cache.leader_node(TOPIC, partition_for(group_id, t.partitions), listener)

    def coordinator_error(self, group_id: str) -> ErrorCode:
        """NONE when this broker coordinates the group, else the Kafka error code to answer."""
        if not self.cache.clustered:
            return ErrorCode.NONE
        node = self.coordinator_node(group_id)
        if node is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if node.node_id != self.cache.node_id:
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.NONE

    def check_coordinator(self, group_id: str) -> None:
        """Raise the error to answer unless this broker coordinates the group."""
        code = self.coordinator_error(group_id)
        if code:
            raise StoreError(
                f"broker {self.cache.node_id} is not the coordinator of group {group_id!r}", code
            )

    # -- the state topic ---------------------------------------------------------------------
    def ensure_offsets_topic(self) -> None:
        """Create __consumer_offsets when it is missing (the change is not awaited)."""
        if TOPIC in self.cache.topics:
            return
        self.admin.create_topic(
            TOPIC,
            self.config.int("offsets.topic.num.partitions"),
            min(3, len(self.cache.broker_ids())),
            OFFSETS_TOPIC_CONFIGS,
            internal=True,
        ).detach()

    def load_all(self) -> None:
        """Single node: replay the whole topic into the coordinator."""
        n_groups, n_offsets = self.store.load_into(self.coordinator)
        if n_groups or n_offsets:
            log.info("group coordinator loaded %d group(s) and %d committed offset(s)", n_groups, n_offsets)

    def on_offsets_leadership(self, index: int, leading: bool) -> None:
        """The replica manager: this broker now leads (or no longer leads) partition ``index``."""
        if leading:
            n_groups, n_offsets = self.store.load_partition(self.coordinator, index)
            log.info(
                "coordinator for %s-%d: loaded %d group(s), %d offset(s)", TOPIC, index, n_groups, n_offsets
            )
        else:
            self.store.unload_partition(self.coordinator, index)
            n = self.partition_count
            self.consumer.unload_groups(lambda gid: partition_for(gid, n) == index)
            self.share.unload_groups(lambda gid: partition_for(gid, n) == index)

    def create_when_controller(self) -> None:
        """Cluster: the controller creates the topic once min(3, voters) brokers are live."""
        quorum = self.cache.quorum
        if quorum is None or not quorum.replayed or not quorum.is_controller:
            return
        if len(quorum.live_brokers()) >= min(3, len(quorum.voters)):
            self.ensure_offsets_topic()

    # -- housekeeping ------------------------------------------------------------------------
    def expire_offsets(self) -> None:
        """Drop committed offsets past ``offsets.retention.minutes`` (in the background)."""
        task = asyncio.get_running_loop().create_task(self.coordinator.expire_offsets())
        task.add_done_callback(_report_failure)

    def periodic(self) -> list[tuple[int, Callable[[], None]]]:
        """(interval ms, function) pairs the broker runs on its event loop."""
        work = [(self.config.int("offsets.retention.check.interval.ms"), self.expire_offsets)]
        if self.cache.clustered:
            work.append((500, self.create_when_controller))
        return work


def _report_failure(task: asyncio.Task[int]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("offset expiry failed: %r", task.exception())
