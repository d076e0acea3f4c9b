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
from framework.coordinator.producer_ids import ProducerIdManager
from framework.errors import NotLeader, StoreError, UnknownTopicOrPartition
from framework.metadata.quorum import ClusterState, parse_voters
from framework.metadata.store import MetadataStore, TopicInfo
from framework.protocol.errors import ErrorCode
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
        self.voters = parse_voters(config["controller.quorum.voters"])
        self.cluster: ClusterState | None = None
        self.producer_ids = ProducerIdManager(
            config.data_dir / "__metadata",
            config["producer.id.block.size"],
            config.node_id,
            node_bits=10 if self.voters else 0,
        )
        # topic -> partitions; None for a partition of which this broker holds no replica
        self.partitions: dict[str, list[Partition | None]] = {}
        self._topic_ids: dict[str, str] = {}
        self._fetchers: dict[int, Any] = {}
        self._bound: list[tuple[asyncio.Future[Any], Any]] = []
        self._reconcile_due = False
        self.server: asyncio.base_events.Server | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.started_ms = 0
        self.connections: set[Any] = set()
        self.stopping = False

    # -- lifecycle -------------------------------------------------------------------------
    def load(self) -> None:
        """Open the data dir and every partition log (recovering them if needed)."""
        self.logs.start()
        if self.voters:
            self._load_cluster()
            return
        self.metadata.load()
        known = {(t.name, p) for t in self.metadata.topics.values() for p in range(t.partitions)}
        for topic, part, path in self.logs.partition_dirs():
            if (topic, part) not in known:
                self.logs.quarantine(path)
        for t in self.metadata.topics.values():
            self._open_topic(t)
        self.metadata.listeners.append(self._on_metadata)
        self._ensure_offsets_topic()

    def _load_cluster(self) -> None:
        """Cluster mode: metadata comes from the quorum's journal, logs open as it is applied."""
        md = self.metadata
        md.persist = False
        md.dir.mkdir(parents=True, exist_ok=True)
        self.cluster = ClusterState(
            self.node_id,
            self.voters,
            self.config.data_dir / "__cluster",
            md,
            int(self.config["broker.session.timeout.ms"]),
            self._schedule_reconcile,
        )
        md.submit = self.cluster.submit_metadata
        md.listeners.append(self._on_metadata)

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
        from framework.coordinator.offsets_topic import OffsetsTopicStore

        c = self.config
        gc = GroupConfig(
            min_session_timeout_ms=c["group.min.session.timeout.ms"],
            max_session_timeout_ms=c["group.max.session.timeout.ms"],
            initial_rebalance_delay_ms=c["group.initial.rebalance.delay.ms"],
            max_size=c["group.max.size"],
            offsets_retention_ms=c["offsets.retention.minutes"] * 60_000,
        )
        self.offsets_store = OffsetsTopicStore(self)

        def exists(topic: str, partition: int) -> bool:
            parts = self.partitions.get(topic)
            return parts is not None and 0 <= partition < len(parts)

        self.groups = GroupCoordinator(
            LoopScheduler(loop), self.offsets_store, gc, lambda: int(time.time() * 1000), exists
        )
        if self.cluster is not None:
            return  # groups load per __consumer_offsets partition as this broker comes to lead it
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
        if self.cluster is not None:
            await self._join_cluster(loop)
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
        if self.cluster is not None:
            self._tasks.append(self._ticker)
            self._tasks.append(loop.create_task(self._every(500, self._cluster_duties)))
            lag = int(self.config["replica.lag.time.max.ms"])
            self._tasks.append(loop.create_task(self._every(max(lag // 2, 50), self._shrink_isrs)))
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

    async def _join_cluster(self, loop: asyncio.AbstractEventLoop) -> None:
        """Catch up with the metadata quorum and register before serving clients.

        Like a KRaft broker, this one accepts no Kafka connections until it has applied the
        quorum's log and registered: answering from a half-replayed journal would send clients
        to partitions it no longer leads. Needs a majority of the voters up.
        """
        cs = self.cluster
        assert cs is not None
        if self.advertised_port == 0:
            raise StoreError("a cluster broker needs a fixed port: --listen HOST:PORT (not port 0)")
        cs.endpoint = (self.advertised_host, self.advertised_port, None)
        self._ticker = loop.create_task(cs.run())
        t0 = loop.time()
        next_note = t0 + 5
        while not (cs.replayed and cs.registered):
            if self._ticker.done():
                self._ticker.result()  # raises what stopped it
            if loop.time() >= next_note:
                next_note += 10
                log.info(
                    "broker %d waiting for the metadata quorum (%d of %d voters must be up: %s)",
                    self.node_id,
                    len(self.voters) // 2 + 1,
                    len(self.voters),
                    ", ".join(f"{i}@{a}" for i, a in sorted(self.voters.items())),
                )
            await asyncio.sleep(0.02)
        # partitions this broker holds no replica of any more (deleted while it was down)
        mine = {
            (t.name, p)
            for t in self.metadata.topics.values()
            for p, r in enumerate(t.assignments)
            if self.node_id in r
        }
        for topic, part, path in self.logs.partition_dirs():
            if (topic, part) not in mine:
                self.logs.quarantine(path)
        self._reconcile()
        log.info("broker %d caught up with the metadata quorum in %.1f s", self.node_id, loop.time() - t0)

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
        for f in list(self._fetchers.values()):
            await f.stop()
        if self.cluster is not None:
            with contextlib.suppress(Exception):
                self.cluster.destroy()
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
        """The brokers clients may use: this one, or every registered, unfenced one."""
        if self.cluster is None:
            return [Node(self.node_id, self.advertised_host, self.advertised_port)]
        return [
            Node(i, b["host"], b["port"], b["rack"])
            for i, b in sorted(self.cluster.brokers.items())
            if not b["fenced"]
        ]

    def cluster_brokers(self) -> dict[int, dict[str, Any]]:
        return self.cluster.brokers if self.cluster is not None else {}

    def broker_ids(self) -> list[int]:
        return [n.node_id for n in self.nodes()]

    def coordinator_node(self, group_id: str) -> Node | None:
        """The broker leading the group's __consumer_offsets partition (None: no leader now)."""
        if self.cluster is None:
            return self.nodes()[0]
        from framework.coordinator.offsets_topic import TOPIC, partition_for

        t = self.metadata.topics.get(TOPIC)
        if t is None:
            return None
        ps = self.cluster.partition_state(TOPIC, partition_for(group_id, t.partitions))
        if ps is None or ps.leader < 0:
            return None
        return next((n for n in self.nodes() if n.node_id == ps.leader), None)

    def coordinator_error(self, group_id: str) -> int:
        """0 when this broker coordinates the group, else the Kafka error code to answer."""
        if self.cluster is None:
            return 0
        node = self.coordinator_node(group_id)
        if node is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if node.node_id != self.node_id:
            return ErrorCode.NOT_COORDINATOR
        return 0

    @property
    def controller_id(self) -> int:
        """What Metadata calls the controller: this broker.

        Any broker of a cluster takes admin requests and proposes them to the quorum, and
        clients (librdkafka) send admin requests to the "controller" they were told about and
        cache it; naming the Raft leader would send them to a broker that may have just died.
        (KRaft brokers name a random live broker, for the same reason.)
        """
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

    # -- cluster: follow the quorum's state -------------------------------------------------
    def _schedule_reconcile(self) -> None:
        if not self._reconcile_due:
            self._reconcile_due = True
            asyncio.get_running_loop().call_soon(self._reconcile)

    def _cluster_duties(self) -> None:
        cs = self.cluster
        assert cs is not None
        if cs.replayed and cs.is_controller:
            from framework.coordinator.offsets_topic import TOPIC

            live = cs.live_brokers()
            if TOPIC not in self.metadata.topics and live and len(live) >= min(3, len(self.voters)):
                self._ensure_offsets_topic()
                self.detach_pending()

    def _reconcile(self) -> None:
        """Open, close, lead and follow partitions as the quorum's state says."""
        self._reconcile_due = False
        cs = self.cluster
        if cs is None or not cs.replayed:
            return
        md = self.metadata
        for name in list(self.partitions):
            t = md.topics.get(name)
            if t is None or self._topic_ids.get(name) != t.topic_id:
                self._drop_topic(name)
        changes: dict[str, int] = {}
        for t in list(md.topics.values()):
            states = cs.pstates.get(t.name, [])
            parts = self.partitions.setdefault(t.name, [])
            self._topic_ids[t.name] = t.topic_id
            lc: LogConfig | None = None
            for i, replicas in enumerate(t.assignments):
                if i >= len(parts):
                    parts.append(None)
                p = parts[i]
                if i >= len(states):
                    continue
                ps = states[i]
                if p is None:
                    if self.node_id not in replicas:
                        continue
                    lc = lc or self.log_config(t)
                    p = parts[i] = Partition(
                        topic=t.name,
                        index=i,
                        topic_id=t.id_bytes,
                        log=self.logs.open_log(t.name, i, lc),
                        replicas=list(replicas),
                        leader_id=-2,
                        leader_epoch=-1,
                        node_id=self.node_id,
                        alter_isr=self._alter_isr,
                    )
                role = p.apply_state(ps.leader, ps.leader_epoch, ps.isr, ps.partition_epoch, list(replicas))
                if role:
                    self._unfollow(p)
                    if role == "follower" and ps.leader >= 0:
                        self._follow(p, ps.leader)
                    self._offsets_role(p, role == "leader")
                    changes[role] = changes.get(role, 0) + 1
                    log.debug(
                        "%s-%d: %s at epoch %d (isr %s)",
                        t.name,
                        i,
                        "leader" if role == "leader" else f"follower of broker {ps.leader}",
                        ps.leader_epoch,
                        ps.isr,
                    )

        if changes:
            leading = sum(1 for ps in self.partitions.values() for p in ps if p is not None and p.is_leader)
            log.info(
                "broker %d now leads %d partition(s) (%d new) and follows %d (%d new)",
                self.node_id,
                leading,
                changes.get("leader", 0),
                sum(1 for ps in self.partitions.values() for p in ps if p is not None and not p.is_leader),
                changes.get("follower", 0),
            )

    def _drop_topic(self, name: str) -> None:
        from framework.errors import UnknownTopicOrPartition as Gone

        for p in self.partitions.pop(name, []):
            if p is not None:
                self._unfollow(p)
                p.close(Gone(f"topic {name!r} was deleted"))
                self.logs.remove_log(p.topic, p.index)
        self._topic_ids.pop(name, None)

    def _follow(self, p: Partition, leader: int) -> None:
        from framework.replication.fetcher import ReplicaFetcher

        f = self._fetchers.get(leader)
        if f is None:
            f = self._fetchers[leader] = ReplicaFetcher(self, leader)
        f.add(p)

    def _unfollow(self, p: Partition) -> None:
        for f in self._fetchers.values():
            f.remove(p)

    def _offsets_role(self, p: Partition, leading: bool) -> None:
        from framework.coordinator.offsets_topic import TOPIC

        if p.topic != TOPIC or not hasattr(self, "groups"):
            return
        if leading:
            n_groups, n_offsets = self.offsets_store.load_partition(self.groups, p.index)
            log.info(
                "coordinator for __consumer_offsets-%d: loaded %d group(s), %d offset(s)",
                p.index,
                n_groups,
                n_offsets,
            )
        else:
            self.offsets_store.unload_partition(self.groups, p.index)

    def _alter_isr(self, p: Partition, isr: list[int]) -> None:
        cs = self.cluster
        assert cs is not None
        epoch = p.partition_epoch
        log.info("%s-%d: proposing ISR %s (was %s)", p.topic, p.index, isr, p.isr)
        fut = cs.propose("alter_isr", p.topic, p.index, self.node_id, p.leader_epoch, epoch, isr)

        def done(f: asyncio.Future[Any]) -> None:
            err = f.exception() if not f.cancelled() else None
            code = f.result() if err is None and not f.cancelled() else -1
            if code != 0:
                log.info("%s-%d: ISR change to %s not applied (%s)", p.topic, p.index, isr, err or code)
                if p.partition_epoch == epoch:
                    p.pending_isr = None

        fut.add_done_callback(done)

    def _shrink_isrs(self) -> None:
        now = int(time.time() * 1000)
        lag = int(self.config["replica.lag.time.max.ms"])
        for parts in self.partitions.values():
            for p in parts:
                if p is not None and p.replicated:
                    p.shrink_isr(now, lag)

    # -- metadata changes proposed by handlers ----------------------------------------------
    def bind_pending(self, result: Any) -> None:
        """Tie the metadata changes just proposed to ``result`` (an object with error_code)."""
        for fut in self.metadata.take_pending():
            self._bound.append((fut, result))

    def detach_pending(self) -> None:
        """Let the changes just proposed complete on their own: nobody waits for the answer."""
        for fut in self.metadata.take_pending():
            fut.add_done_callback(lambda f: f.cancelled() or f.exception())

    def committed(self, resp: Any) -> Any:
        """``resp`` at once (single node), or once the quorum applied this request's changes."""
        self.bind_pending(None)
        bound, self._bound = self._bound, []
        if not bound:
            return resp
        return self._await_committed(bound, resp)

    async def _await_committed(self, bound: list[tuple[asyncio.Future[Any], Any]], resp: Any) -> Any:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 15
        for fut, result in bound:
            problem: StoreError | None
            try:
                problem = await asyncio.wait_for(asyncio.shield(fut), max(deadline - loop.time(), 0.01))
            except TimeoutError:
                problem = StoreError(
                    "the metadata quorum did not commit the change within 15 s; is a majority of "
                    "controller.quorum.voters running?",
                    ErrorCode.REQUEST_TIMED_OUT,
                )
            except StoreError as exc:
                problem = exc
            if problem is not None and result is not None and hasattr(result, "error_code"):
                result.error_code = problem.code
                if hasattr(result, "error_message"):
                    result.error_message = problem.message
        return resp

    def _on_metadata(self, event: str, name: str) -> None:
        if self.cluster is not None:
            if event == "topic_altered":
                self._reconfigure(name)
            elif event == "stream_changed":
                self._on_stream_changed(name)
            else:
                self._schedule_reconcile()
            return
        if event in ("topic_created", "partitions_created"):
            self._open_topic(self.metadata.topics[name])
        elif event == "topic_deleted":
            self._drop_topic(name)
        elif event == "topic_altered":
            self._reconfigure(name)
        elif event == "stream_changed":
            self._on_stream_changed(name)

    def _on_stream_changed(self, name: str) -> None:
        for t in self.metadata.topics.values():
            if t.stream == name:
                self._reconfigure(t.name)

    def _reconfigure(self, topic: str) -> None:
        t = self.metadata.topics.get(topic)
        if t is None:
            return
        lc = self.log_config(t)
        for p in self.partitions.get(topic, []):
            if p is not None:
                p.log.config = lc

    def partition(self, topic: str, index: int) -> Partition:
        """The local replica of a partition; raises when unknown or not hosted here."""
        parts = self.partitions.get(topic)
        if parts is None:
            raise UnknownTopicOrPartition(f"topic {topic!r} does not exist")
        if not 0 <= index < len(parts):
            raise UnknownTopicOrPartition(f"topic {topic!r} has no partition {index}")
        p = parts[index]
        if p is None:
            raise NotLeader(f"broker {self.node_id} holds no replica of {topic}-{index}")
        return p

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
