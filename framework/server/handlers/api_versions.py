"""ApiVersions (18): the APIs and version ranges this broker serves."""

from __future__ import annotations

from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.api_versions import (
    ApiVersion,
    ApiVersionsRequest,
    ApiVersionsResponse,
)
from framework.server import router  # which imports this module: read at call time
from framework.server.context import RequestContext


def _keys() -> list[ApiVersion]:
    return [
        ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, lo, hi in router.supported_versions()
    ]


async def handle(ctx: RequestContext, req: ApiVersionsRequest) -> ApiVersionsResponse:
    if ctx.version >= 3:  # KIP-511: who the client is, for client-metrics subscriptions
        ctx.software.name = req.client_software_name or "unknown"
        ctx.software.version = req.client_software_version or "unknown"
    return ApiVersionsResponse(error_code=ErrorCode.NONE, api_keys=_keys())


def unsupported_version_response() -> ApiVersionsResponse:
    """Answer to an ApiVersions version we do not know: a v0 body with error 35 and our list."""
    return ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=_keys())


def error_response(req: ApiVersionsRequest, code: int, message: str) -> ApiVersionsResponse:
    return ApiVersionsResponse(error_code=code, api_keys=_keys())
