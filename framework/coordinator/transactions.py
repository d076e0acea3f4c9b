"""The transaction coordinator: Kafka's transaction state machine, one per transactional id.

States (Kafka's ``TransactionState``; the number is the one ``__transaction_state`` stores)::

    Empty(0) --AddPartitions/AddOffsets--> Ongoing(1) --EndTxn commit--> PrepareCommit(2)
    Ongoing --EndTxn abort, timeout, fencing InitProducerId--> PrepareAbort(3)
    PrepareCommit --markers written--> CompleteCommit(4) ; PrepareAbort --> CompleteAbort(5)
    Complete* / Empty --InitProducerId--> Empty (epoch bumped) ; --AddPartitions--> Ongoing
    Empty / Complete* --transactional.id.expiration.ms--> Dead(6) (removed: a tombstone)
    PrepareEpochFence(7): only as a pending transition, while an Ongoing transaction is
    aborted with a bumped epoch (a new producer's InitProducerId, or the transaction timed out)

Rules kept, as Kafka's ``TransactionCoordinator`` (transaction version 1):

* every change is first written to the transactional id's ``__transaction_state`` partition
  (:class:`TxnLog`) and applied only once written; while one is being written the id has a
  *pending* state and other requests for it answer CONCURRENT_TRANSACTIONS (retriable);
* InitProducerId bumps the epoch (fencing every older producer: their requests then answer
  PRODUCER_FENCED, their produce INVALID_PRODUCER_EPOCH); a retry with the previous epoch
  (KIP-360) gets the same answer again; an open transaction is first aborted with a bumped
  epoch and the client is told CONCURRENT_TRANSACTIONS until the abort completed; the epoch
  running out (32767) moves the id to a new producer id;
* EndTxn answers once PrepareCommit/PrepareAbort is written; the markers are then written to
  every partition of the transaction (:class:`MarkerWriter`, retried until each partition
  took it or no longer exists) and the transaction completed (Complete*); a retried EndTxn
  for a completed transaction answers NONE, the opposite outcome INVALID_TXN_STATE;
* a transaction open longer than its ``transaction.timeout.ms`` is aborted with a bumped
  epoch (Kafka's ``abortTimedOutTransactions``); an id idle for
  ``transactional.id.expiration.ms`` with no transaction open is removed;
* a coordinator that loads a partition of ``__transaction_state`` (failover, restart) resumes
  the markers of every transaction found in PrepareCommit/PrepareAbort.

Timers and background work come from the group coordinator's :class:`Scheduler`, wall time
from a :class:`~framework.clock.Clock`; persistence and markers through the two Protocols below, so unit tests
drive it with fakes (tests/unit/coordinator/test_transactions.py). Not thread-safe: the
broker's event loop.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Protocol

from framework.clock import Clock
from framework.coordinator.groups import Scheduler
from framework.errors import StoreError
from framework.protocol.error_codes import ErrorCode

log = logging.getLogger("sftraffic.transactions")

E = ErrorCode
TP = tuple[str, int]
NO_PRODUCER_ID = -1
NO_EPOCH = -1
MAX_EPOCH = 32767
MARKER_RETRY_S = 0.1  # first marker retry; doubles up to MARKER_RETRY_MAX_S
MARKER_RETRY_MAX_S = 2.0


class TxnState(enum.Enum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def display(self) -> str:
        """Kafka's name (DescribeTransactions, ListTransactions filters)."""
        return _NAMES[self]

    @classmethod
    def by_name(cls, name: str) -> TxnState | None:
        for s, n in _NAMES.items():
            if n == name:
                return s
        return None


