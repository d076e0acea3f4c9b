"""Produce with schema validation over real logs (no sockets): the handler checks a validated
topic's batches against the ids :class:`SchemasTopic` reads from a ``_schemas`` log, answers
INVALID_RECORD with record_errors, and checks a refused batch once more after reading the
``_schemas`` replica to its log end (a follower's high watermark lags its records)."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from framework.coordinator.schemas_topic import SchemasTopic
from framework.protocol import records as rb
from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.produce import (
    PartitionProduceData,
    PartitionProduceResponse,
    ProduceRequest,
    ProduceResponse,
    TopicProduceData,
)
from framework.replication.partition import Partition
from framework.server.context import RequestContext, SchemaSource
from framework.server.handlers import produce
from framework.storage.log import Log
from tests.support.broker_parts import NODE, Replicas, request_context, services
from tests.support.schemas_topic import schema
from tests.support.storage import NOW, SMALL, open_log

ON = dataclasses.replace(SMALL, value_schema_validation=True)


@pytest.fixture
def logs(tmp_path: Path) -> Iterator[tuple[Log, Log]]:
    events, _ = open_log(tmp_path / "events-0", ON)
    schemas, _ = open_log(tmp_path / "_schemas-0")
    yield events, schemas
    events.close()
    schemas.close()


def context(events: Log, source: SchemaSource | None) -> RequestContext:
    part = Partition("events", 0, b"\x00" * 16, events, [NODE], NODE, 0, [NODE])
    return request_context(services(partitions=Replicas.of(part), schemas=source), ProduceRequest.API_KEY, 9)


def send(ctx: RequestContext, values: list[bytes | None]) -> PartitionProduceResponse:
    batch = rb.build_batch([(None, v) for v in values], timestamp_ms=int(time.time() * 1000))
    req = ProduceRequest(
        acks=1,
        timeout_ms=1000,
        topic_data=[
            TopicProduceData(
                name="events",
                partition_data=[PartitionProduceData(index=0, records=memoryview(bytearray(batch)))],
            )
        ],
    )
    resp = asyncio.run(produce.handle(ctx, req))
    assert isinstance(resp, ProduceResponse)
    return resp.responses[0].partition_responses[0]


def framed(sid: int) -> bytes:
    return b"\x00" + sid.to_bytes(4, "big") + b"avro"


def write(lg: Log, record: tuple[bytes, bytes | None], committed: bool = True) -> None:
    lg.append_as_leader(memoryview(bytearray(rb.build_batch([record], timestamp_ms=NOW))), NOW)
    if committed:
        lg.high_watermark = lg.log_end_offset


def test_registered_ids_pass_others_are_refused_per_record(logs: tuple[Log, Log]) -> None:
    events, schemas = logs
    write(schemas, schema("events-value", 1, 4))
    ctx = context(
        events, SchemasTopic(lambda: SimpleNamespace(log=schemas, high_watermark=schemas.high_watermark))
    )
    ok = send(ctx, [framed(4), None, framed(4)])
    assert ok.error_code == ErrorCode.NONE and events.log_end_offset == 3
    r = send(ctx, [framed(4), b"plain", framed(5)])
    assert r.error_code == ErrorCode.INVALID_RECORD and events.log_end_offset == 3
    assert [(e.batch_index, e.batch_index_error_message) for e in r.record_errors][1] == (
        2,
        "value schema id 5 is not registered under subject events-value",
    )
    assert "2 record(s) refused" in (r.error_message or "")


def test_an_id_a_lagging_replica_holds_uncommitted_is_found_before_refusing(logs: tuple[Log, Log]) -> None:
    events, schemas = logs
    part = SimpleNamespace(log=schemas, high_watermark=0)
    ctx = context(events, SchemasTopic(lambda: part))
    write(schemas, schema("events-value", 1, 9), committed=False)  # fetched, not yet known committed
    assert send(ctx, [framed(9)]).error_code == ErrorCode.NONE
    assert send(ctx, [framed(8)]).error_code == ErrorCode.INVALID_RECORD  # nothing more to read


def test_without_a_schema_source_a_validated_topic_refuses_and_says_why(logs: tuple[Log, Log]) -> None:
    events, _ = logs
    r = send(context(events, None), [framed(1)])
    assert r.error_code == ErrorCode.INVALID_RECORD
    assert (
        "does not read the schema registry's _schemas topic" in r.record_errors[0].batch_index_error_message
    )


def test_validation_off_checks_nothing(logs: tuple[Log, Log]) -> None:
    events, _ = logs
    events.config = dataclasses.replace(events.config, value_schema_validation=False)
    assert send(context(events, None), [b"plain"]).error_code == ErrorCode.NONE
