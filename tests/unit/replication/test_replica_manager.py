"""The replica manager's housekeeping on the broker's clock (replication/replica_manager.py).

Retention, producer-id expiry and the logs it opens all read the one clock the broker passes
in; here that is a :class:`ManualClock`, so a test moves time past ``retention.ms`` or
``producer.id.expiration.ms`` and nothing sleeps. Single node: nothing here reconciles or
follows a leader, so the metadata cache is a stand-in.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from framework import config as cfg
from framework.clock import ManualClock
from framework.replication.replica_manager import ReplicaManager
from framework.storage.log import Log
from framework.storage.log_config import LogConfig
from framework.storage.log_manager import LogManager
from tests.support.storage import append, batch

RETENTION_MS = 60_000
EXPIRATION_MS = 120_000


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def logs(tmp_path: Path, clock: ManualClock) -> Iterator[LogManager]:
    m = LogManager(tmp_path, clock)
    m.start()
    yield m
    m.shutdown()


def manager(logs: LogManager, clock: ManualClock, freed: list[int] | None = None) -> ReplicaManager:
    config = cfg.BrokerConfig.load(overrides={"log.dirs": str(logs.dir)}, environ={})
    sink = freed if freed is not None else []
    single_node = SimpleNamespace(clustered=False)  # what periodic() asks of the metadata cache
    return ReplicaManager(1, config, logs, single_node, clock, sink.append)  # type: ignore[arg-type]


def events_log(logs: LogManager) -> Log:
    lc = LogConfig(retention_ms=RETENTION_MS, producer_id_expiration_ms=EXPIRATION_MS)
    return logs.open_log("events", 0, lc)


def test_the_logs_it_opens_keep_the_brokers_clock(logs: LogManager, clock: ManualClock) -> None:
    lg = events_log(logs)
    assert lg.clock is clock
    assert lg.active.created_ms == clock.wall_ms() == lg.last_flush_ms
    append(lg, batch(ts=clock.wall_ms()))
    clock.advance(5_000)
    assert lg.roll().created_ms == clock.wall_ms()


def test_segments_older_than_retention_ms_go_when_the_clock_passes_it(
    logs: LogManager, clock: ManualClock
) -> None:
    freed: list[int] = []
    rm = manager(logs, clock, freed)
    lg = events_log(logs)
    append(lg, batch(ts=clock.wall_ms()))
    old_size = lg.active.size
    lg.roll()
    clock.advance(10_000)
    append(lg, batch(ts=clock.wall_ms()))
    clock.advance(RETENTION_MS - 10_000)  # the first batch is exactly retention.ms old: kept
    rm.enforce_retention()
    assert (lg.log_start_offset, len(lg.segments), freed) == (0, 2, [])
    clock.advance(1)
    rm.enforce_retention()
    assert (lg.log_start_offset, len(lg.segments), freed) == (1, 1, [old_size])
    clock.advance(10_000)  # the second one too, now: the log rolls, an empty segment remains
    rm.enforce_retention()
    assert (lg.log_start_offset, lg.log_end_offset, lg.size_bytes) == (2, 2, 0)


def test_producer_ids_expire_on_the_brokers_clock(logs: LogManager, clock: ManualClock) -> None:
    rm = manager(logs, clock)
    lg = events_log(logs)
    append(lg, batch(pid=7, epoch=0, seq=0), now=clock.wall_ms())
    clock.advance(EXPIRATION_MS // 2)
    append(lg, batch(pid=8, epoch=0, seq=0), now=clock.wall_ms())
    clock.advance(EXPIRATION_MS // 2)
    rm.expire_producers()
    assert set(lg.producer_state.producers) == {7, 8}  # 7 is exactly expiration.ms idle: kept
    clock.advance(1)
    rm.expire_producers()
    assert set(lg.producer_state.producers) == {8}
    clock.advance(EXPIRATION_MS // 2)
    rm.expire_producers()
    assert lg.producer_state.producers == {}


def test_periodic_work_runs_at_the_configured_intervals(logs: LogManager, clock: ManualClock) -> None:
    work = dict((fn.__name__, ms) for ms, fn in manager(logs, clock).periodic())
    assert work == {
        "enforce_retention": cfg.key("log.retention.check.interval.ms").default,
        "flush": cfg.key("log.flush.scheduler.interval.ms").default,
        "checkpoint": 60_000,
        "expire_producers": cfg.key("producer.id.expiration.check.interval.ms").default,
        "clean": cfg.key("log.cleaner.backoff.ms").default,
    }
