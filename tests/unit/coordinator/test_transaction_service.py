"""The transaction coordinator as the broker wires it (coordinator/transaction_service.py).

The service is given the broker's clock and passes it on: the coordinator's transaction
timeouts and transactional-id expiry, and the timestamps of ``__transaction_state``'s records,
all read it. Here it is a :class:`ManualClock` over a real ``__transaction_state`` log on one
node, so the service's periodic work is driven past a timeout without sleeping.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from types import SimpleNamespace

from framework import config as cfg
from framework.clock import ManualClock
from framework.coordinator.transaction_log import TOPIC
from framework.coordinator.transaction_service import TransactionService
from framework.coordinator.transactions import TxnState
from framework.protocol.error_codes import ErrorCode as E
from framework.replication.partition import Partition
from framework.storage.log import Log
from framework.storage.log_config import LogConfig
from tests.support.coordinator import FakeMarkers, FakeScheduler, run_async, settle

TID = "orders-tx"
EXPIRATION_MS = 60_000


class StateTopic:
    """One ``__transaction_state`` partition led here (the replica manager's look-ups)."""

    def __init__(self, root: Path, clock: ManualClock) -> None:
        lc = LogConfig(compact=True, delete=False)
        lg = Log.open(root / f"{TOPIC}-0", TOPIC, 0, lc, clock=clock)[0]
        self.partition = Partition(TOPIC, 0, bytes(16), lg, [1], 1, isr=[1])

    def replica(self, topic: str, index: int) -> Partition:
        assert (topic, index) == (TOPIC, 0)
        return self.partition

    def topic_partitions(self, topic: str) -> list[Partition] | None:
        return [self.partition] if topic == TOPIC else None


def service(root: Path, clock: ManualClock) -> tuple[TransactionService, FakeMarkers, Log]:
    config = cfg.BrokerConfig.load(overrides={"transactional.id.expiration.ms": EXPIRATION_MS}, environ={})
    cache = SimpleNamespace(topics={TOPIC: SimpleNamespace(partitions=1)}, clustered=False)
    state, markers, ids = StateTopic(root, clock), FakeMarkers(), itertools.count(1000)
    svc = TransactionService(
        config,
        cache,
        None,
        state,
        FakeScheduler(),
        markers,
        lambda: next(ids),
        clock,  # type: ignore[arg-type]
    )
    svc.load_all()
    return svc, markers, state.partition.log


@run_async
async def test_a_transaction_open_past_its_timeout_on_the_brokers_clock_is_aborted(tmp_path: Path) -> None:
    clock = ManualClock()
    svc, markers, lg = service(tmp_path, clock)
    c = svc.coordinator
    r = await c.init_producer_id(TID, 5_000)
    assert await c.add_partitions(TID, r.producer_id, r.producer_epoch, [("events", 0)]) == E.NONE
    assert lg.active.max_timestamp == clock.wall_ms()  # the state record's time is the clock's
    clock.advance(5_000)  # open exactly transaction.timeout.ms: not yet
    svc.abort_timed_out()
    await settle()
    assert markers.sent == [] and c.txns[TID].state is TxnState.ONGOING
    clock.advance(1)
    svc.abort_timed_out()
    await settle()
    (m,) = markers.sent
    assert (m.commit, m.producer_epoch, m.partitions) == (False, r.producer_epoch + 1, (("events", 0),))
    assert c.txns[TID].state is TxnState.COMPLETE_ABORT
    assert c.txns[TID].record.update_ms == lg.active.max_timestamp == clock.wall_ms()


@run_async
async def test_idle_transactional_ids_expire_on_the_brokers_clock(tmp_path: Path) -> None:
    clock = ManualClock()
    svc, _, _ = service(tmp_path, clock)
    assert (await svc.coordinator.init_producer_id(TID, 5_000)).error == E.NONE
    clock.advance(EXPIRATION_MS - 1)
    svc.expire_ids()
    await settle()
    assert TID in svc.coordinator.txns
    clock.advance(1)  # idle transactional.id.expiration.ms: removed
    svc.expire_ids()
    await settle()
    assert svc.coordinator.describe(TID)[0] == E.TRANSACTIONAL_ID_NOT_FOUND


def test_its_periodic_work_runs_at_the_configured_intervals(tmp_path: Path) -> None:
    svc = service(tmp_path, ManualClock())[0]
    assert {fn.__name__: ms for ms, fn in svc.periodic()} == {
        "abort_timed_out": cfg.key("transaction.abort.timed.out.transaction.cleanup.interval.ms").default,
        "expire_ids": cfg.key("transaction.remove.expired.transaction.cleanup.interval.ms").default,
    }
