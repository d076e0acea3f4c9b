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

Security settings as for ``streams`` (``-X KEY=VALUE``, ``--command-config FILE``).
"""

from __future__ import annotations

import argparse
import datetime as dt

from rich.console import Console
from rich.table import Table

from framework.cli.streams import add_connection, client_config
from framework.client.wire import WireClient, from_client_config
from framework.errors import StoreError
from framework.protocol.errors import ErrorCode
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

console = Console()


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("transactions", help="transactions: list, describe, producers, abort a hanging one")
    tsub = p.add_subparsers(dest="action", metavar="ACTION")
    tsub.required = True

    ls = tsub.add_parser("list", help="transactional ids and their states (every broker asked)")
    ls.add_argument("--state", action="append", default=[], help="only this state (repeatable), e.g. Ongoing")
    add_connection(ls)
    ls.set_defaults(func=list_)

    d = tsub.add_parser("describe", help="one transactional id: state, producer, partitions")
    d.add_argument("transactional_id")
    add_connection(d)
    d.set_defaults(func=describe)

    dp = tsub.add_parser("describe-producers", help="active producers of a partition")
    dp.add_argument("--topic", required=True)
    dp.add_argument("--partition", type=int, required=True)
    add_connection(dp)
    dp.set_defaults(func=describe_producers)

    a = tsub.add_parser("abort", help="write an ABORT marker for a hanging transaction")
    a.add_argument("--topic", required=True)
    a.add_argument("--partition", type=int, required=True)
    a.add_argument("--start-offset", type=int, help="first offset of the hanging transaction")
    a.add_argument("--producer-id", type=int)
    a.add_argument("--producer-epoch", type=int)
    a.add_argument("--coordinator-epoch", type=int, default=-1)
    add_connection(a)
    a.set_defaults(func=abort)


def _connect(args: argparse.Namespace, address: str | None = None) -> WireClient:
    return from_client_config(address or args.bootstrap, client_config(args))


def _metadata(args: argparse.Namespace, topic: str | None = None) -> MetadataResponse:
    topics = None if topic is None else [MetadataRequestTopic(name=topic)]
    with _connect(args) as w:
        return w.send(MetadataRequest(topics=topics, allow_auto_topic_creation=False), MetadataResponse)


def _brokers(md: MetadataResponse) -> dict[int, str]:
    return {b.node_id: f"{b.host}:{b.port}" for b in md.brokers}


def _leader(args: argparse.Namespace, topic: str, partition: int) -> str:
    md = _metadata(args, topic)
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
    md = _metadata(args)
    rows = []
    for node, addr in sorted(_brokers(md).items()):
        with _connect(args, addr) as w:
            r = w.send(ListTransactionsRequest(state_filters=list(args.state)), ListTransactionsResponse)
        _check(r.error_code, f"ListTransactions on broker {node}")
        if r.unknown_state_filters:
            raise StoreError(f"unknown state(s): {', '.join(r.unknown_state_filters)}")
        rows += [(s.transactional_id, node, s.producer_id, s.transaction_state) for s in r.transaction_states]
    t = Table("transactional id", "coordinator", "producer id", "state")
    for tid, node, pid, state in sorted(rows):
        t.add_row(tid, str(node), str(pid), state)
    console.print(t)
    return 0


def describe(args: argparse.Namespace) -> int:
    tid = args.transactional_id
    with _connect(args) as w:
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
    with _connect(args, addr) as w:
        r = w.send(DescribeTransactionsRequest(transactional_ids=[tid]), DescribeTransactionsResponse)
    (s,) = r.transaction_states
    _check(s.error_code, f"transactional id {tid!r}")
    started = (
        dt.datetime.fromtimestamp(s.transaction_start_time_ms / 1000, dt.UTC).isoformat(
            timespec="milliseconds"
        )
        if s.transaction_start_time_ms >= 0
        else "-"
    )
    parts = ", ".join(f"{d.topic}-{p}" for d in s.topics for p in d.partitions) or "-"
    t = Table("field", "value")
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


def _producers(args: argparse.Namespace, addr: str) -> list[ProducerState]:
    with _connect(args, addr) as w:
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
    t = Table(
        "producer id", "epoch", "last sequence", "last timestamp", "coordinator epoch", "open txn start"
    )
    for s in _producers(args, _leader(args, args.topic, args.partition)):
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
    addr = _leader(args, args.topic, args.partition)
    if args.start_offset is not None:
        found = [s for s in _producers(args, addr) if s.current_txn_start_offset == args.start_offset]
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
    elif args.producer_id is not None and args.producer_epoch is not None:
        pid, epoch, coordinator_epoch = args.producer_id, args.producer_epoch, args.coordinator_epoch
    else:
        raise StoreError("give --start-offset, or --producer-id and --producer-epoch")
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
    with _connect(args, addr) as w:
        r = w.send(req, WriteTxnMarkersResponse)
    code = r.markers[0].topics[0].partitions[0].error_code
    _check(code, f"ABORT marker for producer {pid} on {args.topic}-{args.partition}")
    console.print(
        f"aborted the transaction of producer {pid} (epoch {epoch}) on {args.topic}-{args.partition}"
    )
    return 0
