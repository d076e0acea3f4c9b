"""DescribeClientQuotas (48): the quota entities a filter matches, with their keys and values.

Kafka's filter: per entity type (``user``, ``client-id``) a match type, EXACT (that name),
DEFAULT (the ``<default>`` entity, a null name) or SPECIFIED (any name but the default); with
``strict`` only entities of exactly those types, else any entity that has them. A bad filter
(a type twice, an unknown type, EXACT without a name) answers INVALID_REQUEST as a whole. With
an authorizer: DescribeConfigs on the cluster, as Kafka asks.
"""

from __future__ import annotations

from framework.protocol.messages.describe_client_quotas import (
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
    EntityData,
    EntryData,
    ValueData,
)
from framework.security import quotas
from framework.security.authorizer import AclOperation
from framework.server import authz
from framework.server.context import RequestContext


async def handle(ctx: RequestContext, req: DescribeClientQuotasRequest) -> DescribeClientQuotasResponse:
    authz.check_cluster(ctx, AclOperation.DESCRIBE_CONFIGS)
    components = [(c.entity_type, c.match_type, c.match) for c in req.components]
    quotas.check_filter(components)
    entries = [
        EntryData(
            entity=[EntityData(entity_type=t, entity_name=n) for t, n in ent],
            values=[ValueData(key=k, value=v) for k, v in sorted(values.items())],
        )
        for ent, values in sorted(ctx.cluster.client_quotas().items(), key=str)
        if quotas.entity_matches(ent, components, req.strict)
    ]
    return DescribeClientQuotasResponse(entries=entries)


def error_response(req: DescribeClientQuotasRequest, code: int, message: str) -> DescribeClientQuotasResponse:
    return DescribeClientQuotasResponse(error_code=code, error_message=message, entries=None)
