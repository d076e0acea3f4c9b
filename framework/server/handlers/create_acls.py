"""CreateAcls (30): add ACLs (kafka-acls --add, AdminClient.create_acls).

Kafka's rule: Alter on the cluster, else CLUSTER_AUTHORIZATION_FAILED; without an authorizer
SECURITY_DISABLED. sftraffic's extension: a stream admin (``adminperm``, Alter on the LITERAL
topic pattern ``<stream>.``) may create ACLs under ``<stream>.`` (TOPIC or GROUP patterns whose
name starts with it) without Alter on the cluster; each other creation gets
CLUSTER_AUTHORIZATION_FAILED. The ACLs are metadata: proposed to the quorum in a cluster, and
answered once applied here; every broker's authorizer reloads them when it applies them.
"""

from __future__ import annotations

import logging

from framework.errors import SecurityDisabled
from framework.metadata.admin import Committed
from framework.protocol.messages.create_acls import (
    AclCreationResult,
    CreateAclsRequest,
    CreateAclsResponse,
)
from framework.security.authorizer import AclBinding, AclOperation
from framework.security.stream_permissions import stream_of
from framework.server import authz
from framework.server.context import RequestContext
from framework.server.errors import set_error, when_committed

log = logging.getLogger("sftraffic.server")


def may_change(ctx: RequestContext, b: AclBinding) -> bool:
    """Whether the principal may create or delete this ACL: Alter on the cluster (Kafka), or
    the admin of the stream whose name space the ACL is in (sftraffic)."""
    if authz.cluster_allowed(ctx, AclOperation.ALTER):
        return True
    stream = stream_of(b)
    return stream is not None and authz.stream_admin(ctx, stream)


async def handle(ctx: RequestContext, req: CreateAclsRequest) -> CreateAclsResponse:
    if ctx.services.authz is None:
        raise SecurityDisabled("No Authorizer is configured.")
    results = [AclCreationResult() for _ in req.creations]
    wanted: list[tuple[AclCreationResult, AclBinding]] = []
    for r, c in zip(results, req.creations, strict=True):
        b = AclBinding.of(
            c.resource_type,
            c.resource_name,
            c.resource_pattern_type,
            c.principal,
            c.host,
            c.operation,
            c.permission_type,
        )
        if may_change(ctx, b):
            wanted.append((r, b))
        else:
            e = authz.denied(AclOperation.ALTER, authz.Res.CLUSTER, "")
            set_error(r, e.code, e.message)
    if not wanted:
        return CreateAclsResponse(results=results)
    prop = ctx.admin.create_acls([b for _, b in wanted])
    for (r, b), problem in zip(wanted, prop.result, strict=True):
        if problem is not None:
            set_error(r, problem.code, problem.message)
        else:
            log.info("ACL created by %s (%s): %s", ctx.principal, ctx.peer, b)
    pending: list[tuple[AclCreationResult, Committed]] = []
    if prop.committed is not None:
        pending = [(r, prop.committed) for r, _ in wanted if not r.error_code]
    return await when_committed(CreateAclsResponse(results=results), pending)


def error_response(req: CreateAclsRequest, code: int, message: str) -> CreateAclsResponse:
    return CreateAclsResponse(
        results=[AclCreationResult(error_code=code, error_message=message) for _ in req.creations]
    )
