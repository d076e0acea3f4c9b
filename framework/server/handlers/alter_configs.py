"""AlterConfigs (33): replace a topic's dynamic configuration (legacy, non-incremental)."""

from __future__ import annotations

from framework.errors import StoreError
from framework.metadata.admin import Committed
from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.alter_configs import (
    AlterConfigsRequest,
    AlterConfigsResourceResponse,
    AlterConfigsResponse,
)
from framework.security.authorizer import AclOperation, ResourceType
from framework.server import authz
from framework.server.context import RequestContext
from framework.server.errors import answer_errors, when_committed

TOPIC, BROKER = 2, 4

BROKER_STATIC = (
    "broker configs are static in sftraffic: edit the broker's TOML file (or SFTRAFFIC_* "
    "variables) and restart it"
)


def check_alterable(
    ctx: RequestContext, resource_type: int, name: str, dynamic_brokers: bool = False
) -> None:
    """AlterConfigs on the topic (or the cluster, for a broker) when an authorizer is on; then:
    topic configs change at run time, and (``dynamic_brokers``: IncrementalAlterConfigs) the
    broker configs declared dynamic; the other broker configs are static here."""
    if resource_type == TOPIC:
        authz.check(ctx, AclOperation.ALTER_CONFIGS, ResourceType.TOPIC, name)
    elif resource_type == BROKER:
        authz.check_cluster(ctx, AclOperation.ALTER_CONFIGS)
    if resource_type == BROKER and not dynamic_brokers:
        raise StoreError(BROKER_STATIC, ErrorCode.INVALID_REQUEST)
    if resource_type not in (TOPIC, BROKER):
        raise StoreError(f"resource type {resource_type} is not supported", ErrorCode.INVALID_REQUEST)


async def handle(ctx: RequestContext, req: AlterConfigsRequest) -> AlterConfigsResponse:
    out = []
    pending: list[tuple[AlterConfigsResourceResponse, Committed]] = []
    for res in req.resources:
        r = AlterConfigsResourceResponse(
            error_code=ErrorCode.NONE, resource_type=res.resource_type, resource_name=res.resource_name
        )
        out.append(r)
        with answer_errors(r):
            check_alterable(ctx, res.resource_type, res.resource_name)
            values = {c.name: c.value for c in res.configs if c.value is not None}
            prop = ctx.admin.alter_topic(
                res.resource_name, values, replace=True, validate_only=req.validate_only
            )
            if prop.committed is not None:
                pending.append((r, prop.committed))
    return await when_committed(AlterConfigsResponse(responses=out), pending)


def error_response(req: AlterConfigsRequest, code: int, message: str) -> AlterConfigsResponse:
    return AlterConfigsResponse(
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
