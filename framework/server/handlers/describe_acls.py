"""DescribeAcls (29): the ACLs a filter selects, grouped by resource pattern (kafka-acls --list).

Kafka's rule: Describe on the cluster, else CLUSTER_AUTHORIZATION_FAILED; without an authorizer
SECURITY_DISABLED. sftraffic's extension: a stream admin (``adminperm``) without it is shown the
ACLs under the streams it administers (see :mod:`framework.security.stream_permissions`).
"""

from __future__ import annotations

from framework.errors import ClusterAuthorizationFailed, SecurityDisabled, StoreError
from framework.protocol.messages.describe_acls import (
    AclDescription,
    DescribeAclsRequest,
    DescribeAclsResource,
    DescribeAclsResponse,
)
from framework.security.authorizer import AclBinding, AclBindingFilter, AclOperation
from framework.security.stream_permissions import stream_of
from framework.server import authz
from framework.server.context import RequestContext

NO_AUTHORIZER = "No Authorizer is configured on the broker"


def visible(ctx: RequestContext, f: AclBindingFilter) -> list[AclBinding]:
    """The ACLs the filter selects that the principal may see."""
    az = ctx.services.authz
    if az is None:
        raise SecurityDisabled(NO_AUTHORIZER)
    acls = az.authorizer.matching(f)
    if authz.cluster_allowed(ctx, AclOperation.DESCRIBE):
        return acls
    admin = {s for s in ctx.cluster.streams if authz.stream_admin(ctx, s)}
    if not admin:
        raise ClusterAuthorizationFailed("not authorized to Describe the cluster's ACLs")
    return [b for b in acls if stream_of(b) in admin]


def group(acls: list[AclBinding]) -> list[DescribeAclsResource]:
    out: dict[tuple[int, str, int], DescribeAclsResource] = {}
    for b in acls:
        key = (int(b.resource_type), b.name, int(b.pattern_type))
        r = out.get(key)
        if r is None:
            r = out[key] = DescribeAclsResource(
                resource_type=b.resource_type, resource_name=b.name, pattern_type=b.pattern_type
            )
        r.acls.append(
            AclDescription(
                principal=b.principal, host=b.host, operation=b.operation, permission_type=b.permission
            )
        )
    return list(out.values())


async def handle(ctx: RequestContext, req: DescribeAclsRequest) -> DescribeAclsResponse:
    f = AclBindingFilter.of(
        req.resource_type_filter,
        req.resource_name_filter,
        req.pattern_type_filter,
        req.principal_filter,
        req.host_filter,
        req.operation,
        req.permission_type,
    )
    try:
        f.check()
        acls = visible(ctx, f)
    except StoreError as exc:
        return error_response(req, exc.code, exc.message)
    return DescribeAclsResponse(resources=group(acls))


def error_response(req: DescribeAclsRequest, code: int, message: str) -> DescribeAclsResponse:
    return DescribeAclsResponse(error_code=code, error_message=message)
