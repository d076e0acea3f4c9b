"""The broker's state, and what moves it: joining the cluster and the controlled shutdown.

Kafka's ``BrokerLifecycleManager``: :class:`BrokerLifecycle` owns the one :class:`BrokerState`
of the broker (Kafka's names and numeric codes, reported by the ``sftraffic_broker_state``
gauge), logs each transition once, and does the steps between states, awaiting what the
metadata quorum sets (its ``replayed_event`` and ``registered_event``, Kafka's initial catch-up
and unfence futures) rather than polling it::

    NOT_RUNNING ──start──▶ STARTING ──(cluster) journal replayed──▶ RECOVERY
        │ (single node: metadata loaded, listener up)                   │ registered, unfenced;
        ▼                                                               ▼ listener up
    RUNNING ◀───────────────────────────────────────────────────────────┘
        │ stop, in a cluster with controlled.shutdown.enable
        ▼
    PENDING_CONTROLLED_SHUTDOWN ── leaderships handed over, acks answered ──▶ SHUTTING_DOWN
    (any state) ── stop, a failed start, or force ──▶ SHUTTING_DOWN ── parts closed ──▶ NOT_RUNNING

* Joining (:meth:`join`): like a KRaft broker, a cluster broker serves no Kafka connection
  until it has applied the quorum's log (STARTING) and registered, unfenced (RECOVERY):
  answering from a half-replayed journal would send clients to partitions it no longer leads.
  Needs a majority of the voters up; a line every 10 s says what it waits for. Then it opens
  and leads what the quorum says, and proposes the SCRAM users ``sftraffic users add
  --data-dir`` wrote before its first start.
* Stopping (:meth:`shut_down`): ``stopping`` is set on leaving RUNNING (long-polling fetches
  answer, the metrics endpoint closes). The controlled shutdown proposes the broker's own
  fencing (Kafka's ControlledShutdown): once applied, its partitions have new leaders from
  their ISRs, so producers see retriable NOT_LEADER_OR_FOLLOWER answers and move on instead of
  waiting out a session timeout; the quorum neither registers it again nor sends its
  heartbeats from then on (``stays_fenced``). Then the acks=all produce requests it appended
  as leader are answered (as a follower it learns the new leader's high watermark; see
  ``Partition.apply_state``) before the listener closes: closing their connections instead
  leaves producers unsure whether they were written. Every step is bounded.

Time is passed in: deadlines and durations are read from ``clock`` (monotonic seconds) and
pauses taken with ``sleep``; a bounded wait on futures is given what is left of its deadline.

Thread-safety: event-loop only.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any, Protocol

from framework.errors import StoreError

log = logging.getLogger("sftraffic.broker")

SHUTDOWN_S = 5.0  # SIGTERM to exit, at most (then force_stop)
CONTROLLED_SHUTDOWN_S = 3.0  # of which handing over leaderships, at most
HANDED_OVER_ACKS_S = 1.0  # controlled shutdown: answering the produce requests appended as leader
COMMIT_ANNOUNCE_S = 0.25  # a stopping controller's last AppendEntries rounds (every 0.1 s)
FIRST_NOTE_S, NOTE_EVERY_S = 5.0, 10.0  # "waiting for the metadata quorum" lines while joining


class BrokerState(enum.IntEnum):
    """Kafka's ``org.apache.kafka.metadata.BrokerState``: names and codes (part of its API)."""

    NOT_RUNNING = 0  # not started, or stopped
    STARTING = 1  # catching up with the cluster metadata
    RECOVERY = 2  # caught up, not yet registered and unfenced
    RUNNING = 3  # serving clients
    PENDING_CONTROLLED_SHUTDOWN = 6  # handing over its leaderships before it stops
    SHUTTING_DOWN = 7  # closing its parts


_NEXT: dict[BrokerState, frozenset[BrokerState]] = {
    BrokerState.NOT_RUNNING: frozenset({BrokerState.STARTING}),
    BrokerState.STARTING: frozenset({BrokerState.RECOVERY, BrokerState.RUNNING}),
    BrokerState.RECOVERY: frozenset({BrokerState.RUNNING}),
    BrokerState.RUNNING: frozenset({BrokerState.PENDING_CONTROLLED_SHUTDOWN}),
    BrokerState.PENDING_CONTROLLED_SHUTDOWN: frozenset(),
    BrokerState.SHUTTING_DOWN: frozenset({BrokerState.NOT_RUNNING}),
}
STOPPING = frozenset({BrokerState.PENDING_CONTROLLED_SHUTDOWN, BrokerState.SHUTTING_DOWN})


