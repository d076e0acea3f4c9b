"""AlterPartitionReassignments (45): move a partition's replicas to a target list, or cancel
a move (null replicas), as ``kafka-reassign-partitions --execute`` / ``--cancel`` and
``AdminClient.alter_partition_reassignments`` ask.

Each partition's change is proposed to the metadata quorum and checked where it is applied,
in log order (:meth:`framework.metadata.quorum.ClusterState.alter_reassignment`), with
Kafka's answers: UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT (an empty list, an
unregistered broker, a broker twice), NO_REASSIGNMENT_IN_PROGRESS (cancelling nothing),
INVALID_REPLICATION_FACTOR (v1 with allow_replication_factor_change false). The answer comes
once the change is applied (the move itself goes on after it: ListPartitionReassignments
shows it), or REQUEST_TIMED_OUT after the request's timeout. With an authorizer it needs Alter
on the cluster.
"""

from __future__ import annotations

import asyncio
from typing import Any

from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ReassignablePartitionResponse,
    ReassignableTopicResponse,
)
from framework.security.authorizer import AclOperation
from framework.server import authz
from framework.server.context import RequestContext
from framework.server.errors import kafka_error


def _set(r: ReassignablePartitionResponse, code: int, message: str | None) -> None:
    r.error_code = int(code)
    r.error_message = (message or ErrorCode(code).description) if code else None


async def _alter(
    ctx: RequestContext, req: AlterPartitionReassignmentsRequest
) -> AlterPartitionReassignmentsResponse:
    allow = req.allow_replication_factor_change if ctx.version >= 1 else True
    out = []
    waits: list[tuple[ReassignablePartitionResponse, asyncio.Future[Any]]] = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            r = ReassignablePartitionResponse(partition_index=p.partition_index, error_code=ErrorCode.NONE)
            parts.append(r)
            target = None if p.replicas is None else list(p.replicas)
            outcome = ctx.admin.alter_reassignment(t.name, p.partition_index, target, allow)
            if isinstance(outcome, asyncio.Future):
                waits.append((r, outcome))
            else:
                _set(r, *outcome)
        out.append(ReassignableTopicResponse(name=t.name, partitions=parts))
    if waits:
        await asyncio.wait([f for _, f in waits], timeout=max(req.timeout_ms, 1) / 1000)
    for r, fut in waits:
        if not fut.done():
            fut.add_done_callback(lambda f: f.cancelled() or f.exception())
            _set(r, ErrorCode.REQUEST_TIMED_OUT, "the metadata quorum did not apply it in time")
        elif fut.exception() is not None:
            exc = fut.exception()
            assert exc is not None
            _set(r, *(kafka_error(exc) or (ErrorCode.UNKNOWN_SERVER_ERROR, str(exc))))
        else:
            _set(r, *fut.result())
    return AlterPartitionReassignmentsResponse(
        allow_replication_factor_change=allow, error_code=ErrorCode.NONE, responses=out
    )


async def handle(
    ctx: RequestContext, req: AlterPartitionReassignmentsRequest
) -> AlterPartitionReassignmentsResponse:
    authz.check_cluster(ctx, AclOperation.ALTER)
    return await _alter(ctx, req)


def error_response(
    req: AlterPartitionReassignmentsRequest, code: int, message: str
) -> AlterPartitionReassignmentsResponse:
    return AlterPartitionReassignmentsResponse(error_code=code, error_message=message)
