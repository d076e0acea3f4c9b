"""DeleteTopics (20): by name (v1-5) or name/topic id (v6+).

With an authorizer: Delete on the topic (a topic given by id also needs Describe, else its name
is not answered), checked before whether it exists, as Kafka does.
"""

from __future__ import annotations

import logging

from framework.errors import StoreError, TopicAuthorizationFailed
from framework.metadata.admin import Committed
from framework.protocol.error_codes import ErrorCode
from framework.protocol.fields import ZERO_UUID
from framework.protocol.messages.delete_topics import (
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)
from framework.security.authorizer import AclOperation, ResourceType
from framework.server import authz
from framework.server.context import RequestContext
from framework.server.errors import answer_errors, when_committed

log = logging.getLogger("sftraffic.server")


async def handle(ctx: RequestContext, req: DeleteTopicsRequest) -> DeleteTopicsResponse:
    if ctx.version >= 6:
        wanted = [(t.name, t.topic_id) for t in req.topics]
    else:
        wanted = [(n, ZERO_UUID) for n in req.topic_names]
    out = []
    pending: list[tuple[DeletableTopicResult, Committed]] = []
    for name, tid in wanted:
        r = DeletableTopicResult(name=name, topic_id=tid, error_code=ErrorCode.NONE)
        out.append(r)
        with answer_errors(r):
            if name is None:
                info = ctx.cluster.topic_by_id(tid)
                if info is None:
                    raise StoreError(f"no topic has id {tid.hex()}", ErrorCode.UNKNOWN_TOPIC_ID)
                if not authz.allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, info.name):
                    raise TopicAuthorizationFailed("not authorized to Describe the topic of this id")
                name = r.name = info.name
            authz.check(ctx, AclOperation.DELETE, ResourceType.TOPIC, name)
            prop = ctx.admin.delete_topic(name)
            if prop.committed is not None:
                pending.append((r, prop.committed))
            r.topic_id = prop.result.id_bytes
            log.info("deleted topic %s for %s", name, ctx.peer)
    return await when_committed(DeleteTopicsResponse(responses=out), pending)


def error_response(req: DeleteTopicsRequest, code: int, message: str) -> DeleteTopicsResponse:
    names = [t.name for t in req.topics] or list(req.topic_names)
    return DeleteTopicsResponse(
        responses=[DeletableTopicResult(name=n, error_code=code, error_message=message) for n in names]
    )
