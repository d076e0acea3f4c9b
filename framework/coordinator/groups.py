"""Consumer groups: Kafka's classic group protocol as a state machine, plus committed offsets.

States (Kafka's ``GroupState``)::

    Empty --join--> PreparingRebalance --all joined / rebalance timeout--> CompletingRebalance
    CompletingRebalance --leader's SyncGroup--> Stable --join, leave, member expiry--> PreparingRebalance
    any --last member gone--> Empty ; Empty without offsets (after retention) --> removed

Rules kept (what clients rely on to recover on their own):

* a new member without an id is told MEMBER_ID_REQUIRED with an id to use (JoinGroup v4+);
* JoinGroup responses wait until every known member rejoined or the rebalance timeout passed;
  dynamic members that did not rejoin are removed (static ones keep their place until their
  session timeout, as in Kafka); ids handed out with MEMBER_ID_REQUIRED stay valid for the
  session timeout; the first rebalance of an empty group waits
  ``group.initial.rebalance.delay.ms`` for more members;
* the leader gets every member's metadata and sends the assignment in SyncGroup; followers'
  SyncGroup waits for it; a member that does not send its SyncGroup within the rebalance
  timeout is removed;
* heartbeats answer REBALANCE_IN_PROGRESS while one is running, ILLEGAL_GENERATION for a stale
  generation, UNKNOWN_MEMBER_ID for a removed member; a member silent for its session timeout
  is removed, so a dead member never blocks the group longer than that (a member waiting for
  its JoinGroup or SyncGroup answer is not: the rebalance timeout governs it);
* static members (``group.instance.id``) keep their assignment across restarts within the
  session timeout: a rejoin with the same instance id replaces the old member id without a
  rebalance when the group's protocol would not change (as in Kafka, the metadata bytes may
  differ: a restarted consumer no longer owns partitions); a stale member id is FENCED;
* offsets: a commit from the current generation (or a "simple" commit, generation -1, for a
  group without members) is stored; unknown members get UNKNOWN_MEMBER_ID, stale generations
  ILLEGAL_GENERATION, then commits during CompletingRebalance REBALANCE_IN_PROGRESS.

Timers come from a :class:`Scheduler` and wall time (member and offset timestamps, offset
expiry) from a :class:`~framework.clock.Clock`, so unit tests drive both without sleeping.
Persistence goes through an :class:`OffsetStore` (the ``__consumer_offsets`` topic).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from framework.clock import Clock
from framework.protocol.codec import DecodeError, decode_data
from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.consumer_protocol_subscription import ConsumerProtocolSubscription

log = logging.getLogger("sftraffic.groups")

E = ErrorCode


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Scheduler(Protocol):
    def time(self) -> float: ...

    def call_later(self, delay: float, fn: Callable[[], None]) -> TimerHandle: ...

    def create_future(self) -> asyncio.Future[Any]: ...


class LoopScheduler:
    """The real scheduler: the running asyncio loop (looked up at each call)."""

    def time(self) -> float:
        return asyncio.get_running_loop().time()

    def call_later(self, delay: float, fn: Callable[[], None]) -> TimerHandle:
        return asyncio.get_running_loop().call_later(max(delay, 0.0), fn)

    def create_future(self) -> asyncio.Future[Any]:
        return asyncio.get_running_loop().create_future()


@dataclass(slots=True)
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str
    commit_ms: int


class OffsetStore(Protocol):
    """Durable record of offsets and group metadata (``__consumer_offsets``)."""

    def write_offsets(
        self, group_id: str, offsets: dict[tuple[str, int], CommittedOffset]
    ) -> Awaitable[None]: ...

    def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]]) -> Awaitable[None]: ...

    def write_group(self, group: Group) -> Awaitable[None]: ...

    def delete_group(self, group_id: str) -> Awaitable[None]: ...

    def write_txn_offsets(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        offsets: dict[tuple[str, int], CommittedOffset],
    ) -> Awaitable[None]: ...


@dataclass(eq=False)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join_future: asyncio.Future[Any] | None = None
    sync_future: asyncio.Future[Any] | None = None
    session_timer: TimerHandle | None = None

    def metadata_for(self, protocol: str) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    @property
    def awaiting_join(self) -> bool:
        return self.join_future is not None and not self.join_future.done()

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_future is not None and not self.sync_future.done()


@dataclass
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    protocol_type: str | None = None
    protocol_name: str | None = None
    generation: int = 0
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id → member id
    pending_members: dict[str, TimerHandle] = field(default_factory=dict)
    offsets: dict[tuple[str, int], CommittedOffset] = field(default_factory=dict)
    state_ms: int = 0
    join_timer: TimerHandle | None = None
    sync_timer: TimerHandle | None = None
    initial_delay_left: float = 0.0
    in_initial_delay: bool = False
    joined_during_delay: bool = False

    def is_(self, *states: GroupState) -> bool:
        return self.state in states

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def all_joined(self) -> bool:
        return (
            bool(self.members)
            and all(m.awaiting_join for m in self.members.values())
            and not self.pending_members
        )

    def select_protocol(self) -> str:
        """The protocol every member supports, chosen by vote (members' own order)."""
        candidates = None
        for m in self.members.values():
            names = {n for n, _ in m.protocols}
            candidates = names if candidates is None else candidates & names
        assert candidates, "join validation guarantees a common protocol"
        votes: dict[str, int] = {}
        for m in self.members.values():
            for n, _ in m.protocols:
                if n in candidates:
                    votes[n] = votes.get(n, 0) + 1
                    break
        return max(sorted(votes), key=lambda n: votes[n])

    def supports(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        if protocol_type != self.protocol_type:
            return False
        names = {n for n, _ in protocols}
        for m in self.members.values():
            names &= {n for n, _ in m.protocols}
        return bool(names)

    def member(self, member_id: str, instance_id: str | None) -> tuple[Member | None, ErrorCode]:
        """The member, or the error Kafka answers: FENCED_INSTANCE_ID when the static instance
        id belongs to another (newer) member id, else UNKNOWN_MEMBER_ID."""
        m = self.members.get(member_id)
        if m is None:
            fenced = instance_id is not None and instance_id in self.static_members
            return None, E.FENCED_INSTANCE_ID if fenced else E.UNKNOWN_MEMBER_ID
        if instance_id and self.static_members.get(instance_id) != member_id:
            return None, E.FENCED_INSTANCE_ID
        return m, E.NONE

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members consume (consumer protocol only); None when unknown."""
        if self.protocol_type != "consumer" or not self.protocol_name:
            return None
        out: set[str] = set()
        for m in self.members.values():
            try:
                sub = decode_data(ConsumerProtocolSubscription, m.metadata_for(self.protocol_name))
            except (DecodeError, ValueError):
                return None
            out.update(sub.topics)
        return out


@dataclass(frozen=True, slots=True)
class JoinRequest:
    """A JoinGroup request as the coordinator uses it (rebalance timeout already defaulted)."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    require_known_member_id: bool
    reason: str | None
    supports_skip_assignment: bool


@dataclass(slots=True)
class JoinResult:
    error: int
    generation: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)  # leader only
    skip_assignment: bool = False


@dataclass(slots=True)
class SyncResult:
    error: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True, slots=True)
