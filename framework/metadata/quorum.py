"""The cluster's metadata quorum: topics, streams, brokers and partition leadership.

The brokers listed in ``controller.quorum.voters`` are the voters of one Raft group (pysyncobj);
any further broker (its ``node.id`` not among them) is an *observer*: a pysyncobj read-only node
that receives the log and snapshots and applies every entry but never votes or leads, and binds
no Raft port (Kafka's brokers beside its controllers), so a cluster grows past its 3 or 5
voters. Changes are proposed by any broker (an observer's go to the leader like a follower's)
and applied, in log order, on every broker by the ``@replicated`` methods below; the Raft leader
is the *controller*.

Replicated state (rebuilt on start from the latest snapshot, ``<data dir>/__cluster/raft.snapshot``,
then the journal after it, ``raft.journal``; nothing else is persisted for it)::

    cluster_id
    md        the MetadataStore's streams and topics (the same changes a single node applies)
    brokers   node id -> {"host", "port", "rack", "fenced", "listeners", "epoch"}: host and port
              of the inter-broker listener, "listeners" the advertised address of every named
              listener, "epoch" the broker epoch (Kafka's): ``version`` after its registration
    pstates   topic -> [PartitionState(leader, leader_epoch, isr, partition_epoch, adding,
              removing)] per partition; adding/removing are non-empty while it is reassigned

Invariants kept by the apply functions (deterministic: they read only replicated state):

* a leader is chosen from the partition's ISR only, so a write acknowledged with acks=all,
  which is on every ISR member, survives; the one exception is an unclean election
  (``elect_leader`` with unclean, proposed by the controller only for topics with
  ``unclean.leader.election.enable`` when no ISR member is alive), which replaces the ISR;
* ``leader_epoch`` grows by one at every leader change, and when the leader re-registers after
  a restart (its log may have lost unflushed data, so followers must not truncate to it);
  ``partition_epoch`` by one at every change of leader or ISR. One apply changes a partition
  at most once (as one Kafka PartitionChangeRecord), so neither moves by more than one;
* the ISR never becomes empty, holds only distinct replicas of the partition, changes only
  through the partition's current leader at the current ``partition_epoch`` (Kafka's
  AlterPartition check) or when the controller fences a broker, and grows only by unfenced
  brokers.

Reassignment (AlterPartitionReassignments, Kafka's PartitionReassignmentReplicas): a target
replica list makes the partition's replicas ``target + (current - target)``, with
``adding = target - current`` and ``removing = current - target``. The added replicas copy the
log by fetching like any follower and join the ISR through the leader; the apply that puts
the last target replica in the ISR also completes the reassignment (replicas = target, ISR
without the removed ones), and elects the first live in-sync target replica when the leader
was removed; a reassignment whose target is in sync already completes at once. Removing a
replica bumps the leader epoch, as Kafka does. Cancelling (a null target) reverts: the added
replicas leave the replica list and the ISR. All of it is replicated state, so a reassignment
survives a controller failover and goes on under the next controller.

The journal is compacted (Raft log compaction) once it holds ``SNAPSHOT_EVERY`` entries: the
state above is written to the snapshot file (pickled, replaced atomically by pysyncobj) and the
journal keeps only what came after, so a long-lived cluster's journal and restart time stay
bounded. A member too far behind receives the snapshot from the leader and restores it.

The controller fences a broker it has not heard from for ``broker.session.timeout.ms``: it
leaves every ISR it is not the last member of and its partitions get new leaders. A voter is
heard from through its Raft append-entries responses (keyed by its voter address); an observer,
whose read-only Raft connection carries no broker id, through ``broker_heartbeat`` entries it
proposes every ``min(2 s, session / 4)`` (Kafka's BrokerHeartbeat): the apply changes no
replicated state, the controller notes its own clock. A restarted broker registers again before
it leads anything. ``unregister_broker`` (Kafka's UnregisterBroker) removes an observer's
registration once no partition lists it as a replica (shrinking the cluster).
"""

from __future__ import annotations

import asyncio
import logging
import os
import pickle
import time
from collections.abc import Callable
from dataclasses import astuple, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from pysyncobj import (  # type: ignore[import-untyped]
    FAIL_REASON,
    SyncObj,
    SyncObjConf,
    SyncObjException,
    replicated,
)

from framework import config as cfg
from framework.clock import SYSTEM, Clock
from framework.errors import StoreError
from framework.metadata.pysyncobj_adapter import SyncObjInternals
from framework.metadata.store import MetadataStore, new_cluster_id
from framework.protocol.error_codes import ErrorCode

log = logging.getLogger("sftraffic.cluster")

_FAIL_NAMES = {v: k for k, v in vars(FAIL_REASON).items() if isinstance(v, int)}


@dataclass(slots=True)
class PartitionState:
    leader: int
    leader_epoch: int
    isr: list[int]
    partition_epoch: int = 0
    adding: list[int] = field(default_factory=list)  # a reassignment's replicas being added
    removing: list[int] = field(default_factory=list)  # and those it removes once complete

    @property
    def reassigning(self) -> bool:
        return bool(self.adding or self.removing)


@dataclass(frozen=True, slots=True)
class VoterState:
    """One voter as this node sees it (DescribeQuorum): -1 where it does not know."""

    node_id: int
    log_end_offset: int  # the last Raft log index it holds (its match index, on the leader)
    last_fetch_ms: int  # wall clock of its last append-entries response to the leader
    last_caught_up_ms: int  # wall clock when the leader last saw it hold the leader's whole log


