"""Transactions over real sockets: confluent-kafka's and aiokafka's transactional
producers against the transaction coordinator, read by read_committed / read_uncommitted
consumers.

Committed records are visible at read_committed, aborted ones never; a read_committed consumer
stops at an open transaction's first offset while read_uncommitted reads past it; a transaction
left open longer than its timeout is aborted by the coordinator; a zombie producer with the old
epoch is fenced; offsets sent with ``send_offsets_to_transaction`` become the group's only when
the transaction commits; a broker restarted mid-transaction recovers the coordinator's state
from ``__transaction_state``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from framework.client.wire import WireClient
from framework.protocol import records as rb
from framework.protocol.error_codes import ErrorCode as E
from framework.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse
from framework.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnTopic,
)
from framework.protocol.messages.end_txn import EndTxnRequest, EndTxnResponse
from framework.protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from framework.protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from framework.protocol.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestTopic,
    OffsetFetchResponse,
)
from framework.protocol.messages.produce import (
    PartitionProduceData,
    ProduceRequest,
    ProduceResponse,
    TopicProduceData,
)
from framework.protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
    TxnOffsetCommitResponse,
)
from testing import BrokerProcess
from tests.support.brokers import BrokerFactory, create_topic, quiet_logger
from tests.support.clients import consume

pytestmark = pytest.mark.integration


def txn_producer(bootstrap: str, tid: str, **extra: Any) -> Producer:
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "transactional.id": tid,
        "linger.ms": 5,
        "logger": quiet_logger(),
    }
    conf.update(extra)
    p = Producer(conf)
    p.init_transactions(30)
    return p


def wait_until(cond: Callable[[], bool], timeout: float = 30.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_commit_is_visible_and_abort_never_across_two_topics(broker: BrokerProcess, topic_name: Any) -> None:
    a, b = topic_name("txa"), topic_name("txb")
    create_topic(broker.bootstrap, a, 2)
    create_topic(broker.bootstrap, b, 1)
    p = txn_producer(broker.bootstrap, f"tx-{a}")
    p.begin_transaction()
    for i in range(50):
        p.produce(a, key=b"%d" % i, value=b"c%d" % i)
        p.produce(b, value=b"c%d" % i)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(50):
        p.produce(a, key=b"%d" % i, value=b"a%d" % i)
        p.produce(b, value=b"a%d" % i)
    p.flush(30)
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce(b, value=b"last")
    p.commit_transaction(30)
    want = sorted(b"c%d" % i for i in range(50))
    assert sorted(consume(broker.bootstrap, a, "read_committed", 2, expect=50)) == want
    got_b = consume(broker.bootstrap, b, "read_committed", 1, expect=51)
    assert sorted(got_b) == sorted([*want, b"last"])
    # read_uncommitted sees the aborted records too (they are in the log)
    assert len(consume(broker.bootstrap, b, "read_uncommitted", 1, expect=101)) == 101


def test_read_committed_stops_at_an_open_transaction(broker: BrokerProcess, topic_name: Any) -> None:
    t = topic_name("txopen")
    create_topic(broker.bootstrap, t, 1)
    plain = Producer({"bootstrap.servers": broker.bootstrap, "logger": quiet_logger()})
    plain.produce(t, value=b"before")
    plain.flush(10)
    p = txn_producer(broker.bootstrap, f"tx-{t}")
    p.begin_transaction()
    p.produce(t, value=b"open")
    p.flush(10)
    plain.produce(t, value=b"after")  # after the open transaction's first offset
    plain.flush(10)
    assert consume(broker.bootstrap, t, "read_uncommitted", expect=3) == [b"before", b"open", b"after"]
    assert consume(broker.bootstrap, t, "read_committed", idle_polls=3) == [b"before"]
    p.commit_transaction(30)
    assert consume(broker.bootstrap, t, "read_committed", expect=3) == [b"before", b"open", b"after"]


def test_zombie_with_the_old_epoch_is_fenced(broker: BrokerProcess, topic_name: Any) -> None:
    t = topic_name("txz")
    create_topic(broker.bootstrap, t, 1)
    tid = f"tx-{t}"
    old = txn_producer(broker.bootstrap, tid)
    old.begin_transaction()
    old.produce(t, value=b"zombie")
    old.flush(10)
    new = txn_producer(broker.bootstrap, tid)  # aborts the zombie's transaction, bumps the epoch
    new.begin_transaction()
    new.produce(t, value=b"new")
    new.commit_transaction(30)
    with pytest.raises(KafkaException) as exc:
        old.produce(t, value=b"zombie-2")
        old.commit_transaction(10)
    err = exc.value.args[0]
    assert err.code() in (
        KafkaError._FENCED,
        KafkaError.PRODUCER_FENCED,
        KafkaError.INVALID_PRODUCER_EPOCH,
    ), err
    assert consume(broker.bootstrap, t, "read_committed", expect=1) == [b"new"]


def test_transaction_timeout_aborts(broker_factory: BrokerFactory, topic_name: Any) -> None:
    b = broker_factory({"transaction.abort.timed.out.transaction.cleanup.interval.ms": 200})
    t = topic_name("txto")
    create_topic(b.bootstrap, t, 1)
    p = txn_producer(b.bootstrap, f"tx-{t}", **{"transaction.timeout.ms": 1000})
    p.begin_transaction()
    p.produce(t, value=b"doomed")
    p.flush(10)
    # the coordinator aborts it: the ABORT marker makes the partition stable again
    plain = Producer({"bootstrap.servers": b.bootstrap, "logger": quiet_logger()})
    plain.produce(t, value=b"after")
    plain.flush(10)
    wait_until(
        lambda: consume(b.bootstrap, t, "read_committed", idle_polls=2) == [b"after"],
        what="the timed-out transaction to be aborted",
    )
    with pytest.raises(KafkaException):
        p.commit_transaction(10)


def test_send_offsets_commit_only_with_the_transaction(broker: BrokerProcess, topic_name: Any) -> None:
    src, out = topic_name("txsrc"), topic_name("txout")
    create_topic(broker.bootstrap, src, 1)
    create_topic(broker.bootstrap, out, 1)
    group = f"g-{src}"
    c = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "logger": quiet_logger(),
        }
    )
    try:
        p = txn_producer(broker.bootstrap, f"tx-{src}")
        meta = c.consumer_group_metadata()
        # aborted: the offsets are not the group's
        p.begin_transaction()
        p.produce(out, value=b"x")
        p.send_offsets_to_transaction([TopicPartition(src, 0, 7)], meta, 30)
        p.abort_transaction(30)
        assert c.committed([TopicPartition(src, 0)], timeout=10)[0].offset < 0
        # committed: they are
        p.begin_transaction()
        p.produce(out, value=b"y")
        p.send_offsets_to_transaction([TopicPartition(src, 0, 9)], meta, 30)
        p.commit_transaction(30)
        wait_until(
            lambda: c.committed([TopicPartition(src, 0)], timeout=10)[0].offset == 9,
            what="the transaction's offsets",
        )
    finally:
        c.close()
    assert consume(broker.bootstrap, out, "read_committed", expect=1) == [b"y"]


def test_aiokafka_transactional_producer(broker: BrokerProcess, topic_name: Any) -> None:
    from aiokafka import AIOKafkaProducer

    t = topic_name("txaio")
    create_topic(broker.bootstrap, t, 2)

    async def run() -> None:
        p = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=f"tx-{t}")
        await p.start()
        try:
            async with p.transaction():
                for i in range(20):
                    await p.send(t, value=b"c%d" % i, partition=i % 2)
            with pytest.raises(RuntimeError):
                async with p.transaction():
                    await p.send_and_wait(t, value=b"aborted", partition=0)
                    raise RuntimeError("abort it")
        finally:
            await p.stop()

    asyncio.run(run())
    got = consume(broker.bootstrap, t, "read_committed", 2, expect=20)
    assert sorted(got) == sorted(b"c%d" % i for i in range(20))


def test_restart_mid_transaction_recovers_coordinator_state(
    broker_factory: BrokerFactory, topic_name: Any
) -> None:
    b = broker_factory()
    t = topic_name("txrs")
    create_topic(b.bootstrap, t, 1)
    tid = f"tx-{t}"
    p = txn_producer(b.bootstrap, tid)
    p.begin_transaction()
    p.produce(t, value=b"open")
    p.flush(10)
    b.stop()
    b.start()
    # the coordinator knows the open transaction: a new producer's init aborts it and fences
    # the old one, and the partition becomes stable
    new = txn_producer(b.bootstrap, tid)
    new.begin_transaction()
    new.produce(t, value=b"new")
    new.commit_transaction(30)
    assert consume(b.bootstrap, t, "read_committed", expect=1) == [b"new"]
    assert consume(b.bootstrap, t, "read_uncommitted", expect=2) == [b"open", b"new"]


def test_offsets_sent_before_a_restart_commit_after_it(
    broker_factory: BrokerFactory, topic_name: Any
) -> None:
    b = broker_factory()
    src, out = topic_name("txrs-src"), topic_name("txrs-out")
    create_topic(b.bootstrap, src, 1)
    create_topic(b.bootstrap, out, 1)
    group = f"g-{src}"
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "logger": quiet_logger()})
    try:
        p = txn_producer(b.bootstrap, f"tx-{src}")
        p.begin_transaction()
        p.produce(out, value=b"result")
        p.send_offsets_to_transaction([TopicPartition(src, 0, 42)], c.consumer_group_metadata(), 30)
        b.stop()  # the pending offsets are in __consumer_offsets, the transaction in __transaction_state
        b.start()
        p.commit_transaction(60)
        wait_until(
            lambda: c.committed([TopicPartition(src, 0)], timeout=10)[0].offset == 42,
            what="the transaction's offsets after the restart",
        )
    finally:
        c.close()
    assert consume(b.bootstrap, out, "read_committed", expect=1) == [b"result"]


def test_transactions_cli_lists_describes_and_aborts_a_hanging_transaction(
    broker: BrokerProcess, topic_name: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from framework.cli.main import main

    t = topic_name("txcli")
    create_topic(broker.bootstrap, t, 1)
    tid = "cli-" + t[-6:]
    p = txn_producer(broker.bootstrap, tid)
    p.begin_transaction()
    p.produce(t, value=b"hanging")
    p.flush(10)
    plain = Producer({"bootstrap.servers": broker.bootstrap, "logger": quiet_logger()})
    plain.produce(t, value=b"after")
    plain.flush(10)
    b = ["--bootstrap", broker.bootstrap]
    capsys.readouterr()
    assert main(["transactions", "list", "--state", "Ongoing", *b]) == 0
    assert tid in capsys.readouterr().out
    assert main(["transactions", "describe", tid, *b]) == 0
    out = capsys.readouterr().out
    assert "Ongoing" in out and f"{t}-0" in out
    assert main(["transactions", "describe-producers", "--topic", t, "--partition", "0", *b]) == 0
    assert main(["transactions", "abort", "--topic", t, "--partition", "0", "--start-offset", "5", *b]) == 2
    # the partition is stuck at the open transaction until its ABORT marker is written
    assert consume(broker.bootstrap, t, "read_committed", idle_polls=2) == []
    assert main(["transactions", "abort", "--topic", t, "--partition", "0", "--start-offset", "0", *b]) == 0
    assert consume(broker.bootstrap, t, "read_committed", expect=1) == [b"after"]
    assert main(["transactions", "describe", "nobody-" + t, *b]) == 2


# -- the transaction APIs request by request ------------------------------------------------------
def _wire_produce(w: WireClient, tid: str, t: str, pid: int, epoch: int, seq: int, part: int) -> int:
    """A transactional batch of one record to ``t``-``part``: the partition's error code."""
    batch = rb.build_batch(
        [(None, b"v")],
        timestamp_ms=int(time.time() * 1000),
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        transactional=True,
    )
    req = ProduceRequest(
        transactional_id=tid,
        acks=-1,
        timeout_ms=5000,
        topic_data=[
            TopicProduceData(name=t, partition_data=[PartitionProduceData(index=part, records=batch)])
        ],
    )
    for _ in range(100):  # Kafka: a new topic's partitions take a moment to get their leader
        r = w.send(req, ProduceResponse, 9)
        code = r.responses[0].partition_responses[0].error_code
        if code not in (E.NOT_LEADER_OR_FOLLOWER, E.UNKNOWN_TOPIC_OR_PARTITION):
            break
        time.sleep(0.1)
    return code


