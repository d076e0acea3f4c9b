"""One event-store node: storage, metadata, partitions and the Kafka listener, wired together.

The broker owns the event loop's view of the world. Handlers reach storage only through
:class:`Partition` objects it hands out, and topic/stream changes only through its methods,
which apply them to the metadata store and then create or drop partition logs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from framework import config as cfg
from framework.coordinator.metadata import MetadataStore, TopicInfo
from framework.coordinator.producer_ids import ProducerIdManager
from framework.errors import StoreError, UnknownTopicOrPartition
from framework.replication.partition import Partition
from framework.server import metrics
from framework.storage.log_config import LogConfig
from framework.storage.log_manager import LogManager

log = logging.getLogger("sftraffic.broker")


@dataclass(frozen=True, slots=True)
class Node:
    node_id: int
    host: str
    port: int
    rack: str | None = None


def _log_failure(what: str) -> Any:
    def done(task: asyncio.Task[Any]) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.error("%s failed: %r", what, task.exception())

    return done


def split_host_port(text: str, what: str = "listener") -> tuple[str, int]:
    host, sep, port = text.strip().rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise StoreError(f"{what} {text!r} must look like HOST:PORT, e.g. 127.0.0.1:9092")
    p = int(port)
    if not 0 <= p <= 65535:
        raise StoreError(f"{what} port {p} is out of range")
    return host.strip("[]"), p


class Broker:
    def __init__(self, config: cfg.BrokerConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        self.host, self.port = split_host_port(config["listeners"])
        adv = config["advertised.listeners"] or config["listeners"]
        self.advertised_host, self.advertised_port = split_host_port(adv, "advertised listener")
        self.logs = LogManager(config.data_dir)
        self.metadata = MetadataStore(config.data_dir, config)
        self.producer_ids = ProducerIdManager(
            config.data_dir / "__metadata", config["producer.id.block.size"], config.node_id
        )
        self.partitions: dict[str, list[Partition]] = {}
        self.server: asyncio.base_events.Server | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.started_ms = 0
        self.connections: set[Any] = set()
        self.stopping = False

    # -- lifecycle -------------------------------------------------------------------------
    def load(self) -> None:
        """Open the data dir and every partition log (recovering them if needed)."""
        self.logs.start()
        self.metadata.load()
        known = {(t.name, p) for t in self.metadata.topics.values() for p in range(t.partitions)}
        for topic, part, path in self.logs.partition_dirs():
            if (topic, part) not in known:
                self.logs.quarantine(path)
        for t in self.metadata.topics.values():
            self._open_topic(t)
        self.metadata.listeners.append(self._on_metadata)
        self._ensure_offsets_topic()

    def _ensure_offsets_topic(self) -> None:
        from framework.coordinator.offsets_topic import TOPIC

        if TOPIC not in self.metadata.topics:
            self.create_topic(
                TOPIC,
                int(self.config["offsets.topic.num.partitions"]),
                min(3, len(self.broker_ids())),
                {"cleanup.policy": "compact", "segment.bytes": 104_857_600},
                internal=True,
            )

    def _start_groups(self, loop: asyncio.AbstractEventLoop) -> None:
        from framework.coordinator.groups import GroupConfig, GroupCoordinator, LoopScheduler
        from framework.coordinator.offsets_topic import TOPIC, OffsetsTopicStore

        c = self.config
        gc = GroupConfig(
            min_session_timeout_ms=c["group.min.session.timeout.ms"],
            max_session_timeout_ms=c["group.max.session.timeout.ms"],
            initial_rebalance_delay_ms=c["group.initial.rebalance.delay.ms"],
            max_size=c["group.max.size"],
            offsets_retention_ms=c["offsets.retention.minutes"] * 60_000,
        )
        self.offsets_store = OffsetsTopicStore(self, len(self.metadata.topics[TOPIC].assignments))

        def exists(topic: str, partition: int) -> bool:
            parts = self.partitions.get(topic)
            return parts is not None and 0 <= partition < len(parts)

        self.groups = GroupCoordinator(
            LoopScheduler(loop), self.offsets_store, gc, lambda: int(time.time() * 1000), exists
        )
        n_groups, n_offsets = self.offsets_store.load_into(self.groups)
        if n_groups or n_offsets:
            log.info(
                "group coordinator loaded %d group(s) and %d committed offset(s)",
                n_groups,
                n_offsets,
            )

    async def start(self) -> None:
        from framework.server.listener import KafkaConnection

        loop = asyncio.get_running_loop()
        self.load()
        self._start_groups(loop)
        from framework.storage.cleaner import LogCleaner

        self.cleaner = LogCleaner(self.config.data_dir)
        self.started_ms = int(time.time() * 1000)
        try:
            self.server = await loop.create_server(
                lambda: KafkaConnection(self),
                self.host,
                self.port,
                reuse_address=True,
                backlog=1024,
            )
        except OSError as exc:
            self.logs.shutdown()
            raise StoreError(f"cannot listen on {self.host}:{self.port}: {exc.strerror}") from None
        if self.port == 0:
            self.port = self.server.sockets[0].getsockname()[1]
            if self.advertised_port == 0:
                self.advertised_port = self.port
        self._tasks = [
            loop.create_task(self._every(self.config["log.retention.check.interval.ms"], self._retention)),
            loop.create_task(self._every(self.config["log.flush.scheduler.interval.ms"], self._flush)),
            loop.create_task(self._every(60_000, self._checkpoint)),
            loop.create_task(
                self._every(self.config["producer.id.expiration.check.interval.ms"], self._expire_producers)
            ),
            loop.create_task(
                self._every(self.config["offsets.retention.check.interval.ms"], self._expire_offsets)
            ),
            loop.create_task(self._every(self.config["log.cleaner.backoff.ms"], self._clean)),
        ]
        listen = self.config["metrics.listen"]
        if listen:
            mh, mp = split_host_port(listen, "metrics.listen")
            metrics.serve(mh, mp, self)
        log.info(
            "broker %d listening on %s:%d (data dir %s, %d topics)",
            self.node_id,
            self.host,
            self.port,
            self.config.data_dir,
            len(self.metadata.topics),
        )

    async def stop(self) -> None:
        self.stopping = True
        if self.server is not None:
            self.server.close()
        for conn in list(self.connections):
            conn.close()
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        if self.server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.server.wait_closed(), 2)
        self.logs.shutdown()
        log.info("broker %d stopped cleanly", self.node_id)

    async def _every(self, interval_ms: int, fn: Any) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                fn()
            except Exception:
                log.exception("background task %s failed", getattr(fn, "__name__", fn))

    def _clean(self) -> None:
        if self.cleaner.running:
            return
        task = asyncio.get_running_loop().create_task(self.cleaner.run_once(list(self.logs.logs.values())))
        task.add_done_callback(_log_failure("log cleaner"))

    def _retention(self) -> None:
        if self.cleaner.running:
            return  # the cleaner reads segment files in a thread: retention waits a round
        freed = self.logs.enforce_retention(int(time.time() * 1000))
        if freed:
            metrics.RETENTION_BYTES.inc(freed)

    def _checkpoint(self) -> None:
        self.logs.checkpoint()
        for lg in self.logs.logs.values():
            if lg.producer_state.dirty:
                lg.producer_state.take_snapshot(lg.log_end_offset)

    def _expire_producers(self) -> None:
        now = int(time.time() * 1000)
        for lg in self.logs.logs.values():
            gone = lg.producer_state.remove_expired(now, lg.config.producer_id_expiration_ms)
            if gone:
                log.info(
                    "%s: expired %d producer id(s) unused for %d ms",
                    lg.name,
                    len(gone),
                    lg.config.producer_id_expiration_ms,
                )

    def _expire_offsets(self) -> None:
        task = asyncio.get_running_loop().create_task(self.groups.expire_offsets())
        task.add_done_callback(_log_failure("offset expiry"))

    def _flush(self) -> None:
        self.logs.flush_due(int(time.time() * 1000))

    # -- topology --------------------------------------------------------------------------
    def nodes(self) -> list[Node]:
        return [Node(self.node_id, self.advertised_host, self.advertised_port)]

    def broker_ids(self) -> list[int]:
        return [n.node_id for n in self.nodes()]

    def coordinator_node(self, group_id: str) -> Node:
        """The broker leading the group's __consumer_offsets partition (this one, single-node)."""
        return self.nodes()[0]

    @property
    def controller_id(self) -> int:
        return self.node_id

    def log_config(self, t: TopicInfo) -> LogConfig:
        values = {k: v for k, (v, _) in self.metadata.topic_config_values(t).items()}
        return LogConfig.from_values(values)

    def _open_topic(self, t: TopicInfo) -> None:
        lc = self.log_config(t)
        parts = self.partitions.get(t.name, [])
        for p in range(len(parts), t.partitions):
            lg = self.logs.open_log(t.name, p, lc)
            replicas = t.assignments[p]
            parts.append(
                Partition(
                    topic=t.name,
                    index=p,
                    topic_id=t.id_bytes,
                    log=lg,
                    replicas=list(replicas),
                    leader_id=self.node_id,
                    isr=[self.node_id],
                )
            )
        self.partitions[t.name] = parts

    def _on_metadata(self, event: str, name: str) -> None:
        if event in ("topic_created", "partitions_created"):
            self._open_topic(self.metadata.topics[name])
        elif event == "topic_deleted":
            for p in self.partitions.pop(name, []):
                p.deleted = True
                p.wake()
                self.logs.remove_log(p.topic, p.index)
        elif event == "topic_altered":
            self._reconfigure(name)
        elif event == "stream_changed":
            for t in self.metadata.topics.values():
                if t.stream == name:
                    self._reconfigure(t.name)

    def _reconfigure(self, topic: str) -> None:
        t = self.metadata.topics.get(topic)
        if t is None:
            return
        lc = self.log_config(t)
        for p in self.partitions.get(topic, []):
            p.log.config = lc

    def partition(self, topic: str, index: int) -> Partition:
        parts = self.partitions.get(topic)
        if parts is None:
            raise UnknownTopicOrPartition(f"topic {topic!r} does not exist")
        if not 0 <= index < len(parts):
            raise UnknownTopicOrPartition(f"topic {topic!r} has no partition {index}")
        return parts[index]

    # -- admin operations (single node: applied directly) -----------------------------------
    def create_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, Any] | None = None,
        assignments: list[list[int]] | None = None,
        validate_only: bool = False,
        internal: bool = False,
    ) -> TopicInfo:
        return self.metadata.create_topic(
            name,
            num_partitions,
            replication_factor,
            configs,
            assignments,
            brokers=self.broker_ids(),
            validate_only=validate_only,
            internal=internal,
        )

    def delete_topic(self, name: str) -> TopicInfo:
        if not self.config["delete.topic.enable"]:
            from framework.protocol.errors import ErrorCode

            raise StoreError(
                "topic deletion is disabled (delete.topic.enable=false)",
                ErrorCode.TOPIC_DELETION_DISABLED,
            )
        return self.metadata.delete_topic(name)
