"""DescribeCluster (60): cluster id, controller and brokers (what AdminClient.describe_cluster shows)."""

from __future__ import annotations

from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.describe_cluster import (
    DescribeClusterBroker,
    DescribeClusterRequest,
    DescribeClusterResponse,
)
from framework.server.context import RequestContext
from framework.server.handlers.metadata import NOT_REQUESTED, cluster_operations


async def handle(ctx: RequestContext, req: DescribeClusterRequest) -> DescribeClusterResponse:
    cluster = ctx.cluster
    if ctx.version >= 1 and req.endpoint_type not in (1,):
        return DescribeClusterResponse(
            error_code=ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
            error_message="only broker endpoints (1) are served",
            endpoint_type=req.endpoint_type,
            cluster_id=cluster.cluster_id,
            controller_id=-1,
        )
    return DescribeClusterResponse(
        error_code=ErrorCode.NONE,
        endpoint_type=1,
        cluster_id=cluster.cluster_id,
        controller_id=cluster.controller_id,
        brokers=[
            DescribeClusterBroker(broker_id=n.node_id, host=n.host, port=n.port, rack=n.rack)
            for n in cluster.nodes(ctx.listener)
        ],
        cluster_authorized_operations=cluster_operations(ctx)
        if req.include_cluster_authorized_operations
        else NOT_REQUESTED,
    )


def error_response(req: DescribeClusterRequest, code: int, message: str) -> DescribeClusterResponse:
    return DescribeClusterResponse(error_code=code, error_message=message, cluster_id="", controller_id=-1)