class GroupConfig:
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 3000
    max_size: int = 2**31 - 1
    offsets_retention_ms: int = 7 * 86_400_000
    offset_metadata_max_bytes: int = 4096


class GroupCoordinator:
    def __init__(
        self,
        scheduler: Scheduler,
        store: OffsetStore,
        config: GroupConfig,
        clock: Clock,
        partition_exists: Callable[[str, int], bool],
    ) -> None:
        self.sched = scheduler
        self.store = store
        self.config = config
        self.clock = clock
        self.partition_exists = partition_exists
        self.groups: dict[str, Group] = {}
        self._background: set[asyncio.Future[None]] = set()
        # TxnOffsetCommit: producer id -> group -> offsets, stored once the transaction commits
        self.pending_txn: dict[int, dict[str, dict[tuple[str, int], CommittedOffset]]] = {}

    # -- helpers ---------------------------------------------------------------------------
    def _set_state(self, g: Group, state: GroupState) -> None:
        if g.state is not state:
            log.debug("group %s: %s -> %s", g.group_id, g.state.value, state.value)
        g.state = state
        g.state_ms = self.clock.wall_ms()

    def _heartbeat(self, g: Group, m: Member, timeout_ms: int | None = None) -> None:
        """(Re)arm the member's session timer."""
        if m.session_timer is not None:
            m.session_timer.cancel()
        ms = timeout_ms if timeout_ms is not None else m.session_timeout_ms
        m.session_timer = self.sched.call_later(ms / 1000, lambda: self._session_expired(g, m))

    def _session_expired(self, g: Group, m: Member) -> None:
        if g.members.get(m.member_id) is not m:
            return
        if (m.awaiting_join and g.is_(GroupState.PREPARING_REBALANCE)) or (
            m.awaiting_sync and g.is_(GroupState.COMPLETING_REBALANCE)
        ):
            # the rebalance timeout governs members waiting for their JoinGroup / SyncGroup
            # answer; their session restarts when it comes (Kafka's hasSatisfiedHeartbeat)
            return
        log.info(
            "group %s: member %s left (session timeout %d ms)",
            g.group_id,
            m.member_id,
            m.session_timeout_ms,
        )
        self._remove_member_and_update(g, m, "session timeout")

    def _remove_member(self, g: Group, m: Member) -> None:
        g.members.pop(m.member_id, None)
        if m.group_instance_id and g.static_members.get(m.group_instance_id) == m.member_id:
            del g.static_members[m.group_instance_id]
        if m.session_timer is not None:
            m.session_timer.cancel()
        for fut in (m.join_future, m.sync_future):
            if fut is not None and not fut.done():
                fut.set_result(
                    JoinResult(E.UNKNOWN_MEMBER_ID)
                    if fut is m.join_future
                    else SyncResult(E.UNKNOWN_MEMBER_ID)
                )
        if g.leader_id == m.member_id:
            g.leader_id = next(iter(g.members), None)

    def _remove_member_and_update(self, g: Group, m: Member, reason: str) -> None:
        self._remove_member(g, m)
        if g.is_(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(g, reason)
        elif g.is_(GroupState.PREPARING_REBALANCE):
            self._maybe_complete_join(g)

    def _new_member_id(self, client_id: str, instance_id: str | None) -> str:
        return f"{instance_id or client_id or 'member'}-{uuid.uuid4()}"

    # -- rebalance -------------------------------------------------------------------------
    def _prepare_rebalance(self, g: Group, reason: str) -> None:
        if g.is_(GroupState.COMPLETING_REBALANCE):
            # assignments of the aborted generation are void; waiting syncs must rejoin
            for m in g.members.values():
                m.assignment = b""
                if m.awaiting_sync:
                    assert m.sync_future is not None
                    m.sync_future.set_result(SyncResult(E.REBALANCE_IN_PROGRESS))
                    self._heartbeat(g, m)
        if g.sync_timer is not None:
            g.sync_timer.cancel()
            g.sync_timer = None
        was_empty = g.is_(GroupState.EMPTY)
        self._set_state(g, GroupState.PREPARING_REBALANCE)
        log.info("group %s: preparing rebalance (generation %d): %s", g.group_id, g.generation, reason)
        rebalance_s = max(g.rebalance_timeout_ms, 1) / 1000
        if was_empty and self.config.initial_rebalance_delay_ms > 0:
            delay = min(self.config.initial_rebalance_delay_ms / 1000, rebalance_s)
            g.initial_delay_left = max(rebalance_s - delay, 0.0)
            g.in_initial_delay = True
            g.joined_during_delay = False
            self._arm_join_timer(g, delay, initial=True)
        else:
            g.initial_delay_left = 0.0
            g.in_initial_delay = False
            self._arm_join_timer(g, rebalance_s, initial=False)
        # Kafka's DelayedJoin completes at once when every member is already in
        self._maybe_complete_join(g)

    def _arm_join_timer(self, g: Group, delay: float, initial: bool) -> None:
        if g.join_timer is not None:
            g.join_timer.cancel()
        g.join_timer = self.sched.call_later(delay, lambda: self._join_timeout(g, initial))

    def _join_timeout(self, g: Group, initial: bool) -> None:
        g.join_timer = None
        if not g.is_(GroupState.PREPARING_REBALANCE):
            return
        if initial and g.initial_delay_left > 0 and g.joined_during_delay:
            # new members kept arriving: extend the initial delay (Kafka's InitialDelayedJoin)
            g.joined_during_delay = False
            step = min(self.config.initial_rebalance_delay_ms / 1000, g.initial_delay_left)
            g.initial_delay_left -= step
            self._arm_join_timer(g, step, initial=True)
            return
        self._complete_join(g)

    def _maybe_complete_join(self, g: Group) -> None:
        """Complete the join early when every member is in (never during the initial delay)."""
        if not g.is_(GroupState.PREPARING_REBALANCE) or g.in_initial_delay:
            return
        if g.all_joined() or not g.members:
            self._complete_join(g)

    def _complete_join(self, g: Group) -> None:
        if g.join_timer is not None:
            g.join_timer.cancel()
            g.join_timer = None
        g.in_initial_delay = False
        # dynamic members that did not rejoin in time are out; static members keep their place
        # until their session timeout (KIP-345). Pending member ids stay valid (Kafka).
        for m in list(g.members.values()):
            if not m.awaiting_join and not m.group_instance_id:
                log.info("group %s: removing member %s (did not rejoin)", g.group_id, m.member_id)
                self._remove_member(g, m)
        joined = [m for m in g.members.values() if m.awaiting_join]
        if g.members and not joined:
            # only absent static members: wait for them to rejoin or for their sessions to end
            self._arm_join_timer(g, max(g.rebalance_timeout_ms, 1) / 1000, initial=False)
            return
        g.generation += 1
        if not g.members:
            g.protocol_name = None
            g.leader_id = None
            self._set_state(g, GroupState.EMPTY)
            self._persist_group(g)
            log.info("group %s: empty at generation %d", g.group_id, g.generation)
            return
        g.protocol_name = g.select_protocol()
        if g.leader_id not in g.members or not g.members[g.leader_id].awaiting_join:
            g.leader_id = joined[0].member_id  # the leader must be a member that rejoined
        self._set_state(g, GroupState.COMPLETING_REBALANCE)
        log.info(
            "group %s: generation %d with %d member(s), protocol %s, leader %s",
            g.group_id,
            g.generation,
            len(g.members),
            g.protocol_name,
            g.leader_id,
        )
        everyone = [
            (m.member_id, m.group_instance_id, m.metadata_for(g.protocol_name)) for m in g.members.values()
        ]
        for m in g.members.values():
            res = JoinResult(
                error=E.NONE,
                generation=g.generation,
                protocol_type=g.protocol_type,
                protocol_name=g.protocol_name,
                leader=g.leader_id or "",
                member_id=m.member_id,
                members=everyone if m.member_id == g.leader_id else [],
            )
            if m.join_future is not None and not m.join_future.done():
                m.join_future.set_result(res)
            m.join_future = None
            self._heartbeat(g, m)
        # members must send SyncGroup within the rebalance timeout
        generation = g.generation
        g.sync_timer = self.sched.call_later(
            max(g.rebalance_timeout_ms, 1) / 1000, lambda: self._sync_timeout(g, generation)
        )

    def _sync_timeout(self, g: Group, generation: int) -> None:
        g.sync_timer = None
        if g.generation != generation or not g.is_(GroupState.COMPLETING_REBALANCE):
            return
        laggards = [m for m in g.members.values() if not m.awaiting_sync]
        for m in laggards:
            log.info("group %s: removing member %s (no SyncGroup in time)", g.group_id, m.member_id)
            self._remove_member(g, m)
        self._prepare_rebalance(g, "members did not sync in time")

    def _persist_group(self, g: Group) -> None:
        fut = self.store.write_group(g)
        if asyncio.isfuture(fut) or asyncio.iscoroutine(fut):
            task = asyncio.ensure_future(fut)
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    # -- JoinGroup -------------------------------------------------------------------------
    async def join(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        require_known_member_id: bool,
        reason: str | None = None,
        supports_skip_assignment: bool = True,
    ) -> JoinResult:
        if not group_id:
            return JoinResult(E.INVALID_GROUP_ID)
        if not (
            self.config.min_session_timeout_ms <= session_timeout_ms <= self.config.max_session_timeout_ms
        ):
            return JoinResult(E.INVALID_SESSION_TIMEOUT)
        req = JoinRequest(
            member_id,
            group_instance_id,
            client_id,
            client_host,
            session_timeout_ms,
            rebalance_timeout_ms if rebalance_timeout_ms >= 0 else session_timeout_ms,
            protocol_type,
            list(protocols),
            require_known_member_id,
            reason,
            supports_skip_assignment,
        )
        g = self.groups.get(group_id)
        if g is None:
            if member_id:
                return JoinResult(E.UNKNOWN_MEMBER_ID)
            g = self.groups[group_id] = Group(group_id, state_ms=self.clock.wall_ms())
        if g.is_(GroupState.DEAD):
            return JoinResult(E.COORDINATOR_NOT_AVAILABLE)
        if not g.supports(protocol_type, protocols):
            return JoinResult(E.INCONSISTENT_GROUP_PROTOCOL)
        fut: asyncio.Future[Any] = self.sched.create_future()
        if not member_id:
            answer = self._join_unknown(g, req, fut)
        elif member_id in g.pending_members:
            g.pending_members.pop(member_id).cancel()
            self._add_member(g, member_id, req, fut, reason or "new member")
            answer = None
        else:
            answer = self._join_known(g, req, fut)
        return answer or await fut

    def _join_unknown(self, g: Group, req: JoinRequest, fut: asyncio.Future[Any]) -> JoinResult | None:
        """A member without a member id: a new one, or a restarted static member."""
        if req.group_instance_id and req.group_instance_id in g.static_members:
            return self._rejoin_static(g, req.group_instance_id, req, fut)
        if len(g.members) + len(g.pending_members) >= self.config.max_size:
            return JoinResult(E.GROUP_MAX_SIZE_REACHED)
        new_id = self._new_member_id(req.client_id, req.group_instance_id)
        if req.require_known_member_id and not req.group_instance_id:
            # KIP-394: hand out the id; the member joins again with it
            g.pending_members[new_id] = self.sched.call_later(
                req.session_timeout_ms / 1000, lambda: self._pending_expired(g, new_id)
            )
            return JoinResult(E.MEMBER_ID_REQUIRED, member_id=new_id)
        self._add_member(g, new_id, req, fut, req.reason or "new member")
        return None

    def _join_known(self, g: Group, req: JoinRequest, fut: asyncio.Future[Any]) -> JoinResult | None:
        """A member rejoining with its member id; None when the answer comes through ``fut``."""
        member_id, instance_id = req.member_id, req.group_instance_id
        m, code = g.member(member_id, instance_id)
        if m is None:
            return JoinResult(code)
        if g.is_(GroupState.PREPARING_REBALANCE):
            self._update_member(m, req, fut)
            self._maybe_complete_join(g)
            return None
        if not g.is_(GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            return JoinResult(E.UNKNOWN_MEMBER_ID)
        if m.matches(req.protocols) and (g.is_(GroupState.COMPLETING_REBALANCE) or member_id != g.leader_id):
            # nothing changed: answer with the current generation (no rebalance)
            self._heartbeat(g, m)
            return self._current(g, member_id, g.leader_id or "", member_id == g.leader_id)
        self._update_member(m, req, fut)
        self._prepare_rebalance(g, req.reason or f"member {member_id} rejoined with new metadata")
        return None

    @staticmethod
    def _current(g: Group, member_id: str, leader: str, with_members: bool, skip: bool = False) -> JoinResult:
        """The group's current generation as a JoinGroup answer (members for the leader only)."""
        assert g.protocol_name is not None
        return JoinResult(
            error=E.NONE,
            generation=g.generation,
            protocol_type=g.protocol_type,
            protocol_name=g.protocol_name,
            leader=leader,
            member_id=member_id,
            members=[
                (x.member_id, x.group_instance_id, x.metadata_for(g.protocol_name))
                for x in g.members.values()
            ]
            if with_members
            else [],
            skip_assignment=skip,
        )

    def _pending_expired(self, g: Group, member_id: str) -> None:
        if g.pending_members.pop(member_id, None) is not None:
            self._maybe_complete_join(g)
            self._maybe_forget(g)

    def _add_member(
        self, g: Group, member_id: str, req: JoinRequest, fut: asyncio.Future[Any], reason: str
    ) -> None:
        m = Member(
            member_id,
            req.group_instance_id,
            req.client_id,
            req.client_host,
            req.session_timeout_ms,
            req.rebalance_timeout_ms,
            req.protocol_type,
            list(req.protocols),
            join_future=fut,
        )
        if not g.members:
            g.protocol_type = req.protocol_type
        g.members[member_id] = m
        if req.group_instance_id:
            g.static_members[req.group_instance_id] = member_id
        if g.leader_id is None:
            g.leader_id = member_id
        if g.is_(GroupState.PREPARING_REBALANCE) and g.in_initial_delay:
            g.joined_during_delay = True
        # a new member that never rejoins must not hold the group up: session timer
        self._heartbeat(g, m)
        if g.is_(GroupState.PREPARING_REBALANCE):
            self._maybe_complete_join(g)
        else:
            self._prepare_rebalance(g, reason)

    @staticmethod
    def _update_member(m: Member, req: JoinRequest, fut: asyncio.Future[Any]) -> None:
        m.protocols = list(req.protocols)
        m.session_timeout_ms = req.session_timeout_ms
        m.rebalance_timeout_ms = req.rebalance_timeout_ms
        if m.join_future is not None and not m.join_future.done():
            m.join_future.set_result(JoinResult(E.REBALANCE_IN_PROGRESS))
        m.join_future = fut

    def _rejoin_static(
        self, g: Group, instance_id: str, req: JoinRequest, fut: asyncio.Future[Any]
    ) -> JoinResult | None:
        """A known static member restarted: new member id, same assignment, no rebalance if unchanged.

        A restarted leader must not recompute the assignment: JoinGroup v9+ clients are told so
        with ``skip_assignment`` (KIP-814); older clients are given the *old* member id as the
        leader, so they believe they are a follower and just sync (Kafka's trick).
        """
        old_id = g.static_members[instance_id]
        old = g.members.pop(old_id)
        new_id = self._new_member_id(req.client_id, instance_id)
        if old.join_future is not None and not old.join_future.done():
            old.join_future.set_result(JoinResult(E.FENCED_INSTANCE_ID))
        if old.sync_future is not None and not old.sync_future.done():
            old.sync_future.set_result(SyncResult(E.FENCED_INSTANCE_ID))
        if old.session_timer is not None:
            old.session_timer.cancel()
        m = g.members[new_id] = Member(
            new_id,
            instance_id,
            req.client_id,
            req.client_host,
            req.session_timeout_ms,
            req.rebalance_timeout_ms,
            req.protocol_type,
            list(req.protocols),
            assignment=old.assignment,
        )
        g.static_members[instance_id] = new_id
        if g.leader_id == old_id:
            g.leader_id = new_id
        log.info("group %s: static member %s restarted (%s -> %s)", g.group_id, instance_id, old_id, new_id)
        # Kafka compares the protocol the group would select, not the metadata bytes
        if g.is_(GroupState.STABLE) and g.select_protocol() == g.protocol_name:
            self._heartbeat(g, m)
            self._persist_group(g)
            # the leader is told to skip assignment (KIP-814): the group keeps its assignment
            is_leader = new_id == g.leader_id
            if not req.supports_skip_assignment:
                return self._current(g, new_id, old_id if is_leader else g.leader_id or "", False)
            return self._current(g, new_id, g.leader_id or "", is_leader, skip=is_leader)
        m.join_future = fut
        self._heartbeat(g, m)
        if g.is_(GroupState.PREPARING_REBALANCE):
            self._maybe_complete_join(g)
        else:
            self._prepare_rebalance(g, f"static member {instance_id} rejoined")
        return None

    # -- SyncGroup -------------------------------------------------------------------------
    async def sync(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> SyncResult:
        g = self.groups.get(group_id)
        if g is None:
            return SyncResult(E.UNKNOWN_MEMBER_ID)
        m, code = g.member(member_id, group_instance_id)
        if m is None:
            return SyncResult(code)
        if generation != g.generation:
            return SyncResult(E.ILLEGAL_GENERATION)
        if (protocol_type and protocol_type != g.protocol_type) or (
            protocol_name and protocol_name != g.protocol_name
        ):
            return SyncResult(E.INCONSISTENT_GROUP_PROTOCOL)
        if g.is_(GroupState.PREPARING_REBALANCE):
            return SyncResult(E.REBALANCE_IN_PROGRESS)
        if g.is_(GroupState.STABLE):
            self._heartbeat(g, m)
            return SyncResult(E.NONE, g.protocol_type, g.protocol_name, m.assignment)
        if not g.is_(GroupState.COMPLETING_REBALANCE):
            return SyncResult(E.UNKNOWN_MEMBER_ID)
        fut: asyncio.Future[Any] = self.sched.create_future()
        if m.sync_future is not None and not m.sync_future.done():
            m.sync_future.set_result(SyncResult(E.REBALANCE_IN_PROGRESS))
        m.sync_future = fut
        self._heartbeat(g, m)
        if member_id == g.leader_id:
            for x in g.members.values():
                x.assignment = assignments.get(x.member_id, b"")
            if g.sync_timer is not None:
                g.sync_timer.cancel()
                g.sync_timer = None
            self._set_state(g, GroupState.STABLE)
            self._persist_group(g)
            for x in g.members.values():
                if x.sync_future is not None and not x.sync_future.done():
                    x.sync_future.set_result(
                        SyncResult(E.NONE, g.protocol_type, g.protocol_name, x.assignment)
                    )
                    self._heartbeat(g, x)  # its session runs again from its answer
                x.sync_future = None
            log.info("group %s: stable at generation %d", g.group_id, g.generation)
        return await fut  # type: ignore[no-any-return]

    # -- Heartbeat / LeaveGroup ------------------------------------------------------------
    def heartbeat(self, group_id: str, generation: int, member_id: str, group_instance_id: str | None) -> int:
        g = self.groups.get(group_id)
        if g is None:
            return E.UNKNOWN_MEMBER_ID
        m, code = g.member(member_id, group_instance_id)
        if m is None:
            return code
        if g.is_(GroupState.EMPTY, GroupState.DEAD):
            return E.UNKNOWN_MEMBER_ID
        if generation != g.generation:
            return E.ILLEGAL_GENERATION
        self._heartbeat(g, m)
        if g.is_(GroupState.PREPARING_REBALANCE):
            return E.REBALANCE_IN_PROGRESS
        return E.NONE

    def leave(self, group_id: str, members: list[tuple[str, str | None]]) -> tuple[int, list[int]]:
        """Remove members ((member id, instance id) pairs); top-level and per-member errors."""
        g = self.groups.get(group_id)
        if g is None:
            return E.UNKNOWN_MEMBER_ID if len(members) == 1 else 0, [int(E.UNKNOWN_MEMBER_ID)] * len(members)
        errors: list[int] = []
        for member_id, instance_id in members:
            if instance_id:
                mid = g.static_members.get(instance_id)
                if mid is None:
                    errors.append(E.UNKNOWN_MEMBER_ID)
                    continue
                if member_id and mid != member_id:
                    errors.append(E.FENCED_INSTANCE_ID)
                    continue
                member_id = mid
            if member_id in g.pending_members:
                g.pending_members.pop(member_id).cancel()
                errors.append(E.NONE)
                self._maybe_complete_join(g)
                continue
            m = g.members.get(member_id)
            if m is None:
                errors.append(E.UNKNOWN_MEMBER_ID)
                continue
            log.info("group %s: member %s left the group", g.group_id, member_id)
            self._remove_member_and_update(g, m, f"member {member_id} left")
            errors.append(E.NONE)
        top = errors[0] if len(members) == 1 else 0
        return top, errors

    # -- offsets ---------------------------------------------------------------------------
    async def commit(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: dict[tuple[str, int], tuple[int, int, str | None]],
        *,
        no_group: int = E.ILLEGAL_GENERATION,
    ) -> dict[tuple[str, int], int]:
        """``no_group``: the answer for a generation >= 0 when the group does not exist (Kafka:
        GROUP_ID_NOT_FOUND from OffsetCommit v9 on, ILLEGAL_GENERATION before)."""

        def all_(code: int) -> dict[tuple[str, int], int]:
            return dict.fromkeys(offsets, code)

        if not group_id:
            return all_(E.INVALID_GROUP_ID)
        g = self.groups.get(group_id)
        if g is None:
            if generation >= 0:
                return all_(no_group)
            g = self.groups[group_id] = Group(group_id, state_ms=self.clock.wall_ms())
        elif g.is_(GroupState.DEAD):
            return all_(E.COORDINATOR_NOT_AVAILABLE)
        elif generation < 0 and g.is_(GroupState.EMPTY):
            pass  # simple (standalone) consumer or admin commit: no members to check against
        elif generation >= 0 or member_id or group_instance_id:
            # as Kafka's validateOffsetCommit: member, then generation, then the group's state
            m, code = g.member(member_id, group_instance_id)
            if m is None:
                return all_(code)
            if generation != g.generation:
                return all_(E.ILLEGAL_GENERATION)
            if g.is_(GroupState.COMPLETING_REBALANCE):
                return all_(E.REBALANCE_IN_PROGRESS)
            self._heartbeat(g, m)
        else:
            return all_(E.UNKNOWN_MEMBER_ID)  # a group with members takes commits from members only
        now = self.clock.wall_ms()
        result: dict[tuple[str, int], int] = {}
        accepted: dict[tuple[str, int], CommittedOffset] = {}
        for tp, (off, epoch, meta) in offsets.items():
            if meta is not None and len(meta.encode()) > self.config.offset_metadata_max_bytes:
                result[tp] = E.OFFSET_METADATA_TOO_LARGE
            elif not self.partition_exists(*tp):
                result[tp] = E.UNKNOWN_TOPIC_OR_PARTITION
            else:
                accepted[tp] = CommittedOffset(off, epoch, meta or "", now)
                result[tp] = E.NONE
        if accepted:
            await self.store.write_offsets(group_id, accepted)
            g.offsets.update(accepted)
        return result

    async def txn_commit(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        generation: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: dict[tuple[str, int], tuple[int, int, str | None]],
    ) -> dict[tuple[str, int], int]:
        """TxnOffsetCommit: keep the offsets aside until the producer's transaction ends
        (:meth:`complete_txn`); only a committed transaction makes them the group's."""
        if not group_id:
            return dict.fromkeys(offsets, E.INVALID_GROUP_ID)
        g = self.groups.get(group_id)
        if g is not None and (generation >= 0 or member_id or group_instance_id) and g.members:
            # KIP-447: the member and generation of a consumer group are checked as for OffsetCommit
            m, code = g.member(member_id, group_instance_id)
            if m is None:
                return dict.fromkeys(offsets, code)
            if generation != g.generation:
                return dict.fromkeys(offsets, E.ILLEGAL_GENERATION)
        now = self.clock.wall_ms()
        result: dict[tuple[str, int], int] = {}
        accepted: dict[tuple[str, int], CommittedOffset] = {}
        for tp, (off, epoch, meta) in offsets.items():
            if meta is not None and len(meta.encode()) > self.config.offset_metadata_max_bytes:
                result[tp] = E.OFFSET_METADATA_TOO_LARGE
            elif not self.partition_exists(*tp):
                result[tp] = E.UNKNOWN_TOPIC_OR_PARTITION
            else:
                accepted[tp] = CommittedOffset(off, epoch, meta or "", now)
                result[tp] = E.NONE
        if accepted:
            # in the log first (the producer's epoch checked there: a fenced one is refused)
            await self.store.write_txn_offsets(group_id, producer_id, producer_epoch, accepted)
            self.pending_txn.setdefault(producer_id, {}).setdefault(group_id, {}).update(accepted)
        return result

    def pending_txn_partitions(self, group_id: str) -> set[tuple[str, int]]:
        """Partitions of ``group_id`` with offsets of a transaction not yet ended (KIP-447:
        OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT for them)."""
        return {tp for by_group in self.pending_txn.values() for tp in by_group.get(group_id, {})}

    def restore_txn_offset(
        self, producer_id: int, group_id: str, tp: tuple[str, int], value: CommittedOffset
    ) -> None:
        """Loading: an offset of a transaction still open (its marker not yet written)."""
        self.pending_txn.setdefault(producer_id, {}).setdefault(group_id, {})[tp] = value

    async def complete_txn(self, producer_id: int, commit: bool, owns: Callable[[str], bool]) -> None:
        """The transaction marker of ``producer_id`` reached the groups ``owns`` selects (one
        ``__consumer_offsets`` partition): store their pending offsets on commit, drop them on abort."""
        by_group = self.pending_txn.get(producer_id)
        if not by_group:
            return
        for group_id in [gid for gid in by_group if owns(gid)]:
            offsets = by_group.pop(group_id)
            if commit and offsets:
                await self.store.write_offsets(group_id, offsets)
                g = self.groups.setdefault(group_id, Group(group_id, state_ms=self.clock.wall_ms()))
                g.offsets.update(offsets)
        if not by_group:
            self.pending_txn.pop(producer_id, None)

    def fetch_offsets(
        self, group_id: str, partitions: list[tuple[str, int]] | None
    ) -> dict[tuple[str, int], CommittedOffset | None]:
        g = self.groups.get(group_id)
        offsets = g.offsets if g is not None else {}
        if partitions is None:
            return dict(offsets.items())
        return {tp: offsets.get(tp) for tp in partitions}

    async def delete_offsets(
        self, group_id: str, partitions: list[tuple[str, int]]
    ) -> tuple[int, dict[tuple[str, int], int]]:
        g = self.groups.get(group_id)
        if g is None:
            return E.GROUP_ID_NOT_FOUND, {}
        subscribed: set[str] | None = set()
        if not g.is_(GroupState.EMPTY):
            if g.protocol_type != "consumer":
                return E.NON_EMPTY_GROUP, {}
            # unknown subscriptions (unreadable, or no generation yet): every topic counts (Kafka)
            subscribed = g.subscribed_topics()
        res: dict[tuple[str, int], int] = {}
        gone: list[tuple[str, int]] = []
        for tp in partitions:
            if subscribed is None or tp[0] in subscribed:
                res[tp] = E.GROUP_SUBSCRIBED_TO_TOPIC
            else:
                res[tp] = E.NONE
                if tp in g.offsets:
                    gone.append(tp)
        if gone:
            await self.store.delete_offsets(group_id, gone)
            for tp in gone:
                g.offsets.pop(tp, None)
        return 0, res

    # -- admin -----------------------------------------------------------------------------
    def list_groups(self) -> list[Group]:
        return [g for g in self.groups.values() if not g.is_(GroupState.DEAD)]

    async def delete_group(self, group_id: str) -> int:
        g = self.groups.get(group_id)
        if g is None or g.is_(GroupState.DEAD):
            return E.GROUP_ID_NOT_FOUND
        if not g.is_(GroupState.EMPTY):
            return E.NON_EMPTY_GROUP
        if g.offsets:
            await self.store.delete_offsets(group_id, list(g.offsets))
        await self.store.delete_group(group_id)
        self._set_state(g, GroupState.DEAD)
        del self.groups[group_id]
        return E.NONE

    def _maybe_forget(self, g: Group) -> None:
        if g.is_(GroupState.EMPTY) and not g.offsets and not g.members and not g.pending_members:
            self._set_state(g, GroupState.DEAD)
            self.groups.pop(g.group_id, None)

    async def expire_offsets(self) -> int:
        """Drop offsets of empty groups older than offsets.retention.minutes; forget empty groups."""
        now = self.clock.wall_ms()
        keep_ms = self.config.offsets_retention_ms
        removed = 0
        for g in list(self.groups.values()):
            if not g.is_(GroupState.EMPTY):
                continue
            if g.protocol_type:  # group management: offsets expire after the group emptied
                expired = list(g.offsets) if now - g.state_ms > keep_ms else []
            else:  # simple consumers: each offset expires after its commit
                expired = [tp for tp, o in g.offsets.items() if now - o.commit_ms > keep_ms]
            if expired:
                await self.store.delete_offsets(g.group_id, expired)
                for tp in expired:
                    g.offsets.pop(tp, None)
                removed += len(expired)
            if not g.offsets and not g.members:
                await self.store.delete_group(g.group_id)
                self._maybe_forget(g)
        return removed

    def restore_group(
        self,
        group_id: str,
        protocol_type: str | None,
        generation: int,
        protocol: str | None,
        leader: str | None,
        state_ms: int,
        members: list[Member],
    ) -> None:
        """Rebuild a group from the log at start-up; live members resume, dead ones expire."""
        g = self.groups.setdefault(group_id, Group(group_id))
        g.protocol_type = protocol_type
        g.generation = generation
        g.protocol_name = protocol
        g.leader_id = leader
        g.state_ms = state_ms
        g.members = {m.member_id: m for m in members}
        g.static_members = {m.group_instance_id: m.member_id for m in members if m.group_instance_id}
        g.state = GroupState.STABLE if members else GroupState.EMPTY
        for m in members:
            self._heartbeat(g, m)

    def restore_offset(self, group_id: str, tp: tuple[str, int], value: CommittedOffset | None) -> None:
        g = self.groups.setdefault(group_id, Group(group_id))
        if value is None:
            g.offsets.pop(tp, None)
        else:
            g.offsets[tp] = value

    def forget_group(self, group_id: str) -> None:
        self.groups.pop(group_id, None)

    def unload_group(self, group_id: str) -> None:
        """Another broker now coordinates the group: drop it, stop its timers, and answer its
        waiting JoinGroup/SyncGroup requests with NOT_COORDINATOR (members then look it up)."""
        for pid in list(self.pending_txn):  # the next coordinator reads them from the log
            self.pending_txn[pid].pop(group_id, None)
            if not self.pending_txn[pid]:
                del self.pending_txn[pid]
        g = self.groups.pop(group_id, None)
        if g is None:
            return
        for t in (g.join_timer, g.sync_timer):
            if t is not None:
                t.cancel()
        for m in g.members.values():
            if m.session_timer is not None:
                m.session_timer.cancel()
            if m.join_future is not None and not m.join_future.done():
                m.join_future.set_result(JoinResult(E.NOT_COORDINATOR))
            if m.sync_future is not None and not m.sync_future.done():
                m.sync_future.set_result(SyncResult(E.NOT_COORDINATOR))
