"""UnregisterBroker (64): remove a broker's registration from the cluster metadata, as
``kafka-cluster unregister --id N`` and ``Admin.unregisterBroker`` ask, the last step of
shrinking a cluster: move the broker's replicas off with a reassignment, stop it,
then unregister it.

Proposed to the metadata quorum and checked where applied, in log order
(:meth:`framework.metadata.quorum.ClusterState.unregister_broker`): BROKER_ID_NOT_REGISTERED for
an unknown id, INVALID_REQUEST for a controller.quorum.voters member or a broker still listed
as a replica (Kafka leaves that to the operator; refusing keeps partitions from naming a broker
that no longer exists). A broker still running registers again, as in Kafka. The answer comes
once applied, or REQUEST_TIMED_OUT after 30 s. With an authorizer it needs Alter on the cluster.
"""

from __future__ import annotations

import asyncio

from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.unregister_broker import UnregisterBrokerRequest, UnregisterBrokerResponse
from framework.security.authorizer import AclOperation
from framework.server import authz
from framework.server.context import RequestContext
from framework.server.errors import kafka_error

TIMEOUT_S = 30.0


def _answer(code: int, message: str | None) -> UnregisterBrokerResponse:
    return UnregisterBrokerResponse(
        error_code=int(code), error_message=(message or ErrorCode(code).description) if code else None
    )


async def _unregister(fut: asyncio.Future[tuple[int, str | None]]) -> UnregisterBrokerResponse:
    # asyncio.wait, not asyncio.timeout: a handler may run outside a Task (framework.server.router)
    await asyncio.wait((fut,), timeout=TIMEOUT_S)
    if not fut.done():
        fut.add_done_callback(lambda f: f.cancelled() or f.exception())
        return _answer(ErrorCode.REQUEST_TIMED_OUT, "the metadata quorum did not apply it in time")
    exc = fut.exception()
    if exc is not None:  # a quorum failure becomes its Kafka code
        return _answer(*(kafka_error(exc) or (ErrorCode.UNKNOWN_SERVER_ERROR, str(exc))))
    return _answer(*fut.result())


async def handle(ctx: RequestContext, req: UnregisterBrokerRequest) -> UnregisterBrokerResponse:
    authz.check_cluster(ctx, AclOperation.ALTER)
    outcome = ctx.admin.unregister_broker(req.broker_id)
    if isinstance(outcome, asyncio.Future):
        return await _unregister(outcome)
    return _answer(*outcome)


def error_response(req: UnregisterBrokerRequest, code: int, message: str) -> UnregisterBrokerResponse:
    return UnregisterBrokerResponse(error_code=code, error_message=message)
