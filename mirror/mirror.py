"""The mirror process: one flow, source cluster → target cluster (MM2's three connectors in one
loop: MirrorSourceConnector, MirrorCheckpointConnector, MirrorHeartbeatConnector).

The loop, on one thread (confluent-kafka clients are not shared with another thread):

1. **copy**: consume a batch from the source (assigned partitions, no group, read_committed),
   produce each record to ``<alias>.<topic>``, same partition, key, value, headers and
   timestamp, with an idempotent acks=all producer;
2. **commit** every ``commit_interval``: flush the producer (every copy acknowledged, or the
   mirror stops with an error: nothing is committed past a copy that failed), then write the
   progress of each partition (the last source offset copied) to ``mm2-offsets.<alias>.internal``
   and an offset sync to ``mm2-offset-syncs.<alias>.internal``, and flush again. A crash
   between commits copies again what followed the last commit: at-least-once, duplicates
   possible, nothing lost;
3. **checkpoint** every ``checkpoint_interval``: the source's consumer groups (``--groups``)
   with offsets on mirrored topics, translated (:mod:`~mirror.offset_sync`), written to
   ``<alias>.checkpoints.internal``; with ``sync_group_offsets`` also committed to the same
   group on the target while it has no members there, and only forward;
4. **heartbeat** every ``heartbeat_interval`` to the target's ``heartbeats`` topic;
5. **refresh** every ``refresh_interval``: new source topics matching ``--topics``, new
   partitions, changed configs, applied to the remote topics; new partitions assigned.

With ``exactly_once`` (``--exactly-once``) the producer is transactional (transactional id
``mm2-<source-alias>-<target-alias>``): everything written between two commits (copies, progress,
syncs, checkpoints, heartbeats) is one transaction, committed at step 2. A restarted mirror's
``init_transactions`` aborts what its killed predecessor left open (and fences it, should it
still run), so a read_committed reader of the target sees each record once; read_uncommitted
readers still see the aborted copies.

Every internal topic lives on the target cluster; nothing is written to the source.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka import Consumer as _Consumer
from confluent_kafka import Producer as _Producer
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)

from mirror.formats import (
    Checkpoint,
    FormatError,
    Heartbeat,
    OffsetSync,
    decode_progress,
    progress_key,
    progress_value,
)
from mirror.offset_sync import OffsetSyncStore
from mirror.policy import ReplicationPolicy, copied_configs

log = logging.getLogger("sftraffic.mirror")

TIMEOUT = 30.0
# an offset sync at least every this many copies of a partition (MM2's offset.lag.max): a group
# moved to the target reads at most about this many records again per partition
SYNC_EVERY = 100


class MirrorError(Exception):
    """The mirror cannot go on (a copy the target refused, a cluster gone); one line."""


@dataclass
class MirrorSettings:
    source: Mapping[str, Any]  # librdkafka settings, bootstrap.servers included
    target: Mapping[str, Any]
    policy: ReplicationPolicy
    commit_interval: float = 1.0
    checkpoint_interval: float = 5.0
    heartbeat_interval: float = 1.0
    refresh_interval: float = 10.0
    status_interval: float = 0.0  # 0: no status lines
    sync_group_offsets: bool = False
    replication_factor: int = -1  # of topics created on the target (-1: the target's default)
    exactly_once: bool = False  # copies and progress in one transaction per commit


@dataclass
class MirrorStats:
    """What the mirror exposes (status lines, the Prometheus endpoint); read under ``lock``."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    copied: int = 0
    commits: int = 0
    checkpoints: int = 0
    heartbeats: int = 0
    behind: dict[tuple[str, int], int] = field(default_factory=dict)  # source partition → records
    last_commit: float = 0.0

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {
                "copied": self.copied,
                "commits": self.commits,
                "checkpoints": self.checkpoints,
                "heartbeats": self.heartbeats,
                "behind": dict(self.behind),
                "last_commit": self.last_commit,
            }


def _err(exc: BaseException) -> str:
    e = exc.args[0] if exc.args else None
    return e.str() if isinstance(e, KafkaError) else str(exc)


