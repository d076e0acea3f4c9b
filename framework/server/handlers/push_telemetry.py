"""PushTelemetry (72): a client's metrics, as an OTLP MetricsData payload (KIP-714).

Checked and decoded by the broker's client-metrics manager
(:mod:`framework.server.client_metrics`), which keeps the latest values for ``/metrics``.
"""

from __future__ import annotations

from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.push_telemetry import PushTelemetryRequest, PushTelemetryResponse
from framework.server.client_metrics import ClientIdentity
from framework.server.context import RequestContext


async def handle(ctx: RequestContext, req: PushTelemetryRequest) -> PushTelemetryResponse:
    manager = ctx.services.client_metrics
    if manager is None:  # not wired (handler tests): no subscription to push for
        return PushTelemetryResponse(error_code=ErrorCode.UNKNOWN_SUBSCRIPTION_ID)
    identity = ClientIdentity.of(ctx.header.client_id, (ctx.software.name, ctx.software.version), ctx.peer)
    return manager.push(req, identity)


def error_response(req: PushTelemetryRequest, code: int, message: str) -> PushTelemetryResponse:
    return PushTelemetryResponse(error_code=code)
