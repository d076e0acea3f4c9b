"""GetTelemetrySubscriptions (71): which metrics a client should push, and how often (KIP-714).

Answered by the broker's client-metrics manager (:mod:`framework.server.client_metrics`). With no
subscription matching the client, the answer asks for no metrics, at the default interval
(300000 ms), and the client only asks again after it.
"""

from __future__ import annotations

from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.get_telemetry_subscriptions import (
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
)
from framework.server.client_metrics import DEFAULT_INTERVAL_MS, ClientIdentity
from framework.server.context import RequestContext


async def handle(
    ctx: RequestContext, req: GetTelemetrySubscriptionsRequest
) -> GetTelemetrySubscriptionsResponse:
    manager = ctx.services.client_metrics
    if manager is None:  # not wired (handler tests): nothing requested
        return GetTelemetrySubscriptionsResponse(
            error_code=ErrorCode.NONE, push_interval_ms=DEFAULT_INTERVAL_MS
        )
    identity = ClientIdentity.of(ctx.header.client_id, (ctx.software.name, ctx.software.version), ctx.peer)
    return manager.get_subscriptions(req.client_instance_id, identity)


def error_response(
    req: GetTelemetrySubscriptionsRequest, code: int, message: str
) -> GetTelemetrySubscriptionsResponse:
    return GetTelemetrySubscriptionsResponse(error_code=code, push_interval_ms=DEFAULT_INTERVAL_MS)
