"""DeleteAcls (31): delete the ACLs each filter matches (kafka-acls --remove, AdminClient.delete_acls).

Kafka's rule: Alter on the cluster, else CLUSTER_AUTHORIZATION_FAILED; without an authorizer
SECURITY_DISABLED. sftraffic's extension: a stream admin without it deletes only the matching
ACLs under the streams it administers (one who administers none is refused as by Kafka).
"""

from __future__ import annotations

import logging

from framework.errors import ClusterAuthorizationFailed, SecurityDisabled, StoreError
from framework.metadata.admin import Committed
from framework.protocol.messages.delete_acls import (
    DeleteAclsFilterResult,
    DeleteAclsMatchingAcl,
    DeleteAclsRequest,
    DeleteAclsResponse,
)
from framework.security.authorizer import AclBinding, AclBindingFilter, AclOperation
from framework.server import authz
from framework.server.context import RequestContext
from framework.server.errors import set_error, when_committed
from framework.server.handlers.create_acls import may_change

log = logging.getLogger("sftraffic.server")


def _matching(b: AclBinding) -> DeleteAclsMatchingAcl:
    return DeleteAclsMatchingAcl(
        resource_type=b.resource_type,
        resource_name=b.name,
        pattern_type=b.pattern_type,
        principal=b.principal,
        host=b.host,
        operation=b.operation,
        permission_type=b.permission,
    )


async def handle(ctx: RequestContext, req: DeleteAclsRequest) -> DeleteAclsResponse:
    if ctx.services.authz is None:
        raise SecurityDisabled("No Authorizer is configured.")
    everything = authz.cluster_allowed(ctx, AclOperation.ALTER)
    if not everything and not any(authz.stream_admin(ctx, s) for s in ctx.cluster.streams):
        raise ClusterAuthorizationFailed("not authorized to Alter the cluster's ACLs")
    filters = [
        AclBindingFilter.of(
            f.resource_type_filter,
            f.resource_name_filter,
            f.pattern_type_filter,
            f.principal_filter,
            f.host_filter,
            f.operation,
            f.permission_type,
        )
        for f in req.filters
    ]
    prop = ctx.admin.delete_acls(filters, None if everything else (lambda b: may_change(ctx, b)))
    results = []
    for outcome in prop.result:
        r = DeleteAclsFilterResult()
        results.append(r)
        if isinstance(outcome, StoreError):
            set_error(r, outcome.code, outcome.message)
            continue
        r.matching_acls = [_matching(b) for b in outcome]
        for b in outcome:
            log.info("ACL deleted by %s (%s): %s", ctx.principal, ctx.peer, b)
    pending: list[tuple[DeleteAclsFilterResult, Committed]] = []
    if prop.committed is not None:
        pending = [(r, prop.committed) for r in results if not r.error_code]
    return await when_committed(DeleteAclsResponse(filter_results=results), pending)


def error_response(req: DeleteAclsRequest, code: int, message: str) -> DeleteAclsResponse:
    return DeleteAclsResponse(
        filter_results=[DeleteAclsFilterResult(error_code=code, error_message=message) for _ in req.filters]
    )
