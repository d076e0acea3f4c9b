"""``sftraffic transactions list|describe|describe-producers|abort``: like Kafka's
``kafka-transactions.sh``, over the Kafka protocol (works against any Kafka cluster).

* ``list``: ListTransactions to every broker (each answers for the ids it coordinates);
* ``describe ID``: FindCoordinator (transaction) then DescribeTransactions to the coordinator;
* ``describe-producers --topic T --partition P``: DescribeProducers to the partition's leader;
* ``abort --topic T --partition P --start-offset N``: a hanging transaction (its coordinator
  lost it, so no marker will ever come and read_committed consumers stop at it): the producer
  whose open transaction starts at offset N is found with DescribeProducers, then an ABORT
  marker is written with WriteTxnMarkers to the leader, as Kafka's tool does. ``--producer-id
  --producer-epoch --coordinator-epoch`` give the producer directly.

The shared connection options (``-b/--bootstrap-server``, ``--command-config FILE``, ``-X``);
the same security settings for every broker asked.

``-o json``: ``list``: ``{"transactions": [{"transactional_id", "coordinator_id", "producer_id",
"transaction_state"}]}``; ``describe``: ``{"coordinator_id", "transactional_id", "producer_id",
"producer_epoch", "transaction_state", "transaction_timeout_ms", "transaction_start_time_ms",
"topic_partitions": [{"topic", "partition"}]}``; ``describe-producers``: ``{"topic",
"partition", "active_producers": [{"producer_id", "producer_epoch", "last_sequence",
"last_timestamp", "coordinator_epoch", "current_txn_start_offset"}]}``.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt

from framework.cli.output import command, command_group, connect, console, json_wanted, print_json, table
from framework.client.connection import Connection
from framework.client.wire import WireClient
from framework.errors import StoreError
from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.describe_producers import (
    DescribeProducersRequest,
    DescribeProducersResponse,
    ProducerState,
    TopicRequest,
)
from framework.protocol.messages.describe_transactions import (
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
)
from framework.protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from framework.protocol.messages.list_transactions import ListTransactionsRequest, ListTransactionsResponse
from framework.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic, MetadataResponse
from framework.protocol.messages.write_txn_markers import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)

EXAMPLES = """\
  sftraffic transactions list --state Ongoing
  sftraffic transactions describe my-txn-id -o json
  sftraffic transactions describe-producers --topic traffic.speeds --partition 0
  sftraffic transactions abort --topic traffic.speeds --partition 0 --start-offset 1234"""


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    tsub = command_group(
        sub,
        "transactions",
        "transactions: list, describe, producers, abort a hanging one",
        "Transactions over the Kafka protocol, as kafka-transactions.",
        EXAMPLES,
    )

    ls = command(
        tsub,
        "list",
        "transactional ids and their states (every broker asked)",
        "sftraffic transactions list --state Ongoing -o json",
        output=True,
    )
    ls.add_argument("--state", action="append", default=[], help="only this state (repeatable), e.g. Ongoing")
    ls.set_defaults(func=list_)

    d = command(
        tsub,
        "describe",
        "one transactional id: state, producer, partitions",
        "sftraffic transactions describe my-txn-id",
        output=True,
    )
    d.add_argument("transactional_id")
    d.set_defaults(func=describe)

    dp = command(
        tsub,
        "describe-producers",
        "active producers of a partition",
        "sftraffic transactions describe-producers --topic traffic.speeds --partition 0",
        output=True,
    )
    dp.add_argument("--topic", required=True)
    dp.add_argument("--partition", type=int, required=True)
    dp.set_defaults(func=describe_producers)

    a = command(
        tsub,
        "abort",
        "write an ABORT marker for a hanging transaction",
        "sftraffic transactions abort --topic traffic.speeds --partition 0 --start-offset 1234",
    )
    a.add_argument("--topic", required=True)
    a.add_argument("--partition", type=int, required=True)
    a.add_argument("--start-offset", type=int, help="first offset of the hanging transaction")
    a.add_argument("--producer-id", type=int)
    a.add_argument("--producer-epoch", type=int)
    a.add_argument("--coordinator-epoch", type=int, default=-1)
    a.set_defaults(func=abort)


def _at(conn: Connection, address: str | None = None) -> WireClient:
    """A wire client to ``address`` (default: the bootstrap broker) with ``conn``'s security."""
    return (dataclasses.replace(conn, bootstrap=address) if address else conn).wire()


