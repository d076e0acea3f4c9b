"""FindCoordinator (10): which broker coordinates a group (the leader of its __consumer_offsets
partition) or a transactional id (key type 1: the leader of its __transaction_state partition)."""

from __future__ import annotations

from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.find_coordinator import (
    Coordinator,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from framework.security.authorizer import AclOperation, ResourceType
from framework.server import authz
from framework.server.context import RequestContext

GROUP, TRANSACTION = 0, 1


def _none(key: str, code: int, message: str) -> Coordinator:
    return Coordinator(key=key, node_id=-1, host="", port=-1, error_code=code, error_message=message)


def _lookup(ctx: RequestContext, key: str, key_type: int) -> Coordinator:
    # Describe on the group (or transactional id) first, as Kafka does
    if key_type == GROUP and not authz.allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, key):
        return _none(key, ErrorCode.GROUP_AUTHORIZATION_FAILED, "not authorized to Describe the group")
    if key_type == TRANSACTION and not authz.allowed(
        ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key
    ):
        return _none(
            key,
            ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            "not authorized to Describe the transactional id",
        )
    if key_type not in (GROUP, TRANSACTION):
        return _none(key, ErrorCode.INVALID_REQUEST, f"unknown coordinator key type {key_type}")
    if not key:
        return _none(
            key,
            ErrorCode.INVALID_REQUEST,
            "empty group id" if key_type == GROUP else "empty transactional id",
        )
    if key_type == TRANSACTION:
        txns = ctx.services.transactions
        node = txns.coordinator_node(key, ctx.listener) if txns is not None else None
    else:
        node = ctx.groups.coordinator_node(key, ctx.listener)
    if node is None:  # cluster: the state topic not created yet, or its partition has no leader
        return _none(key, ErrorCode.COORDINATOR_NOT_AVAILABLE, "the coordinator is being elected; retry")
    return Coordinator(
        key=key, node_id=node.node_id, host=node.host, port=node.port, error_code=ErrorCode.NONE
    )


async def handle(ctx: RequestContext, req: FindCoordinatorRequest) -> FindCoordinatorResponse:
    if ctx.version >= 4:
        return FindCoordinatorResponse(
            coordinators=[_lookup(ctx, k, req.key_type) for k in req.coordinator_keys]
        )
    c = _lookup(ctx, req.key, req.key_type)
    return FindCoordinatorResponse(
        error_code=c.error_code,
        error_message=c.error_message,
        node_id=c.node_id,
        host=c.host,
        port=c.port,
    )


def error_response(req: FindCoordinatorRequest, code: int, message: str) -> FindCoordinatorResponse:
    return FindCoordinatorResponse(
        error_code=code,
        error_message=message,
        node_id=-1,
        host="",
        port=-1,
        coordinators=[_none(k, code, message) for k in req.coordinator_keys],
    )
