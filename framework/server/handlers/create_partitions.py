"""CreatePartitions (37): grow a topic's partition count (never shrink, as in Kafka); with an
authorizer it needs Alter on the topic (else TOPIC_AUTHORIZATION_FAILED)."""

from __future__ import annotations

from framework.metadata.admin import Committed
from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)
from framework.security.authorizer import AclOperation, ResourceType
from framework.server import authz
from framework.server.context import RequestContext
from framework.server.errors import answer_errors, when_committed


async def handle(ctx: RequestContext, req: CreatePartitionsRequest) -> CreatePartitionsResponse:
    out = []
    pending: list[tuple[CreatePartitionsTopicResult, Committed]] = []
    for t in req.topics:
        r = CreatePartitionsTopicResult(name=t.name, error_code=ErrorCode.NONE)
        out.append(r)
        with answer_errors(r):
            authz.check(ctx, AclOperation.ALTER, ResourceType.TOPIC, t.name)
            assignments = [list(a.broker_ids) for a in t.assignments] if t.assignments else None
            prop = ctx.admin.create_partitions(t.name, t.count, assignments, req.validate_only)
            if prop.committed is not None:
                pending.append((r, prop.committed))
    return await when_committed(CreatePartitionsResponse(results=out), pending)


def error_response(req: CreatePartitionsRequest, code: int, message: str) -> CreatePartitionsResponse:
    return CreatePartitionsResponse(
        results=[
            CreatePartitionsTopicResult(name=t.name, error_code=code, error_message=message)
            for t in req.topics
        ]
    )