def _wire_add(w: WireClient, tid: str, t: str, pid: int, epoch: int, *parts: int) -> list[int]:
    """AddPartitionsToTxn of ``parts`` of ``t``: their error codes, in the order asked."""
    req = AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=tid,
        v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[AddPartitionsToTxnTopic(name=t, partitions=list(parts))],
    )
    r = w.send(req, AddPartitionsToTxnResponse, 3)
    found = {
        p.partition_index: p.partition_error_code
        for tr in r.results_by_topic_v3_and_below
        for p in tr.results_by_partition
    }
    return [found[p] for p in parts]  # (Kafka answers them in no particular order)


def _wire_init(w: WireClient, tid: str, timeout_ms: int) -> InitProducerIdResponse:
    # Kafka: FindCoordinator creates the coordinator's topic (NOT_COORDINATOR until then)
    for _ in range(100):
        w.send(FindCoordinatorRequest(key=tid, key_type=1), FindCoordinatorResponse, 3)
        req = InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=timeout_ms)
        r = w.send(req, InitProducerIdResponse, 4)
        if r.error_code not in (
            E.NOT_COORDINATOR,
            E.COORDINATOR_NOT_AVAILABLE,
            E.COORDINATOR_LOAD_IN_PROGRESS,
        ):
            break
        time.sleep(0.1)
    return r


