"""ListOffsets on a leader elected a moment ago, whose high watermark still lags the start of
its epoch: "latest" is OFFSET_NOT_AVAILABLE (retriable) rather than an offset lower than one the
previous leader acknowledged, as Kafka's ``Partition.fetchOffsetForTimestamp``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from framework.errors import OffsetNotAvailable
from framework.replication.partition import Partition
from framework.server.handlers.list_offsets import EARLIEST, LATEST, MAX_TIMESTAMP, lookup
from framework.storage.log import Log
from tests.support.storage import NOW, batch, cfg, open_log, payload


@pytest.fixture
def log(tmp_path: Path) -> Iterator[Log]:
    lg, _ = open_log(tmp_path / "events-0", cfg(segment_bytes=1 << 20))
    yield lg
    lg.close()


def new_leader(lg: Log) -> Partition:
    """Broker 1 follows with 10 records of which it knows 4 committed, then is elected."""
    lg.append_as_leader(payload(batch(4, ts=NOW), batch(6, ts=NOW + 10)), NOW)
    lg.high_watermark = 4
    p = Partition(
        topic="events", index=0, topic_id=b"\x00" * 16, log=lg, replicas=[1, 2, 3],
        leader_id=-2, leader_epoch=-1, node_id=1, alter_isr=lambda _p, _isr: None,
    )  # fmt: skip
    assert p.apply_state(1, 1, [1, 2, 3], 1, [1, 2, 3], NOW) == "leader"
    assert p.epoch_start_offset == 10 and p.high_watermark == 4
    return p


def test_latest_is_not_available_until_the_high_watermark_reaches_the_epoch_start(log: Log) -> None:
    p = new_leader(log)
    with pytest.raises(OffsetNotAvailable, match="has not reached the start of its epoch"):
        lookup(p, LATEST)
    with pytest.raises(OffsetNotAvailable):
        lookup(p, LATEST, isolation_level=1)
    assert lookup(p, EARLIEST) == (0, -1)
    assert lookup(p, NOW) == (0, NOW)  # found below the high watermark: answered
    with pytest.raises(OffsetNotAvailable):
        lookup(p, NOW + 5)  # would be offset 4, not known committed yet
    with pytest.raises(OffsetNotAvailable):
        lookup(p, MAX_TIMESTAMP)
    p.follower_fetched(2, 10, NOW)
    p.follower_fetched(3, 10, NOW)
    assert p.high_watermark == 10
    assert lookup(p, LATEST) == (10, -1)
    assert lookup(p, NOW + 5) == (4, NOW + 10)
    assert lookup(p, NOW + 50) == (-1, -1)  # nothing that late: no error once caught up
