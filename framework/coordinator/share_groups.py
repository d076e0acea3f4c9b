"""Share groups (KIP-932): members of a group read partitions together, each record once.

Two halves, as in Kafka:

* :class:`ShareGroupCoordinator`, on the broker coordinating the group (the leader of its
  ``__consumer_offsets`` partition): membership through ShareGroupHeartbeat. A member joins
  with epoch 0 and the id it made itself, is removed after ``group.share.session.timeout.ms``
  of silence or when it leaves with epoch -1. Every change of membership, of a subscription or
  of a subscribed topic's partition count bumps the group epoch and recomputes the assignment
  at once with the ``simple`` assignor. There is no revocation: several members may read one
  partition, so a member is given its new assignment (and the group epoch) in the next answer.
* :class:`SharePartitionManager`, on every broker: the share partitions of the partitions it
  leads (:mod:`framework.coordinator.share_partition`) and the members' share sessions
  (ShareFetch / ShareAcknowledge session epochs: 0 opens, -1 closes, otherwise the next one).
  A session ends with epoch -1 or when the connection that opened it closes; its records go
  back then (that delivery uncounted). A member the coordinator removes keeps its records
  until their locks expire, as in Kafka.

The share-partition state lives in the leader's memory: after a leader change or a restart the
new leader starts the partition again at its ``share.auto.offset.reset`` position, so records
acknowledged but not yet past the start offset may be delivered again (at least once).
Not thread-safe: used from the broker's event loop only.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from framework.coordinator.groups import Scheduler, TimerHandle
from framework.coordinator.share_partition import SharePartition, SharePartitionConfig
from framework.protocol.error_codes import ErrorCode

log = logging.getLogger("sftraffic.groups")

E = ErrorCode

#: topic name → partition indexes
Partitions = dict[str, set[int]]
#: (group id, topic, partition)
ShareKey = tuple[str, str, int]

LEAVE_EPOCH = -1
FINAL_SESSION_EPOCH = -1


class ShareGroupState(enum.Enum):
    EMPTY = "Empty"
    STABLE = "Stable"


@dataclass(frozen=True, slots=True)
class ShareGroupConfig:
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    max_size: int = 200


@dataclass(eq=False)
class ShareMember:
    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topics: list[str] = field(default_factory=list)
    member_epoch: int = 0
    assigned: Partitions = field(default_factory=dict)
    session_timer: TimerHandle | None = None


@dataclass
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    target: dict[str, Partitions] = field(default_factory=dict)
    topic_partitions: dict[str, int] = field(default_factory=dict)

    @property
    def state(self) -> ShareGroupState:
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    def subscribed(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed_topics}


@dataclass(slots=True)
class ShareHeartbeatResult:
    error_code: int = E.NONE
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Partitions | None = None  # None: unchanged, not sent


def assign_simple(members: dict[str, ShareMember], counts: dict[str, int]) -> dict[str, Partitions]:
    """Kafka's ``simple`` assignor: per topic, its partitions spread over the members subscribed
    to it; with more members than partitions each member gets one and partitions are shared."""
    out: dict[str, Partitions] = {mid: {} for mid in members}
    for topic in sorted(counts):
        eligible = sorted(mid for mid, m in members.items() if topic in m.subscribed_topics)
        n = counts[topic]
        if not eligible or n <= 0:
            continue
        if len(eligible) <= n:
            for p in range(n):
                out[eligible[p % len(eligible)]].setdefault(topic, set()).add(p)
        else:
            for i, mid in enumerate(eligible):
                out[mid].setdefault(topic, set()).add(i % n)
    return out


class ShareGroupCoordinator:
    """Membership of share groups; ``partition_count(topic)`` is 0 for a missing topic,
    ``other_group_active(group_id)`` tells whether a classic or consumer group holds the id."""

    def __init__(
        self,
        scheduler: Scheduler,
        config: ShareGroupConfig,
        partition_count: Callable[[str], int],
        other_group_active: Callable[[str], bool],
    ) -> None:
        self.sched = scheduler
        self.config = config
        self.partition_count = partition_count
        self.other_group_active = other_group_active
        self.groups: dict[str, ShareGroup] = {}

    def heartbeat(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        rack_id: str | None,
        subscribed_topic_names: list[str] | None,
        client_id: str = "",
        client_host: str = "",
    ) -> ShareHeartbeatResult:
        problem = self._refusal(group_id, member_id, member_epoch, rack_id, subscribed_topic_names)
        if problem is None:
            g = self.groups.get(group_id)
            m = g.members.get(member_id) if g is not None else None
            if member_epoch == LEAVE_EPOCH:
                if g is not None and m is not None:
                    log.info("share group %s: member %s left the group", group_id, member_id)
                    self._remove(g, m, "left the group")
                    return ShareHeartbeatResult(member_id=member_id, member_epoch=LEAVE_EPOCH)
                problem = E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}."
            elif member_epoch == 0 and m is None:
                if g is not None and len(g.members) >= self.config.max_size:
                    problem = (
                        E.GROUP_MAX_SIZE_REACHED,
                        "The share group has reached its maximum capacity of "
                        f"{self.config.max_size} members.",
                    )
                else:
                    g = self.groups.setdefault(group_id, ShareGroup(group_id))
                    m = g.members[member_id] = ShareMember(member_id)
                    log.info("share group %s: member %s joined", group_id, member_id)
            elif g is None or m is None:
                problem = E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}."
            elif member_epoch not in (0, m.member_epoch):
                which = "greater" if member_epoch > m.member_epoch else "smaller"
                problem = (
                    E.FENCED_MEMBER_EPOCH,
                    f"The share group member has a {which} member epoch ({member_epoch}) than the one "
                    f"known by the group coordinator ({m.member_epoch}). The member must abandon all "
                    "its partitions and rejoin.",
                )
            if problem is None:
                assert g is not None and m is not None
                return self._beat(g, m, member_epoch, rack_id, subscribed_topic_names, client_id, client_host)
        log.debug("share group %s: heartbeat of %r refused: %s", group_id, member_id, problem[1])
        return ShareHeartbeatResult(error_code=problem[0], error_message=problem[1])

    def _refusal(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        rack_id: str | None,
        subscribed_topic_names: list[str] | None,
    ) -> tuple[int, str] | None:
        if not group_id:
            return E.INVALID_REQUEST, "GroupId can't be empty."
        if not member_id:
            return E.INVALID_REQUEST, "MemberId can't be empty."
        if rack_id is not None and not rack_id:
            return E.INVALID_REQUEST, "RackId can't be empty."
        if member_epoch < LEAVE_EPOCH:
            return (
                E.INVALID_REQUEST,
                f"MemberEpoch is {member_epoch}, but must be greater than or equal to -1.",
            )
        if member_epoch == 0 and not subscribed_topic_names:
            return E.INVALID_REQUEST, "SubscribedTopicNames must be set in first request."
        if self.other_group_active(group_id):
            return E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group."
        return None

    def _beat(
        self,
        g: ShareGroup,
        m: ShareMember,
        member_epoch: int,
        rack_id: str | None,
        subscribed_topic_names: list[str] | None,
        client_id: str,
        client_host: str,
    ) -> ShareHeartbeatResult:
        changed = member_epoch == 0 and m.member_epoch == 0
        if rack_id is not None:
            m.rack_id = rack_id
        m.client_id, m.client_host = client_id or m.client_id, client_host or m.client_host
        if subscribed_topic_names is not None:
            topics = sorted(set(subscribed_topic_names))
            if topics != m.subscribed_topics:
                m.subscribed_topics = topics
                changed = True
        counts = {t: self.partition_count(t) for t in sorted(g.subscribed())}
        if changed or counts != g.topic_partitions:
            self._bump(g, counts, f"member {m.member_id} changed" if changed else "topic metadata changed")
        self._arm_session(g, m)
        before = (m.member_epoch, m.assigned)
        m.member_epoch = g.group_epoch
        m.assigned = g.target.get(m.member_id, {})
        send = member_epoch == 0 or before != (m.member_epoch, m.assigned)
        return ShareHeartbeatResult(
            member_id=m.member_id,
            member_epoch=m.member_epoch,
            heartbeat_interval_ms=self.config.heartbeat_interval_ms,
            assignment={t: set(ps) for t, ps in m.assigned.items()} if send else None,
        )

    def _bump(self, g: ShareGroup, counts: dict[str, int] | None, reason: str) -> None:
        if counts is None:
            counts = {t: self.partition_count(t) for t in sorted(g.subscribed())}
        g.topic_partitions = counts
        g.group_epoch += 1
        g.target = assign_simple(g.members, counts)
        log.info("share group %s: epoch %d (%s)", g.group_id, g.group_epoch, reason)

    def _arm_session(self, g: ShareGroup, m: ShareMember) -> None:
        if m.session_timer is not None:
            m.session_timer.cancel()
        m.session_timer = self.sched.call_later(
            self.config.session_timeout_ms / 1000, lambda: self._expire(g.group_id, m)
        )

    def _expire(self, group_id: str, m: ShareMember) -> None:
        g = self.groups.get(group_id)
        if g is not None and g.members.get(m.member_id) is m:
            log.info("share group %s: member %s removed (session timeout)", group_id, m.member_id)
            self._remove(g, m, "session timeout")

    def _remove(self, g: ShareGroup, m: ShareMember, reason: str) -> None:
        if m.session_timer is not None:
            m.session_timer.cancel()
        del g.members[m.member_id]
        g.target.pop(m.member_id, None)
        if g.members:
            self._bump(g, None, f"member {m.member_id} left: {reason}")
        else:  # an empty share group stays (its start offsets are its committed position)
            g.group_epoch += 1
            g.target, g.topic_partitions = {}, {}

    # -- the rest of the broker ------------------------------------------------------------
    def is_share_group(self, group_id: str) -> bool:
        return group_id in self.groups

    def describe(self, group_id: str) -> ShareGroup | None:
        return self.groups.get(group_id)

    def list_groups(self) -> list[ShareGroup]:
        return list(self.groups.values())

    def delete(self, group_id: str) -> ErrorCode:
        g = self.groups.get(group_id)
        if g is None:
            return E.GROUP_ID_NOT_FOUND
        if g.members:
            return E.NON_EMPTY_GROUP
        del self.groups[group_id]
        return E.NONE

    def unload_groups(self, owns: Callable[[str], bool]) -> None:
        """Another broker now coordinates these groups: forget their members (they rejoin)."""
        for gid in [gid for gid in self.groups if owns(gid)]:
            for m in self.groups.pop(gid).members.values():
                if m.session_timer is not None:
                    m.session_timer.cancel()


# -- the partition leader's side -----------------------------------------------------------------
@dataclass(eq=False)
class ShareSession:
    group_id: str
    member_id: str
    epoch: int = 1  # the epoch the next request must carry
    partitions: set[tuple[str, int]] = field(default_factory=set)
    connection: str | None = None


class SharePartitionManager:
    """The share partitions this broker leads and the share sessions of the members reading them."""

    def __init__(self, scheduler: Scheduler, config: SharePartitionConfig, max_sessions: int = 2000) -> None:
        self.sched = scheduler
        self.config = config
        self.max_sessions = max_sessions
        self.partitions: dict[ShareKey, SharePartition] = {}
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        self._waiters: dict[ShareKey, list[asyncio.Future[None]]] = {}
        self._timers: dict[ShareKey, tuple[float, TimerHandle]] = {}
        self._generations: dict[ShareKey, object] = {}

    # -- share sessions ----------------------------------------------------------------------
    def open_session(
        self, group_id: str, member_id: str, epoch: int, connection: str | None = None
    ) -> tuple[ErrorCode, ShareSession | None]:
        """The session a request with ``epoch`` speaks in: 0 opens a new one (replacing an
        old one of the member, whose records go back), -1 is the last request of the session,
        any other must be the next epoch of an open session."""
        key = (group_id, member_id)
        s = self.sessions.get(key)
        if epoch == 0:
            if s is not None:
                self.close_session(group_id, member_id)
            elif len(self.sessions) >= self.max_sessions:
                return E.SHARE_SESSION_LIMIT_REACHED, None
            s = self.sessions[key] = ShareSession(group_id, member_id, connection=connection)
            return E.NONE, s
        if s is None:
            return E.SHARE_SESSION_NOT_FOUND, None
        if epoch == FINAL_SESSION_EPOCH:
            return E.NONE, s
        if epoch != s.epoch:
            return E.INVALID_SHARE_SESSION_EPOCH, None
        s.epoch = s.epoch + 1 if s.epoch < 2**31 - 1 else 1
        return E.NONE, s

    def close_session(self, group_id: str, member_id: str) -> None:
        """The member's session ends: every record it holds here goes back, that delivery
        uncounted (as Kafka)."""
        if self.sessions.pop((group_id, member_id), None) is not None:
            self.release_member(group_id, member_id)

    def connection_closed(self, connection: str) -> None:
        """The connection that opened sessions is gone (the member crashed, say): they end."""
        for s in [s for s in self.sessions.values() if s.connection is connection]:
            self.close_session(s.group_id, s.member_id)

    def release_member(self, group_id: str, member_id: str) -> None:
        for key, sp in list(self.partitions.items()):
            if key[0] == group_id and sp.release_member(member_id):
                self.wake(key)

    # -- share partitions --------------------------------------------------------------------
    def get(self, key: ShareKey, generation: object, start: Callable[[], int]) -> SharePartition:
        """The share partition, made at ``start()`` the first time; ``generation`` (the topic id
        and leader epoch) changing means this broker lost and regained the leadership, or the
        topic was made anew: the old state is dropped."""
        sp = self.partitions.get(key)
        if sp is None or self._generations.get(key) != generation:
            sp = self.partitions[key] = SharePartition(start(), self.config)
            self._generations[key] = generation
        return sp

    def find(self, key: ShareKey) -> SharePartition | None:
        return self.partitions.get(key)

    def forget(self, group_id: str, topic: str | None = None) -> bool:
        """Drop the group's share state (of one topic, or all): True when there was some."""
        keys = [k for k in self.partitions if k[0] == group_id and (topic is None or k[1] == topic)]
        for key in keys:
            del self.partitions[key]
            self._generations.pop(key, None)
            timer = self._timers.pop(key, None)
            if timer is not None:
                timer[1].cancel()
        return bool(keys)

    def schedule_expiry(self, key: ShareKey, due: float | None = None) -> None:
        """Keep one timer per share partition at its earliest lock deadline; ``due``: the
        deadline of records just acquired (else the partition's earliest is looked up)."""
        sp = self.partitions.get(key)
        if due is None:
            due = sp.next_deadline() if sp is not None else None
        current = self._timers.get(key)
        if due is None or (current is not None and current[0] <= due):
            return
        if current is not None:
            current[1].cancel()
        self._timers[key] = (due, self.sched.call_later(due - self.sched.time(), lambda: self._expire(key)))

    def _expire(self, key: ShareKey) -> None:
        self._timers.pop(key, None)
        sp = self.partitions.get(key)
        if sp is None:
            return
        if sp.expire_locks(self.sched.time()):
            self.wake(key)
        self.schedule_expiry(key)

    # -- long polls ----------------------------------------------------------------------------
    def add_waiter(self, key: ShareKey, fut: asyncio.Future[None]) -> None:
        self._waiters.setdefault(key, []).append(fut)

    def wake(self, key: ShareKey) -> None:
        for fut in self._waiters.pop(key, ()):
            if not fut.done():
                fut.set_result(None)
