"""ApiVersions (18): the APIs and version ranges this broker serves."""

from __future__ import annotations

from framework.protocol.errors import ErrorCode
from framework.protocol.messages.api_versions import (
    ApiVersion,
    ApiVersionsRequest,
    ApiVersionsResponse,
)
from framework.server.context import RequestContext
from framework.server.router import supported_versions

API_KEY = 18


def _keys() -> list[ApiVersion]:
    return [ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, lo, hi in supported_versions()]


def handle(ctx: RequestContext, req: ApiVersionsRequest) -> ApiVersionsResponse:
    return ApiVersionsResponse(error_code=ErrorCode.NONE, api_keys=_keys())


def unsupported_version_response() -> ApiVersionsResponse:
    """Answer to an ApiVersions version we do not know: a v0 body with error 35 and our list."""
    return ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=_keys())


def error_response(req: ApiVersionsRequest, code: int, message: str) -> ApiVersionsResponse:
    return ApiVersionsResponse(error_code=code, api_keys=_keys())
