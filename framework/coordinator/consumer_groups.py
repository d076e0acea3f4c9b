"""Consumer groups of KIP-848's protocol (``group.protocol=consumer``): the broker assigns.

Each member heartbeats (ConsumerGroupHeartbeat) with its subscription and the partitions it
owns; the coordinator answers with the member's epoch and the partitions it should own.

* The **group epoch** is bumped whenever the group's membership, a member's subscription or
  assignor, or the partition count of a subscribed topic changes; the **target assignment** is
  then recomputed at once by the group's server-side assignor (``uniform`` or ``range``), so the
  target assignment epoch always equals the group epoch.
* Each member moves towards its target on its own (Kafka's ``CurrentAssignmentBuilder``):
  partitions it must give up are revoked first (the member keeps its epoch, state
  ``unrevoked_partitions``, until a heartbeat reports them gone); a partition newly targeted
  at it is handed over only once no other member holds it (state ``unreleased_partitions``
  until then); a member holding exactly its target is ``stable`` at the target epoch.
* A member subscribes by topic names, a regular expression (``subscribed_topic_regex``,
  matched against whole topic names, internal topics left out), or both; the expression is
  resolved again on every heartbeat, so a topic created later joins the subscription.
  Python's ``re`` stands in for RE2/J: the patterns consumers use (``^sensors-.*``,
  ``orders-(eu|us)``) mean the same in both.
* A member's epoch is checked on every heartbeat: a larger one, or a smaller one that is not
  the previous epoch with owned partitions within the current assignment (a lost response),
  is FENCED_MEMBER_EPOCH; an unknown member id is UNKNOWN_MEMBER_ID. Epoch -1 leaves.
* A member silent for ``group.consumer.session.timeout.ms`` is removed; one that does not
  revoke within its rebalance timeout is removed too (fenced), so a partition never stays
  blocked.

The groups live in memory only: after a coordinator move (or restart) members are told
UNKNOWN_MEMBER_ID and rejoin with epoch 0. Committed offsets are kept by the
:class:`~framework.coordinator.groups.GroupCoordinator`.

Static membership (``group.instance.id``): a static member leaving with epoch -2 keeps its
partitions until its session times out; one joining with the same instance id under a new
member id meanwhile takes them over with its epoch, without a rebalance. A second live member
with the instance id is UNRELEASED_INSTANCE_ID. Not thread-safe: used
from the broker's event loop only; timers come from a :class:`Scheduler`.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import re
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from framework.coordinator.groups import Scheduler, TimerHandle
from framework.protocol.error_codes import ErrorCode

log = logging.getLogger("sftraffic.groups")

E = ErrorCode

#: topic name → partition indexes
Partitions = dict[str, set[int]]

LEAVE_EPOCH = -1
LEAVE_STATIC_EPOCH = -2


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"


class MemberState(enum.Enum):
    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


@dataclass(frozen=True, slots=True)
class ConsumerGroupConfig:
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    max_size: int = 2**31 - 1
    assignors: tuple[str, ...] = ("uniform", "range")


@dataclass(eq=False)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 300_000
    subscribed_topics: list[str] = field(default_factory=list)  # names and regex matches
    topic_names: list[str] = field(default_factory=list)  # as the member sent them
    topic_regex: str | None = None
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Partitions = field(default_factory=dict)
    pending_revocation: Partitions = field(default_factory=dict)
    session_timer: TimerHandle | None = None
    revocation_timer: TimerHandle | None = None
    left_static: bool = False  # a static member that left with epoch -2, not yet timed out


@dataclass
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor: str = "uniform"
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target: dict[str, Partitions] = field(default_factory=dict)  # member id → target
    topic_partitions: dict[str, int] = field(default_factory=dict)  # subscribed topic → count

    @property
    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.assignment_epoch != self.group_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(
            m.state is not MemberState.STABLE or m.member_epoch != self.assignment_epoch
            for m in self.members.values()
        ):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def subscribed(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed_topics}

    def owner(self, topic: str, partition: int) -> ConsumerMember | None:
        """The member holding the partition (assigned or not yet revoked), if any."""
        for m in self.members.values():
            if partition in m.assigned.get(topic, ()) or partition in m.pending_revocation.get(topic, ()):
                return m
        return None


@dataclass(slots=True)
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: list[str] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Partitions | None = None  # None: unchanged since the last heartbeat
    client_id: str = ""
    client_host: str = ""
    generate_member_id: bool = False  # v0: the coordinator names new members


@dataclass(slots=True)
class HeartbeatResult:
    error_code: int = E.NONE
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Partitions | None = None  # None: unchanged, not sent


class HeartbeatError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


# -- assignors -------------------------------------------------------------------------------
def _eligible(members: dict[str, ConsumerMember], topic: str) -> list[str]:
    return sorted(mid for mid, m in members.items() if topic in m.subscribed_topics)


def assign_range(
    members: dict[str, ConsumerMember], counts: dict[str, int], previous: dict[str, Partitions]
) -> dict[str, Partitions]:
    """Per topic, contiguous ranges over the subscribed members sorted by id (the first
    ``count % members`` get one more)."""
    out: dict[str, Partitions] = {mid: {} for mid in members}
    for topic in sorted(counts):
        eligible = _eligible(members, topic)
        if not eligible:
            continue
        n, k = counts[topic], len(eligible)
        start = 0
        for i, mid in enumerate(eligible):
            size = n // k + (1 if i < n % k else 0)
            if size:
                out[mid][topic] = set(range(start, start + size))
            start += size
    return out


def assign_uniform(
    members: dict[str, ConsumerMember], counts: dict[str, int], previous: dict[str, Partitions]
) -> dict[str, Partitions]:
    """Every subscribed partition to one subscribed member, counts as even as the subscriptions
    allow, keeping partitions where they were targeted before (sticky)."""
    out: dict[str, Partitions] = {mid: {} for mid in members}
    load = dict.fromkeys(members, 0)
    owner: dict[tuple[str, int], str] = {}

    def give(mid: str, tp: tuple[str, int]) -> None:
        out[mid].setdefault(tp[0], set()).add(tp[1])
        load[mid] += 1
        owner[tp] = mid

    def take(mid: str, tp: tuple[str, int]) -> None:
        out[mid][tp[0]].discard(tp[1])
        if not out[mid][tp[0]]:
            del out[mid][tp[0]]
        load[mid] -= 1

    for mid in sorted(previous):
        if mid not in members:
            continue
        for topic, parts in sorted(previous[mid].items()):
            if topic not in members[mid].subscribed_topics or topic not in counts:
                continue
            for p in sorted(parts):
                if p < counts[topic] and (topic, p) not in owner:
                    give(mid, (topic, p))
    for topic in sorted(counts):
        eligible = _eligible(members, topic)
        if not eligible:
            continue
        for p in range(counts[topic]):
            if (topic, p) not in owner:
                give(min(eligible, key=lambda m: (load[m], m)), (topic, p))
    # balance: move a partition from a member to an eligible one with at least two fewer
    moved = True
    while moved:
        moved = False
        for tp, mid in sorted(owner.items()):
            eligible = _eligible(members, tp[0])
            least = min(eligible, key=lambda m: (load[m], m))
            if load[least] < load[mid] - 1:
                take(mid, tp)
                give(least, tp)
                moved = True
    return out


ASSIGNORS: dict[
    str, Callable[[dict[str, ConsumerMember], dict[str, int], dict[str, Partitions]], dict[str, Partitions]]
] = {"uniform": assign_uniform, "range": assign_range}


def _copy(p: Partitions) -> Partitions:
    return {t: set(ps) for t, ps in p.items() if ps}


def _minus(a: Partitions, b: Partitions) -> Partitions:
    return {t: ps - b.get(t, set()) for t, ps in a.items() if ps - b.get(t, set())}


def _and(a: Partitions, b: Partitions) -> Partitions:
    return {t: ps & b.get(t, set()) for t, ps in a.items() if ps & b.get(t, set())}


def _overlaps(a: Partitions, b: Partitions) -> bool:
    return any(ps & b.get(t, set()) for t, ps in a.items())


def _subset(a: Partitions, b: Partitions) -> bool:
    return all(ps <= b.get(t, set()) for t, ps in a.items())


class ConsumerGroupCoordinator:
    """KIP-848 consumer groups; ``partition_count(topic)`` is 0 for a topic that does not
    exist; ``classic_group_active(group_id)`` tells whether a classic group of that id has
    members (then the id is refused here, GROUP_ID_NOT_FOUND, as Kafka); ``topic_names()``
    lists the topics a subscription's regular expression may match."""

    def __init__(
        self,
        scheduler: Scheduler,
        config: ConsumerGroupConfig,
        partition_count: Callable[[str], int],
        classic_group_active: Callable[[str], bool],
        topic_names: Callable[[], Iterable[str]] = list,
    ) -> None:
        self.sched = scheduler
        self.topic_names = topic_names
        self.config = config
        self.partition_count = partition_count
        self.classic_group_active = classic_group_active
        self.groups: dict[str, ConsumerGroup] = {}

    # -- the heartbeat ---------------------------------------------------------------------
    def heartbeat(self, req: HeartbeatRequest) -> HeartbeatResult:
        try:
            self._validate(req)
            return self._heartbeat(req)
        except HeartbeatError as e:
            log.debug(
                "consumer group %s: heartbeat of %r refused: %s", req.group_id, req.member_id, e.message
            )
            return HeartbeatResult(error_code=e.code, error_message=e.message)

    def _validate(self, req: HeartbeatRequest) -> None:
        def invalid(message: str) -> HeartbeatError:
            return HeartbeatError(E.INVALID_REQUEST, message)

        if not req.group_id:
            raise invalid("GroupId can't be empty.")
        if req.instance_id is not None and not req.instance_id:
            raise invalid("InstanceId can't be empty.")
        if req.rack_id is not None and not req.rack_id:
            raise invalid("RackId can't be empty.")
        if not req.generate_member_id and not req.member_id:
            raise invalid("MemberId can't be empty.")
        if req.member_epoch > 0 or req.member_epoch == LEAVE_EPOCH:
            if not req.member_id:
                raise invalid("MemberId can't be empty.")
        elif req.member_epoch == 0:
            if req.rebalance_timeout_ms == -1:
                raise invalid("RebalanceTimeoutMs must be provided in first request.")
            if req.owned:
                raise invalid("TopicPartitions must be empty when (re-)joining.")
            if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
                raise invalid("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
        elif req.member_epoch == LEAVE_STATIC_EPOCH:
            if not req.instance_id:
                raise invalid("InstanceId can't be null.")
        else:
            raise invalid(f"MemberEpoch {req.member_epoch} is invalid.")
        if req.subscribed_topic_regex:  # librdkafka sends "" for none
            try:
                re.compile(req.subscribed_topic_regex)
            except re.error as exc:
                raise HeartbeatError(
                    E.INVALID_REGULAR_EXPRESSION,
                    f"SubscribedTopicRegex `{req.subscribed_topic_regex}` is not a valid regular "
                    f"expression: {exc}.",
                ) from exc
        if req.server_assignor is not None and req.server_assignor not in self.config.assignors:
            raise HeartbeatError(
                E.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {req.server_assignor} is not supported."
            )

    def _heartbeat(self, req: HeartbeatRequest) -> HeartbeatResult:
        if self.classic_group_active(req.group_id):
            raise HeartbeatError(E.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a consumer group.")
        g = self.groups.get(req.group_id)
        if req.member_epoch in (LEAVE_EPOCH, LEAVE_STATIC_EPOCH):
            return self._leave(g, req)
        joined = req.member_epoch == 0
        if joined:
            g, m, joined = self._join(g, req)
        else:
            found = g.members.get(req.member_id) if g is not None else None
            if g is None or found is None:
                raise HeartbeatError(
                    E.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group {req.group_id}."
                )
            m = found
            self._check_epoch(m, req)
        assert g is not None
        before = (m.member_epoch, _copy(m.assigned))
        changed = self._update_member(m, req)
        changed = self._resolve(g) or changed or joined
        counts = {t: self.partition_count(t) for t in sorted(g.subscribed())}
        if changed or counts != g.topic_partitions:
            self._bump(g, counts, f"member {m.member_id} changed" if changed else "topic metadata changed")
        self._arm_session(g, m)
        self._reconcile(g, m, req.owned)
        full = req.member_epoch == 0 or (
            req.rebalance_timeout_ms != -1
            and req.subscribed_topic_names is not None
            and req.owned is not None
        )
        send = full or before != (m.member_epoch, m.assigned)
        return HeartbeatResult(
            member_id=m.member_id,
            member_epoch=m.member_epoch,
            heartbeat_interval_ms=self.config.heartbeat_interval_ms,
            assignment=_copy(m.assigned) if send else None,
        )

    def _join(
        self, g: ConsumerGroup | None, req: HeartbeatRequest
    ) -> tuple[ConsumerGroup, ConsumerMember, bool]:
        """(group, member, whether the membership changed) for a heartbeat with epoch 0."""
        m = g.members.get(req.member_id) if g is not None and req.member_id else None
        if g is not None and m is not None:  # rejoining (after a fence, say): it holds nothing
            self._cancel_revocation(m)
            m.member_epoch, m.previous_member_epoch, m.left_static = 0, -1, False
            m.state, m.assigned, m.pending_revocation = MemberState.STABLE, {}, {}
            return g, m, True
        if g is not None and req.instance_id:
            old = next((o for o in g.members.values() if o.instance_id == req.instance_id), None)
            if old is not None:
                if not old.left_static:
                    raise HeartbeatError(
                        E.UNRELEASED_INSTANCE_ID,
                        f"Static member {old.member_id} with instance id {req.instance_id} is not released.",
                    )
                return g, self._replace_static(g, old, req.member_id or _new_member_id()), False
        if g is not None and len(g.members) >= self.config.max_size:
            raise HeartbeatError(
                E.GROUP_MAX_SIZE_REACHED,
                f"The consumer group has reached its maximum capacity of {self.config.max_size} members.",
            )
        if g is None:
            g = self.groups[req.group_id] = ConsumerGroup(req.group_id, assignor=self.config.assignors[0])
        m = ConsumerMember(req.member_id or _new_member_id())
        g.members[m.member_id] = m
        log.info("consumer group %s: member %s joined", g.group_id, m.member_id)
        return g, m, True

    def _replace_static(self, g: ConsumerGroup, old: ConsumerMember, member_id: str) -> ConsumerMember:
        """A static member came back under a new member id within its session timeout: it
        takes over the old member's epoch and partitions, and the group does not rebalance."""
        if old.session_timer is not None:
            old.session_timer.cancel()
        self._cancel_revocation(old)
        new = dataclasses.replace(
            old, member_id=member_id, left_static=False, session_timer=None, revocation_timer=None
        )
        del g.members[old.member_id]
        g.members[member_id] = new
        if old.member_id in g.target:
            g.target[member_id] = g.target.pop(old.member_id)
        log.info(
            "consumer group %s: static member %s (instance %s) replaced %s",
            g.group_id,
            member_id,
            new.instance_id,
            old.member_id,
        )
        return new

    @staticmethod
    def _check_epoch(m: ConsumerMember, req: HeartbeatRequest) -> None:
        # a smaller epoch is accepted when it is the previous one and the member owns no more
        # than its current assignment: the response with the new epoch may have been lost
        lost_response = (
            req.member_epoch == m.previous_member_epoch
            and req.owned is not None
            and _subset(req.owned, m.assigned)
        )
        if req.member_epoch > m.member_epoch or (req.member_epoch < m.member_epoch and not lost_response):
            which = "greater" if req.member_epoch > m.member_epoch else "smaller"
            raise HeartbeatError(
                E.FENCED_MEMBER_EPOCH,
                f"The consumer group member has a {which} member epoch ({req.member_epoch}) than the one "
                f"known by the group coordinator ({m.member_epoch}). The member must abandon all its "
                "partitions and rejoin.",
            )

    def _resolve(self, g: ConsumerGroup) -> bool:
        """Each member's subscription: its topic names and the topics its regex matches now
        (whole names, internal topics left out, as Kafka). True when one changed."""
        names: list[str] | None = None
        changed = False
        for m in g.members.values():
            topics = set(m.topic_names)
            if m.topic_regex:
                if names is None:
                    names = sorted(self.topic_names())
                pattern = re.compile(m.topic_regex)
                topics.update(t for t in names if pattern.fullmatch(t))
            if sorted(topics) != m.subscribed_topics:
                m.subscribed_topics = sorted(topics)
                changed = True
        return changed

    @staticmethod
    def _update_member(m: ConsumerMember, req: HeartbeatRequest) -> bool:
        """Apply the request's fields; True when the subscription or assignor changed."""
        changed = False
        if req.instance_id is not None:
            m.instance_id = req.instance_id
        if req.rack_id is not None:
            m.rack_id = req.rack_id
        if req.client_id:
            m.client_id = req.client_id
        if req.client_host:
            m.client_host = req.client_host
        if req.rebalance_timeout_ms != -1:
            m.rebalance_timeout_ms = req.rebalance_timeout_ms
        if req.subscribed_topic_names is not None:
            m.topic_names = sorted(set(req.subscribed_topic_names))
        if req.subscribed_topic_regex is not None:
            m.topic_regex = req.subscribed_topic_regex or None
        if req.server_assignor is not None and req.server_assignor != m.server_assignor:
            m.server_assignor = req.server_assignor
            changed = True
        return changed

    # -- epochs and the target assignment --------------------------------------------------
    def _bump(self, g: ConsumerGroup, counts: dict[str, int] | None, reason: str) -> None:
        """A new group epoch and, at once, its target assignment."""
        if counts is None:
            counts = {t: self.partition_count(t) for t in sorted(g.subscribed())}
        g.topic_partitions = counts
        g.group_epoch += 1
        g.assignor = self._assignor(g)
        existing = {t: n for t, n in counts.items() if n > 0}
        g.target = ASSIGNORS[g.assignor](g.members, existing, g.target)
        g.assignment_epoch = g.group_epoch
        log.info("consumer group %s: epoch %d (%s)", g.group_id, g.group_epoch, reason)

    def _assignor(self, g: ConsumerGroup) -> str:
        """The assignor most members ask for (ties: the configured order), else the first."""
        votes: dict[str, int] = {}
        for m in g.members.values():
            if m.server_assignor:
                votes[m.server_assignor] = votes.get(m.server_assignor, 0) + 1
        if not votes:
            return self.config.assignors[0]
        return max(self.config.assignors, key=lambda a: (votes.get(a, 0), -self.config.assignors.index(a)))

    # -- reconciliation (Kafka's CurrentAssignmentBuilder) ---------------------------------
    def _reconcile(self, g: ConsumerGroup, m: ConsumerMember, owned: Partitions | None) -> None:
        if m.state is MemberState.UNREVOKED_PARTITIONS:
            if owned is None or _overlaps(owned, m.pending_revocation):
                return  # still waiting for the member to give them up
            self._cancel_revocation(m)
            m.pending_revocation = {}
            self._next_assignment(g, m)
        elif m.member_epoch != g.assignment_epoch or m.state is MemberState.UNRELEASED_PARTITIONS:
            self._next_assignment(g, m)

    def _next_assignment(self, g: ConsumerGroup, m: ConsumerMember) -> None:
        target = g.target.get(m.member_id, {})
        keep = _and(m.assigned, target)
        revoke = _minus(m.assigned, target)
        unreleased = False
        for topic, parts in _minus(target, m.assigned).items():
            for p in sorted(parts):
                holder = g.owner(topic, p)
                if holder is None or holder is m:
                    keep.setdefault(topic, set()).add(p)
                else:
                    unreleased = True
        if revoke:
            m.state = MemberState.UNREVOKED_PARTITIONS
            m.assigned, m.pending_revocation = keep, revoke
            self._arm_revocation(g, m)
            return
        if m.member_epoch != g.assignment_epoch:
            m.previous_member_epoch, m.member_epoch = m.member_epoch, g.assignment_epoch
        m.assigned = keep
        m.state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE

    # -- timers ----------------------------------------------------------------------------
    def _arm_session(self, g: ConsumerGroup, m: ConsumerMember) -> None:
        if m.session_timer is not None:
            m.session_timer.cancel()
        m.session_timer = self.sched.call_later(
            self.config.session_timeout_ms / 1000, lambda: self._expire(g.group_id, m, "session timeout")
        )

    def _arm_revocation(self, g: ConsumerGroup, m: ConsumerMember) -> None:
        if m.revocation_timer is None:
            m.revocation_timer = self.sched.call_later(
                m.rebalance_timeout_ms / 1000,
                lambda: self._expire(g.group_id, m, "did not revoke within its rebalance timeout"),
            )

    @staticmethod
    def _cancel_revocation(m: ConsumerMember) -> None:
        if m.revocation_timer is not None:
            m.revocation_timer.cancel()
            m.revocation_timer = None

    def _expire(self, group_id: str, m: ConsumerMember, reason: str) -> None:
        g = self.groups.get(group_id)
        if g is None or g.members.get(m.member_id) is not m:
            return
        log.info("consumer group %s: member %s removed (%s)", group_id, m.member_id, reason)
        self._remove(g, m, reason)

    def _remove(self, g: ConsumerGroup, m: ConsumerMember, reason: str) -> None:
        if m.session_timer is not None:
            m.session_timer.cancel()
        self._cancel_revocation(m)
        del g.members[m.member_id]
        g.target.pop(m.member_id, None)
        if not g.members:
            del self.groups[g.group_id]  # its offsets stay with the group coordinator
            return
        self._bump(g, None, f"member {m.member_id} left: {reason}")

    def _leave(self, g: ConsumerGroup | None, req: HeartbeatRequest) -> HeartbeatResult:
        m = g.members.get(req.member_id) if g is not None else None
        if g is None or m is None:
            raise HeartbeatError(
                E.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group {req.group_id}."
            )
        if req.member_epoch == LEAVE_STATIC_EPOCH and m.instance_id:
            # a static member leaving for a while (a restart): its partitions wait for it until
            # its session times out
            log.info("consumer group %s: static member %s left for now", g.group_id, m.member_id)
            self._cancel_revocation(m)
            m.left_static = True
            return HeartbeatResult(member_id=m.member_id, member_epoch=req.member_epoch)
        log.info("consumer group %s: member %s left the group", g.group_id, m.member_id)
        self._remove(g, m, "left the group")
        return HeartbeatResult(member_id=m.member_id, member_epoch=req.member_epoch)

    # -- the rest of the broker ------------------------------------------------------------
    def is_consumer_group(self, group_id: str) -> bool:
        return group_id in self.groups

    def list_groups(self) -> list[ConsumerGroup]:
        return list(self.groups.values())

    def describe(self, group_id: str) -> ConsumerGroup | None:
        return self.groups.get(group_id)

    def check_commit(self, group_id: str, member_id: str, member_epoch: int) -> int:
        """OffsetCommit or OffsetFetch of a member (KIP-848: the generation is the member
        epoch); as Kafka, a commit without member and epoch is refused while the group has
        members (an empty group is no longer here)."""
        g = self.groups.get(group_id)
        m = g.members.get(member_id) if g is not None else None
        if m is None:
            return E.UNKNOWN_MEMBER_ID
        if member_epoch != m.member_epoch:
            return E.STALE_MEMBER_EPOCH
        return E.NONE

    def unload_groups(self, owns: Callable[[str], bool]) -> None:
        """Another broker now coordinates these groups: forget them (members rejoin there)."""
        for gid in [gid for gid in self.groups if owns(gid)]:
            for m in self.groups.pop(gid).members.values():
                if m.session_timer is not None:
                    m.session_timer.cancel()
                self._cancel_revocation(m)


def _new_member_id() -> str:
    return uuid.uuid4().hex[:22]


def partitions_of(pairs: Iterable[tuple[str, Iterable[int]]]) -> Partitions:
    out: Partitions = {}
    for topic, parts in pairs:
        out.setdefault(topic, set()).update(parts)
    return out
