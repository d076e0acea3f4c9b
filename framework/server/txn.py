"""What the transaction handlers share: the transaction service, the coordinator check, and
the error older clients know for a fenced producer."""

from __future__ import annotations

from framework.errors import StoreError
from framework.protocol.error_codes import ErrorCode
from framework.server.context import RequestContext, TransactionDirectory

__all__ = ["TransactionDirectory", "check_coordinator", "for_version", "service"]


def service(ctx: RequestContext) -> TransactionDirectory:
    svc = ctx.services.transactions
    if svc is None:
        raise StoreError("this broker runs no transaction coordinator", ErrorCode.COORDINATOR_NOT_AVAILABLE)
    return svc


def check_coordinator(ctx: RequestContext, transactional_id: str) -> TransactionDirectory:
    """The transaction service, if this broker coordinates ``transactional_id``; else raise."""
    svc = service(ctx)
    code = svc.coordinator_error(transactional_id)
    if code:
        raise StoreError(
            f"broker {ctx.node_id} is not the coordinator of transactional id {transactional_id!r}", code
        )
    return svc


def for_version(code: int, version: int, fenced_since: int) -> int:
    """PRODUCER_FENCED (KIP-588) as INVALID_PRODUCER_EPOCH for versions before ``fenced_since``."""
    if code == ErrorCode.PRODUCER_FENCED and version < fenced_since:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return code
