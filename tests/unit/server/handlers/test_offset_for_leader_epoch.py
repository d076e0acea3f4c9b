"""OffsetForLeaderEpoch handler over a real Log and Partition (no sockets): requests and
responses pass through the codec at every served version."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from framework.protocol import codec
from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.offset_for_leader_epoch import (
    EpochEndOffset,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from framework.replication.partition import Partition
from framework.server.context import BrokerServices
from framework.server.handlers import offset_for_leader_epoch as handler
from framework.server.router import supported_versions
from framework.storage.log import Log
from tests.support.broker_parts import NODE, OneNode, Replicas, request_context, services
from tests.support.storage import append, batch, open_log

VERSIONS = [2, 3, 4]


@pytest.fixture
def log(tmp_path: Path) -> Iterator[Log]:
    lg, _ = open_log(tmp_path / "events-0")
    yield lg
    lg.close()


def broker(*parts: Partition, node_id: int = NODE) -> BrokerServices:
    """What the handler sees: the replica manager's look-ups over these partitions, and the node id."""
    return services(partitions=Replicas({"events": list(parts)}, node_id=node_id), cluster=OneNode(node_id))


def partition(log: Log, *, leader: int = NODE, epoch: int = 0, index: int = 0) -> Partition:
    return Partition("events", index, b"\x00" * 16, log, [leader], leader, epoch, [leader])


def ask(
    b: Any, version: int, *queries: tuple[int, int, int], topic: str = "events", replica_id: int = -1
) -> list[EpochEndOffset]:
    """(partition, current_leader_epoch, leader_epoch) queries → the partition answers."""
    req = OffsetForLeaderEpochRequest(
        replica_id=replica_id,
        topics=[
            OffsetForLeaderTopic(
                topic=topic,
                partitions=[OffsetForLeaderPartition(p, cur, e) for p, cur, e in queries],
            )
        ],
    )
    req, _ = codec.decode(OffsetForLeaderEpochRequest, version, codec.encode(req, version))
    resp = asyncio.run(handler.handle(request_context(b, OffsetForLeaderEpochRequest.API_KEY, version), req))
    resp, _ = codec.decode(OffsetForLeaderEpochResponse, version, codec.encode(resp, version))
    assert [t.topic for t in resp.topics] == [topic]
    return resp.topics[0].partitions


def answer(r: EpochEndOffset) -> tuple[int, int, int]:
    return r.error_code, r.leader_epoch, r.end_offset


def test_served_and_advertised_at_versions_2_to_4() -> None:
    assert (23, 2, 4) in supported_versions()


@pytest.mark.parametrize("version", VERSIONS)
def test_single_broker_epoch_zero_ends_at_the_log_end(log: Log, version: int) -> None:
    for _ in range(3):
        append(log, batch(2))
    b = broker(partition(log))
    assert [answer(r) for r in ask(b, version, (0, 0, 0), (0, -1, 0))] == [(0, 0, 6), (0, 0, 6)]
    assert [answer(r) for r in ask(b, version, (0, 0, 1), (0, 0, -1))] == [(0, -1, -1), (0, -1, -1)]


def test_empty_log_answers_the_current_epoch_with_the_log_end(log: Log) -> None:
    """Kafka records the epoch start when a replica becomes leader, before any write; a
    consumer validating a committed position on an empty partition gets (0, 0)."""
    b = broker(partition(log))
    assert answer(ask(b, 4, (0, 0, 0))[0]) == (0, 0, 0)
    assert log.epochs.entries() == [(0, 0)]


def test_after_leader_changes_each_epoch_ends_where_the_next_starts(log: Log) -> None:
    append(log, batch(2))
    log.become_leader(3)
    append(log, batch(4))
    log.become_leader(5)
    append(log, batch(1))
    b = broker(partition(log, epoch=5))
    got = [answer(r) for r in ask(b, 4, (0, 5, 0), (0, 5, 2), (0, 5, 3), (0, 5, 4), (0, 5, 5), (0, 5, 6))]
    assert got == [(0, 0, 2), (0, 0, 2), (0, 3, 6), (0, 3, 6), (0, 5, 7), (0, -1, -1)]


def test_a_follower_replica_is_answered_the_same_way(log: Log) -> None:
    append(log, batch(2))
    assert answer(ask(broker(partition(log)), 3, (0, 0, 0), replica_id=2)[0]) == (0, 0, 2)


def test_unknown_topic_or_partition(log: Log) -> None:
    b = broker(partition(log))
    unknown = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert [r.error_code for r in ask(b, 4, (0, 0, 0), topic="nope")] == [unknown]
    assert [answer(r) for r in ask(b, 4, (5, 0, 0), (-1, 0, 0))] == [(unknown, -1, -1)] * 2
    b.partitions.partitions["events"][0].deleted = True
    assert ask(b, 4, (0, 0, 0))[0].error_code == unknown


def test_not_the_leader(log: Log) -> None:
    append(log, batch(1))
    b = broker(partition(log, leader=2))
    assert answer(ask(b, 4, (0, 0, 0))[0]) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, -1)


def test_no_replica_here(log: Log) -> None:
    b = broker(partition(log))
    b.partitions.partitions["events"].append(None)  # partition 1 lives on other brokers only
    assert answer(ask(b, 4, (1, 0, 0))[0]) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, -1)


@pytest.mark.parametrize(
    ("current", "code"),
    [(3, ErrorCode.FENCED_LEADER_EPOCH), (5, ErrorCode.UNKNOWN_LEADER_EPOCH), (4, 0), (-1, 0)],
)
def test_current_leader_epoch_is_checked_first(log: Log, current: int, code: int) -> None:
    log.become_leader(4)
    append(log, batch(1))
    for leader in (NODE, 2):  # fencing wins over leadership, as in Kafka
        r = ask(broker(partition(log, leader=leader, epoch=4)), 2, (0, current, 4))[0]
        if code:
            assert answer(r) == (code, -1, -1)
        elif leader == NODE:
            assert answer(r) == (0, 4, 1)
        else:
            assert r.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_error_response_covers_every_partition() -> None:
    req = OffsetForLeaderEpochRequest(
        topics=[OffsetForLeaderTopic("a", [OffsetForLeaderPartition(0), OffsetForLeaderPartition(3)])]
    )
    resp = handler.error_response(req, ErrorCode.KAFKA_STORAGE_ERROR, "disk")
    assert [answer(p) for p in resp.topics[0].partitions] == [(ErrorCode.KAFKA_STORAGE_ERROR, -1, -1)] * 2
    assert [p.partition for p in resp.topics[0].partitions] == [0, 3]