@dataclass(frozen=True, slots=True)
class QuorumStatus:
    """The Raft state behind DescribeQuorum: only the leader knows the other voters' progress."""

    leader_id: int  # -1: no leader known
    epoch: int  # the Raft term
    high_watermark: int  # the commit index
    is_leader: bool
    voters: list[VoterState]
    addresses: dict[int, str] = field(default_factory=dict)  # voter -> its Raft HOST:PORT
    # registered brokers that are not voters (they follow the log read-only): as of their last
    # heartbeat on the leader, -1 elsewhere
    observers: list[VoterState] = field(default_factory=list)


def parse_voters(items: list[str]) -> dict[int, str]:
    """``["1@127.0.0.1:19092", ...]`` → {1: "127.0.0.1:19092", ...}, with a clear error."""
    voters: dict[int, str] = {}
    for item in items:
        nid, sep, addr = item.strip().partition("@")
        host, colon, port = addr.rpartition(":")
        if not sep or not nid.strip().isdigit() or not colon or not host or not port.isdigit():
            raise StoreError(
                f"controller.quorum.voters entry {item!r} must look like ID@HOST:PORT, e.g. 1@127.0.0.1:19092"
            )
        if int(nid) in voters:
            raise StoreError(f"controller.quorum.voters lists node {nid} twice")
        voters[int(nid)] = f"{host}:{port}"
    return voters


# The journal holds each change as (method id, args). pysyncobj numbers the @replicated methods
# by their sorted names, so adding one renumbers those after it and a journal written before
# (or a not yet upgraded member's entries) would replay as the wrong calls: the ids are pinned
# here: the first six as pysyncobj numbered them before any was added (the journals of every
# earlier release), then each new method appended, never inserted; none removed or renamed.
REPLICATED_METHODS = (
    "alter_isr",
    "change_metadata",
    "elect_leader",
    "fence_broker",
    "init_cluster",
    "register_broker",
    # partition reassignment
    "alter_reassignment",
    # non-voting brokers (observers): their heartbeats, and shrinking the cluster
    "broker_heartbeat",
    "unregister_broker",
)

SNAPSHOT_EVERY = 1000  # journal entries that trigger a snapshot (log compaction)
SNAPSHOT_MAX_AGE_S = 3600  # and at least this often when anything changed
SNAPSHOT_FORMAT = 1
HEARTBEAT_MAX_S = 2.0  # Kafka's broker.heartbeat.interval.ms default; at most a quarter of the session
STALL_S = 1.0  # a gap between two duty rounds (every 0.2 s) longer than this: the process was paused


class Advertised(Protocol):
    """Where this broker is reached (the metadata cache's): its inter-broker listener's
    address, and each named listener's."""

    endpoint: tuple[str, int]
    endpoints: dict[str, tuple[str, int]]


class QuorumError(StoreError):
    code = ErrorCode.REQUEST_TIMED_OUT