def _wire_txn_offset_commit(w: WireClient, tid: str, group: str, t: str, pid: int, epoch: int) -> list[int]:
    """TxnOffsetCommit of offset 1 of ``t``-0 for ``group``: the partitions' error codes."""
    commit = TxnOffsetCommitRequest(
        transactional_id=tid,
        group_id=group,
        producer_id=pid,
        producer_epoch=epoch,
        generation_id=-1,
        topics=[
            TxnOffsetCommitRequestTopic(
                name=t,
                partitions=[TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=1)],
            )
        ],
    )
    for _ in range(100):  # Kafka: __consumer_offsets is made by the group's FindCoordinator
        w.send(FindCoordinatorRequest(key=group, key_type=0), FindCoordinatorResponse, 3)
        got = w.send(commit, TxnOffsetCommitResponse, 3)
        codes = [p.error_code for tr in got.topics for p in tr.partitions]
        if codes[0] not in (
            E.COORDINATOR_NOT_AVAILABLE,
            E.NOT_COORDINATOR,
            E.COORDINATOR_LOAD_IN_PROGRESS,
        ):
            break
        time.sleep(0.1)
    return codes


def _wire_fetched(w: WireClient, group: str, t: str, stable: bool) -> tuple[int, int]:
    """OffsetFetch of ``t``-0 for ``group``: (error code, committed offset)."""
    req = OffsetFetchRequest(
        group_id=group,
        topics=[OffsetFetchRequestTopic(name=t, partition_indexes=[0])],
        require_stable=stable,
    )
    part = w.send(req, OffsetFetchResponse, 7).topics[0].partitions[0]
    return part.error_code, part.committed_offset