def _metadata(conn: Connection, topic: str | None = None) -> MetadataResponse:
    topics = None if topic is None else [MetadataRequestTopic(name=topic)]
    with _at(conn) as w:
        return w.send(MetadataRequest(topics=topics, allow_auto_topic_creation=False), MetadataResponse)


def _brokers(md: MetadataResponse) -> dict[int, str]:
    return {b.node_id: f"{b.host}:{b.port}" for b in md.brokers}


def _leader(conn: Connection, topic: str, partition: int) -> str:
    md = _metadata(conn, topic)
    for t in md.topics:
        if t.name != topic:
            continue
        if t.error_code:
            raise StoreError(f"topic {topic}: {ErrorCode(t.error_code).name}")
        for p in t.partitions:
            if p.partition_index == partition:
                addr = _brokers(md).get(p.leader_id)
                if addr is None:
                    raise StoreError(f"{topic}-{partition} has no leader now; retry")
                return addr
    raise StoreError(f"{topic}-{partition} does not exist")


def _check(code: int, what: str) -> None:
    if code:
        raise StoreError(f"{what}: {ErrorCode(code).name}", ErrorCode(code))


def list_(args: argparse.Namespace) -> int:
    conn = connect(args)
    md = _metadata(conn)
    rows = []
    for node, addr in sorted(_brokers(md).items()):
        with _at(conn, addr) as w:
            r = w.send(ListTransactionsRequest(state_filters=list(args.state)), ListTransactionsResponse)
        _check(r.error_code, f"ListTransactions on broker {node}")
        if r.unknown_state_filters:
            raise StoreError(f"unknown state(s): {', '.join(r.unknown_state_filters)}")
        rows += [(s.transactional_id, node, s.producer_id, s.transaction_state) for s in r.transaction_states]
    rows.sort()
    if json_wanted(args):
        keys = ("transactional_id", "coordinator_id", "producer_id", "transaction_state")
        print_json({"transactions": [dict(zip(keys, row, strict=True)) for row in rows]})
        return 0
    t = table("transactional id", "coordinator", "producer id", "state")
    for tid, node, pid, state in rows:
        t.add_row(tid, str(node), str(pid), state)
    console.print(t)
    return 0


def describe(args: argparse.Namespace) -> int:
    tid = args.transactional_id
    conn = connect(args)
    with _at(conn) as w:
        fc = w.send(
            FindCoordinatorRequest(key=tid, key_type=1, coordinator_keys=[tid]), FindCoordinatorResponse
        )
    c = fc.coordinators[0] if fc.coordinators else None
    code, node, addr = (
        (c.error_code, c.node_id, f"{c.host}:{c.port}")
        if c
        else (fc.error_code, fc.node_id, f"{fc.host}:{fc.port}")
    )
    _check(code, f"the coordinator of {tid!r}")
    with _at(conn, addr) as w:
        r = w.send(DescribeTransactionsRequest(transactional_ids=[tid]), DescribeTransactionsResponse)
    (s,) = r.transaction_states
    _check(s.error_code, f"transactional id {tid!r}")
    doc = {
        "coordinator_id": node,
        "transactional_id": tid,
        "producer_id": s.producer_id,
        "producer_epoch": s.producer_epoch,
        "transaction_state": s.transaction_state,
        "transaction_timeout_ms": s.transaction_timeout_ms,
        "transaction_start_time_ms": s.transaction_start_time_ms,
        "topic_partitions": [{"topic": d.topic, "partition": p} for d in s.topics for p in d.partitions],
    }
    if json_wanted(args):
        print_json(doc)
        return 0
    started = (
        dt.datetime.fromtimestamp(s.transaction_start_time_ms / 1000, dt.UTC).isoformat(
            timespec="milliseconds"
        )
        if s.transaction_start_time_ms >= 0
        else "-"
    )
    parts = ", ".join(f"{d.topic}-{p}" for d in s.topics for p in d.partitions) or "-"
    t = table("field", "value")
    for k, v in [
        ("coordinator", str(node)),
        ("transactional id", tid),
        ("producer id", str(s.producer_id)),
        ("producer epoch", str(s.producer_epoch)),
        ("state", s.transaction_state),
        ("timeout ms", str(s.transaction_timeout_ms)),
        ("started", started),
        ("partitions", parts),
    ]:
        t.add_row(k, v)
    console.print(t)
    return 0


