"""CreatePartitions (37): grow a topic's partition count (never shrink, as in Kafka)."""

from __future__ import annotations

from framework.errors import StoreError
from framework.protocol.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)
from framework.server.context import RequestContext

API_KEY = 37


def handle(ctx: RequestContext, req: CreatePartitionsRequest) -> object:
    b = ctx.broker
    out = []
    for t in req.topics:
        r = CreatePartitionsTopicResult(name=t.name, error_code=0)
        out.append(r)
        try:
            assignments = [list(a.broker_ids) for a in t.assignments] if t.assignments else None
            b.metadata.create_partitions(t.name, t.count, assignments, b.broker_ids(), req.validate_only)
            b.bind_pending(r)
        except StoreError as exc:
            r.error_code = exc.code
            r.error_message = exc.message
    return b.committed(CreatePartitionsResponse(results=out))


def error_response(req: CreatePartitionsRequest, code: int, message: str) -> CreatePartitionsResponse:
    return CreatePartitionsResponse(
        results=[
            CreatePartitionsTopicResult(name=t.name, error_code=code, error_message=message)
            for t in req.topics
        ]
    )