class Mirror:
    """One flow. :meth:`run` until ``stop`` is set (then a last commit); raises MirrorError."""

    def __init__(self, settings: MirrorSettings, say: Callable[[str], None] = print) -> None:
        self.s = settings
        self.p = settings.policy
        self.say = say
        self.stats = MirrorStats()
        self.syncs = OffsetSyncStore()
        quiet: dict[str, Any] = {"logger": log}
        self.src_admin = AdminClient({**settings.source, **quiet})
        self.dst_admin = AdminClient({**settings.target, **quiet})
        self.consumer = _Consumer(
            {
                **settings.source,
                **quiet,
                "group.id": f"mm2-{self.p.source_alias}-unused",  # required; never joins or commits
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
                "fetch.wait.max.ms": 100,
                "queued.max.messages.kbytes": 65536,
            }
        )
        self.transactional_id = f"mm2-{self.p.source_alias}-{self.p.target_alias}"
        txn = {"transactional.id": self.transactional_id} if settings.exactly_once else {}
        self.producer = _Producer(
            {
                **settings.target,
                **quiet,
                **txn,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "batch.size": 1_000_000,
                "queue.buffering.max.messages": 500_000,
                "compression.type": "none",
            }
        )
        self._failed: KafkaError | None = None
        # source partition → last offset consumed (and produced) / last committed
        self._last: dict[tuple[str, int], int] = {}
        self._committed: dict[tuple[str, int], int] = {}
        # remote partition → target offset of the last copy acknowledged since the last commit
        # (upstream, downstream) of the last copy acknowledged since the last commit
        self._downstream: dict[tuple[str, int], tuple[int, int]] = {}
        # remote partition → source offsets of the copies produced, not yet acknowledged (the
        # target acknowledges a partition's copies in order: the k-th report is the k-th copy)
        self._pending: dict[tuple[str, int], deque[int]] = defaultdict(deque)
        self._since_sync: dict[tuple[str, int], int] = {}
        self._syncs_due: list[tuple[str, int, int, int]] = []
        self._partitions: dict[str, int] = {}  # mirrored source topic → partitions assigned
        self._configs: dict[str, dict[str, str]] = {}  # remote topic → configs last applied
        self._checkpointed: dict[tuple[str, str, int], int] = {}  # (group, remote, p) → offset
        self._probe: _Consumer | None = None  # end offsets of remote partitions
        self._warned: set[str] = set()

    # -- the loop ---------------------------------------------------------------------------
    def run(self, stop: threading.Event) -> None:
        try:
            self._run(stop)
        except KafkaException as exc:  # e.g. fenced by another mirror with the same aliases
            raise MirrorError(_err(exc)) from None

    def _run(self, stop: threading.Event) -> None:
        self._ensure_internal_topics()
        if self.s.exactly_once:
            # aborts what a killed predecessor left open (its copies never become visible to
            # read_committed readers) and fences it, should it still be running
            self.producer.init_transactions(TIMEOUT)
            self.producer.begin_transaction()
        self._committed = self._load_progress()
        self._load_syncs()
        self.refresh()
        now = time.monotonic()
        next_commit = now + self.s.commit_interval
        next_checkpoint = now + min(self.s.checkpoint_interval, 1.0)
        next_heartbeat = now
        next_refresh = now + self.s.refresh_interval
        next_status = now + (self.s.status_interval or 1e18)
        last_copied, last_status = 0, now
        try:
            while not stop.is_set():
                self._copy_batch()
                now = time.monotonic()
                if now >= next_commit:
                    self.commit()
                    next_commit = now + self.s.commit_interval
                if now >= next_heartbeat:
                    self.heartbeat()
                    next_heartbeat = now + self.s.heartbeat_interval
                if now >= next_checkpoint:
                    self.checkpoint()
                    next_checkpoint = time.monotonic() + self.s.checkpoint_interval
                if now >= next_refresh:
                    try:
                        self.refresh()
                    except MirrorError as exc:  # a cluster briefly away: the copying goes on
                        log.warning("refreshing topics (again in %.0f s): %s", self.s.refresh_interval, exc)
                    next_refresh = time.monotonic() + self.s.refresh_interval
                if now >= next_status:
                    snap = self.stats.snapshot()
                    rate = (snap["copied"] - last_copied) / max(now - last_status, 1e-6)
                    last_copied, last_status = snap["copied"], now
                    behind = sum(snap["behind"].values())
                    self.say(
                        f"copied {snap['copied']} records ({rate:,.0f}/s), {behind} behind, "
                        f"{snap['commits']} commits, {snap['checkpoints']} checkpoints"
                    )
                    next_status = now + self.s.status_interval
            self.commit(final=True)
        finally:
            self.consumer.close()
            self.close()

    def _copy_batch(self) -> None:
        msgs = self.consumer.consume(num_messages=10_000, timeout=0.05)
        produce = self.producer.produce
        delivered = self._delivered
        prefix = self.p.source_alias + "."
        last = self._last
        pending = self._pending
        n = 0
        for m in msgs:
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    continue
                if err.fatal():
                    raise MirrorError(f"reading the source: {err.str()}")
                if err.str() not in self._warned:  # e.g. a topic deleted at the source
                    self._warned.add(err.str())
                    log.warning("reading the source: %s", err.str())
                continue
            topic, partition = str(m.topic()), int(m.partition() or 0)
            ts_type, ts = m.timestamp()
            kw: dict[str, Any] = {"partition": partition, "on_delivery": delivered}
            if ts_type != 0:
                kw["timestamp"] = ts
            headers = m.headers()
            if headers:
                kw["headers"] = headers
            remote = prefix + topic
            offset = int(m.offset() or 0)
            while True:
                try:
                    produce(remote, m.value(), m.key(), **kw)
                    break
                except BufferError:
                    self.producer.poll(0.05)
            pending[(remote, partition)].append(offset)
            last[(topic, partition)] = offset
            n += 1
        self.producer.poll(0)
        if self._syncs_due:
            due, self._syncs_due = self._syncs_due, []
            for topic, partition, upstream, downstream in due:
                self._sync(topic, partition, upstream, downstream)
        if self._failed is not None:
            raise MirrorError(f"the target refused a copy: {self._failed.str()}")
        if n:
            with self.stats.lock:
                self.stats.copied += n

    def _delivered(self, err: KafkaError | None, msg: Any) -> None:
        key = (msg.topic(), msg.partition())
        upstream = self._pending[key].popleft()
        if err is not None:
            if self._failed is None:
                self._failed = err
            return
        downstream = msg.offset()
        self._downstream[key] = (upstream, downstream)
        n = self._since_sync.get(key, 0) + 1
        if n >= SYNC_EVERY:
            # the copy of record u is at d, and later records land later: a valid sync now,
            # committed or not
            topic = self.p.upstream_topic(key[0]) or key[0]
            self._syncs_due.append((topic, key[1], upstream, downstream))
            n = 0
        self._since_sync[key] = n

    def _internal_delivered(self, err: KafkaError | None, msg: Any) -> None:
        if err is not None and self._failed is None:
            self._failed = err

    def _flush(self, what: str) -> None:
        deadline = time.monotonic() + TIMEOUT * 4
        while len(self.producer) and time.monotonic() < deadline:
            self.producer.flush(1.0)
        if len(self.producer):
            raise MirrorError(f"the target did not acknowledge {len(self.producer)} {what} in time")
        if self._failed is not None:
            raise MirrorError(f"the target refused a copy: {self._failed.str()}")

    # -- commit ------------------------------------------------------------------------------
    def commit(self, final: bool = False) -> None:
        """Progress and offset syncs for what the target has acknowledged (see the module doc).
        With ``exactly_once`` the copies, progress, syncs, checkpoints and heartbeats since the
        last commit are one transaction, committed here (the next one begun unless ``final``)."""
        changed = {tp: o for tp, o in self._last.items() if self._committed.get(tp) != o}
        if not changed and not self.s.exactly_once:
            self._update_behind()
            return
        self._flush("copies")
        alias = self.p.source_alias
        for (topic, partition), last in changed.items():
            self.producer.produce(
                self.p.offsets_topic,
                progress_value(last),
                progress_key(alias, topic, partition),
                on_delivery=self._internal_delivered,
            )
            acked = self._downstream.pop((self.p.remote_topic(topic), partition), None)
            if acked is not None:
                self._sync(topic, partition, acked[0] + 1, acked[1] + 1)
        if self.s.exactly_once:
            self.producer.commit_transaction(TIMEOUT * 2)
            if self._failed is not None:
                raise MirrorError(f"the target refused a copy: {self._failed.str()}")
            if not final:
                self.producer.begin_transaction()
        else:
            self._flush("progress records")
        self._committed.update(changed)
        self._update_behind()
        with self.stats.lock:
            self.stats.commits += 1
            self.stats.last_commit = time.time()

    def _sync(self, topic: str, partition: int, upstream: int, downstream: int) -> None:
        self.syncs.add(topic, partition, upstream, downstream)
        s = OffsetSync(topic, partition, upstream, downstream)
        self.producer.produce(
            self.p.offset_syncs_topic, s.value(), s.key(), on_delivery=self._internal_delivered
        )

    def _update_behind(self) -> None:
        behind: dict[tuple[str, int], int] = {}
        for topic, n in self._partitions.items():
            for p in range(n):
                try:
                    _, high = self.consumer.get_watermark_offsets(TopicPartition(topic, p), cached=True)
                except KafkaException:
                    continue
                if high is None or high < 0:
                    continue
                done = self._last.get((topic, p), self._committed.get((topic, p)))
                behind[(topic, p)] = max(0, high - (done + 1 if done is not None else 0))
        with self.stats.lock:
            self.stats.behind = behind

    # -- heartbeats, checkpoints ------------------------------------------------------------------
    def heartbeat(self) -> None:
        hb = Heartbeat(self.p.source_alias, self.p.target_alias, int(time.time() * 1000))
        self.producer.produce(self.p.heartbeats_topic, hb.value(), hb.key())
        with self.stats.lock:
            self.stats.heartbeats += 1

    def checkpoint(self) -> None:
        """Translate the source groups' committed offsets; write the checkpoints that changed."""
        try:
            listed = self.src_admin.list_consumer_groups(request_timeout=TIMEOUT).result(TIMEOUT)
        except KafkaException as exc:
            log.warning("listing the source's groups: %s", _err(exc))
            return
        groups = [g.group_id for g in listed.valid if self.p.mirrors_group(g.group_id)]
        written = 0
        for group in groups:
            try:
                fut = self.src_admin.list_consumer_group_offsets(
                    [ConsumerGroupTopicPartitions(group)], request_timeout=TIMEOUT
                )
                tps = fut[group].result(TIMEOUT).topic_partitions or []
            except KafkaException as exc:
                log.warning("offsets of group %s: %s", group, _err(exc))
                continue
            translated: dict[tuple[str, int], int] = {}
            for tp in tps:
                if tp.error is not None or tp.offset < 0 or tp.topic not in self._partitions:
                    continue
                down = self.syncs.translate(tp.topic, tp.partition, tp.offset)
                if down is None:
                    continue
                remote = self.p.remote_topic(tp.topic)
                translated[(remote, tp.partition)] = down
                if self._checkpointed.get((group, remote, tp.partition)) != down:
                    cp = Checkpoint(group, remote, tp.partition, tp.offset, down)
                    self.producer.produce(
                        self.p.checkpoints_topic, cp.value(), cp.key(), on_delivery=self._internal_delivered
                    )
                    self._checkpointed[(group, remote, tp.partition)] = down
                    written += 1
            if translated and self.s.sync_group_offsets:
                self._sync_group(group, translated)
        if written:
            self._flush("checkpoints")
            with self.stats.lock:
                self.stats.checkpoints += written

    def _sync_group(self, group: str, translated: dict[tuple[str, int], int]) -> None:
        """Commit translated offsets to the target's group: only while it has no members there,
        and only forward (a consumer already on the target is never moved back)."""
        try:
            desc = self.dst_admin.describe_consumer_groups([group], request_timeout=TIMEOUT)[group]
            d = desc.result(TIMEOUT)
            if d.members:
                return
            fut = self.dst_admin.list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group)], request_timeout=TIMEOUT
            )
            listed = fut[group].result(TIMEOUT).topic_partitions or []
            current = {(tp.topic, tp.partition): tp.offset for tp in listed}
        except KafkaException as exc:
            log.warning("group %s on the target: %s", group, _err(exc))
            return
        ahead = [
            TopicPartition(t, p, o) for (t, p), o in sorted(translated.items()) if o > current.get((t, p), -1)
        ]
        if not ahead:
            return
        try:
            self.dst_admin.alter_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group, ahead)], request_timeout=TIMEOUT
            )[group].result(TIMEOUT)
        except KafkaException as exc:  # e.g. a member joined meanwhile: next time
            log.warning("committing group %s on the target: %s", group, _err(exc))

    # -- topics ------------------------------------------------------------------------------
    def _ensure_internal_topics(self) -> None:
        compact = {"cleanup.policy": "compact"}
        self._create(
            [
                NewTopic(self.p.offsets_topic, 1, self.s.replication_factor, config=compact),
                NewTopic(self.p.offset_syncs_topic, 1, self.s.replication_factor),
                NewTopic(self.p.checkpoints_topic, 1, self.s.replication_factor, config=compact),
                NewTopic(self.p.heartbeats_topic, 1, self.s.replication_factor),
            ]
        )

    def _create(self, topics: list[NewTopic]) -> None:
        if not topics:
            return
        futs = self.dst_admin.create_topics(topics, operation_timeout=TIMEOUT, request_timeout=TIMEOUT)
        for name, fut in futs.items():
            try:
                fut.result(TIMEOUT)
                self.say(f"created {name} on the target")
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise MirrorError(f"creating {name} on the target: {_err(exc)}") from None
        # the new topics' leaders known before the first produce
        deadline = time.monotonic() + TIMEOUT
        names = {t.topic for t in topics}
        while time.monotonic() < deadline:
            md = self.dst_admin.list_topics(timeout=TIMEOUT).topics
            if all(n in md and md[n].error is None and md[n].partitions for n in names):
                return
            time.sleep(0.1)

    def _read_all(self, topic: str) -> list[tuple[bytes, bytes | None]]:
        """Every record of a one-partition topic of the target, from the start to its end now."""
        c = _Consumer(
            {
                **self.s.target,
                "logger": log,
                "group.id": f"mm2-{self.p.source_alias}-loader",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
            }
        )
        try:
            low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT)
            out: list[tuple[bytes, bytes | None]] = []
            if high <= low:
                return out
            c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
            deadline = time.monotonic() + TIMEOUT * 4
            while time.monotonic() < deadline:
                for m in c.consume(10_000, 0.5):
                    err = m.error()
                    if err is None:
                        out.append((m.key() or b"", m.value()))
                        if (m.offset() or 0) >= high - 1:
                            return out
                    elif err.code() == KafkaError._PARTITION_EOF:
                        return out
            raise MirrorError(f"reading {topic} on the target: not at its end after {TIMEOUT * 4:.0f} s")
        except KafkaException as exc:
            raise MirrorError(f"reading {topic} on the target: {_err(exc)}") from None
        finally:
            c.close()

    def _load_progress(self) -> dict[tuple[str, int], int]:
        progress: dict[tuple[str, int], int] = {}
        for key, value in self._read_all(self.p.offsets_topic):
            try:
                alias, topic, partition, last = decode_progress(key, value)
            except FormatError as exc:
                log.warning("%s: %s", self.p.offsets_topic, exc)
                continue
            if alias != self.p.source_alias:
                continue
            if last is None:
                progress.pop((topic, partition), None)
            else:
                progress[(topic, partition)] = last
        if progress:
            self.say(f"resuming {len(progress)} partitions from {self.p.offsets_topic}")
        return progress

    def _load_syncs(self) -> None:
        for key, value in self._read_all(self.p.offset_syncs_topic):
            try:
                s = OffsetSync.decode(key, value or b"")
            except FormatError as exc:
                log.warning("%s: %s", self.p.offset_syncs_topic, exc)
                continue
            self.syncs.add(s.topic, s.partition, s.upstream, s.downstream)

    def refresh(self) -> None:
        """Source topics and partitions → remote topics; new partitions assigned."""
        try:
            md = self.src_admin.list_topics(timeout=TIMEOUT).topics
            dst = self.dst_admin.list_topics(timeout=TIMEOUT).topics
        except KafkaException as exc:
            raise MirrorError(f"listing topics: {_err(exc)}") from None
        selected = {
            name: len(t.partitions)
            for name, t in md.items()
            if t.error is None and t.partitions and self.p.mirrors_topic(name)
        }
        configs = self._source_configs(sorted(selected))
        create, grow = [], []
        for name, n in sorted(selected.items()):
            remote = self.p.remote_topic(name)
            if remote not in dst:
                cfg = configs.get(name, {})
                create.append(NewTopic(remote, n, self.s.replication_factor, config=cfg))
                self._configs[remote] = cfg
            elif len(dst[remote].partitions) < n:
                grow.append(NewPartitions(remote, n))
        self._create(create)
        if grow:
            for name, fut in self.dst_admin.create_partitions(grow, request_timeout=TIMEOUT).items():
                try:
                    fut.result(TIMEOUT)
                    self.say(f"{name}: partitions raised to {selected[self.p.upstream_topic(name) or name]}")
                except KafkaException as exc:
                    raise MirrorError(f"adding partitions to {name} on the target: {_err(exc)}") from None
        self._sync_configs(configs)
        self._assign(selected)

    def _source_configs(self, topics: list[str]) -> dict[str, dict[str, str]]:
        return self._describe(self.src_admin, topics)

    def _describe(self, admin: AdminClient, topics: list[str]) -> dict[str, dict[str, str]]:
        """Allow-listed configs set on each topic (not broker defaults)."""
        if not topics:
            return {}
        res = [ConfigResource(ConfigResource.Type.TOPIC, t) for t in topics]
        out: dict[str, dict[str, str]] = {}
        for r, fut in admin.describe_configs(res, request_timeout=TIMEOUT).items():
            try:
                entries = fut.result(TIMEOUT)
            except KafkaException as exc:
                log.warning("configs of %s: %s", r.name, _err(exc))
                continue
            explicit = {
                k: str(e.value)
                for k, e in entries.items()
                if e.value is not None and not e.is_default and e.source == 1  # DYNAMIC_TOPIC_CONFIG
            }
            out[r.name] = copied_configs(explicit)
        return out

    def _sync_configs(self, configs: dict[str, dict[str, str]]) -> None:
        """Allow-listed configs of the source topics onto the remote ones, incrementally: set where
        they differ, deleted (back to the target's default) where the source no longer sets them;
        other configs of the remote topics (the target's own choices) are left alone."""
        unknown = [self.p.remote_topic(t) for t in configs if self.p.remote_topic(t) not in self._configs]
        if unknown:  # remote topics created before this process started: what they have now
            self._configs.update(self._describe(self.dst_admin, unknown))
        for topic, cfg in configs.items():
            remote = self.p.remote_topic(topic)
            have = self._configs.get(remote, {})
            if have == cfg:
                continue
            entries = [
                ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
                for k, v in sorted(cfg.items())
                if have.get(k) != v
            ] + [
                ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE)
                for k in sorted(set(have) - set(cfg))
            ]
            r = ConfigResource(ConfigResource.Type.TOPIC, remote, incremental_configs=entries)
            try:
                self.dst_admin.incremental_alter_configs([r], request_timeout=TIMEOUT)[r].result(TIMEOUT)
                self._configs[remote] = cfg
                self.say(f"{remote}: configs {cfg or '(defaults)'}")
            except KafkaException as exc:
                log.warning("configs of %s on the target: %s", remote, _err(exc))

    def _assign(self, selected: dict[str, int]) -> None:
        new: list[TopicPartition] = []
        for topic, n in selected.items():
            for p in range(self._partitions.get(topic, 0), n):
                last = self._committed.get((topic, p))
                start = last + 1 if last is not None else None
                remote_end = self._end_offset(self.p.remote_topic(topic), p)
                if start is None:
                    try:
                        tp = TopicPartition(topic, p)
                        low, _ = self.consumer.get_watermark_offsets(tp, timeout=TIMEOUT)
                    except KafkaException as exc:
                        raise MirrorError(f"offsets of {topic}-{p} at the source: {_err(exc)}") from None
                    start = max(low, 0)
                # every record copied from now on lands at remote_end or later
                self._sync(topic, p, start, remote_end)
                new.append(TopicPartition(topic, p, start))
            self._partitions[topic] = max(n, self._partitions.get(topic, 0))
        if new:
            self._flush("offset syncs")
            self.consumer.incremental_assign(new)
            shown = ", ".join(f"{t.topic}-{t.partition}@{t.offset}" for t in new[:8])
            self.say(f"copying {len(new)} partitions: {shown}" + (" ..." if len(new) > 8 else ""))

    def _end_offset(self, topic: str, partition: int) -> int:
        c = self._probe
        if c is None:
            c = self._probe = _Consumer(
                {**self.s.target, "logger": log, "group.id": f"mm2-{self.p.source_alias}-probe"}
            )
        deadline = time.monotonic() + TIMEOUT
        while True:
            try:
                _, high = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=TIMEOUT)
                return int(high)
            except KafkaException as exc:  # a partition just created: its leader not known yet
                if time.monotonic() > deadline:
                    why = _err(exc)
                    raise MirrorError(f"end offset of {topic}-{partition} on the target: {why}") from None
                time.sleep(0.2)

    def close(self) -> None:
        if self._probe is not None:
            self._probe.close()
            self._probe = None
