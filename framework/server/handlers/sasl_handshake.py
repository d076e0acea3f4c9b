"""SaslHandshake (17): choose a SASL mechanism, to authenticate or re-authenticate (KIP-368).

Only v1 is served (Kafka 4 removed v0, whose tokens followed without Kafka framing): the
exchange then goes on with SaslAuthenticate. On a listener without SASL the answer is
ILLEGAL_SASL_STATE; an unsupported mechanism answers UNSUPPORTED_SASL_MECHANISM with the
enabled ones. Any error closes the connection once written (the listener does it).
"""

from __future__ import annotations

from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse
from framework.server.context import RequestContext


async def handle(ctx: RequestContext, req: SaslHandshakeRequest) -> SaslHandshakeResponse:
    session = ctx.sasl
    if session is None:
        return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE)
    # UnsupportedSaslMechanism / IllegalSaslState propagate: error_response answers them
    session.handshake(req.mechanism)
    return SaslHandshakeResponse(error_code=ErrorCode.NONE, mechanisms=list(session.mechanisms))


def error_response(req: SaslHandshakeRequest, code: int, message: str) -> SaslHandshakeResponse:
    return SaslHandshakeResponse(error_code=code)