def test_wire_a_transactional_batch_needs_its_partition_in_the_transaction(
    broker: BrokerProcess, topic_name: Any
) -> None:
    """KIP-890 part 1, KIP-447 (OffsetFetch require_stable) and the coordinator's error codes,
    request by request."""
    t = topic_name("txwire")
    create_topic(broker.bootstrap, t, 2)
    tid = f"tx-{t}"

    with WireClient(broker.bootstrap) as w:

        def produce(w: WireClient, pid: int, epoch: int, seq: int, part: int) -> int:
            return _wire_produce(w, tid, t, pid, epoch, seq, part)

        def add(w: WireClient, pid: int, epoch: int, *parts: int) -> list[int]:
            return _wire_add(w, tid, t, pid, epoch, *parts)

        def fetched(stable: bool) -> tuple[int, int]:
            return _wire_fetched(w, group, t, stable)

        assert _wire_init(w, tid, 10**9).error_code == E.INVALID_TRANSACTION_TIMEOUT
        r = _wire_init(w, tid, 60_000)
        assert r.error_code == E.NONE
        pid, epoch = r.producer_id, r.producer_epoch
        assert produce(w, pid, epoch, 0, 0) == E.INVALID_TXN_STATE  # not added: refused
        assert add(w, pid, epoch, 0) == [E.NONE]
        assert produce(w, pid, epoch, 0, 0) == E.NONE
        assert produce(w, pid, epoch, 0, 1) == E.INVALID_TXN_STATE  # partition 1 still not in it
        assert add(w, pid, epoch - 1, 1) == [E.PRODUCER_FENCED]
        assert add(w, pid + 1, epoch, 1) == [E.INVALID_PRODUCER_ID_MAPPING]
        assert add(w, pid, epoch, 1, 9) == [E.OPERATION_NOT_ATTEMPTED, E.UNKNOWN_TOPIC_OR_PARTITION]
        # offsets in the transaction: unstable for a read_committed consumer until it ends
        group = f"g-{t}"
        add_offsets = AddOffsetsToTxnRequest(
            transactional_id=tid, producer_id=pid, producer_epoch=epoch, group_id=group
        )
        assert w.send(add_offsets, AddOffsetsToTxnResponse, 3).error_code == E.NONE
        codes = _wire_txn_offset_commit(w, tid, group, t, pid, epoch)
        assert codes == [E.NONE]

        assert fetched(True) == (E.UNSTABLE_OFFSET_COMMIT, -1)
        assert fetched(False) == (E.NONE, -1)
        end = EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=True)
        assert w.send(end, EndTxnResponse, 3).error_code == E.NONE
        wait_until(lambda: fetched(True) == (E.NONE, 1), what="the transaction's offset")
        old = EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch - 1, committed=True)
        assert (
            w.send(old, EndTxnResponse, 1).error_code == E.INVALID_PRODUCER_EPOCH
        )  # v0-1: no PRODUCER_FENCED
    assert consume(broker.bootstrap, t, "read_committed", 2, expect=1) == [b"v"]