class Quorum(Protocol):
    """What the lifecycle uses of the metadata quorum (``framework.metadata.quorum.ClusterState``)."""

    voters: dict[int, str]
    replayed_event: asyncio.Event
    registered_event: asyncio.Event

    @property
    def broker_epoch(self) -> int: ...

    @property
    def is_controller(self) -> bool: ...

    async def propose_retrying(self, method: str, *args: Any, timeout: float = 15.0) -> Any: ...


class HeldPartition(Protocol):
    topic: str
    index: int

    @property
    def is_leader(self) -> bool: ...

    @property
    def replicated(self) -> bool: ...

    def unanswered_acks(self) -> list[asyncio.Future[None]]: ...


class Replicas(Protocol):
    """The replica manager, as far as joining and leaving the cluster goes."""

    def all_partitions(self) -> Iterable[HeldPartition]: ...

    def quarantine_strays(self) -> None: ...

    def reconcile(self) -> None: ...


class BootstrapUsers(Protocol):
    """The metadata store's SCRAM users written before the broker's first start."""

    path: Path

    def bootstrap_credentials(self) -> dict[str, dict[str, dict[str, Any]]]: ...

    def credential(self, user: str, mechanism: str) -> Any: ...

    def forget_bootstrap_credentials(self) -> None: ...


