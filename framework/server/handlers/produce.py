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
``LOG_BURST`` lines per ``LOG_PERIOD_S``; the next line counts those left out).
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections.abc import Coroutine, Mapping
from typing import Any

from framework.errors import CorruptRecord, InvalidRecord, StoreError
from framework.protocol import records as rb
from framework.protocol.api import API_TABLE
from framework.protocol.errors import ErrorCode
from framework.protocol.messages.produce import (
    BatchIndexAndErrorMessage,
    PartitionProduceResponse,
    ProduceRequest,
    ProduceResponse,
    TopicProduceResponse,
)
from framework.protocol.records import SchemaCheck
from framework.replication.partition import Partition
from framework.security.authorizer import AclOperation, ResourceType
from framework.server import authz, metrics
from framework.server.context import RequestContext
from framework.server.errors import answer_errors, kafka_error, set_error
from framework.storage.log import AppendInfo

API_KEY = 0

_BYTES_IN = metrics.BYTES_IN
_MSGS_IN = metrics.MESSAGES_IN
_child = metrics.child
_WRITE, _TOPIC = AclOperation.WRITE, ResourceType.TOPIC
_NO_SCHEMAS = "this broker does not read the schema registry's _schemas topic"

log = logging.getLogger("sftraffic.produce")

LOG_PERIOD_S = 10.0
LOG_BURST = 10
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


class RateLimitedLog:
    """At most ``burst`` lines per ``period_s``; the first line after that counts the rest."""

    __slots__ = ("_count", "_left_out", "_start", "burst", "logger", "period_s")

    def __init__(
        self, logger: logging.Logger, period_s: float = LOG_PERIOD_S, burst: int = LOG_BURST
    ) -> None:
        self.logger = logger
        self.period_s = period_s
        self.burst = burst
        self._start = -period_s
        self._count = 0
        self._left_out = 0

    def __call__(self, level: int, message: str, now: float | None = None) -> bool:
        """Log ``message`` unless over the limit; True when it was logged."""
        t = time.monotonic() if now is None else now
        if t - self._start >= self.period_s:
            self._start = t
            self._count = 0
        if self._count >= self.burst:
            self._left_out += 1
            return False
        self._count += 1
        if self._left_out:
            message += f" ({self._left_out} more not logged in the last {self.period_s:g} s)"
            self._left_out = 0
        self.logger.log(level, message)
        return True


refusal_log = RateLimitedLog(log)


def _refused(ctx: RequestContext, topic: str, index: int, exc: StoreError) -> None:
    """A batch the log refused: its record errors into the response, one (rate-limited) line."""
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


def handle(
    ctx: RequestContext, req: ProduceRequest
) -> ProduceResponse | Coroutine[Any, Any, ProduceResponse | None] | None:
    acks = req.acks
    if acks not in (0, 1, -1):
        raise StoreError(f"acks must be 0, 1 or -1 (all), not {acks}", ErrorCode.INVALID_REQUIRED_ACKS)
    if req.transactional_id is None:
        return _produce(ctx, req, None)
    authz.check(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id)
    found = _unverified(ctx, req)
    if found is None:
        return _produce(ctx, req, {})
    pid, epoch, tps = found
    svc = ctx.services.transactions
    node = svc.coordinator_node(req.transactional_id) if svc is not None else None
    if svc is None or node is None:
        return _produce(ctx, req, dict.fromkeys(tps, ErrorCode.NOT_ENOUGH_REPLICAS))
    if node.node_id == ctx.node_id or ctx.services.txn_channel is None:
        codes = svc.coordinator.verify_partitions(req.transactional_id, pid, epoch, tps)
        return _produce(ctx, req, _refusals(codes))
    return _verify_remote(ctx, req, node.node_id, pid, epoch, tps)


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


async def _verify_remote(
    ctx: RequestContext, req: ProduceRequest, node_id: int, pid: int, epoch: int, tps: list[tuple[str, int]]
) -> ProduceResponse | None:
    assert ctx.services.txn_channel is not None and req.transactional_id is not None
    codes = await ctx.services.txn_channel.verify(node_id, req.transactional_id, pid, epoch, tps)
    resp = _produce(ctx, req, _refusals(codes))
    if resp is None or isinstance(resp, ProduceResponse):
        return resp
    return await resp


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
) -> ProduceResponse | Coroutine[Any, Any, ProduceResponse] | None:
    """The append; ``refused``: None without a transactional id, else partitions the
    transaction coordinator did not vouch for (the rest may hold transactional batches)."""
    partitions = ctx.partitions
    acks = req.acks
    transactional = refused is not None
    az = ctx.services.authz
    decisions = az.session(ctx.peer, ctx.principal) if az is not None else None
    now = int(time.time() * 1000)
    responses = []
    waits: list[tuple[PartitionProduceResponse, asyncio.Future[None]]] = []
    for td in req.topic_data:
        name = td.name
        out = []
        nbytes = 0
        nmsgs = 0
        if decisions is not None and not decisions.allowed(_WRITE, _TOPIC, name):
            # Write on the topic, checked before its existence (which is not disclosed)
            out = [
                PartitionProduceResponse(
                    index=pd.index, base_offset=-1, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED
                )
                for pd in td.partition_data
            ]
            responses.append(TopicProduceResponse(name=name, partition_responses=out))
            continue
        for pd in td.partition_data:
            r = PartitionProduceResponse(index=pd.index, base_offset=-1)
            out.append(r)
            with answer_errors(r):
                if refused:
                    _check_verified(refused, name, pd.index)
                part = partitions.replica(name, pd.index)
                records = pd.records
                if not records:
                    raise CorruptRecord("empty record set")
                try:
                    info = _append(ctx, name, part, records, acks, now, transactional)  # type: ignore[arg-type]
                except StoreError as exc:
                    if isinstance(exc, InvalidRecord) and exc.record_errors:
                        r.record_errors = [
                            BatchIndexAndErrorMessage(batch_index=i, batch_index_error_message=m)
                            for i, m in exc.record_errors
                        ]
                    _refused(ctx, name, pd.index, exc)
                    raise
                if acks == -1 and part.replicated:
                    # outliving the leadership: a batch the next leader has is answered with
                    # success, not "not persisted" (see Partition)
                    fut = part.wait_replicated(info.last_offset + 1, outlive_leadership=True)
                    if fut is not None:
                        waits.append((r, fut))
                r.base_offset = info.first_offset
                r.log_append_time_ms = info.log_append_time
                r.log_start_offset = part.log.log_start_offset
                nbytes += info.bytes
                nmsgs += info.records
        if nbytes:
            _child(_BYTES_IN, name).inc(nbytes)
            _child(_MSGS_IN, name).inc(nmsgs)
        responses.append(TopicProduceResponse(name=name, partition_responses=out))
    resp = ProduceResponse(responses=responses)
    if acks == 0:
        metrics.count_errors(API_TABLE[API_KEY], resp)  # no response: count its errors here
        return None
    if waits:
        return _replicated(resp, waits, req.timeout_ms)
    return resp


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


async def _replicated(
    resp: ProduceResponse,
    waits: list[tuple[PartitionProduceResponse, asyncio.Future[None]]],
    timeout_ms: int,
) -> ProduceResponse:
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
    return resp


def error_response(req: ProduceRequest, code: int, message: str) -> ProduceResponse | None:
    if req.acks == 0:
        return None
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
