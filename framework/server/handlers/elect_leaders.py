"""ElectLeaders (43): move leadership to each partition's preferred replica, or (unclean) to
any live replica of a partition whose in-sync replicas are all gone (Kafka's
``kafka-leader-election``, ``AdminClient.elect_leaders``).

With an authorizer it needs Alter on the cluster (else CLUSTER_AUTHORIZATION_FAILED). A null
partition list means every partition. Elections are proposed to the metadata quorum
and answered once applied, or REQUEST_TIMED_OUT after the request's timeout.
"""

from __future__ import annotations

import asyncio
from typing import Any

from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.elect_leaders import (
    ElectLeadersRequest,
    ElectLeadersResponse,
    PartitionResult,
    ReplicaElectionResult,
)
from framework.security.authorizer import AclOperation
from framework.server import authz
from framework.server.context import RequestContext
from framework.server.errors import kafka_error, set_error


def _wanted(ctx: RequestContext, req: ElectLeadersRequest) -> list[tuple[str, list[int]]]:
    if req.topic_partitions is None:
        return [(t.name, list(range(t.partitions))) for t in ctx.cluster.topics.values()]
    return [(tp.topic, list(tp.partitions)) for tp in req.topic_partitions]


async def _elect(ctx: RequestContext, req: ElectLeadersRequest) -> ElectLeadersResponse:
    election = req.election_type if ctx.version >= 1 else 0
    results = []
    waits: list[tuple[PartitionResult, asyncio.Future[Any]]] = []
    for topic, partitions in _wanted(ctx, req):
        out = []
        for i in partitions:
            r = PartitionResult(partition_id=i, error_code=ErrorCode.NONE)
            out.append(r)
            outcome = ctx.admin.elect_leader(topic, i, election)
            if isinstance(outcome, asyncio.Future):
                waits.append((r, outcome))
            elif outcome:
                set_error(r, outcome, outcome.description)
        results.append(ReplicaElectionResult(topic=topic, partition_result=out))
    if waits:
        await asyncio.wait([f for _, f in waits], timeout=max(req.timeout_ms, 1) / 1000)
    for r, fut in waits:
        if not fut.done():
            fut.add_done_callback(lambda f: f.cancelled() or f.exception())
            set_error(r, ErrorCode.REQUEST_TIMED_OUT, "the metadata quorum did not apply it in time")
        elif fut.exception() is not None:
            exc = fut.exception()
            assert exc is not None
            set_error(r, *(kafka_error(exc) or (ErrorCode.UNKNOWN_SERVER_ERROR, str(exc))))
        elif fut.result():
            code = ErrorCode(fut.result())
            set_error(r, code, code.description)
    return ElectLeadersResponse(error_code=ErrorCode.NONE, replica_election_results=results)


async def handle(ctx: RequestContext, req: ElectLeadersRequest) -> ElectLeadersResponse:
    authz.check_cluster(ctx, AclOperation.ALTER)
    return await _elect(ctx, req)


def error_response(req: ElectLeadersRequest, code: int, message: str) -> ElectLeadersResponse:
    return ElectLeadersResponse(
        error_code=code,
        replica_election_results=[
            ReplicaElectionResult(
                topic=tp.topic,
                partition_result=[
                    PartitionResult(partition_id=i, error_code=code, error_message=message)
                    for i in tp.partitions
                ],
            )
            for tp in req.topic_partitions or []
        ],
    )
