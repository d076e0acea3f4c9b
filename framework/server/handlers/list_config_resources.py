"""ListConfigResources (74; ListClientMetricsResources in Kafka before 4.1): the config resources
there are, as ``kafka-client-metrics --list`` and ``--describe`` ask.

v0 lists the client-metrics subscriptions (KIP-714). v1 names the resource types wanted (none:
every type): client-metrics subscriptions, topics and brokers are listed; broker loggers and
groups have no configs here, so none are; another type is INVALID_REQUEST. With an authorizer:
DescribeConfigs on the cluster (else CLUSTER_AUTHORIZATION_FAILED), as Kafka.
"""

from __future__ import annotations

from framework.errors import StoreError
from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.list_config_resources import (
    ConfigResource,
    ListConfigResourcesRequest,
    ListConfigResourcesResponse,
)
from framework.security.authorizer import AclOperation
from framework.server import authz
from framework.server.context import RequestContext

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
_TYPES = (CLIENT_METRICS, TOPIC, BROKER, BROKER_LOGGER, GROUP)


async def handle(ctx: RequestContext, req: ListConfigResourcesRequest) -> ListConfigResourcesResponse:
    authz.check_cluster(ctx, AclOperation.DESCRIBE_CONFIGS)
    wanted = [CLIENT_METRICS] if ctx.version == 0 else list(req.resource_types) or list(_TYPES)
    unknown = sorted(set(wanted) - set(_TYPES))
    if unknown:
        raise StoreError(f"resource types {unknown} have no configs", ErrorCode.INVALID_REQUEST)
    out: list[ConfigResource] = []
    if CLIENT_METRICS in wanted:
        out += [
            ConfigResource(resource_name=n, resource_type=CLIENT_METRICS)
            for n in sorted(ctx.cluster.client_metrics())
        ]
    if TOPIC in wanted:
        out += [ConfigResource(resource_name=t, resource_type=TOPIC) for t in sorted(ctx.cluster.topics)]
    if BROKER in wanted:
        out += [
            ConfigResource(resource_name=str(n.node_id), resource_type=BROKER) for n in ctx.cluster.nodes()
        ]
    return ListConfigResourcesResponse(error_code=ErrorCode.NONE, config_resources=out)


def error_response(req: ListConfigResourcesRequest, code: int, message: str) -> ListConfigResourcesResponse:
    return ListConfigResourcesResponse(error_code=code)
