"""SaslAuthenticate (36): one token of the SASL exchange the handshake chose.

A completed exchange answers the session lifetime (v1+, ``connections.max.reauth.ms``, KIP-368).
A failed one answers SASL_AUTHENTICATION_FAILED with the same message whatever went wrong
(wrong password, unknown user, malformed token), after
``connection.failed.authentication.delay.ms``; the listener then closes the connection. The
reason is logged (rate-limited), never sent.
"""

from __future__ import annotations

import asyncio
import logging

from framework.errors import SaslAuthenticationFailed
from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.sasl_authenticate import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
)
from framework.server.context import RequestContext
from framework.server.rate_limited_log import RateLimitedLog

log = logging.getLogger("sftraffic.security")
auth_log = RateLimitedLog(log)


async def _later(resp: SaslAuthenticateResponse, delay_s: float) -> SaslAuthenticateResponse:
    await asyncio.sleep(delay_s)
    return resp


async def handle(ctx: RequestContext, req: SaslAuthenticateRequest) -> SaslAuthenticateResponse:
    session = ctx.sasl
    if session is None:
        return SaslAuthenticateResponse(
            error_code=ErrorCode.ILLEGAL_SASL_STATE,
            error_message=f"listener {ctx.listener} does not use SASL",
        )
    try:
        step = session.authenticate(req.auth_bytes)
    except SaslAuthenticationFailed as exc:
        auth_log(
            logging.WARNING,
            f"authentication failed from {ctx.peer} on {ctx.listener} ({session.mechanism}): "
            f"{session.last_failure}",
        )
        resp = SaslAuthenticateResponse(
            error_code=ErrorCode.SASL_AUTHENTICATION_FAILED, error_message=exc.message
        )
        return await _later(resp, ctx.config.int("connection.failed.authentication.delay.ms") / 1000)
    if step.principal is not None:
        log.debug(
            "%s authenticated as %s on %s (%s)", ctx.peer, step.principal, ctx.listener, session.mechanism
        )
    return SaslAuthenticateResponse(
        error_code=ErrorCode.NONE, auth_bytes=step.token, session_lifetime_ms=step.session_lifetime_ms
    )


def error_response(req: SaslAuthenticateRequest, code: int, message: str) -> SaslAuthenticateResponse:
    return SaslAuthenticateResponse(error_code=code, error_message=message)