_NAMES = {
    TxnState.EMPTY: "Empty",
    TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
S = TxnState
_COMPLETE_OR_EMPTY = (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)


@dataclass(frozen=True, slots=True)
class TxnRecord:
    """One ``__transaction_state`` value: a transactional id's state as written."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TP]
    update_ms: int
    start_ms: int
    last_producer_epoch: int = NO_EPOCH  # not in Kafka's value v0: lost across a reload
    previous_producer_id: int = NO_PRODUCER_ID  # before the epoch ran out (idem)


@dataclass(eq=False)
class TxnMetadata:
    """A transactional id's current state plus the transition being written, if any."""

    record: TxnRecord
    pending: TxnState | None = None
    coordinator_epoch: int = 0
    completing: asyncio.Task[None] | None = field(default=None, repr=False)

    @property
    def state(self) -> TxnState:
        return self.record.state

    @property
    def producer_id(self) -> int:
        return self.record.producer_id

    @property
    def producer_epoch(self) -> int:
        return self.record.producer_epoch


@dataclass(frozen=True, slots=True)
class TxnMarker:
    """COMMIT or ABORT markers for ``partitions`` of one transaction (WriteTxnMarkers)."""

    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    partitions: tuple[TP, ...]


class TxnLog(Protocol):
    """The ``__transaction_state`` topic: where a transactional id lives and its writes."""

    def partition_for(self, transactional_id: str) -> int: ...

    def write(self, record: TxnRecord) -> Awaitable[None]:
        """Append ``record`` (a tombstone when its state is DEAD); done once replicated.
        Raises StoreError (e.g. NOT_LEADER_OR_FOLLOWER) when it could not be written."""
        ...


class MarkerWriter(Protocol):
    """Writes transaction markers to partition leaders (local log or WriteTxnMarkers)."""

    def write_markers(self, marker: TxnMarker) -> Awaitable[dict[TP, int]]:
        """Error code per partition (NONE: written)."""
        ...


@dataclass(frozen=True, slots=True)
class TxnConfig:
    max_timeout_ms: int = 900_000
    id_expiration_ms: int = 604_800_000


@dataclass(frozen=True, slots=True)
class InitResult:
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_EPOCH


class _NotCoordinator(Exception):
    def __init__(self, code: ErrorCode) -> None:
        self.code = code


# errors of a __transaction_state write, as Kafka maps them for the client
_WRITE_ERRORS = {
    E.UNKNOWN_TOPIC_OR_PARTITION: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_ENOUGH_REPLICAS: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_ENOUGH_REPLICAS_AFTER_APPEND: E.COORDINATOR_NOT_AVAILABLE,
    E.REQUEST_TIMED_OUT: E.COORDINATOR_NOT_AVAILABLE,
    E.KAFKA_STORAGE_ERROR: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_LEADER_OR_FOLLOWER: E.NOT_COORDINATOR,
    E.FENCED_LEADER_EPOCH: E.NOT_COORDINATOR,
    E.MESSAGE_TOO_LARGE: E.UNKNOWN_SERVER_ERROR,
    E.RECORD_LIST_TOO_LARGE: E.UNKNOWN_SERVER_ERROR,
}
# marker errors after which a partition is done with (Kafka's TransactionMarkerRequestCompletionHandler)
_MARKER_GIVE_UP = (
    E.UNKNOWN_TOPIC_OR_PARTITION,  # the topic was deleted
    E.INVALID_PRODUCER_EPOCH,  # a newer epoch wrote there already
    E.TRANSACTION_COORDINATOR_FENCED,  # a newer coordinator took over
    E.CORRUPT_MESSAGE,
    E.INVALID_REQUEST,
)


class TransactionCoordinator:
    def __init__(
        self,
        scheduler: Scheduler,
        txn_log: TxnLog,
        markers: MarkerWriter,
        next_producer_id: Callable[[], int],
        config: TxnConfig,
        clock: Clock,
    ) -> None:
        self.scheduler = scheduler
        self.txn_log = txn_log
        self.markers = markers
        self.next_producer_id = next_producer_id
        self.config = config
        self.clock = clock
        self.txns: dict[str, TxnMetadata] = {}
        self.loaded: dict[int, int] = {}  # __transaction_state partition -> coordinator epoch
        self.loading: set[int] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    # -- ownership ---------------------------------------------------------------------------
    def _check_owned(self, transactional_id: str) -> int:
        """The coordinator epoch of the id's partition; raises unless loaded here."""
        p = self.txn_log.partition_for(transactional_id)
        if p in self.loading:
            raise _NotCoordinator(E.COORDINATOR_LOAD_IN_PROGRESS)
        epoch = self.loaded.get(p)
        if epoch is None:
            raise _NotCoordinator(E.NOT_COORDINATOR)
        return epoch

    def _get(self, transactional_id: str) -> TxnMetadata | None:
        m = self.txns.get(transactional_id)
        return None if m is None or m.state is S.DEAD else m

    # -- the txn log -------------------------------------------------------------------------
    async def _write(self, m: TxnMetadata, target: TxnRecord, pending: TxnState | None = None) -> ErrorCode:
        """Write ``target`` with ``pending`` as the transition; apply it once written."""
        epoch = m.coordinator_epoch
        m.pending = pending or target.state
        try:
            await self.txn_log.write(target)
        except StoreError as exc:
            m.pending = None
            code = _WRITE_ERRORS.get(exc.code, exc.code)
            log.info("%s: writing %s failed: %s", target.transactional_id, target.state.display, exc)
            return code
        except TimeoutError:
            m.pending = None
            return E.COORDINATOR_NOT_AVAILABLE
        m.pending = None
        p = self.txn_log.partition_for(target.transactional_id)
        if self.loaded.get(p) != epoch or self.txns.get(target.transactional_id) is not m:
            return E.NOT_COORDINATOR  # the partition moved (or was reloaded) meanwhile
        m.record = target
        if target.state is S.DEAD:
            self.txns.pop(target.transactional_id, None)
        return E.NONE

    # -- InitProducerId ----------------------------------------------------------------------
    async def init_producer_id(
        self,
        transactional_id: str,
        timeout_ms: int,
        expected: tuple[int, int] | None = None,
    ) -> InitResult:
        """A producer id and a bumped epoch for ``transactional_id`` (fencing older ones)."""
        if not transactional_id:
            return InitResult(E.INVALID_REQUEST)
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            return InitResult(E.INVALID_TRANSACTION_TIMEOUT)
        try:
            coordinator_epoch = self._check_owned(transactional_id)
        except _NotCoordinator as exc:
            return InitResult(exc.code)
        now = self.clock.wall_ms()
        m = self._get(transactional_id)
        if m is None:
            rec = TxnRecord(
                transactional_id, self.next_producer_id(), NO_EPOCH, timeout_ms, S.EMPTY, frozenset(), now, -1
            )
            m = self.txns[transactional_id] = TxnMetadata(rec, coordinator_epoch=coordinator_epoch)
        if m.pending is not None:
            return InitResult(E.CONCURRENT_TRANSACTIONS)
        r = m.record
        want = expected if expected is not None and expected[0] >= 0 else None
        # Kafka's isValidProducerId: a brand-new id, or the producer id it has (or had, when
        # its epoch ran out); the epoch is checked below
        if want is not None and not (
            r.producer_epoch == NO_EPOCH
            or want[0] == r.producer_id
            or (want[0] == r.previous_producer_id and want[1] >= MAX_EPOCH - 1)
        ):
            return InitResult(E.PRODUCER_FENCED)
        if r.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return InitResult(E.CONCURRENT_TRANSACTIONS)
        if r.state is S.ONGOING:
            # abort the open transaction with a bumped epoch; the client retries meanwhile
            self._spawn(self._fence_and_abort(m, "a new producer initialised the transactional id"))
            return InitResult(E.CONCURRENT_TRANSACTIONS)
        base = replace(
            r, state=S.EMPTY, partitions=frozenset(), timeout_ms=timeout_ms, update_ms=now, start_ms=-1
        )
        if r.producer_epoch >= MAX_EPOCH - 1 and (want is None or want[1] == r.producer_epoch):
            target = replace(
                base,
                producer_id=self.next_producer_id(),
                previous_producer_id=r.producer_id,
                producer_epoch=0,
                last_producer_epoch=NO_EPOCH,
            )
        elif want is None:
            # a new producer: nobody may claim the old epoch as a retry afterwards
            target = replace(base, producer_epoch=r.producer_epoch + 1, last_producer_epoch=NO_EPOCH)
        elif r.producer_epoch == NO_EPOCH or want[1] == r.producer_epoch:
            # KIP-360: the producer carries on after an error: bump, and remember its epoch
            target = replace(base, producer_epoch=r.producer_epoch + 1, last_producer_epoch=r.producer_epoch)
        elif want[1] == r.last_producer_epoch:
            target = replace(base)  # a retry of a bump whose answer was lost: the same answer
        else:
            return InitResult(E.PRODUCER_FENCED)
        code = await self._write(m, target)
        if code:
            return InitResult(code)
        log.info(
            "transactional id %r: producer id %d epoch %d",
            transactional_id,
            target.producer_id,
            target.producer_epoch,
        )
        return InitResult(E.NONE, target.producer_id, target.producer_epoch)

    # -- AddPartitionsToTxn / AddOffsetsToTxn --------------------------------------------------
    def _check_producer(self, transactional_id: str, producer_id: int, epoch: int) -> TxnMetadata:
        """The id's metadata when ``producer_id``/``epoch`` are its current ones, else raise."""
        if not transactional_id:
            raise _NotCoordinator(E.INVALID_REQUEST)
        self._check_owned(transactional_id)
        m = self._get(transactional_id)
        if m is None or m.producer_id != producer_id:
            raise _NotCoordinator(E.INVALID_PRODUCER_ID_MAPPING)
        if m.producer_epoch != epoch:
            raise _NotCoordinator(E.PRODUCER_FENCED)
        return m

    async def add_partitions(
        self, transactional_id: str, producer_id: int, epoch: int, partitions: Iterable[TP]
    ) -> ErrorCode:
        """Add partitions to the open transaction (opening one): NONE or the error for all."""
        try:
            m = self._check_producer(transactional_id, producer_id, epoch)
        except _NotCoordinator as exc:
            return exc.code
        if m.pending is not None or m.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return E.CONCURRENT_TRANSACTIONS
        r = m.record
        wanted = frozenset(partitions)
        if r.state is S.ONGOING and wanted <= r.partitions:
            return E.NONE
        now = self.clock.wall_ms()
        target = replace(
            r,
            state=S.ONGOING,
            partitions=r.partitions | wanted,
            update_ms=now,
            start_ms=now if r.state in _COMPLETE_OR_EMPTY else r.start_ms,
        )
        return await self._write(m, target)

    def verify_partitions(
        self, transactional_id: str, producer_id: int, epoch: int, partitions: Iterable[TP]
    ) -> dict[TP, ErrorCode]:
        """KIP-890: is each partition in the producer's open transaction? (no side effect)"""
        parts = list(partitions)
        try:
            m = self._check_producer(transactional_id, producer_id, epoch)
        except _NotCoordinator as exc:
            return dict.fromkeys(parts, exc.code)
        if m.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return dict.fromkeys(parts, E.CONCURRENT_TRANSACTIONS)
        # as Kafka, a pending transition is not checked: the partitions listed are those written
        return {tp: E.NONE if tp in m.record.partitions else E.INVALID_TXN_STATE for tp in parts}

    # -- EndTxn ------------------------------------------------------------------------------
    async def end_txn(self, transactional_id: str, producer_id: int, epoch: int, commit: bool) -> ErrorCode:
        """Commit or abort the open transaction: answered once PrepareCommit/Abort is written."""
        try:
            m = self._check_producer(transactional_id, producer_id, epoch)
        except _NotCoordinator as exc:
            return exc.code
        if m.pending is not None:
            return E.CONCURRENT_TRANSACTIONS
        st = m.state
        if st is S.ONGOING:
            return await self._prepare_end(m, commit)
        if st is S.COMPLETE_COMMIT:
            return E.NONE if commit else E.INVALID_TXN_STATE
        if st is S.COMPLETE_ABORT:
            return E.INVALID_TXN_STATE if commit else E.NONE
        if st is S.PREPARE_COMMIT:
            return E.CONCURRENT_TRANSACTIONS if commit else E.INVALID_TXN_STATE
        if st is S.PREPARE_ABORT:
            return E.INVALID_TXN_STATE if commit else E.CONCURRENT_TRANSACTIONS
        return E.INVALID_TXN_STATE  # Empty: no transaction open

    async def _prepare_end(self, m: TxnMetadata, commit: bool, bump: bool = False) -> ErrorCode:
        r = m.record
        target = replace(
            r,
            state=S.PREPARE_COMMIT if commit else S.PREPARE_ABORT,
            update_ms=self.clock.wall_ms(),
        )
        pending = None
        if bump:  # fence the current producer: the abort (and everything after) at epoch + 1
            target = replace(target, producer_epoch=r.producer_epoch + 1, last_producer_epoch=NO_EPOCH)
            pending = S.PREPARE_EPOCH_FENCE
        code = await self._write(m, target, pending)
        if code == E.NONE:
            self._start_completion(m)
        return code

    async def _fence_and_abort(self, m: TxnMetadata, why: str) -> None:
        if m.pending is not None or m.state is not S.ONGOING:
            return
        log.info(
            "transactional id %r: aborting the open transaction of producer %d epoch %d (%s)",
            m.record.transactional_id,
            m.producer_id,
            m.producer_epoch,
            why,
        )
        await self._prepare_end(m, False, bump=m.producer_epoch < MAX_EPOCH)

    # -- markers, then Complete* -------------------------------------------------------------
    def _start_completion(self, m: TxnMetadata) -> None:
        if m.completing is None or m.completing.done():
            m.completing = self._spawn(self._complete(m))

    async def _complete(self, m: TxnMetadata) -> None:
        r = m.record
        commit = r.state is S.PREPARE_COMMIT
        remaining = sorted(r.partitions)
        delay = MARKER_RETRY_S
        while remaining:
            if self.txns.get(r.transactional_id) is not m:
                return  # unloaded: the next coordinator resumes
            marker = TxnMarker(r.producer_id, r.producer_epoch, commit, m.coordinator_epoch, tuple(remaining))
            try:
                errors = await self.markers.write_markers(marker)
            except StoreError as exc:
                log.info("%s: markers not written yet (%s); retrying", r.transactional_id, exc)
                errors = dict.fromkeys(remaining, int(exc.code))
            left = []
            for tp in remaining:
                code = errors.get(tp, E.NONE)
                if code == E.NONE:
                    continue
                if code in _MARKER_GIVE_UP:
                    log.warning(
                        "%s: %s marker for %s-%d refused (%s): left out",
                        r.transactional_id,
                        "COMMIT" if commit else "ABORT",
                        *tp,
                        E(code).name,
                    )
                    continue
                left.append(tp)
            remaining = left
            if remaining:
                await self._sleep(delay)
                delay = min(delay * 2, MARKER_RETRY_MAX_S)
        while self.txns.get(r.transactional_id) is m:
            target = replace(
                m.record,
                state=S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT,
                partitions=frozenset(),
                update_ms=self.clock.wall_ms(),
            )
            code = await self._write(m, target)
            if code in (E.NONE, E.NOT_COORDINATOR):
                return
            await self._sleep(delay)
            delay = min(delay * 2, MARKER_RETRY_MAX_S)

    async def _sleep(self, seconds: float) -> None:
        fut = self.scheduler.create_future()

        def wake() -> None:
            if not fut.done():
                fut.set_result(None)

        self.scheduler.call_later(seconds, wake)
        await fut

    def _spawn(self, coro: Awaitable[None]) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("transaction coordinator task failed", exc_info=task.exception())

    # -- housekeeping ------------------------------------------------------------------------
    def abort_timed_out(self) -> list[str]:
        """Abort (with a bumped epoch) every transaction open longer than its timeout."""
        now = self.clock.wall_ms()
        out = []
        for m in list(self.txns.values()):
            r = m.record
            if r.state is S.ONGOING and m.pending is None and r.start_ms + r.timeout_ms < now:
                out.append(r.transactional_id)
                self._spawn(self._fence_and_abort(m, f"open longer than its timeout of {r.timeout_ms} ms"))
        return out

    def expire_transactional_ids(self) -> list[str]:
        """Remove ids idle for ``transactional.id.expiration.ms`` with no transaction open."""
        now = self.clock.wall_ms()
        out = []
        for m in list(self.txns.values()):
            r = m.record
            if (
                r.state in _COMPLETE_OR_EMPTY
                and m.pending is None
                and r.update_ms + self.config.id_expiration_ms <= now
            ):
                out.append(r.transactional_id)
                self._spawn(self._expire(m))
        return out

    async def _expire(self, m: TxnMetadata) -> None:
        await self._write(m, replace(m.record, state=S.DEAD, update_ms=self.clock.wall_ms()))

    # -- loading (leadership of __transaction_state partitions) -------------------------------
    def begin_load(self, partition: int) -> None:
        self.loading.add(partition)

    def load(self, partition: int, coordinator_epoch: int, records: Iterable[TxnRecord | str]) -> int:
        """Take over ``partition``: its records in log order (a str is a tombstone's id).

        Transactions found in PrepareCommit/PrepareAbort get their markers (again)."""
        self.unload(partition)
        latest: dict[str, TxnRecord | None] = {}
        for rec in records:
            if isinstance(rec, str):
                latest[rec] = None
            else:
                latest[rec.transactional_id] = rec
        n = 0
        for tid, last in latest.items():
            if last is None or last.state is S.DEAD:
                continue
            m = self.txns[tid] = TxnMetadata(last, coordinator_epoch=coordinator_epoch)
            n += 1
            if last.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                self._start_completion(m)
        self.loading.discard(partition)
        self.loaded[partition] = coordinator_epoch
        return n

    def unload(self, partition: int) -> None:
        self.loaded.pop(partition, None)
        self.loading.discard(partition)
        for tid in [t for t in self.txns if self.txn_log.partition_for(t) == partition]:
            m = self.txns.pop(tid)
            if m.completing is not None:
                m.completing.cancel()

    # -- operations (DescribeTransactions, ListTransactions, abort) ---------------------------
    def describe(self, transactional_id: str) -> tuple[ErrorCode, TxnMetadata | None]:
        try:
            self._check_owned(transactional_id)
        except _NotCoordinator as exc:
            return exc.code, None
        m = self._get(transactional_id)
        return (E.TRANSACTIONAL_ID_NOT_FOUND, None) if m is None else (E.NONE, m)

    def list_transactions(
        self,
        states: set[TxnState] | None = None,
        producer_ids: set[int] | None = None,
        min_duration_ms: int = -1,
    ) -> list[TxnMetadata]:
        now = self.clock.wall_ms()
        out = []
        for m in self.txns.values():
            if self.txn_log.partition_for(m.record.transactional_id) not in self.loaded:
                continue
            if states and m.state not in states:
                continue
            if producer_ids and m.producer_id not in producer_ids:
                continue
            if min_duration_ms >= 0 and (
                m.state is not S.ONGOING or now - m.record.start_ms < min_duration_ms
            ):
                continue
            out.append(m)
        return out

    async def stop(self) -> None:
        for t in list(self._tasks):
            t.cancel()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=1.0)
