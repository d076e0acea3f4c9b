"""The transaction coordinator (coordinator/transactions.py), driven as the handlers drive it.

A fake ``__transaction_state`` (:class:`FakeTxnLog`, every write recorded, optionally held
until the test releases it) and a fake marker writer (:class:`FakeMarkers`, answering the
error codes a test scripts) stand in for the broker; time is the manual clock of
tests/support/coordinator.py, so timeouts and retries are exact and nothing sleeps.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field

from framework.coordinator.transactions import (
    TP,
    TransactionCoordinator,
    TxnConfig,
    TxnRecord,
    TxnState,
)
from framework.errors import StoreError
from framework.protocol.error_codes import ErrorCode as E
from tests.support.coordinator import FakeMarkers, FakeScheduler, run_async, settle

S = TxnState
TID = "orders-tx"
A0, A1, B0 = ("a", 0), ("a", 1), ("b", 0)


@dataclass
class FakeTxnLog:
    records: list[TxnRecord] = field(default_factory=list)
    fail: StoreError | None = None
    gate: asyncio.Future[None] | None = None

    def partition_for(self, transactional_id: str) -> int:
        return 0

    async def write(self, record: TxnRecord) -> None:
        if self.gate is not None:
            await self.gate
        if self.fail is not None:
            raise self.fail
        self.records.append(record)

    def states(self) -> list[TxnState]:
        return [r.state for r in self.records]


class H:
    def __init__(self, **config: int) -> None:
        self.sched = FakeScheduler()
        self.log = FakeTxnLog()
        self.markers = FakeMarkers()
        self.pids = itertools.count(1000)
        self.c = TransactionCoordinator(
            self.sched,
            self.log,
            self.markers,
            lambda: next(self.pids),
            TxnConfig(**config),
            self.sched,
        )
        self.c.load(0, 5, [])

    async def init(self, tid: str = TID, timeout_ms: int = 60_000) -> tuple[int, int]:
        r = await self.c.init_producer_id(tid, timeout_ms)
        assert r.error == E.NONE, r
        return r.producer_id, r.producer_epoch

    async def open(self, *tps: TP) -> tuple[int, int]:
        pid, epoch = await self.init()
        assert await self.c.add_partitions(TID, pid, epoch, tps or [A0]) == E.NONE
        return pid, epoch

    def state(self, tid: str = TID) -> TxnState:
        return self.c.txns[tid].state


@run_async
async def test_init_gives_a_producer_id_and_each_init_bumps_the_epoch() -> None:
    h = H()
    pid, epoch = await h.init()
    assert (pid, epoch) == (1000, 0)
    assert await h.init() == (1000, 1)
    assert h.log.states() == [S.EMPTY, S.EMPTY]
    assert [r.producer_epoch for r in h.log.records] == [0, 1]


@run_async
async def test_init_refuses_a_timeout_above_the_max_and_ids_not_coordinated_here() -> None:
    h = H(max_timeout_ms=10_000)
    assert (await h.c.init_producer_id(TID, 10_001)).error == E.INVALID_TRANSACTION_TIMEOUT
    assert (await h.c.init_producer_id(TID, 0)).error == E.INVALID_TRANSACTION_TIMEOUT
    h.c.unload(0)
    assert (await h.c.init_producer_id(TID, 1000)).error == E.NOT_COORDINATOR
    h.c.begin_load(0)
    assert (await h.c.init_producer_id(TID, 1000)).error == E.COORDINATOR_LOAD_IN_PROGRESS


@run_async
async def test_add_partitions_opens_the_transaction_and_checks_the_producer() -> None:
    h = H()
    pid, epoch = await h.init()
    assert await h.c.add_partitions(TID, pid, epoch, [A0]) == E.NONE
    assert h.state() is S.ONGOING
    assert await h.c.add_partitions(TID, pid, epoch, [A0]) == E.NONE  # already in: nothing written
    assert await h.c.add_partitions(TID, pid, epoch, [A1, B0]) == E.NONE
    assert h.log.states() == [S.EMPTY, S.ONGOING, S.ONGOING]
    assert h.log.records[-1].partitions == {A0, A1, B0}
    assert await h.c.add_partitions(TID, pid, epoch - 1, [A0]) == E.PRODUCER_FENCED
    assert await h.c.add_partitions(TID, pid + 1, epoch, [A0]) == E.INVALID_PRODUCER_ID_MAPPING
    assert await h.c.add_partitions("other", pid, epoch, [A0]) == E.INVALID_PRODUCER_ID_MAPPING
    assert await h.c.add_partitions("", pid, epoch, [A0]) == E.INVALID_REQUEST


@run_async
async def test_commit_writes_prepare_then_markers_then_complete() -> None:
    h = H()
    pid, epoch = await h.open(A0, B0)
    assert await h.c.end_txn(TID, pid, epoch, True) == E.NONE
    await settle()
    assert h.log.states()[-2:] == [S.PREPARE_COMMIT, S.COMPLETE_COMMIT]
    (m,) = h.markers.sent
    assert (m.producer_id, m.producer_epoch, m.commit, m.coordinator_epoch) == (pid, epoch, True, 5)
    assert sorted(m.partitions) == [A0, B0]
    assert h.state() is S.COMPLETE_COMMIT and h.log.records[-1].partitions == frozenset()
    # a retried commit is fine, an abort of it is not
    assert await h.c.end_txn(TID, pid, epoch, True) == E.NONE
    assert await h.c.end_txn(TID, pid, epoch, False) == E.INVALID_TXN_STATE
    # no transaction open
    assert await h.c.end_txn(TID, pid, epoch + 1, True) == E.PRODUCER_FENCED


@run_async
async def test_end_txn_while_markers_are_pending_is_concurrent() -> None:
    h = H()
    pid, epoch = await h.open(A0)
    h.markers.script = [{A0: E.NOT_LEADER_OR_FOLLOWER}]
    assert await h.c.end_txn(TID, pid, epoch, False) == E.NONE
    await settle()
    assert h.state() is S.PREPARE_ABORT
    assert await h.c.end_txn(TID, pid, epoch, False) == E.CONCURRENT_TRANSACTIONS
    assert await h.c.end_txn(TID, pid, epoch, True) == E.INVALID_TXN_STATE
    assert await h.c.add_partitions(TID, pid, epoch, [A0]) == E.CONCURRENT_TRANSACTIONS
    assert h.c.verify_partitions(TID, pid, epoch, [A0]) == {A0: E.CONCURRENT_TRANSACTIONS}
    assert (await h.c.init_producer_id(TID, 1000)).error == E.CONCURRENT_TRANSACTIONS
    await h.sched.advance(0.2)  # the retry
    assert h.state() is S.COMPLETE_ABORT
    assert len(h.markers.sent) == 2


@run_async
async def test_markers_for_a_deleted_topic_are_given_up() -> None:
    h = H()
    pid, epoch = await h.open(A0, B0)
    h.markers.script = [{A0: E.NONE, B0: E.UNKNOWN_TOPIC_OR_PARTITION}]
    assert await h.c.end_txn(TID, pid, epoch, True) == E.NONE
    await settle()
    assert h.state() is S.COMPLETE_COMMIT
    assert len(h.markers.sent) == 1


@run_async
async def test_init_during_an_open_transaction_aborts_it_with_a_bumped_epoch() -> None:
    h = H()
    pid, epoch = await h.open(A0)
    r = await h.c.init_producer_id(TID, 60_000)
    assert r.error == E.CONCURRENT_TRANSACTIONS
    await settle()
    (m,) = h.markers.sent
    assert (m.commit, m.producer_epoch) == (False, epoch + 1)
    assert h.state() is S.COMPLETE_ABORT
    assert await h.init() == (pid, epoch + 2)
    # the zombie is fenced
    assert await h.c.add_partitions(TID, pid, epoch, [A0]) == E.PRODUCER_FENCED
    assert await h.c.end_txn(TID, pid, epoch, True) == E.PRODUCER_FENCED


@run_async
async def test_kip360_retry_with_the_previous_epoch_gets_the_same_answer() -> None:
    h = H()
    pid, epoch = await h.init()
    r = await h.c.init_producer_id(TID, 60_000, (pid, epoch))
    assert (r.error, r.producer_epoch) == (E.NONE, epoch + 1)
    again = await h.c.init_producer_id(TID, 60_000, (pid, epoch))  # the response was lost
    assert (again.error, again.producer_id, again.producer_epoch) == (E.NONE, pid, epoch + 1)
    assert (await h.c.init_producer_id(TID, 60_000, (pid, epoch - 1))).error == E.PRODUCER_FENCED
    assert (await h.c.init_producer_id(TID, 60_000, (pid + 7, epoch + 1))).error == E.PRODUCER_FENCED


@run_async
async def test_epoch_exhaustion_moves_to_a_new_producer_id() -> None:
    h = H()
    pid, _ = await h.init()
    m = h.c.txns[TID]
    m.record = TxnRecord(TID, pid, 32766, 60_000, S.EMPTY, frozenset(), 0, -1)
    new_pid, epoch = await h.init()
    assert new_pid != pid and epoch == 0


@run_async
async def test_a_write_in_flight_makes_other_requests_concurrent() -> None:
    h = H()
    pid, epoch = await h.init()
    h.log.gate = asyncio.get_running_loop().create_future()
    adding = asyncio.ensure_future(h.c.add_partitions(TID, pid, epoch, [A0]))
    await settle()
    assert await h.c.end_txn(TID, pid, epoch, True) == E.CONCURRENT_TRANSACTIONS
    assert h.c.verify_partitions(TID, pid, epoch, [A0]) == {A0: E.INVALID_TXN_STATE}  # not written yet
    h.log.gate.set_result(None)
    assert await adding == E.NONE


@run_async
async def test_a_failed_write_changes_nothing() -> None:
    h = H()
    pid, epoch = await h.init()
    h.log.fail = StoreError("not leader", E.NOT_LEADER_OR_FOLLOWER)
    assert await h.c.add_partitions(TID, pid, epoch, [A0]) == E.NOT_COORDINATOR
    h.log.fail = StoreError("short of replicas", E.NOT_ENOUGH_REPLICAS)
    assert await h.c.add_partitions(TID, pid, epoch, [A0]) == E.COORDINATOR_NOT_AVAILABLE
    assert h.state() is S.EMPTY and h.c.txns[TID].pending is None


@run_async
async def test_verify_partitions_kip890() -> None:
    h = H()
    pid, epoch = await h.open(A0)
    assert h.c.verify_partitions(TID, pid, epoch, [A0, A1]) == {A0: E.NONE, A1: E.INVALID_TXN_STATE}
    assert h.c.verify_partitions(TID, pid, epoch - 1, [A0]) == {A0: E.PRODUCER_FENCED}
    assert h.c.verify_partitions("nobody", pid, epoch, [A0]) == {A0: E.INVALID_PRODUCER_ID_MAPPING}


@run_async
async def test_a_transaction_open_past_its_timeout_is_aborted_and_its_producer_fenced() -> None:
    h = H()
    pid, epoch = await h.init(timeout_ms=5_000)
    assert await h.c.add_partitions(TID, pid, epoch, [A0]) == E.NONE
    await h.sched.advance(4)
    assert h.c.abort_timed_out() == []
    await h.sched.advance(1.5)
    assert h.c.abort_timed_out() == [TID]
    await settle()
    (m,) = h.markers.sent
    assert (m.commit, m.producer_epoch) == (False, epoch + 1)
    assert h.state() is S.COMPLETE_ABORT
    assert await h.c.end_txn(TID, pid, epoch, True) == E.PRODUCER_FENCED
    assert await h.init() == (pid, epoch + 2)


@run_async
async def test_idle_transactional_ids_expire() -> None:
    h = H(id_expiration_ms=60_000)
    await h.init()
    await h.init("busy")
    await h.sched.advance(30)
    await h.init("busy")  # used again: its clock restarts
    await h.sched.advance(31)
    assert h.c.expire_transactional_ids() == [TID]
    await settle()
    assert TID not in h.c.txns and "busy" in h.c.txns
    assert h.log.records[-1].state is S.DEAD
    assert h.c.describe(TID)[0] == E.TRANSACTIONAL_ID_NOT_FOUND


@run_async
async def test_an_open_transaction_does_not_expire() -> None:
    h = H(id_expiration_ms=1_000)
    await h.open(A0)
    await h.sched.advance(5)
    assert h.c.expire_transactional_ids() == []


@run_async
async def test_load_restores_state_and_resumes_prepared_transactions() -> None:
    h = H()
    recs: list[TxnRecord | str] = [
        TxnRecord("t1", 1, 3, 60_000, S.ONGOING, frozenset({A0}), 1, 1),
        TxnRecord("t2", 2, 0, 60_000, S.ONGOING, frozenset({A0, B0}), 1, 1),
        TxnRecord("t2", 2, 0, 60_000, S.PREPARE_COMMIT, frozenset({A0, B0}), 2, 1),
        TxnRecord("t3", 3, 0, 60_000, S.EMPTY, frozenset(), 1, -1),
        "t3",  # tombstone: expired
    ]
    assert h.c.load(0, 9, recs) == 2
    await settle()
    assert h.state("t1") is S.ONGOING
    assert h.state("t2") is S.COMPLETE_COMMIT
    (m,) = h.markers.sent
    assert (m.producer_id, m.commit, m.coordinator_epoch, sorted(m.partitions)) == (2, True, 9, [A0, B0])
    assert "t3" not in h.c.txns
    # the open one continues with its producer's epoch
    assert await h.c.end_txn("t1", 1, 3, False) == E.NONE


@run_async
async def test_unload_stops_completion_and_answers_not_coordinator() -> None:
    h = H()
    pid, epoch = await h.open(A0)
    h.markers.script = [{A0: E.NOT_LEADER_OR_FOLLOWER}]
    assert await h.c.end_txn(TID, pid, epoch, True) == E.NONE
    await settle()
    h.c.unload(0)
    await h.sched.advance(1)
    assert len(h.markers.sent) == 1
    assert await h.c.end_txn(TID, pid, epoch, True) == E.NOT_COORDINATOR


@run_async
async def test_list_and_describe() -> None:
    h = H()
    await h.open(A0)
    await h.init("idle")
    assert {m.record.transactional_id for m in h.c.list_transactions()} == {TID, "idle"}
    assert [m.record.transactional_id for m in h.c.list_transactions({S.ONGOING})] == [TID]
    await h.sched.advance(10)
    assert [m.record.transactional_id for m in h.c.list_transactions(min_duration_ms=5_000)] == [TID]
    code, m = h.c.describe(TID)
    assert code == E.NONE and m is not None and m.record.partitions == {A0}


@run_async
async def test_a_fenced_zombie_cannot_claim_its_old_epoch_as_a_kip360_retry() -> None:
    h = H()
    pid, old = await h.init()
    assert await h.init() == (pid, old + 1)  # a new instance, without an expected epoch
    r = await h.c.init_producer_id(TID, 60_000, (pid, old))  # the zombie tries to recover
    assert r.error == E.PRODUCER_FENCED
