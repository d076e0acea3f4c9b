"""StreamAdmin (10000, sftraffic extension): create, describe, alter and delete streams.

With an authorizer: describing a stream needs Describe on its topics' name space (the topic
resource ``<stream>.``, which any stream permission gives) or on the cluster; creating one needs
Create on the cluster; altering or deleting one, its admin (``adminperm``: Alter on the LITERAL
topic pattern ``<stream>.``, or Alter on the cluster). Otherwise TOPIC_AUTHORIZATION_FAILED
(CLUSTER_AUTHORIZATION_FAILED for a creation); a listing leaves such streams out.
"""

from __future__ import annotations

import logging

from framework import config as cfg
from framework.errors import StoreError, TopicAuthorizationFailed
from framework.metadata.admin import Committed
from framework.metadata.store import StreamInfo
from framework.protocol.error_codes import ErrorCode
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
from framework.security.authorizer import AclOperation, ResourceType
from framework.server import authz
from framework.server.context import RequestContext
from framework.server.errors import answer_errors, when_committed

log = logging.getLogger("sftraffic.server")


def describe(ctx: RequestContext, s: StreamInfo) -> StreamResult:
    bc = ctx.config
    entries = []
    for k in cfg.keys(cfg.STREAM):
        if k.name in s.configs:
            entries.append(
                StreamConfigEntry(name=k.name, value=k.render(s.configs[k.name]), source=SOURCE_STREAM)
            )
        else:
            in_broker = k.name in bc.values or (k.broker_name is not None and k.broker_name in bc.values)
            value = bc.topic_default(k.name) if cfg.TOPIC in k.scopes else bc.value(k.name)
            entries.append(
                StreamConfigEntry(
                    name=k.name,
                    value=k.render(value),
                    source=SOURCE_BROKER if in_broker else SOURCE_DEFAULT,
                )
            )
    return StreamResult(
        name=s.name,
        error_code=ErrorCode.NONE,
        created_ms=s.created_ms,
        configs=entries,
        topics=ctx.cluster.stream_topics(s.name),
    )


def _may_describe(ctx: RequestContext, name: str) -> bool:
    return authz.cluster_allowed(ctx, AclOperation.DESCRIBE) or authz.allowed(
        ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, f"{name}."
    )


def _describe_all(ctx: RequestContext, names: list[str]) -> StreamAdminResponse:
    out = []
    for n in names or [s for s in sorted(ctx.cluster.streams) if _may_describe(ctx, s)]:
        s = ctx.cluster.streams.get(n)
        if names and not _may_describe(ctx, n):
            out.append(
                StreamResult(
                    name=n,
                    error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    error_message=f"not authorized to Describe stream {n!r}",
                )
            )
        elif s is None:
            out.append(
                StreamResult(
                    name=n,
                    error_code=ErrorCode.RESOURCE_NOT_FOUND,
                    error_message=f"stream {n!r} does not exist",
                )
            )
        else:
            out.append(describe(ctx, s))
    return StreamAdminResponse(streams=out)


def _change(ctx: RequestContext, req: StreamAdminRequest, name: str) -> tuple[StreamResult, Committed | None]:
    set_ = {c.name: c.value for c in req.configs if c.value is not None}
    delete = [c.name for c in req.configs if c.value is None]
    if req.operation == CREATE:
        authz.check_cluster(ctx, AclOperation.CREATE)
    elif req.operation in (ALTER, DELETE) and not authz.stream_admin(ctx, name):
        raise TopicAuthorizationFailed(f"not authorized to change stream {name!r}: not its admin")
    if req.operation == CREATE:
        prop = ctx.admin.create_stream(name, set_, validate_only=req.validate_only)
        if not req.validate_only:
            log.info("created stream %s for %s", name, ctx.peer)
    elif req.operation == ALTER:
        prop = ctx.admin.alter_stream(name, set_, delete, validate_only=req.validate_only)
    elif req.operation == DELETE:
        prop = ctx.admin.delete_stream(name)
        log.info("deleted stream %s for %s", name, ctx.peer)
        return StreamResult(name=name), prop.committed
    else:
        raise StoreError(f"unknown stream operation {req.operation}", ErrorCode.INVALID_REQUEST)
    return describe(ctx, prop.result), prop.committed


async def handle(ctx: RequestContext, req: StreamAdminRequest) -> StreamAdminResponse:
    if req.operation == DESCRIBE:
        return _describe_all(ctx, list(req.names))
    out = []
    pending: list[tuple[StreamResult, Committed]] = []
    for n in req.names:
        failed = StreamResult(name=n)
        with answer_errors(failed):
            result, committed = _change(ctx, req, n)
            out.append(result)
            if committed is not None:
                pending.append((result, committed))
            continue
        out.append(failed)
    return await when_committed(StreamAdminResponse(streams=out), pending)


def error_response(req: StreamAdminRequest, code: int, message: str) -> StreamAdminResponse:
    return StreamAdminResponse(
        streams=[StreamResult(name=n, error_code=code, error_message=message) for n in req.names]
    )
