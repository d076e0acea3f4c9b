"""Fetch and ListOffsets at read_committed over a real Log and Partition (no sockets): the last
stable offset bounds what a read_committed consumer sees, aborted transactions come with the
records, read_uncommitted is unchanged. Transactions are written straight into the log (the
transaction coordinator, and with it transactional produce, is a later step)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from framework.protocol import codec
from framework.protocol import records as rb
from framework.protocol.control import EndTxnMarker
from framework.protocol.messages.fetch import (
    FetchPartition,
    FetchRequest,
    FetchResponse,
    FetchTopic,
    PartitionData,
)
from framework.protocol.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
)
from framework.replication.partition import Partition
from framework.server.context import BrokerServices
from framework.server.handlers import fetch, list_offsets
from framework.storage.log import Log
from tests.support.broker_parts import NODE, Replicas, request_context, services
from tests.support.storage import NOW, append, batch, open_log, payload

P1, P2 = 501, 502


@pytest.fixture
def log(tmp_path: Path) -> Iterator[Log]:
    lg, _ = open_log(tmp_path / "events-0")
    yield lg
    lg.close()


def broker(log: Log) -> BrokerServices:
    part = Partition("events", 0, b"\x00" * 16, log, [NODE], NODE, 0, [NODE])
    return services(partitions=Replicas.of(part))


def txn(log: Log, pid: int, seq: int, n: int = 2) -> None:
    data = rb.build_batch(
        [(b"k", b"v")] * n,
        timestamp_ms=NOW,
        producer_id=pid,
        producer_epoch=0,
        base_sequence=seq,
        transactional=True,
    )
    log.append_as_leader(payload(data), NOW, transactional=True)
    log.high_watermark = log.log_end_offset


def end(log: Log, pid: int, commit: bool) -> None:
    log.append_txn_marker(EndTxnMarker(pid, 0, commit, 0), NOW)
    log.high_watermark = log.log_end_offset


def do_fetch(b: Any, offset: int, isolation: int, version: int = 12) -> PartitionData:
    req = FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=isolation,
        topics=[
            FetchTopic(
                topic="events",
                partitions=[FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)],
            )
        ],
    )
    req, _ = codec.decode(FetchRequest, version, codec.encode(req, version))
    answer = asyncio.run(fetch.handle(request_context(b, FetchRequest.API_KEY, version), req))
    assert isinstance(answer, FetchResponse)
    resp, _ = codec.decode(FetchResponse, version, codec.encode(answer, version))
    return resp.responses[0].partitions[0]


def last_offset(data: bytes) -> int:
    return max(h.last_offset for _, h in rb.iter_batches(data)) if data else -1


def latest(b: Any, isolation: int, timestamp: int = -1, version: int = 7) -> int:
    req = ListOffsetsRequest(
        replica_id=-1,
        isolation_level=isolation,
        topics=[
            ListOffsetsTopic(
                name="events", partitions=[ListOffsetsPartition(partition_index=0, timestamp=timestamp)]
            )
        ],
    )
    req, _ = codec.decode(ListOffsetsRequest, version, codec.encode(req, version))
    resp = asyncio.run(list_offsets.handle(request_context(b, ListOffsetsRequest.API_KEY, version), req))
    resp, _ = codec.decode(ListOffsetsResponse, version, codec.encode(resp, version))
    r = resp.topics[0].partitions[0]
    assert r.error_code == 0
    return int(r.offset)


def test_plain_data_reads_to_the_high_watermark_at_both_levels(log: Log) -> None:
    append(log, batch(3), batch(2))
    b = broker(log)
    for level in (0, 1):
        pd = do_fetch(b, 0, level)
        assert (pd.high_watermark, pd.last_stable_offset) == (5, 5)
        assert last_offset(bytes(pd.records or b"")) == 4
        assert pd.aborted_transactions == ([] if level else None)
        assert latest(b, level) == 5


def test_read_committed_stops_at_an_open_transaction(log: Log) -> None:
    append(log, batch(2))  # 0-1
    txn(log, P1, 0)  # 2-3, open
    append(log, batch(2))  # 4-5
    b = broker(log)
    committed = do_fetch(b, 0, 1)
    assert (committed.high_watermark, committed.last_stable_offset) == (6, 2)
    assert last_offset(bytes(committed.records or b"")) == 1
    assert last_offset(bytes(do_fetch(b, 0, 0).records or b"")) == 5
    assert do_fetch(b, 2, 1).records in (None, b"")  # nothing stable to read at the LSO
    assert (latest(b, 1), latest(b, 0)) == (2, 6)
    assert latest(b, 1, timestamp=NOW) == 0
    end(log, P1, commit=True)  # 6
    assert do_fetch(b, 0, 1).last_stable_offset == 7
    assert latest(b, 1) == 7


def test_aborted_transactions_come_with_the_records(log: Log) -> None:
    txn(log, P1, 0)  # 0-1
    txn(log, P2, 0)  # 2-3
    end(log, P1, commit=False)  # 4
    end(log, P2, commit=True)  # 5
    append(log, batch(1))  # 6
    b = broker(log)
    pd = do_fetch(b, 0, 1)
    assert pd.last_stable_offset == 7
    assert [(t.producer_id, t.first_offset) for t in pd.aborted_transactions or []] == [(P1, 0)]
    assert [(t.producer_id, t.first_offset) for t in do_fetch(b, 5, 1).aborted_transactions or []] == []
    assert do_fetch(b, 0, 0).aborted_transactions is None
