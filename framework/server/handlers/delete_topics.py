"""DeleteTopics (20): by name (v1-5) or name/topic id (v6+)."""

from __future__ import annotations

import logging

from framework.errors import StoreError
from framework.protocol.errors import ErrorCode
from framework.protocol.messages.delete_topics import (
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)
from framework.protocol.schema import ZERO_UUID
from framework.server.context import RequestContext

API_KEY = 20
log = logging.getLogger("sftraffic.server")


def handle(ctx: RequestContext, req: DeleteTopicsRequest) -> object:
    broker = ctx.broker
    wanted: list[tuple[str | None, bytes]] = []
    if ctx.version >= 6:
        wanted = [(t.name, t.topic_id) for t in req.topics]
    else:
        wanted = [(n, ZERO_UUID) for n in req.topic_names]
    out = []
    for name, tid in wanted:
        r = DeletableTopicResult(name=name, topic_id=tid, error_code=0)
        out.append(r)
        if name is None:
            info = broker.metadata.topics_by_id.get(tid)
            if info is None:
                r.error_code = ErrorCode.UNKNOWN_TOPIC_ID
                continue
            name = info.name
            r.name = name
        try:
            t = broker.delete_topic(name)
            broker.bind_pending(r)
            r.topic_id = t.id_bytes
            log.info("deleted topic %s for %s", name, ctx.peer)
        except StoreError as exc:
            r.error_code = exc.code
            r.error_message = exc.message
    return broker.committed(DeleteTopicsResponse(responses=out))


def error_response(req: DeleteTopicsRequest, code: int, message: str) -> DeleteTopicsResponse:
    names = [t.name for t in req.topics] or list(req.topic_names)
    return DeleteTopicsResponse(
        responses=[DeletableTopicResult(name=n, error_code=code, error_message=message) for n in names]
    )