class ClusterState(SyncObj):  # type: ignore[misc]
    def __init__(
        self,
        node_id: int,
        voters: dict[int, str],
        directory: Path,
        md: MetadataStore,
        session_timeout_ms: int,
        on_change: Callable[[], None],
        endpoint: tuple[str, int, str | None],
        listeners: dict[str, tuple[str, int]] | None = None,
        password: str = "",
        stays_fenced: Callable[[], bool] = lambda: False,
        clock: Clock = SYSTEM,
    ) -> None:
        if not voters:
            raise StoreError("a cluster broker needs controller.quorum.voters")
        directory.mkdir(parents=True, exist_ok=True)
        self.node_id = node_id
        self.md = md
        self.on_change = on_change
        # wall time of DescribeQuorum's fetch and catch-up timestamps; durations (heartbeats,
        # sessions) are measured on time.monotonic(), the clock pysyncobj's own timers use
        self.clock = clock
        self.voters = voters
        self.session_timeout = session_timeout_ms / 1000
        # a broker that is not a voter follows the metadata log read-only (an observer, Kafka's
        # broker role): no Raft port, never votes or leads, its proposals go to the leader
        self.is_voter = node_id in voters
        self.addr_to_id = {a: i for i, a in voters.items()}
        self._init_controller_state()
        # the broker is shutting down (its lifecycle says): fenced on purpose, it neither
        # registers again nor sends heartbeats
        self.stays_fenced = stays_fenced
        # what the broker's lifecycle awaits (Kafka's initial catch-up and unfence futures),
        # set by the tick that sees them become true: ``replayed`` and ``registered`` (the
        # latter cleared again while the quorum has this broker fenced)
        self.replayed_event = asyncio.Event()
        self.registered_event = asyncio.Event()
        self.endpoint = endpoint  # (host, port, rack) this broker registers
        self.listeners = dict(listeners or {})  # and its advertised address per listener name
        self._raft = SyncObjInternals(self)  # pysyncobj's private state: only through it
        # replicated state (written to snapshots by _write_snapshot, not by pysyncobj's pickling
        # of attributes: it is set before SyncObj.__init__ for that reason)
        self.cluster_id = ""
        self.brokers: dict[int, dict[str, Any]] = {}
        self.pstates: dict[str, list[PartitionState]] = {}
        self.version = 0
        self._start_commit = 1 << 62  # set once the journal is open
        self._join_raft(self._raft_conf(directory, password))
        self._pin_method_ids()  # before the first tick applies anything
        self._start_commit = self.raftCommitIndex

    def _init_controller_state(self) -> None:
        """What this broker tracks as (would-be) controller or heartbeating broker: local to
        this process, never replicated."""
        self.heartbeat_interval = min(HEARTBEAT_MAX_S, self.session_timeout / 4)
        self._next_heartbeat = 0.0
        self._heartbeating = False
        # the controller's view of each broker's last heartbeat applied: node -> (monotonic
        # time of the apply, the Raft index the broker had applied when it sent it). Not
        # replicated state: only the controller reads it, from its own clock
        self._heartbeats: dict[int, tuple[float, int]] = {}
        self._controller_since: float | None = None
        self._fencing: set[int] = set()
        self._registering = False
        self._registered_once = False
        self._next_control = 0.0
        self._last_duty = 0.0
        self._next_rebalance = 0.0
        self._electing: set[tuple[str, int]] = set()
        self._caught_up: dict[int, int] = {}  # voter -> wall ms it last held the leader's whole log

    def _raft_conf(self, directory: Path, password: str) -> SyncObjConf:
        """pysyncobj's settings: journal and snapshots in ``directory``, timeouts, the shared
        password, and the bind address of a voter."""
        return SyncObjConf(
            autoTick=False,
            journalFile=str(directory / "raft.journal"),
            fullDumpFile=str(directory / "raft.snapshot"),
            serializer=self._write_snapshot,
            deserializer=self._read_snapshot,
            logCompactionMinEntries=SNAPSHOT_EVERY,
            logCompactionMinTime=SNAPSHOT_MAX_AGE_S,
            useFork=False,
            dynamicMembershipChange=False,
            commandsWaitLeader=True,
            connectionRetryTime=0.5,
            connectionTimeout=3.0,
            # a crashed controller is replaced within 0.8-1.6 s, then fences the broker after
            # broker.session.timeout.ms: failover stays under 5 s at the defaults
            raftMinTimeout=0.8,
            raftMaxTimeout=1.6,
            maxBindRetries=3,
            bindRetryTime=0.5,
            # controller.quorum.password: the members authenticate each other and encrypt their
            # links with it (pysyncobj's password option, Fernet from `cryptography`)
            password=password or None,
            # bind the Raft port to this node's voter address: pysyncobj binds 0.0.0.0 otherwise
            bindAddress=self.voters[self.node_id] if self.is_voter else None,
        )

    def _join_raft(self, conf: SyncObjConf) -> None:
        """Start pysyncobj: a voter binds its controller endpoint; an observer binds nothing."""
        node_id, voters = self.node_id, self.voters
        try:
            if self.is_voter:
                super().__init__(voters[node_id], [a for i, a in voters.items() if i != node_id], conf)
            else:  # pysyncobj's read-only node: receives the log and snapshots, binds nothing
                log.info(
                    "node %d is not in controller.quorum.voters (%s): joining as a non-voting observer",
                    node_id,
                    ", ".join(map(str, sorted(voters))),
                )
                super().__init__(None, list(voters.values()), conf)
        except SyncObjException as exc:  # 'BindError' after maxBindRetries
            raise StoreError(
                f"cannot bind the controller endpoint {voters[node_id]} of node {node_id}: {exc}; "
                "is another broker using it?"
            ) from None

    @classmethod
    def for_broker(
        cls,
        config: cfg.BrokerConfig,
        md: MetadataStore,
        advertised: Advertised,
        on_change: Callable[[], None],
        stays_fenced: Callable[[], bool],
        clock: Clock,
    ) -> ClusterState:
        """The quorum member of a cluster broker (node.id, controller.quorum.voters and
        .password, broker.session.timeout.ms): it registers the broker's advertised listeners,
        which must have fixed ports, and holds ``md``'s state (nothing goes to metadata.json)."""
        if any(port == 0 for _, port in advertised.endpoints.values()):
            raise StoreError("a cluster broker needs fixed ports: --listen HOST:PORT (not port 0)")
        md.persist = False
        md.dir.mkdir(parents=True, exist_ok=True)
        return cls(
            config.node_id,
            parse_voters(config.list("controller.quorum.voters")),
            config.data_dir / "__cluster",
            md,
            config.int("broker.session.timeout.ms"),
            on_change,
            (*advertised.endpoint, None),
            dict(advertised.endpoints),
            config.password("controller.quorum.password"),
            stays_fenced=stays_fenced,
            clock=clock,
        )

    def _pin_method_ids(self) -> None:
        """Number the replicated methods as REPLICATED_METHODS lists them (see there)."""
        pinned = {f"{name}_v0": i for i, name in enumerate(REPLICATED_METHODS)}
        found = self._raft.method_ids()  # pysyncobj's numbering
        if set(pinned) != set(found):
            raise StoreError(
                f"replicated methods and REPLICATED_METHODS differ: {sorted(set(pinned) ^ set(found))}"
            )
        self._raft.set_method_ids(pinned)

    # -- snapshots (Raft log compaction; called by pysyncobj on the event loop) ----------------
    def _write_snapshot(self, path: str, raft: tuple[Any, ...]) -> None:
        state = {
            "cluster_id": self.cluster_id,
            "brokers": self.brokers,
            "pstates": {t: [astuple(ps) for ps in parts] for t, parts in self.pstates.items()},
            "version": self.version,
            "metadata": self.md.snapshot(),
        }
        with open(path, "wb") as fh:
            pickle.dump((SNAPSHOT_FORMAT, state, raft), fh, protocol=pickle.HIGHEST_PROTOCOL)
            fh.flush()
            os.fsync(fh.fileno())

    def _read_snapshot(self, path: str) -> tuple[Any, ...]:
        with open(path, "rb") as fh:
            fmt, state, raft = pickle.load(fh)  # noqa: S301 (our own file, in our data dir)
        if fmt != SNAPSHOT_FORMAT:
            raise StoreError(f"{path}: unknown snapshot format {fmt!r}")
        self.cluster_id = state["cluster_id"]
        self.brokers = state["brokers"]
        self.pstates = {t: [PartitionState(*ps) for ps in parts] for t, parts in state["pstates"].items()}
        self.version = state["version"]
        self.md.restore(state["metadata"])
        self.md.cluster_id = self.cluster_id or self.md.cluster_id
        self.on_change()
        return tuple(raft)

    # -- queries ---------------------------------------------------------------------------
    @property
    def replayed(self) -> bool:
        """True once the journal found on disk has been applied and the quorum answered."""
        return bool(self.raftLastApplied >= self._start_commit and self.isReady())

    @property
    def registered(self) -> bool:
        """This broker registered during this run, and the quorum has it as unfenced."""
        return self._registered_once and self.unfenced(self.node_id)

    @property
    def is_controller(self) -> bool:
        """This broker is the Raft leader."""
        return self._raft.is_leader()

    def unfenced(self, node_id: int) -> bool:
        b = self.brokers.get(node_id)
        return b is not None and not b["fenced"]

    def live_brokers(self) -> list[int]:
        return sorted(i for i, b in self.brokers.items() if not b["fenced"])

    def partition_state(self, topic: str, index: int) -> PartitionState | None:
        parts = self.pstates.get(topic)
        if parts is None or not 0 <= index < len(parts):
            return None
        return parts[index]

    def status(self) -> QuorumStatus:
        """Leader, term, commit index and each voter's progress as far as pysyncobj exposes it:
        the leader knows every voter's match index and when it last answered; a follower knows
        only its own log end."""
        now_ms, mono = self.clock.wall_ms(), time.monotonic()
        leader = self._raft.leader_address()
        leader_id = -1 if leader is None else self.addr_to_id.get(leader, -1)
        own_end = self._raft.log_end_index()
        is_leader = self.is_controller
        match = self._raft.match_index()
        silent = self._raft.silence()
        voters = [VoterState(self.node_id, own_end, now_ms if is_leader else -1, now_ms if is_leader else -1)]
        for node in self.otherNodes:
            nid = self.addr_to_id.get(node.id)
            if nid is None:
                continue
            age = silent.get(node)
            voters.append(
                VoterState(
                    nid,
                    int(match[node]) if node in match else -1,
                    now_ms - int(age * 1000) if age is not None else -1,
                    self._caught_up.get(nid, -1) if is_leader else -1,
                )
            )
        if not self.is_voter:  # an observer lists the voters only
            voters = voters[1:]
        voters.sort(key=lambda v: v.node_id)
        observers = []
        for nid in sorted(self.brokers):
            if nid in self.voters:
                continue
            beat = self._heartbeats.get(nid) if is_leader else None
            if nid == self.node_id:
                observers.append(VoterState(nid, own_end, -1, -1))
            elif beat is None:
                observers.append(VoterState(nid, -1, -1, -1))
            else:
                observers.append(VoterState(nid, beat[1], now_ms - int((mono - beat[0]) * 1000), -1))
        return QuorumStatus(
            leader_id,
            int(self.raftCurrentTerm),
            int(self.raftCommitIndex),
            is_leader,
            voters,
            dict(self.voters),
            observers,
        )

    def _note_caught_up(self) -> None:
        """The leader: voters whose match index has reached its log end are caught up now."""
        end = self._raft.log_end_index()
        now_ms = self.clock.wall_ms()
        match = self._raft.match_index()
        for node in self.otherNodes:
            nid = self.addr_to_id.get(node.id)
            if nid is not None and match.get(node, -1) >= end:
                self._caught_up[nid] = now_ms

    # -- proposing from the event loop ------------------------------------------------------
    def propose(self, method: str, *args: Any) -> asyncio.Future[Any]:
        """Propose a change; the future resolves once it is applied on this node."""
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        def done(result: Any, err: int) -> None:
            if fut.done():
                return
            if err == FAIL_REASON.SUCCESS:
                fut.set_result(result)
            else:
                fut.set_exception(
                    QuorumError(f"metadata quorum did not apply {method}: {_FAIL_NAMES.get(err, err)}")
                )

        getattr(self, method)(*args, callback=done)
        return fut

    async def propose_retrying(self, method: str, *args: Any, timeout: float = 15.0) -> Any:
        """Propose a change, again while the quorum elects a new leader (up to ``timeout`` s).

        Only for idempotent changes: after a leader change the first proposal may or may not
        be in the log, and applying it twice must do no harm.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            try:
                return await self.propose(method, *args)
            except QuorumError:
                if loop.time() + 0.2 >= deadline:
                    raise
                await asyncio.sleep(0.2)

    def submit_metadata(self, op: str, arg: dict[str, Any]) -> asyncio.Future[Any]:
        """Propose a metadata change, again while the quorum elects a new leader (up to 15 s);
        applying it twice is harmless (a topic's creation is idempotent by id)."""
        return asyncio.ensure_future(self.propose_retrying("change_metadata", op, arg))

    async def run(self, interval: float = 0.01) -> None:
        """Drive Raft from the event loop (no thread: applies run on the loop)."""
        while True:
            try:
                self.doTick(0.0)
                self._note_progress()
                now = time.monotonic()
                if now >= self._next_control:
                    self._next_control = now + 0.2
                    self._duties(now)
            except Exception:
                log.exception("metadata quorum tick failed")
            await asyncio.sleep(interval)

    def _note_progress(self) -> None:
        """Set (or clear) the events of what this tick's applies changed (see ``__init__``)."""
        if not self.replayed_event.is_set() and self.replayed:
            self.replayed_event.set()
        if self.registered:
            self.registered_event.set()
        else:
            self.registered_event.clear()

    def _duties(self, now: float) -> None:
        if not self.replayed:
            return
        stalled = now - self._last_duty
        self._last_duty = now
        if self._controller_since is not None and stalled > STALL_S:
            # this process was paused (SIGSTOP, a stalled VM): what it last heard of the others
            # is stale, so it judges them afresh from now, as a newly elected controller does
            log.info("metadata quorum: no tick for %.1f s; session clocks restart", stalled)
            self._controller_since = now
        me = self.brokers.get(self.node_id)
        if (
            not self.stays_fenced()
            and not self._registering
            and (not self._registered_once or me is None or me["fenced"])
        ):
            self._register()
        elif (
            not self.is_voter
            and not self.stays_fenced()
            # a proposal whose answer was lost (a dropped link to an unchanged leader) does not
            # stop the heartbeats: after a session without an answer the next one goes anyway
            and (not self._heartbeating or now >= self._next_heartbeat + self.session_timeout)
            and now >= self._next_heartbeat
            and me is not None
            and not me["fenced"]
        ):
            self._heartbeat(now)
        if not self.is_controller:
            self._controller_since = None
            return
        if self._controller_since is None:
            self._controller_since = now
            self._caught_up.clear()
            log.info("node %d is the controller", self.node_id)
        self._note_caught_up()
        if not self.cluster_id:
            self.init_cluster(self.md.broker.str("cluster.id") or new_cluster_id())
        quiet = self._raft.silence()  # seconds since each voter's last append-entries response
        for node in self.otherNodes:
            nid = self.addr_to_id.get(node.id)
            if nid is None or not self.unfenced(nid) or nid in self._fencing:
                continue
            # counted from when this broker became the controller at the earliest
            silent_s = min(quiet.get(node, float("inf")), now - self._controller_since)
            if silent_s > self.session_timeout:
                log.warning(
                    "fencing broker %d: not heard from for %.1f s (broker.session.timeout.ms)",
                    nid,
                    silent_s,
                )
                self._fencing.add(nid)
                self.fence_broker(nid, callback=lambda _r, _e, n=nid: self._fencing.discard(n))
        for nid, silent in self.silent_observers(now, self._controller_since):
            log.warning("fencing broker %d: no heartbeat for %.1f s (broker.session.timeout.ms)", nid, silent)
            self._fencing.add(nid)
            self.fence_broker(nid, callback=lambda _r, _e, n=nid: self._fencing.discard(n))
        self._elect_unclean()
        if self.md.broker.bool("auto.leader.rebalance.enable") and now >= self._next_rebalance:
            self._next_rebalance = now + self.md.broker.int("leader.imbalance.check.interval.seconds")
            self._rebalance_leaders()

    def silent_observers(self, now: float, since: float) -> list[tuple[int, float]]:
        """(observer, seconds without a heartbeat) of the unfenced observers the controller has
        had no heartbeat from for longer than the session timeout, counting from ``since`` at
        the earliest (when it became the controller)."""
        out = []
        for nid, b in sorted(self.brokers.items()):
            if nid in self.voters or b["fenced"] or nid in self._fencing:
                continue
            silent = now - max(self._heartbeats.get(nid, (0.0, -1))[0], since)
            if silent > self.session_timeout:
                out.append((nid, silent))
        return out

    # -- controller: elections ----------------------------------------------------------------
    def preferred_candidates(self, only: set[tuple[str, int]] | None = None) -> list[tuple[str, int, int]]:
        """(topic, partition, preferred replica) where that replica is live, in sync and not leading."""
        out = []
        for topic, parts in self.pstates.items():
            for i, ps in enumerate(parts):
                if only is not None and (topic, i) not in only:
                    continue
                replicas = self._replicas(topic, i)
                if (
                    replicas
                    and replicas[0] != ps.leader
                    and replicas[0] in ps.isr
                    and self.unfenced(replicas[0])
                ):
                    out.append((topic, i, replicas[0]))
        return out

    def _rebalance_leaders(self) -> None:
        """Kafka's auto leader rebalance: for each broker whose share of preferred partitions led
        by others exceeds leader.imbalance.per.broker.percentage, elect it where it can lead."""
        preferred: dict[int, int] = {}
        not_led: dict[int, int] = {}
        for topic, parts in self.pstates.items():
            for i, ps in enumerate(parts):
                replicas = self._replicas(topic, i)
                if replicas:
                    preferred[replicas[0]] = preferred.get(replicas[0], 0) + 1
                    if ps.leader != replicas[0]:
                        not_led[replicas[0]] = not_led.get(replicas[0], 0) + 1
        limit = self.md.broker.int("leader.imbalance.per.broker.percentage") / 100
        brokers = {b for b, n in not_led.items() if n / preferred[b] > limit}
        for topic, i, candidate in self.preferred_candidates():
            if candidate in brokers:
                self._propose_election(topic, i, candidate, unclean=False, why="preferred replica")

    def _elect_unclean(self) -> None:
        """Partitions without a leader and no live ISR member, whose topic allows it, get a live
        out-of-sync replica as leader (unclean.leader.election.enable): records it lacks are lost."""
        for topic, parts in self.pstates.items():
            t = self.md.topics.get(topic)
            if t is None:
                continue
            for i, ps in enumerate(parts):
                if ps.leader != -1 or any(self.unfenced(r) for r in ps.isr):
                    continue
                if not self.md.topic_config_values(t)["unclean.leader.election.enable"][0]:
                    break
                candidate = next((r for r in t.assignments[i] if self.unfenced(r)), -1)
                if candidate != -1:
                    self._propose_election(topic, i, candidate, unclean=True, why="unclean election")

    def _propose_election(self, topic: str, index: int, candidate: int, *, unclean: bool, why: str) -> None:
        key = (topic, index)
        ps = self.partition_state(topic, index)
        if key in self._electing or ps is None:
            return
        if unclean:
            log.warning(
                "%s-%d: no in-sync replica is alive; unclean leader election makes broker %d the "
                "leader: records it does not have are lost (unclean.leader.election.enable=true)",
                topic,
                index,
                candidate,
            )
        else:
            log.info("%s-%d: electing broker %d as leader (%s)", topic, index, candidate, why)
        self._electing.add(key)
        self.elect_leader(
            topic,
            index,
            ps.leader_epoch,
            candidate,
            unclean,
            callback=lambda _r, _e: self._electing.discard(key),
        )

    def _register(self) -> None:
        host, port, rack = self.endpoint
        listeners = {name: [h, p] for name, (h, p) in self.listeners.items()}

        def done(_result: Any, err: int) -> None:
            self._registering = False
            if err == FAIL_REASON.SUCCESS:
                self._registered_once = True
                log.info("broker %d registered with the controller", self.node_id)

        self._registering = True
        self.register_broker(self.node_id, host, port, rack, listeners, callback=done)

    def _heartbeat(self, now: float) -> None:
        """An observer tells the controller it is alive (Kafka's BrokerHeartbeat), through the
        log: the controller cannot name a read-only Raft connection."""

        def done(_result: Any, _err: int) -> None:
            self._heartbeating = False

        self._heartbeating = True
        self._next_heartbeat = now + self.heartbeat_interval
        self.broker_heartbeat(self.node_id, int(self.raftLastApplied), self.broker_epoch, callback=done)

    # -- replicated changes (applied on every node, in log order) ---------------------------
    def _changed(self) -> None:
        self.version += 1
        self.on_change()

    @replicated  # type: ignore[untyped-decorator]
    def init_cluster(self, cluster_id: str) -> None:
        if not self.cluster_id:
            self.cluster_id = cluster_id
            self.md.cluster_id = cluster_id
            self._changed()

    @replicated  # type: ignore[untyped-decorator]
    def change_metadata(self, op: str, arg: dict[str, Any]) -> StoreError | None:
        problem = self.md.apply(op, arg)
        if problem is None:
            name = str(arg["name"])
            if op == "create_topic" and name not in self.pstates:
                self.pstates[name] = [self._initial(a) for a in arg["assignments"]]
            elif op == "create_partitions":
                self.pstates.setdefault(name, []).extend(self._initial(a) for a in arg["new"])
            elif op == "delete_topic":
                self.pstates.pop(name, None)
            self._changed()
        return problem

    def _initial(self, replicas: list[int]) -> PartitionState:
        live = [r for r in replicas if self.unfenced(r)]
        if not live:
            return PartitionState(-1, 0, list(replicas[:1]))
        return PartitionState(live[0], 0, live)

    @replicated  # type: ignore[untyped-decorator]
    def register_broker(
        self,
        node_id: int,
        host: str,
        port: int,
        rack: str | None,
        listeners: dict[str, list[Any]] | None = None,
    ) -> None:
        # the broker epoch: a later registration (a restart) has a higher one, so what the
        # earlier incarnation still had in flight (a heartbeat, its controlled shutdown) is refused
        epoch = self.version + 1
        self.brokers[node_id] = {"host": host, "port": port, "rack": rack, "fenced": False, "epoch": epoch}
        self._heartbeats[node_id] = (time.monotonic(), -1)  # registering starts its session
        if listeners is not None:  # journals written before listeners were named have none
            self.brokers[node_id]["listeners"] = listeners
        # a (re)started broker may have lost unflushed data: it leads nothing and rejoins the
        # ISRs through their leaders once it has caught up
        self._leave(node_id, registered=True)
        self._changed()

    @replicated  # type: ignore[untyped-decorator]
    def broker_heartbeat(self, node_id: int, applied: int, epoch: int = -1) -> int:
        """Changes no replicated state: the controller notes when it applied it (its own clock).
        Refused (STALE_BROKER_EPOCH) from an incarnation that is not the registered one."""
        if not self._current(node_id, epoch):
            return int(ErrorCode.STALE_BROKER_EPOCH)
        self._heartbeats[node_id] = (time.monotonic(), applied)
        return 0

    def _current(self, node_id: int, epoch: int) -> bool:
        """``node_id`` is registered, at broker epoch ``epoch`` unless that is -1 (any)."""
        b = self.brokers.get(node_id)
        return b is not None and (epoch < 0 or b.get("epoch", -1) == epoch)

    @property
    def broker_epoch(self) -> int:
        """This broker's epoch once it registered during this run, else -1."""
        b = self.brokers.get(self.node_id)
        return int(b.get("epoch", -1)) if b is not None and self._registered_once else -1

    @replicated  # type: ignore[untyped-decorator]
    def unregister_broker(self, node_id: int) -> tuple[int, str | None]:
        """Remove a broker's registration (Kafka's UnregisterBroker): refused for a voter and
        for a broker still holding replicas (move them off first with a reassignment)."""
        if node_id not in self.brokers:
            return int(ErrorCode.BROKER_ID_NOT_REGISTERED), f"broker {node_id} is not registered"
        if node_id in self.voters:
            return (
                int(ErrorCode.INVALID_REQUEST),
                f"broker {node_id} is a controller.quorum.voters member and cannot be unregistered",
            )
        held = sorted(
            f"{t.name}-{i}"
            for t in self.md.topics.values()
            for i, replicas in enumerate(t.assignments)
            if node_id in replicas
        )
        if held:
            return (
                int(ErrorCode.INVALID_REQUEST),
                f"broker {node_id} still holds {len(held)} replica(s) ({', '.join(held[:5])}"
                f"{', ...' if len(held) > 5 else ''}): reassign them first",
            )
        self._leave(node_id)
        del self.brokers[node_id]
        self._heartbeats.pop(node_id, None)
        self._changed()
        return 0, None

    @replicated  # type: ignore[untyped-decorator]
    def fence_broker(self, node_id: int, epoch: int = -1) -> None:
        """The controller's (epoch -1) or the broker's own, controlled shutdown (its epoch: a
        restarted broker's registration is not undone by its previous run's shutdown)."""
        b = self.brokers.get(node_id)
        if b is None or b["fenced"] or not self._current(node_id, epoch):
            return
        b["fenced"] = True
        self._leave(node_id)
        self._changed()

    @replicated  # type: ignore[untyped-decorator]
    def elect_leader(self, topic: str, index: int, leader_epoch: int, candidate: int, unclean: bool) -> int:
        """Make ``candidate`` the leader (ElectLeaders, auto rebalance, unclean election).

        The controller's own elections carry the leader epoch they were decided at and are
        refused if it has changed; a client's (ElectLeaders) carries -1 and applies to the state
        at this point of the log. A preferred leader must be live and in the ISR; an unclean one
        live, and only while no ISR member is, and it becomes the whole ISR.
        """
        ps = self.partition_state(topic, index)
        if ps is None:
            return int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if leader_epoch >= 0 and ps.leader_epoch != leader_epoch:
            return int(ErrorCode.FENCED_LEADER_EPOCH)  # decided on a state that has changed since
        if ps.leader == candidate:
            return int(ErrorCode.ELECTION_NOT_NEEDED)
        if candidate not in self._replicas(topic, index) or not self.unfenced(candidate):
            return int(
                ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
                if unclean
                else ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
            )
        if unclean:
            if ps.leader != -1 or any(self.unfenced(r) for r in ps.isr):
                return int(ErrorCode.ELECTION_NOT_NEEDED)
            ps.isr = [candidate]
        elif candidate not in ps.isr:
            return int(ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE)
        ps.leader = candidate
        ps.leader_epoch += 1
        ps.partition_epoch += 1
        self._changed()
        return 0

    @replicated  # type: ignore[untyped-decorator]
    def alter_isr(
        self, topic: str, index: int, leader: int, leader_epoch: int, partition_epoch: int, isr: list[int]
    ) -> int:
        ps = self.partition_state(topic, index)
        if ps is None:
            return int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if ps.leader != leader or ps.leader_epoch != leader_epoch:
            return int(ErrorCode.FENCED_LEADER_EPOCH)
        if ps.partition_epoch != partition_epoch:
            return int(ErrorCode.INVALID_UPDATE_VERSION)
        if leader not in isr or any(r not in ps.isr and not self.unfenced(r) for r in isr):
            return int(ErrorCode.INELIGIBLE_REPLICA)
        replicas = self._replicas(topic, index)
        if len(set(isr)) != len(isr) or any(r not in replicas for r in isr):
            # Kafka's Replicas.validateIsr: a non-replica would never fetch, so the leader's
            # high watermark would stop; a duplicate would count one replica twice
            return int(ErrorCode.INVALID_REQUEST)
        if ps.reassigning:
            # the ISR change and the reassignment's completion are one change, as Kafka's
            # PartitionChangeBuilder makes them one PartitionChangeRecord
            self._change_partition(topic, index, ps, replicas, list(isr), ps.adding, ps.removing)
        else:
            ps.isr = list(isr)
            ps.partition_epoch += 1
        self._changed()
        return 0

    @replicated  # type: ignore[untyped-decorator]
    def alter_reassignment(
        self, topic: str, index: int, target: list[int] | None, allow_rf_change: bool = True
    ) -> tuple[int, str | None]:
        """Start, change or (``target`` None) cancel a partition's reassignment
        (AlterPartitionReassignments): (error code, message), checked here in log order as
        Kafka's ReplicationControlManager.alterPartitionReassignment checks it."""
        ps = self.partition_state(topic, index)
        t = self.md.topics.get(topic)
        if ps is None or t is None:
            return int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), f"unable to find partition {topic}:{index}"
        replicas = self._replicas(topic, index)
        if target is None:
            if not ps.reassigning:
                return int(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS), None
            original = [r for r in replicas if r not in ps.adding]
            isr = [r for r in ps.isr if r not in ps.adding]
            if not isr:
                if not self.md.topic_config_values(t)["unclean.leader.election.enable"][0]:
                    return (
                        int(ErrorCode.INVALID_REPLICA_ASSIGNMENT),
                        f"unable to revert partition assignment for {topic}:{index} because it "
                        "would require an unclean leader election",
                    )
                isr = original[:1]
            self._change_partition(topic, index, ps, original, isr, [], [])
            self._changed()
            return 0, None
        if not target:
            return int(ErrorCode.INVALID_REPLICA_ASSIGNMENT), "the manual partition assignment is empty"
        for b in sorted(target):
            if b not in self.brokers:
                return (
                    int(ErrorCode.INVALID_REPLICA_ASSIGNMENT),
                    f"the manual partition assignment includes broker {b}, but no such broker is registered",
                )
        if len(set(target)) != len(target):
            dup = next(b for b in target if target.count(b) > 1)
            return (
                int(ErrorCode.INVALID_REPLICA_ASSIGNMENT),
                f"the manual partition assignment includes the broker {dup} more than once",
            )
        current_rf = len(replicas) - len(ps.removing)
        if not allow_rf_change and len(target) != current_rf:
            return (
                int(ErrorCode.INVALID_REPLICATION_FACTOR),
                f"the replication factor is changed from {current_rf} to {len(target)}",
            )
        removing = sorted(set(replicas) - set(target))
        adding = sorted(set(target) - set(replicas))
        self._change_partition(topic, index, ps, list(target) + removing, list(ps.isr), adding, removing)
        self._changed()
        return 0, None

    def reassignments(self) -> dict[tuple[str, int], tuple[list[int], list[int], list[int]]]:
        """(topic, partition) -> (replicas, adding, removing) of every ongoing reassignment."""
        out = {}
        for topic, parts in self.pstates.items():
            for i, ps in enumerate(parts):
                if ps.reassigning:
                    out[(topic, i)] = (self._replicas(topic, i), list(ps.adding), list(ps.removing))
        return out

    def _change_partition(
        self,
        topic: str,
        index: int,
        ps: PartitionState,
        replicas: list[int],
        isr: list[int],
        adding: list[int],
        removing: list[int],
    ) -> None:
        """One partition change (Kafka's PartitionChangeBuilder.build): complete the
        reassignment if the ISR allows, keep the leader if it is still a live ISR member or elect
        the first live ISR member of the replicas, bump the leader epoch when the leader changes
        or a replica leaves, the partition epoch when anything changes."""
        if adding or removing:
            kept_isr = [r for r in isr if r not in removing]
            kept = [r for r in replicas if r not in removing]
            if kept_isr and kept and all(r in kept_isr for r in kept):
                replicas, isr, adding, removing = kept, kept_isr, [], []
        old_replicas = self._replicas(topic, index)
        leader = ps.leader
        if not (leader in isr and self.unfenced(leader)):
            leader = self._elect(replicas, isr)
        changed = (
            leader != ps.leader
            or isr != ps.isr
            or replicas != old_replicas
            or adding != ps.adding
            or removing != ps.removing
        )
        if not changed:
            return
        if leader != ps.leader or any(r not in replicas for r in old_replicas):
            ps.leader_epoch += 1
        ps.partition_epoch += 1
        ps.leader, ps.isr, ps.adding, ps.removing = leader, list(isr), list(adding), list(removing)
        if replicas != old_replicas:
            self.md.set_replicas(topic, index, replicas)
        if not adding and not removing and (old_replicas != replicas):
            log.info("%s-%d: replicas now %s (leader %d, isr %s)", topic, index, replicas, leader, isr)

    def _replicas(self, topic: str, index: int) -> list[int]:
        t = self.md.topics.get(topic)
        return list(t.assignments[index]) if t is not None and index < t.partitions else []

    def _elect(self, replicas: list[int], isr: list[int], other_than: int = -1) -> int:
        """The first live ISR member in assignment order (never outside the ISR), or -1."""
        return next((r for r in replicas if r != other_than and r in isr and self.unfenced(r)), -1)

    def _leave(self, node_id: int, *, registered: bool = False) -> None:
        """``node_id`` leaves every ISR it is not the last member of and hands over what it leads.

        With ``registered`` (it registered again, unfenced) every partition left without a
        leader elects one from its ISR, this broker included: a restarted sole ISR member leads
        again. Each partition changes at most once per apply, as one Kafka PartitionChangeRecord:
        the leader epoch goes up by one when the leader changes or is elected again, the
        partition epoch by one when the leader or the ISR changes.
        """
        for topic, parts in self.pstates.items():
            for i, ps in enumerate(parts):
                replicas = self._replicas(topic, i)
                isr = ps.isr
                if node_id in isr and len(isr) > 1:
                    isr = [r for r in isr if r != node_id]
                leader = ps.leader
                if leader == node_id:
                    leader = self._elect(replicas, isr, other_than=node_id)
                if leader == -1 and registered:
                    leader = self._elect(replicas, isr)
                new_epoch = leader != ps.leader or ps.leader == node_id
                if new_epoch or isr != ps.isr:
                    ps.partition_epoch += 1
                if new_epoch:
                    ps.leader_epoch += 1
                ps.leader, ps.isr = leader, isr