def _producers(conn: Connection, args: argparse.Namespace, addr: str) -> list[ProducerState]:
    with _at(conn, addr) as w:
        r = w.send(
            DescribeProducersRequest(
                topics=[TopicRequest(name=args.topic, partition_indexes=[args.partition])]
            ),
            DescribeProducersResponse,
        )
    (p,) = r.topics[0].partitions
    _check(p.error_code, f"{args.topic}-{args.partition}")
    return list(p.active_producers)


def describe_producers(args: argparse.Namespace) -> int:
    conn = connect(args)
    producers = _producers(conn, args, _leader(conn, args.topic, args.partition))
    if json_wanted(args):
        print_json(
            {
                "topic": args.topic,
                "partition": args.partition,
                "active_producers": [
                    {
                        "producer_id": s.producer_id,
                        "producer_epoch": s.producer_epoch,
                        "last_sequence": s.last_sequence,
                        "last_timestamp": s.last_timestamp,
                        "coordinator_epoch": s.coordinator_epoch,
                        "current_txn_start_offset": s.current_txn_start_offset,
                    }
                    for s in producers
                ],
            }
        )
        return 0
    t = table(
        "producer id", "epoch", "last sequence", "last timestamp", "coordinator epoch", "open txn start"
    )
    for s in producers:
        t.add_row(
            str(s.producer_id),
            str(s.producer_epoch),
            str(s.last_sequence),
            str(s.last_timestamp),
            str(s.coordinator_epoch),
            str(s.current_txn_start_offset),
        )
    console.print(t)
    return 0


def abort(args: argparse.Namespace) -> int:
    if args.start_offset is None and (args.producer_id is None or args.producer_epoch is None):
        raise StoreError("give --start-offset, or --producer-id and --producer-epoch")
    conn = connect(args)
    addr = _leader(conn, args.topic, args.partition)
    if args.start_offset is not None:
        found = [s for s in _producers(conn, args, addr) if s.current_txn_start_offset == args.start_offset]
        if not found:
            raise StoreError(
                f"no open transaction starts at offset {args.start_offset} of {args.topic}-{args.partition} "
                "(see `sftraffic transactions describe-producers`)"
            )
        pid, epoch, coordinator_epoch = (
            found[0].producer_id,
            found[0].producer_epoch,
            found[0].coordinator_epoch,
        )
    else:
        pid, epoch, coordinator_epoch = args.producer_id, args.producer_epoch, args.coordinator_epoch
    req = WriteTxnMarkersRequest(
        markers=[
            WritableTxnMarker(
                producer_id=pid,
                producer_epoch=epoch,
                transaction_result=False,
                topics=[WritableTxnMarkerTopic(name=args.topic, partition_indexes=[args.partition])],
                coordinator_epoch=max(coordinator_epoch, 0),
            )
        ]
    )
    with _at(conn, addr) as w:
        r = w.send(req, WriteTxnMarkersResponse)
    code = r.markers[0].topics[0].partitions[0].error_code
    _check(code, f"ABORT marker for producer {pid} on {args.topic}-{args.partition}")
    console.print(
        f"aborted the transaction of producer {pid} (epoch {epoch}) on {args.topic}-{args.partition}"
    )
    return 0
