"""The partitions this broker holds, and what it does with them (Kafka's ReplicaManager).

It opens, reconfigures and drops partition logs as the metadata says; makes each partition a
leader or a follower at the epoch the quorum chose; runs one :class:`ReplicaFetcher` per
leader it follows; proposes ISR changes to the quorum; and runs the logs' housekeeping
(retention, flush, checkpoints, producer-id expiry, compaction, ISR shrinking).

A replica the quorum takes off a broker (a reassignment removed it) stops at once: it leaves
its fetcher, fails what waits on it with NOT_LEADER_OR_FOLLOWER, and its log is deleted (Kafka's
StopReplica with delete, driven by metadata as KRaft brokers do).

Replication throttles (:mod:`framework.replication.quota`): the leader side's quota is read by
the Fetch handler, the follower side's by the replica fetchers; both are refreshed from the
topic configs and dynamic broker configs at every metadata change.

Who else learns of leadership: listeners registered with :meth:`on_leadership` for a topic
(the group service for ``__consumer_offsets``) are told when this broker starts or stops
leading one of its partitions.

Lookups for handlers: :meth:`leader` / :meth:`replica` return the partition or raise the
StoreError whose Kafka code answers the request (UNKNOWN_TOPIC_OR_PARTITION,
NOT_LEADER_OR_FOLLOWER); :meth:`topic_partitions` is the produce path's look-up without
exceptions.

Thread-safety: event-loop only; the cleaner's work runs in a thread on logs it marks.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from framework import config as cfg
from framework.clock import Clock
from framework.errors import NotLeader, UnknownTopicOrPartition
from framework.metadata.cache import MetadataCache
from framework.metadata.quorum import PartitionState
from framework.metadata.store import TopicInfo
from framework.replication.fetcher import FetcherSettings, ReplicaFetcher
from framework.replication.partition import Partition
from framework.replication.quota import ReplicationQuota, throttled_partitions
from framework.security.sasl import SaslLogin
from framework.storage.cleaner import LogCleaner
from framework.storage.log_manager import LogManager

log = logging.getLogger("sftraffic.replicas")

# (partition index, leading) for a watched topic
LeadershipListener = Callable[[int, bool], None]
Periodic = tuple[int, Callable[[], None]]
ISR_RETRY_BACKOFF_S = 1.0  # after a refused ISR change, the partition waits this long to propose again


def _log_failure(what: str) -> Callable[[asyncio.Task[Any]], None]:
    def done(task: asyncio.Task[Any]) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.error("%s failed: %r", what, task.exception())

    return done


class PartitionLookups:
    """The look-ups handlers make over ``partitions`` (topic → its partitions, None where this
    broker holds no replica): the replica manager's, and those of the handler tests' fakes."""

    partitions: dict[str, list[Partition | None]]
    node_id: int

    def topic_partitions(self, topic: str) -> list[Partition | None] | None:
        return self.partitions.get(topic)

    def replica(self, topic: str, index: int) -> Partition:
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

    def leader(self, topic: str, index: int) -> Partition:
        """The partition if this broker leads it; raises the error to answer otherwise."""
        p = self.replica(topic, index)
        if not p.is_leader:
            p.check_leader()
        return p

    def all_partitions(self) -> list[Partition]:
        return [p for parts in self.partitions.values() for p in parts if p is not None]


class ReplicaManager(PartitionLookups):
    def __init__(
        self,
        node_id: int,
        config: cfg.BrokerConfig,
        logs: LogManager,
        cache: MetadataCache,
        clock: Clock,
        retention_freed: Callable[[int], None] = lambda n: None,
        fetcher_tls: ssl.SSLContext | None = None,
        fetcher_sasl: SaslLogin | None = None,
    ) -> None:
        self.node_id = node_id
        self.retention_freed = retention_freed
        self.config = config
        self.logs = logs
        self.cache = cache
        self.clock = clock  # the broker's: elections, retention, expiry, ISR lag, back-offs
        self.cleaner = LogCleaner(logs.dir)
        # topic -> partitions; None for a partition of which this broker holds no replica
        self.partitions: dict[str, list[Partition | None]] = {}
        self._topic_ids: dict[str, str] = {}
        self._fetchers: dict[int, ReplicaFetcher] = {}
        self._listeners: dict[str, list[LeadershipListener]] = {}
        self._reconcile_due = False
        self._cleaning: asyncio.Task[Any] | None = None
        self._isr_backoff: dict[tuple[str, int], float] = {}  # partition -> no proposal before
        # replica fetchers reach leaders on inter.broker.listener.name (TLS and SASL as it needs)
        self.fetcher_settings = FetcherSettings.from_config(node_id, config, fetcher_tls, fetcher_sasl)
        self.leader_quota = ReplicationQuota("leader")
        self.follower_quota = ReplicationQuota("follower")
        self.removed_replicas = 0  # replicas stopped and deleted because a reassignment moved them away

    @property
    def log_dir(self) -> Path:
        """The directory holding this broker's partition logs (``log.dirs``)."""
        return self.logs.dir

    def on_leadership(self, topic: str, listener: LeadershipListener) -> None:
        self._listeners.setdefault(topic, []).append(listener)

    # -- single node: every partition is local and led here ---------------------------------
    def open_all(self) -> None:
        """Open every topic's logs (recovering them), quarantining directories of no topic."""
        md = self.cache.store
        known = {(t.name, p) for t in md.topics.values() for p in range(t.partitions)}
        for topic, part, path in self.logs.partition_dirs():
            if (topic, part) not in known:
                self.logs.quarantine(path)
        for t in md.topics.values():
            self._open_topic(t)

    def _open_topic(self, t: TopicInfo) -> None:
        lc = self.cache.log_config(t)
        parts = self.partitions.setdefault(t.name, [])
        for p in range(len(parts), t.partitions):
            parts.append(
                Partition(
                    topic=t.name,
                    index=p,
                    topic_id=t.id_bytes,
                    log=self.logs.open_log(t.name, p, lc),
                    replicas=list(t.assignments[p]),
                    leader_id=self.node_id,
                    isr=[self.node_id],
                )
            )

    def refresh_throttles(self) -> None:
        """Read the replication throttles: the rates (dynamic broker configs) and the throttled
        replicas of this broker (topic configs)."""
        store, me, topics = self.cache.store, self.node_id, list(self.cache.topics.values())
        self.leader_quota.rate = int(store.dynamic_broker_value(me, "leader.replication.throttled.rate")[0])
        self.follower_quota.rate = int(
            store.dynamic_broker_value(me, "follower.replication.throttled.rate")[0]
        )
        self.leader_quota.throttled = self._throttled(
            (t.name, t.configs.get("leader.replication.throttled.replicas")) for t in topics
        )
        self.follower_quota.throttled = self._throttled(
            (t.name, t.configs.get("follower.replication.throttled.replicas")) for t in topics
        )

    def _throttled(self, listed: Iterable[tuple[str, list[str] | None]]) -> dict[str, frozenset[int]]:
        """topic -> its partitions a throttled-replicas list names for this broker."""
        out = {}
        for topic, entries in listed:
            parts = throttled_partitions(entries or [], self.node_id)
            if parts:
                out[topic] = parts
        return out

    def on_metadata(self, event: str, name: str) -> None:
        """A metadata change was applied (the MetadataStore's listener)."""
        # a created or restored topic's throttles are read by the reconcile its event schedules
        if event in ("topic_altered", "broker_configs_changed"):
            self.refresh_throttles()
        if event == "broker_configs_changed":
            return
        if event == "topic_altered":
            self._reconfigure(name)
        elif event == "stream_changed":
            for t in list(self.cache.topics.values()):
                if t.stream == name:
                    self._reconfigure(t.name)
        elif self.cache.clustered:
            self.schedule_reconcile()
        elif event in ("topic_created", "partitions_created"):
            self._open_topic(self.cache.topics[name])
        elif event == "topic_deleted":
            self._drop_topic(name)

    def _reconfigure(self, topic: str) -> None:
        t = self.cache.topics.get(topic)
        if t is None:
            return
        lc = self.cache.log_config(t)
        for p in self.partitions.get(topic, []):
            if p is not None:
                p.log.config = lc

    def _drop_topic(self, name: str) -> None:
        for p in self.partitions.pop(name, []):
            if p is not None:
                self._unfollow(p)
                p.close(UnknownTopicOrPartition(f"topic {name!r} was deleted"))
                self.logs.remove_log(p.topic, p.index)
        self._topic_ids.pop(name, None)

    def _tell(self, topic: str, index: int, leading: bool) -> None:
        for fn in self._listeners.get(topic, ()):
            fn(index, leading)

    # -- cluster: follow the quorum's state -------------------------------------------------
    def quarantine_strays(self) -> None:
        """Move away partition dirs this broker holds no replica of (deleted while it was down)."""
        mine = {
            (t.name, p)
            for t in self.cache.topics.values()
            for p, r in enumerate(t.assignments)
            if self.node_id in r
        }
        for topic, part, path in self.logs.partition_dirs():
            if (topic, part) not in mine:
                self.logs.quarantine(path)

    def schedule_reconcile(self) -> None:
        if not self._reconcile_due:
            self._reconcile_due = True
            asyncio.get_running_loop().call_soon(self.reconcile)

    def reconcile(self) -> None:
        """Open, close, lead and follow partitions as the quorum's state says."""
        self._reconcile_due = False
        quorum = self.cache.quorum
        if quorum is None or not quorum.replayed:
            return
        self.refresh_throttles()
        for name in list(self.partitions):
            t = self.cache.topics.get(name)
            if t is None or self._topic_ids.get(name) != t.topic_id:
                self._drop_topic(name)
        changes = {"leader": 0, "follower": 0}
        for t in list(self.cache.topics.values()):
            self._topic_ids[t.name] = t.topic_id
            for role in self._reconcile_topic(t, self.cache.partition_states(t)):
                changes[role] += 1
        if any(changes.values()):
            held = self.all_partitions()
            leading = sum(1 for p in held if p.is_leader)
            log.info(
                "broker %d now leads %d partition(s) (%d new) and follows %d (%d new)",
                self.node_id,
                leading,
                changes["leader"],
                len(held) - leading,
                changes["follower"],
            )

    def _reconcile_topic(self, t: TopicInfo, states: list[PartitionState]) -> list[str]:
        parts = self.partitions.setdefault(t.name, [])
        roles = []
        for i, replicas in enumerate(t.assignments):
            if i >= len(parts):
                parts.append(None)
            if i >= len(states):
                continue
            p = parts[i]
            if p is not None and self.node_id not in replicas:
                self._remove_replica(p, replicas)
                parts[i] = None
                continue
            if p is None:
                if self.node_id not in replicas:
                    continue
                p = parts[i] = self._new_replica(t, i)
            ps = states[i]
            role = p.apply_state(
                ps.leader,
                ps.leader_epoch,
                ps.isr,
                ps.partition_epoch,
                list(replicas),
                now_ms=self.clock.wall_ms(),
            )
            if role:
                self._unfollow(p)
                if role == "follower" and ps.leader >= 0:
                    self._follow(p, ps.leader)
                self._tell(t.name, i, role == "leader")
                roles.append(role)
                log.debug(
                    "%s-%d: %s at epoch %d (isr %s)",
                    t.name,
                    i,
                    "leader" if role == "leader" else f"follower of broker {ps.leader}",
                    ps.leader_epoch,
                    ps.isr,
                )
        return roles

    def _remove_replica(self, p: Partition, replicas: list[int]) -> None:
        """The quorum moved this replica away: stop serving and fetching it, delete its log."""
        was_leader = p.is_leader
        self._unfollow(p)
        p.close(NotLeader(f"{p.topic}-{p.index}: moved to brokers {replicas}"))
        self.logs.remove_log(p.topic, p.index)
        self.removed_replicas += 1
        if was_leader:
            self._tell(p.topic, p.index, False)
        log.info("%s-%d: replica moved to brokers %s; its log here is deleted", p.topic, p.index, replicas)

    def _new_replica(self, t: TopicInfo, index: int) -> Partition:
        return Partition(
            topic=t.name,
            index=index,
            topic_id=t.id_bytes,
            log=self.logs.open_log(t.name, index, self.cache.log_config(t)),
            replicas=list(t.assignments[index]),
            leader_id=-2,
            leader_epoch=-1,
            node_id=self.node_id,
            alter_isr=self._alter_isr,
        )

    def _follow(self, p: Partition, leader: int) -> None:
        f = self._fetchers.get(leader)
        if f is None:
            endpoint, quota = self.cache.registered_endpoint, self.follower_quota
            f = self._fetchers[leader] = ReplicaFetcher(
                self.fetcher_settings, leader, endpoint, quota, clock=self.clock
            )
        f.add(p)

    def _unfollow(self, p: Partition) -> None:
        for f in self._fetchers.values():
            f.remove(p)

    def _alter_isr(self, p: Partition, isr: list[int]) -> None:
        joining = [r for r in isr if r not in p.isr]
        if self.clock.monotonic() < self._isr_backoff.get((p.topic, p.index), 0.0) or not all(
            self.cache.is_live(r) for r in joining
        ):
            # a fenced broker still fetching (stopping, or paused and resumed) cannot rejoin, and a
            # refused proposal is not repeated at every fetch: the quorum log stays quiet
            p.pending_isr = None
            return
        self._send_isr(p, isr, p.partition_epoch)

    def _send_isr(self, p: Partition, isr: list[int], epoch: int) -> None:
        quorum = self.cache.quorum
        assert quorum is not None
        key = (p.topic, p.index)
        log.info("%s-%d: proposing ISR %s (was %s)", p.topic, p.index, isr, p.isr)
        fut = quorum.propose("alter_isr", p.topic, p.index, self.node_id, p.leader_epoch, epoch, isr)

        def done(f: asyncio.Future[Any]) -> None:
            err = f.exception() if not f.cancelled() else None
            code: int | None = f.result() if err is None and not f.cancelled() else None
            if code == 0:
                return
            self._isr_backoff[key] = self.clock.monotonic() + ISR_RETRY_BACKOFF_S
            if code is not None:
                log.info("%s-%d: ISR change to %s not applied (error %d)", p.topic, p.index, isr, code)
            if p.isr_change_answered(isr, epoch, code):
                # the same change again: applied once at most (the partition epoch moves on)
                log.info(
                    "%s-%d: ISR change to %s may or may not apply (%s); it counts until known, "
                    "proposing it again in %.1f s",
                    p.topic,
                    p.index,
                    isr,
                    err or "cancelled",
                    ISR_RETRY_BACKOFF_S,
                )
                asyncio.get_running_loop().call_later(ISR_RETRY_BACKOFF_S, self._resend_isr, p, isr, epoch)

        fut.add_done_callback(done)

    def _resend_isr(self, p: Partition, isr: list[int], epoch: int) -> None:
        if p.pending_isr == isr and p.partition_epoch == epoch and p.is_leader and not p.deleted:
            self._send_isr(p, isr, epoch)

    # -- housekeeping ------------------------------------------------------------------------
    def periodic(self) -> list[Periodic]:
        """(interval ms, function) pairs the broker runs on its event loop."""
        c = self.config
        tasks: list[Periodic] = [
            (c.int("log.retention.check.interval.ms"), self.enforce_retention),
            (c.int("log.flush.scheduler.interval.ms"), self.flush),
            (60_000, self.checkpoint),
            (c.int("producer.id.expiration.check.interval.ms"), self.expire_producers),
            (c.int("log.cleaner.backoff.ms"), self.clean),
        ]
        if self.cache.clustered:
            tasks.append((max(c.int("replica.lag.time.max.ms") // 2, 50), self.shrink_isrs))
        return tasks

    def clean(self) -> None:
        if self.cleaner.running or self.cleaner.stopping.is_set():
            return
        task = asyncio.get_running_loop().create_task(self.cleaner.run_once(list(self.logs.logs.values())))
        task.add_done_callback(_log_failure("log cleaner"))
        self._cleaning = task

    def enforce_retention(self) -> None:
        if self.cleaner.running:
            return  # the cleaner reads segment files in a thread: retention waits a round
        freed = self.logs.enforce_retention(self.clock.wall_ms())
        if freed:
            self.retention_freed(freed)

    def checkpoint(self) -> None:
        self.logs.checkpoint()
        for lg in self.logs.logs.values():
            if lg.producer_state.dirty:
                lg.producer_state.take_snapshot(lg.log_end_offset)

    def expire_producers(self) -> None:
        now = self.clock.wall_ms()
        for lg in self.logs.logs.values():
            gone = lg.producer_state.remove_expired(now, lg.config.producer_id_expiration_ms)
            if gone:
                log.info(
                    "%s: expired %d producer id(s) unused for %d ms",
                    lg.name,
                    len(gone),
                    lg.config.producer_id_expiration_ms,
                )

    def flush(self) -> None:
        self.logs.flush_due(self.clock.wall_ms())

    def shrink_isrs(self) -> None:
        now = self.clock.wall_ms()
        lag = self.config.int("replica.lag.time.max.ms")
        for p in self.all_partitions():
            if p.replicated:
                p.shrink_isr(now, lag)

    async def stop(self, timeout: float = 1.0) -> None:
        """Stop the replica fetchers and the cleaner, each bounded (the broker closes the logs after)."""
        self.cleaner.stop()
        fetchers, self._fetchers = list(self._fetchers.values()), {}
        await asyncio.gather(*(f.stop(timeout) for f in fetchers))
        if self._cleaning is not None and not self._cleaning.done():
            # the worker thread ends at its next batch; a swap in progress finishes on the loop
            await asyncio.wait({self._cleaning}, timeout=timeout)