class BrokerLifecycle:
    """Owns :attr:`state`; the broker calls :meth:`starting`, :meth:`join` (cluster),
    :meth:`running`, then :meth:`shut_down` or :meth:`forced`, and :meth:`stopped` once its
    parts are closed."""

    def __init__(
        self,
        node_id: int,
        replicas: Replicas,
        users: BootstrapUsers,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.node_id = node_id
        self.replicas = replicas
        self.users = users
        self.clock = clock
        self.sleep = sleep
        self.state = BrokerState.NOT_RUNNING
        self.stopping = asyncio.Event()  # set on leaving RUNNING to stop (and never cleared)
        self.quorum: Quorum | None = None  # once joining a cluster

    def shutting_down(self) -> bool:
        """PENDING_CONTROLLED_SHUTDOWN or SHUTTING_DOWN (the quorum's ``stays_fenced``)."""
        return self.state in STOPPING

    def _become(self, state: BrokerState) -> None:
        """Move to ``state`` (logged once); SHUTTING_DOWN may follow any state."""
        old = self.state
        if state is old:
            return
        if state is not BrokerState.SHUTTING_DOWN and state not in _NEXT[old]:
            raise StoreError(f"broker {self.node_id}: no transition from {old.name} to {state.name}")
        self.state = state
        log.info("broker %d: %s -> %s", self.node_id, old.name, state.name)
        if state in STOPPING:
            self.stopping.set()

    # -- starting ----------------------------------------------------------------------------
    def starting(self) -> None:
        self._become(BrokerState.STARTING)

    def running(self) -> None:
        """The listener serves clients."""
        self._become(BrokerState.RUNNING)

    async def join(self, quorum: Quorum, ticker: asyncio.Task[None]) -> None:
        """Catch up with the metadata quorum and register (STARTING → RECOVERY → registered),
        then open and lead what it says and propose the bootstrap SCRAM users. ``ticker`` runs
        the quorum: what ends it ends the join."""
        self.quorum = quorum
        t0 = self.clock()
        await self._until(quorum.replayed_event, ticker, quorum)
        self._become(BrokerState.RECOVERY)
        await self._until(quorum.registered_event, ticker, quorum)
        self.replicas.quarantine_strays()
        self.replicas.reconcile()
        log.info("broker %d caught up with the metadata quorum in %.1f s", self.node_id, self.clock() - t0)
        await self._propose_bootstrap_users(quorum)

    async def _until(self, event: asyncio.Event, ticker: asyncio.Task[None], quorum: Quorum) -> None:
        waiter = asyncio.ensure_future(event.wait())
        note_at = self.clock() + FIRST_NOTE_S
        try:
            while not event.is_set():
                done, _ = await asyncio.wait(
                    {waiter, ticker},
                    timeout=max(note_at - self.clock(), 0),
                    return_when=asyncio.FIRST_COMPLETED,
                )
                if ticker in done:
                    ticker.result()  # raises what stopped it
                    raise StoreError(f"broker {self.node_id}: the metadata quorum stopped")
                if not done:
                    note_at += NOTE_EVERY_S
                    log.info(
                        "broker %d waiting for the metadata quorum (%d of %d voters must be up: %s)",
                        self.node_id,
                        len(quorum.voters) // 2 + 1,
                        len(quorum.voters),
                        ", ".join(f"{i}@{a}" for i, a in sorted(quorum.voters.items())),
                    )
        finally:
            waiter.cancel()

    async def _propose_bootstrap_users(self, quorum: Quorum) -> None:
        """Credentials added with ``sftraffic users add --data-dir`` before this broker's first
        start go to the quorum (those it has not got already), then leave metadata.json."""
        pending = self.users.bootstrap_credentials()
        if not pending:
            return
        for user, mechs in sorted(pending.items()):
            missing = {m: c for m, c in mechs.items() if self.users.credential(user, m) is None}
            if missing:
                arg = {"name": user, "set": missing, "delete": []}
                await quorum.propose_retrying("change_metadata", "scram_credentials", arg)
        self.users.forget_bootstrap_credentials()
        log.info(
            "broker %d: SCRAM users of %s proposed to the quorum: %s",
            self.node_id,
            self.users.path,
            ", ".join(sorted(pending)),
        )

    # -- stopping ----------------------------------------------------------------------------
    async def shut_down(self, controlled: bool) -> None:
        """Leave RUNNING: through a controlled shutdown when ``controlled`` and in a cluster,
        then SHUTTING_DOWN (the caller closes the parts, then calls :meth:`stopped`)."""
        if controlled and self.quorum is not None and self.state is BrokerState.RUNNING:
            self._become(BrokerState.PENDING_CONTROLLED_SHUTDOWN)
            if await self._controlled_shutdown(self.quorum, CONTROLLED_SHUTDOWN_S):
                await self._hand_over_acks(HANDED_OVER_ACKS_S)
        self._become(BrokerState.SHUTTING_DOWN)

    def forced(self) -> None:
        """Stopping now, whatever the state (a second signal, or the stop ran out of time)."""
        self._become(BrokerState.SHUTTING_DOWN)

    def stopped(self) -> None:
        self._become(BrokerState.NOT_RUNNING)

    def _leading(self) -> list[HeldPartition]:
        return [p for p in self.replicas.all_partitions() if p.is_leader and p.replicated]

    async def _controlled_shutdown(self, quorum: Quorum, timeout: float) -> bool:
        """Propose this broker's fencing and hand every leadership to an in-sync follower;
        False when the quorum did not apply it in time."""
        log.info(
            "broker %d: controlled shutdown, handing over %d leadership(s)",
            self.node_id,
            len(self._leading()),
        )
        proposal = quorum.propose_retrying("fence_broker", self.node_id, quorum.broker_epoch, timeout=timeout)
        try:
            await asyncio.wait_for(proposal, timeout)
        except (TimeoutError, StoreError) as exc:
            log.warning("broker %d: controlled shutdown incomplete (%s); stopping anyway", self.node_id, exc)
            return False
        if quorum.is_controller:
            # the other brokers apply the change when the leader's next AppendEntries tells them
            # it is committed: let that go out (the ticker runs meanwhile) before the quorum
            # loses its leader, or they would wait for a new election (~2 s) to learn it
            await self.sleep(COMMIT_ANNOUNCE_S)
        self.replicas.reconcile()  # the new leaders take over here too, before the listener closes
        left = [f"{p.topic}-{p.index}" for p in self._leading()]
        if left:
            log.warning(
                "broker %d: no in-sync follower could take over %s", self.node_id, ", ".join(left[:10])
            )
        return True

    async def _hand_over_acks(self, timeout: float) -> None:
        """Wait (bounded) until the acks=all produce requests appended here as leader are answered."""
        deadline = self.clock() + timeout
        while pending := [f for p in self.replicas.all_partitions() for f in p.unanswered_acks()]:
            left = deadline - self.clock()
            if left <= 0:
                log.info("broker %d: stopping with acks=all produce requests not yet answered", self.node_id)
                return
            await asyncio.wait(pending, timeout=left)
