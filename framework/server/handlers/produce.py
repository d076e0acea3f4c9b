"""Produce (0): validate and append record batches; acks 0, 1 and -1 (all).

Hot path: each batch's header, CRC and records are checked by the leader's log (Kafka's
LogValidator: records walked in place, or decompressed into a reused buffer, never turned into
objects), then its base offset is patched in the request buffer and it is written as-is.
acks=0 gets no response, as in Kafka. With an authorizer each topic needs Write (else
TOPIC_AUTHORIZATION_FAILED for its partitions, whether it exists or not), decided once per
connection and topic (a dict hit afterwards).

Transactions (KIP-98, KIP-890 part 1): a request with a transactional id may hold transactional
batches. Before one opens the producer's transaction on a partition (the partition's producer
state has no open transaction of that producer and epoch), the leader asks the transaction
coordinator (in process, or AddPartitionsToTxn v4 verify-only to the coordinator's broker)
whether the partition is in the transaction: if not, the batch answers INVALID_TXN_STATE and is
not stored; a fenced producer INVALID_PRODUCER_EPOCH; a coordinator that cannot answer now
NOT_ENOUGH_REPLICAS (retriable), as Kafka's ReplicaManager maps them. Transactional batches
without a transactional id answer TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as in Kafka.

Schema validation (Confluent Server's ``confluent.key/value.schema.validation``): on a topic
with it on, the walk also checks that each non-null key / value starts with magic byte 0 and
the id of a schema registered under ``<topic>-key`` / ``<topic>-value``, looked up in the sets
of :class:`~framework.coordinator.schemas_topic.SchemasTopic` (which first catches up with
``_schemas``, so a schema registered before the batch was sent is known); a record without one
is refused with INVALID_RECORD.

A refused batch is never stored. Records refused one by one (a key missing on a compacted
topic, a timestamp out of range, a schema id not registered) are listed in the partition's
``record_errors`` (KIP-467, v8+) with ``error_message``; clients fail such batches at once
(librdkafka and the Java client do not retry INVALID_RECORD / INVALID_TIMESTAMP). Every
refused batch, and every append the disk refused, is logged on one line (at most
ten lines per ten seconds, :class:`~framework.server.rate_limited_log.RateLimitedLog`; the
next line counts those left out).
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Mapping

from framework.errors import CorruptRecord, InvalidRecord, StoreError
from framework.protocol import records as rb
from framework.protocol.api import API_TABLE
from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.produce import (
    BatchIndexAndErrorMessage,
    PartitionProduceData,
    PartitionProduceResponse,
    ProduceRequest,
    ProduceResponse,
    TopicProduceData,
    TopicProduceResponse,
)
from framework.protocol.records import SchemaCheck
from framework.replication.partition import Partition
from framework.security.authorizer import AclOperation, ResourceType
from framework.server import authz, metrics
from framework.server.context import NO_RESPONSE, NoResponse, RequestContext
from framework.server.errors import answer_errors, kafka_error, set_error
from framework.server.rate_limited_log import RateLimitedLog
from framework.storage.log import AppendInfo

_BYTES_IN = metrics.BYTES_IN
_MSGS_IN = metrics.MESSAGES_IN
_child = metrics.child
_WRITE, _TOPIC = AclOperation.WRITE, ResourceType.TOPIC
_ENTRY = API_TABLE[ProduceRequest.API_KEY]
_NO_SCHEMAS = "this broker does not read the schema registry's _schemas topic"

log = logging.getLogger("sftraffic.produce")

# refusals of the batch itself (logged at INFO) and of the disk (logged at WARNING)
_REFUSED = frozenset(
    {
        ErrorCode.CORRUPT_MESSAGE,
        ErrorCode.INVALID_RECORD,
        ErrorCode.INVALID_TIMESTAMP,
        ErrorCode.MESSAGE_TOO_LARGE,
        ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT,
    }
)


refusal_log = RateLimitedLog(log)
_Waits = list[tuple[PartitionProduceResponse, asyncio.Future[None]]]


def _refused(
    ctx: RequestContext, topic: str, index: int, r: PartitionProduceResponse, exc: StoreError
) -> None:
    """A batch the log refused: its record errors into the answer ``r``, one (rate-limited) line."""
    if isinstance(exc, InvalidRecord) and exc.record_errors:
        r.record_errors = [
            BatchIndexAndErrorMessage(batch_index=i, batch_index_error_message=m)
            for i, m in exc.record_errors
        ]
    code = exc.code
    if code in _REFUSED:
        level = logging.INFO
    elif code == ErrorCode.KAFKA_STORAGE_ERROR:
        level = logging.WARNING
    else:
        return
    client = ctx.header.client_id or "?"
    refusal_log(
        level, f"refused a batch for {topic}-{index} from {client} ({ctx.peer}): {code.name}: {exc.message}"
    )


async def handle(ctx: RequestContext, req: ProduceRequest) -> ProduceResponse | NoResponse:
    acks = req.acks
    if acks not in (0, 1, -1):
        raise StoreError(f"acks must be 0, 1 or -1 (all), not {acks}", ErrorCode.INVALID_REQUIRED_ACKS)
    refused = None if req.transactional_id is None else await _verified(ctx, req, req.transactional_id)
    resp, waits = _produce(ctx, req, refused)
    if acks == 0:
        metrics.count_errors(_ENTRY, resp)  # no response: count its errors here
        return NO_RESPONSE
    if waits:
        await _replicated(waits, req.timeout_ms)
    return resp


async def _verified(ctx: RequestContext, req: ProduceRequest, tid: str) -> dict[tuple[str, int], int]:
    """KIP-890 part 1: the partitions whose transactional batches the transaction coordinator
    did not vouch for, with the error their batch answers (empty: every batch may go in)."""
    authz.check(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, tid)
    found = _unverified(ctx, req)
    if found is None:
        return {}
    pid, epoch, tps = found
    svc = ctx.services.transactions
    node = svc.coordinator_node(tid) if svc is not None else None
    if svc is None or node is None:
        return dict.fromkeys(tps, ErrorCode.NOT_ENOUGH_REPLICAS)
    channel = ctx.services.txn_channel
    if node.node_id == ctx.node_id or channel is None:
        return _refusals(svc.coordinator.verify_partitions(tid, pid, epoch, tps))
    return _refusals(await channel.verify(node.node_id, tid, pid, epoch, tps))


def _refusals(codes: Mapping[tuple[str, int], int]) -> dict[tuple[str, int], int]:
    """Partitions the coordinator did not vouch for, with the error their batch answers."""
    out = {}
    for tp, code in codes.items():
        if code == ErrorCode.NONE:
            continue
        if code in (ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_ID_MAPPING):
            code = ErrorCode.INVALID_PRODUCER_EPOCH
        elif code in (
            ErrorCode.NOT_COORDINATOR,
            ErrorCode.COORDINATOR_NOT_AVAILABLE,
            ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
            ErrorCode.CONCURRENT_TRANSACTIONS,
        ):
            code = ErrorCode.NOT_ENOUGH_REPLICAS  # retriable, as Kafka answers a failed verification
        out[tp] = code
    return out


def _unverified(ctx: RequestContext, req: ProduceRequest) -> tuple[int, int, list[tuple[str, int]]] | None:
    """KIP-890 part 1: (producer id, epoch, partitions) whose transactional batch opens the
    producer's transaction here, so the coordinator must confirm the partition is in it;
    None when there is none (later batches of an open transaction need no check)."""
    pid = epoch = -1
    need: list[tuple[str, int]] = []
    for td in req.topic_data:
        for pd in td.partition_data:
            recs = pd.records
            if not recs or len(recs) < rb.HEADER_SIZE:
                continue
            try:
                h = rb.read_header(recs)
            except struct.error:
                continue
            if not h.is_transactional or h.producer_id < 0:
                continue
            pid, epoch = h.producer_id, h.producer_epoch
            try:
                part = ctx.partitions.replica(td.name, pd.index)
            except StoreError:
                continue  # answered by the append
            ps = part.log.producer_state
            entry = ps.producers.get(pid)
            if pid in ps.ongoing and entry is not None and entry.epoch == epoch:
                continue
            need.append((td.name, pd.index))
    return (pid, epoch, need) if need else None


def _check_verified(refused: dict[tuple[str, int], int], name: str, index: int) -> None:
    code = refused.get((name, index))
    if code is not None:
        raise StoreError(
            f"{name}-{index}: the transaction coordinator did not confirm this partition "
            f"is in the producer's transaction ({ErrorCode(code).name})",
            ErrorCode(code),
        )


def _produce(
    ctx: RequestContext, req: ProduceRequest, refused: dict[tuple[str, int], int] | None
) -> tuple[ProduceResponse, _Waits]:
    """Every partition's append, and the waits of those acks=all must wait for; ``refused``:
    None without a transactional id, else the partitions the transaction coordinator did not
    vouch for (the others may hold transactional batches)."""
    az = ctx.services.authz
    decisions = az.session(ctx.peer, ctx.principal) if az is not None else None
    now = ctx.services.clock.wall_ms()
    waits: _Waits = []
    responses = []
    for td in req.topic_data:
        if decisions is not None and not decisions.allowed(_WRITE, _TOPIC, td.name):
            responses.append(_unauthorized(td))
        else:
            responses.append(_produce_topic(ctx, td, req.acks, now, refused, waits))
    return ProduceResponse(responses=responses), waits


def _unauthorized(td: TopicProduceData) -> TopicProduceResponse:
    """No Write on the topic: checked before its existence, which is not disclosed."""
    code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    return TopicProduceResponse(
        name=td.name,
        partition_responses=[
            PartitionProduceResponse(index=pd.index, base_offset=-1, error_code=code)
            for pd in td.partition_data
        ],
    )


def _produce_topic(
    ctx: RequestContext,
    td: TopicProduceData,
    acks: int,
    now: int,
    refused: dict[tuple[str, int], int] | None,
    waits: _Waits,
) -> TopicProduceResponse:
    """One topic's partitions, each answered on its own; the topic's bytes and messages in."""
    name = td.name
    out = []
    nbytes = nmsgs = 0
    for pd in td.partition_data:
        r = PartitionProduceResponse(index=pd.index, base_offset=-1)
        out.append(r)
        with answer_errors(r):
            info = _produce_partition(ctx, name, pd, r, acks, now, refused, waits)
            nbytes += info.bytes
            nmsgs += info.records
    if nbytes:
        _child(_BYTES_IN, name).inc(nbytes)
        _child(_MSGS_IN, name).inc(nmsgs)
    return TopicProduceResponse(name=name, partition_responses=out)


def _produce_partition(
    ctx: RequestContext,
    topic: str,
    pd: PartitionProduceData,
    r: PartitionProduceResponse,
    acks: int,
    now: int,
    refused: dict[tuple[str, int], int] | None,
    waits: _Waits,
) -> AppendInfo:
    """One partition's batch checked and appended, its answer ``r`` filled in; with acks=all
    the wait for the in-sync replicas joins ``waits``. Raises what answers the partition."""
    if refused:
        _check_verified(refused, topic, pd.index)
    part = ctx.partitions.replica(topic, pd.index)
    records = pd.records
    if not records:
        raise CorruptRecord("empty record set")
    try:
        info = _append(ctx, topic, part, records, acks, now, refused is not None)  # type: ignore[arg-type]
    except StoreError as exc:
        _refused(ctx, topic, pd.index, r, exc)
        raise
    if acks == -1 and part.replicated:
        # outliving the leadership: a batch the next leader has is answered with success, not
        # "not persisted" (see Partition)
        fut = part.wait_replicated(info.last_offset + 1, outlive_leadership=True)
        if fut is not None:
            waits.append((r, fut))
    r.base_offset = info.first_offset
    r.log_append_time_ms = info.log_append_time
    r.log_start_offset = part.log.log_start_offset
    return info


def _append(
    ctx: RequestContext,
    topic: str,
    part: Partition,
    records: memoryview,
    acks: int,
    now: int,
    transactional: bool,
) -> AppendInfo:
    """The leader's append, with the topic's schema check; a batch refused while the reader of
    ``_schemas`` had not read to its log end is checked once more after it has."""
    schemas = _schemas(ctx, topic, part)
    try:
        return part.append_records(records, acks, now, transactional, schemas)
    except InvalidRecord:
        src = ctx.services.schemas
        if schemas is None or src is None or not src.refresh():
            raise
    return part.append_records(records, acks, now, transactional, _schemas(ctx, topic, part))


def _schemas(ctx: RequestContext, topic: str, part: Partition) -> SchemaCheck | None:
    """The schema check of the topic's batches; None (two attribute reads) when it has none."""
    lc = part.log.config
    key, value = lc.key_schema_validation, lc.value_schema_validation
    if not (key or value):
        return None
    src = ctx.services.schemas
    if src is None:
        none: set[int] = set()
        return SchemaCheck(
            f"{topic}-key", none if key else None, f"{topic}-value", none if value else None, _NO_SCHEMAS
        )
    return src.check(topic, key, value)


async def _replicated(waits: _Waits, timeout_ms: int) -> None:
    """acks=all: answer once every in-sync replica has the batches (or time runs out)."""
    await asyncio.wait([f for _, f in waits], timeout=max(timeout_ms, 1) / 1000)
    for r, fut in waits:
        if not fut.done():
            fut.cancel()
            set_error(
                r, ErrorCode.REQUEST_TIMED_OUT, "not on every in-sync replica before the request timed out"
            )
            continue
        exc = fut.exception()
        if exc is not None:
            set_error(r, *(kafka_error(exc) or (ErrorCode.UNKNOWN_SERVER_ERROR, str(exc))))


def error_response(req: ProduceRequest, code: int, message: str) -> ProduceResponse | NoResponse:
    if req.acks == 0:
        return NO_RESPONSE
    return ProduceResponse(
        responses=[
            TopicProduceResponse(
                name=td.name,
                partition_responses=[
                    PartitionProduceResponse(
                        index=pd.index, error_code=code, base_offset=-1, error_message=message
                    )
                    for pd in td.partition_data
                ],
            )
            for td in req.topic_data
        ]
    )
