"""A partition as the broker serves it: its log, its role, the ISR and the high watermark.

The partition decides what consumers may see (the high watermark) and wakes fetchers that are
long-polling for new data. As leader it tracks each follower's log end offset from the offsets
the follower fetches at (Kafka's replica fetch protocol), and keeps::

    high watermark = min(log end offset of every ISR member)      (never moves back)

so a record below it is on every in-sync replica. acks=all producers wait until their last
offset is below it. A producer's waiter outlives its leadership: when this broker becomes a follower, the
batches appended while it led are answered once the new leader's high watermark (learned by
fetching) covers them, with success if the log still holds them (the new leader had them), else
NOT_LEADER_OR_FOLLOWER (a truncation removed them). Kafka answers NOT_LEADER_OR_FOLLOWER at the
handover, which clients read as "not persisted": librdkafka, bumping its producer epoch meanwhile
(on another partition's OUT_OF_ORDER_SEQUENCE_NUMBER), then re-sends such a batch under new
sequence numbers and the new leader, which has it, writes it twice.

A follower that has not caught up with the leader's log end for
``replica.lag.time.max.ms`` is proposed out of the ISR; one that has reached the high
watermark (and the start of the leader's epoch) is proposed back in. ISR changes go through
the metadata quorum (``alter_isr``) and take effect when applied, at the partition epoch the
leader last saw, as Kafka's AlterPartition.

With one replica the high watermark follows the log end at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from framework.errors import NotEnoughReplicas, NotLeader, OffsetOutOfRange, StoreError
from framework.protocol.control import EndTxnMarker
from framework.protocol.error_codes import ErrorCode
from framework.protocol.records import SchemaCheck
from framework.storage.log import AppendInfo, Log


class FencedLeaderEpoch(StoreError):
    code = ErrorCode.FENCED_LEADER_EPOCH


class UnknownLeaderEpoch(StoreError):
    code = ErrorCode.UNKNOWN_LEADER_EPOCH


class NotEnoughReplicasAfterAppend(StoreError):
    code = ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND


def _outcome_seen(fut: asyncio.Future[None]) -> None:
    if not fut.cancelled():
        fut.exception()


@dataclass(slots=True)
class FollowerState:
    log_end_offset: int = -1
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0
    leader_end_at_last_fetch: int = -1


# (leader id, leader epoch, partition epoch, proposed ISR) -> None; set by the broker
AlterIsr = Callable[["Partition", list[int]], None]


@dataclass(eq=False)
class Partition:
    topic: str
    index: int
    topic_id: bytes
    log: Log
    replicas: list[int]
    leader_id: int
    leader_epoch: int = 0
    isr: list[int] = field(default_factory=list)
    node_id: int = -1  # this broker (-1: single node, where leader_id is this broker)
    partition_epoch: int = 0
    epoch_start_offset: int = 0  # log end when this broker became leader at leader_epoch
    deleted: bool = False
    followers: dict[int, FollowerState] = field(default_factory=dict)
    pending_isr: list[int] | None = None
    leader_high_watermark: int = -1  # a follower: the leader's high watermark at its last fetch
    alter_isr: AlterIsr | None = None
    _waiters: list[asyncio.Future[None]] = field(default_factory=list)
    # acks=all waiters: (end offset, leader epoch the batch was appended in, outlives the
    # leadership, future)
    _acks: list[tuple[int, int, bool, asyncio.Future[None]]] = field(default_factory=list)

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def is_leader(self) -> bool:
        return self.node_id < 0 or self.leader_id == self.node_id

    @property
    def replicated(self) -> bool:
        return len(self.replicas) > 1

    def check_epoch(self, epoch: int) -> None:
        if epoch < 0 or epoch == self.leader_epoch:
            return
        if epoch < self.leader_epoch:
            raise FencedLeaderEpoch(f"{self.topic}-{self.index}: epoch {epoch} < {self.leader_epoch}")
        raise UnknownLeaderEpoch(f"{self.topic}-{self.index}: epoch {epoch} > {self.leader_epoch}")

    def check_leader(self) -> None:
        if not self.is_leader:
            raise NotLeader(
                f"{self.topic}-{self.index}: broker {self.node_id} is not the leader "
                f"(leader is {self.leader_id})"
            )

    # -- leader: appends and the high watermark ---------------------------------------------
    def append_records(
        self,
        payload: memoryview,
        acks: int,
        now_ms: int,
        transactional: bool = False,
        schemas: SchemaCheck | None = None,
    ) -> AppendInfo:
        """Validate, then append a producer's record set as leader (check, then apply).

        ``transactional``: the caller checked with the transaction coordinator that the
        producer's transaction includes this partition (else transactional batches are refused).
        ``schemas``: the schema ids keys and values must carry (schema validation), or None.
        """
        if not self.is_leader:
            self.check_leader()
        lg = self.log
        if acks == -1 and len(self.isr) < lg.config.min_insync_replicas:
            raise NotEnoughReplicas(
                f"{self.topic}-{self.index}: {len(self.isr)} in-sync replica(s), "
                f"min.insync.replicas={lg.config.min_insync_replicas}"
            )
        info = lg.append_as_leader(payload, now_ms, transactional=transactional, schemas=schemas)
        if len(self.isr) <= 1 and self.pending_isr is None:
            self.advance_high_watermark(lg.log_end_offset)
        elif info.records:
            self.wake()  # followers long-polling for new data
        return info

    def append_txn_marker(self, marker: EndTxnMarker, now_ms: int) -> AppendInfo:
        """Write a transaction's COMMIT/ABORT marker as leader (WriteTxnMarkers)."""
        if not self.is_leader:
            self.check_leader()
        lg = self.log
        info, _ = lg.append_txn_marker(marker, now_ms)
        if len(self.isr) <= 1 and self.pending_isr is None:
            self.advance_high_watermark(lg.log_end_offset)
        elif info.records:
            self.wake()  # followers long-polling for new data
        return info

    def wait_replicated(
        self, end_offset: int, *, outlive_leadership: bool = False
    ) -> asyncio.Future[None] | None:
        """None when ``end_offset`` is already below the high watermark, else a future for it.

        The future fails with NOT_LEADER_OR_FOLLOWER when this broker stops leading, unless
        ``outlive_leadership`` (a producer's acks=all request): then it is answered as a
        follower, once the new leader's high watermark covers the batch (success if the log
        still holds it; see the module docstring).
        """
        if self.log.high_watermark >= end_offset:
            return None
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        # its waiter may be gone (connection closed, request timed out): the outcome is then
        # nobody's business, and must not be reported as "exception was never retrieved"
        fut.add_done_callback(_outcome_seen)
        self._acks.append((end_offset, self.log.leader_epoch, outlive_leadership, fut))
        return fut

    def unanswered_acks(self) -> list[asyncio.Future[None]]:
        """The futures of the acks=all waiters not answered yet (each is done once answered)."""
        return [fut for *_, fut in self._acks if not fut.done()]

    def advance_high_watermark(self, offset: int) -> None:
        if offset > self.log.high_watermark:
            self.log.high_watermark = offset
            self.wake()
            if self._acks:
                self._complete_acks(offset)

    def _complete_acks(self, hw: int) -> None:
        keep = []
        below_min = len(self.isr) < self.log.config.min_insync_replicas
        for end, epoch, outlive, fut in self._acks:
            if fut.done():
                continue
            if not self._still_holds(end, epoch):
                # truncated as a follower: it was not committed, the client must retry it
                fut.set_exception(
                    NotLeader(
                        f"{self.topic}-{self.index}: leadership moved to broker {self.leader_id} "
                        "before the batch was replicated, and it was not kept"
                    )
                )
                continue
            if end <= hw:
                if below_min:
                    fut.set_exception(
                        NotEnoughReplicasAfterAppend(
                            f"{self.topic}-{self.index}: written, but only {len(self.isr)} in-sync "
                            f"replica(s) have it (min.insync.replicas={self.log.config.min_insync_replicas})"
                        )
                    )
                else:
                    fut.set_result(None)
            else:
                keep.append((end, epoch, outlive, fut))
        self._acks = keep

    def _still_holds(self, end: int, epoch: int) -> bool:
        """Whether the log still holds the batch ending before ``end`` appended as leader in
        ``epoch``: no truncation took it (that epoch still reaches ``end``)."""
        lg = self.log
        if end > lg.log_end_offset:
            return False
        if self.is_leader and epoch == lg.leader_epoch:
            return True  # appended in this leadership: nothing truncated it since
        found, end_offset = lg.end_offset_for_epoch(epoch)
        return found == epoch and end_offset >= end

    def _fail_acks(self, exc: StoreError) -> None:
        acks, self._acks = self._acks, []
        for *_, fut in acks:
            if not fut.done():
                fut.set_exception(exc)

    def truncated(self) -> None:
        """The log was truncated (a follower diverging from its leader): the acks=all waiters
        whose batches went are answered NOT_LEADER_OR_FOLLOWER now."""
        if self._acks:
            self._complete_acks(self.log.high_watermark)

    def maybe_advance_high_watermark(self) -> None:
        lg = self.log
        hw = lg.log_end_offset
        for r in set(self.isr) | set(self.pending_isr or ()):
            if r == self.node_id:
                continue
            fs = self.followers.get(r)
            hw = min(hw, fs.log_end_offset if fs is not None else -1)
        if hw >= 0:
            self.advance_high_watermark(hw)

    # -- leader: followers ------------------------------------------------------------------
    def follower_fetched(self, replica_id: int, fetch_offset: int, now_ms: int) -> None:
        """A follower fetched at ``fetch_offset``: everything below it is on that follower.

        Check, then apply: an offset outside [log start, log end] (a follower ahead of this
        log has diverged from it) raises OffsetOutOfRange and changes nothing, as Kafka updates
        a follower's fetch state only after a successful read.
        """
        lg = self.log
        if not lg.log_start_offset <= fetch_offset <= lg.log_end_offset:
            raise OffsetOutOfRange(
                f"{self.topic}-{self.index}: replica {replica_id} fetched at {fetch_offset}, "
                f"outside [{lg.log_start_offset}, {lg.log_end_offset}]"
            )
        fs = self.followers.get(replica_id)
        if fs is None:
            if replica_id not in self.replicas:
                return
            fs = self.followers[replica_id] = FollowerState()
        leo = self.log.log_end_offset
        # Kafka's Replica.updateFetchState: caught up if it reached the log end as it is now,
        # or as it was at the previous fetch
        if fetch_offset >= leo:
            fs.last_caught_up_ms = max(fs.last_caught_up_ms, now_ms)
        elif fetch_offset >= fs.leader_end_at_last_fetch >= 0:
            fs.last_caught_up_ms = max(fs.last_caught_up_ms, fs.last_fetch_ms)
        fs.log_end_offset = fetch_offset
        fs.last_fetch_ms = now_ms
        fs.leader_end_at_last_fetch = leo
        if (
            replica_id not in self.isr
            and self.pending_isr is None
            and fetch_offset >= self.log.high_watermark
            and fetch_offset >= self.epoch_start_offset
            and self.alter_isr is not None
        ):
            self._propose_isr([*self.isr, replica_id])
        self.maybe_advance_high_watermark()

    def shrink_isr(self, now_ms: int, max_lag_ms: int) -> None:
        """Propose the followers that have not caught up for ``max_lag_ms`` out of the ISR."""
        if not self.is_leader or self.pending_isr is not None or len(self.isr) <= 1:
            return
        out = [
            r
            for r in self.isr
            if r != self.node_id
            and now_ms - (self.followers.get(r) or FollowerState()).last_caught_up_ms > max_lag_ms
        ]
        if out and self.alter_isr is not None:
            self._propose_isr([r for r in self.isr if r not in out])

    def _propose_isr(self, isr: list[int]) -> None:
        assert self.alter_isr is not None
        self.pending_isr = isr
        self.alter_isr(self, isr)

    def isr_change_answered(self, isr: list[int], partition_epoch: int, code: int | None) -> bool:
        """The quorum's answer to proposing ``isr`` at ``partition_epoch``: 0 applied, an error
        code its apply refused it with, None unknown (the quorum changed leader or timed out:
        the change may still be applied). True when the same change must be proposed again.

        The high watermark counts the proposed ISR (Kafka's maximal ISR) until the outcome is
        known, as Kafka's ``Partition.handleAlterPartitionError``: forgetting an expansion the
        quorum then applies would let this leader acknowledge records the added follower lacks,
        and an election could make that follower the leader (acknowledged records lost). So the
        proposal is dropped only when refused as ineligible (nothing applied, the epoch is
        current); an epoch conflict keeps it until the metadata that won arrives
        (:meth:`apply_state` clears it); an unknown outcome keeps it and asks for a retry.
        """
        if code == 0 or self.pending_isr != isr or self.partition_epoch != partition_epoch:
            return False  # applied (the metadata will follow), or superseded
        if code is None:
            return self.is_leader and not self.deleted
        if code in (ErrorCode.INELIGIBLE_REPLICA, ErrorCode.INVALID_REQUEST):
            self.pending_isr = None
        return False

    # -- role changes (from the metadata quorum) --------------------------------------------
    def apply_state(
        self,
        leader: int,
        leader_epoch: int,
        isr: list[int],
        partition_epoch: int,
        replicas: list[int],
        now_ms: int,
    ) -> str:
        """Take the quorum's view; returns "leader", "follower" when the role or epoch changed, else "".

        ``now_ms`` is the time of an election: this broker's followers in
        the ISR count as caught up then.
        """
        self.replicas = replicas
        changed = leader != self.leader_id or leader_epoch != self.leader_epoch
        if partition_epoch != self.partition_epoch:
            self.pending_isr = None
        self.isr = list(isr)
        self.partition_epoch = partition_epoch
        if not changed:
            if self.is_leader:
                self.maybe_advance_high_watermark()
                if self._acks:
                    self._complete_acks(self.log.high_watermark)
            return ""
        was_leader = self.is_leader
        self.leader_id = leader
        self.leader_epoch = leader_epoch
        if leader == self.node_id:
            # as Kafka: in-sync followers count as caught up at the election, so none is
            # dropped from the ISR before it could fetch once
            self.followers = {
                r: FollowerState(last_caught_up_ms=now_ms if r in isr else 0)
                for r in replicas
                if r != self.node_id
            }
            self.log.become_leader(leader_epoch)
            self.epoch_start_offset = self.log.log_end_offset
            self.pending_isr = None
            self.maybe_advance_high_watermark()
            self.wake()
            return "leader"
        self.followers = {}
        self.pending_isr = None
        self.leader_high_watermark = -1  # a new leader: unknown until the first fetch from it
        # producers' acks=all waiters outlive the leadership (see the module docstring); the
        # others fail now, as in Kafka
        if was_leader and self._acks:
            moved = NotLeader(f"{self.topic}-{self.index}: leadership moved to broker {leader}")
            for *_, outlive, fut in self._acks:
                if not outlive and not fut.done():
                    fut.set_exception(moved)  # the coordinators' writes
            self._complete_acks(self.log.high_watermark)
        self.wake()
        return "follower"

    def close(self, reason: StoreError) -> None:
        self.deleted = True
        self._fail_acks(reason)
        self.wake()

    # -- long-poll waiters -------------------------------------------------------------------
    def wake(self) -> None:
        if self._waiters:
            waiters, self._waiters = self._waiters, []
            for w in waiters:
                if not w.done():
                    w.set_result(None)

    def add_waiter(self, fut: asyncio.Future[None]) -> None:
        if len(self._waiters) > 64:
            self._waiters = [w for w in self._waiters if not w.done()]
        self._waiters.append(fut)
