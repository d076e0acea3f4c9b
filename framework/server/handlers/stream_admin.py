"""StreamAdmin (10000, sftraffic extension): create, describe, alter and delete streams."""

from __future__ import annotations

import logging

from framework import config as cfg
from framework.errors import StoreError
from framework.metadata.store import StreamInfo, UnknownStream
from framework.protocol.errors import ErrorCode
from framework.protocol.messages.stream_admin import (
    ALTER,
    CREATE,
    DELETE,
    DESCRIBE,
    SOURCE_BROKER,
    SOURCE_DEFAULT,
    SOURCE_STREAM,
    StreamAdminRequest,
    StreamAdminResponse,
    StreamConfigEntry,
    StreamResult,
)
from framework.server.context import RequestContext

API_KEY = 10000
log = logging.getLogger("sftraffic.server")


def describe(ctx: RequestContext, s: StreamInfo) -> StreamResult:
    bc = ctx.broker.config
    entries = []
    for k in cfg.keys(cfg.STREAM):
        if k.name in s.configs:
            entries.append(
                StreamConfigEntry(name=k.name, value=k.render(s.configs[k.name]), source=SOURCE_STREAM)
            )
        else:
            in_broker = k.name in bc.values or (k.broker_name is not None and k.broker_name in bc.values)
            value = bc.topic_default(k.name) if cfg.TOPIC in k.scopes else bc[k.name]
            entries.append(
                StreamConfigEntry(
                    name=k.name,
                    value=k.render(value),
                    source=SOURCE_BROKER if in_broker else SOURCE_DEFAULT,
                )
            )
    return StreamResult(
        name=s.name,
        error_code=0,
        created_ms=s.created_ms,
        configs=entries,
        topics=ctx.broker.metadata.stream_topics(s.name),
    )


def handle(ctx: RequestContext, req: StreamAdminRequest) -> object:
    md = ctx.broker.metadata
    out = []
    if req.operation == DESCRIBE:
        names = list(req.names) or sorted(md.streams)
        for n in names:
            s = md.streams.get(n)
            if s is None:
                out.append(
                    StreamResult(
                        name=n,
                        error_code=ErrorCode.RESOURCE_NOT_FOUND,
                        error_message=f"stream {n!r} does not exist",
                    )
                )
            else:
                out.append(describe(ctx, s))
        return ctx.broker.committed(StreamAdminResponse(streams=out))
    set_ = {c.name: c.value for c in req.configs if c.value is not None}
    delete = [c.name for c in req.configs if c.value is None]
    for n in req.names:
        try:
            if req.operation == CREATE:
                s = md.create_stream(n, set_, validate_only=req.validate_only)
                if not req.validate_only:
                    log.info("created stream %s for %s", n, ctx.peer)
            elif req.operation == ALTER:
                s = md.alter_stream(n, set_, delete, validate_only=req.validate_only)
            elif req.operation == DELETE:
                s = md.delete_stream(n)
                log.info("deleted stream %s for %s", n, ctx.peer)
            else:
                raise StoreError(f"unknown stream operation {req.operation}", ErrorCode.INVALID_REQUEST)
            out.append(describe(ctx, s) if req.operation != DELETE else StreamResult(name=n))
            ctx.broker.bind_pending(out[-1])
        except UnknownStream as exc:
            out.append(StreamResult(name=n, error_code=exc.code, error_message=exc.message))
        except StoreError as exc:
            out.append(StreamResult(name=n, error_code=exc.code, error_message=exc.message))
    return ctx.broker.committed(StreamAdminResponse(streams=out))


def error_response(req: StreamAdminRequest, code: int, message: str) -> StreamAdminResponse:
    return StreamAdminResponse(
        streams=[StreamResult(name=n, error_code=code, error_message=message) for n in req.names]
    )
