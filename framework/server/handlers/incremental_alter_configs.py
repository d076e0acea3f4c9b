"""IncrementalAlterConfigs (44): SET / DELETE / APPEND / SUBTRACT on topic configs."""

from __future__ import annotations

from typing import Any

from framework import config as cfg
from framework.errors import ConfigError, StoreError
from framework.protocol.errors import ErrorCode
from framework.protocol.messages.incremental_alter_configs import (
    AlterConfigsResourceResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from framework.server.context import RequestContext
from framework.server.handlers.alter_configs import BROKER_STATIC

API_KEY = 44
TOPIC, BROKER = 2, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def handle(ctx: RequestContext, req: IncrementalAlterConfigsRequest) -> object:
    md = ctx.broker.metadata
    out = []
    for res in req.resources:
        r = AlterConfigsResourceResponse(
            error_code=0, resource_type=res.resource_type, resource_name=res.resource_name
        )
        out.append(r)
        try:
            if res.resource_type == BROKER:
                raise StoreError(BROKER_STATIC, ErrorCode.INVALID_REQUEST)
            if res.resource_type != TOPIC:
                raise StoreError(
                    f"resource type {res.resource_type} is not supported", ErrorCode.INVALID_REQUEST
                )
            t = md.topic(res.resource_name)
            current = {k: v for k, (v, _) in md.topic_config_values(t).items()}
            set_: dict[str, Any] = {}
            delete: list[str] = []
            for c in res.configs:
                k = cfg.lookup(c.name)
                if k is None or cfg.TOPIC not in k.scopes:
                    raise ConfigError(f"unknown topic config {c.name!r}")
                if c.config_operation == SET:
                    set_[c.name] = c.value
                elif c.config_operation == DELETE:
                    delete.append(c.name)
                elif c.config_operation in (APPEND, SUBTRACT):
                    if k.type != "list":
                        raise ConfigError(f"{c.name} is not a list config; APPEND/SUBTRACT apply to lists")
                    items = list(current.get(c.name) or [])
                    change = [x.strip() for x in (c.value or "").split(",") if x.strip()]
                    if c.config_operation == APPEND:
                        items += [x for x in change if x not in items]
                    else:
                        items = [x for x in items if x not in change]
                    set_[c.name] = ",".join(items)
                else:
                    raise StoreError(
                        f"unknown config operation {c.config_operation}", ErrorCode.INVALID_REQUEST
                    )
            md.alter_topic(res.resource_name, set_, delete, validate_only=req.validate_only)
            ctx.broker.bind_pending(r)
        except StoreError as exc:
            r.error_code = exc.code
            r.error_message = exc.message
    return ctx.broker.committed(IncrementalAlterConfigsResponse(responses=out))


def error_response(
    req: IncrementalAlterConfigsRequest, code: int, message: str
) -> IncrementalAlterConfigsResponse:
    return IncrementalAlterConfigsResponse(
        responses=[
            AlterConfigsResourceResponse(
                error_code=code,
                error_message=message,
                resource_type=r.resource_type,
                resource_name=r.resource_name,
            )
            for r in req.resources
        ]
    )
