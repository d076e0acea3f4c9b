"""Produce (0): validate and append record batches; acks 0, 1 and -1 (all).

Hot path: batches stay opaque (header + CRC check, base offset patched in the request buffer,
written as-is). acks=0 gets no response, as in Kafka.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from typing import Any

from framework.errors import CorruptRecord, StoreError
from framework.protocol.api import API_TABLE
from framework.protocol.errors import ErrorCode
from framework.protocol.messages.produce import (
    PartitionProduceResponse,
    ProduceRequest,
    ProduceResponse,
    TopicProduceResponse,
)
from framework.server import metrics
from framework.server.context import RequestContext
from framework.server.errors import answer_errors, kafka_error, set_error

API_KEY = 0

_BYTES_IN = metrics.BYTES_IN
_MSGS_IN = metrics.MESSAGES_IN
_child = metrics.child


def handle(
    ctx: RequestContext, req: ProduceRequest
) -> ProduceResponse | Coroutine[Any, Any, ProduceResponse] | None:
    partitions = ctx.partitions
    acks = req.acks
    if acks not in (0, 1, -1):
        raise StoreError(f"acks must be 0, 1 or -1 (all), not {acks}", ErrorCode.INVALID_REQUIRED_ACKS)
    now = int(time.time() * 1000)
    responses = []
    waits: list[tuple[PartitionProduceResponse, asyncio.Future[None]]] = []
    for td in req.topic_data:
        name = td.name
        out = []
        nbytes = 0
        nmsgs = 0
        for pd in td.partition_data:
            r = PartitionProduceResponse(index=pd.index, base_offset=-1)
            out.append(r)
            with answer_errors(r):
                part = partitions.replica(name, pd.index)
                records = pd.records
                if not records:
                    raise CorruptRecord("empty record set")
                info = part.append_records(records, acks, now)  # type: ignore[arg-type]
                if acks == -1 and part.replicated:
                    fut = part.wait_replicated(info.last_offset + 1)
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
