"""Authorization on the request path: what handlers ask, answered from per-connection caches.

Handlers ask :func:`allowed` (a decision) or :func:`check` (raise the resource type's Kafka error:
TOPIC_, GROUP_, CLUSTER_ or TRANSACTIONAL_ID_AUTHORIZATION_FAILED, through the one error
mapping of :mod:`framework.server.errors`). Without an authorizer (``authorizer.class.name``
empty) everything is allowed and each question costs one attribute look-up.

Decisions are cached per connection (its peer address and principal) and resource by
:class:`~framework.security.authorizer.DecisionCache`; an ACL change applied by the metadata
store, on every broker, empties every cache (the authorizer's generation), so a revocation takes
effect on the connection's next request. Thread-safety: event loop only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from framework.errors import (
    ClusterAuthorizationFailed,
    GroupAuthorizationFailed,
    StoreError,
    TopicAuthorizationFailed,
    TransactionalIdAuthorizationFailed,
)
from framework.security.authorizer import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    AclBinding,
    AclOperation,
    DecisionCache,
    ResourceType,
    StandardAuthorizer,
)
from framework.security.principal import KafkaPrincipal

if TYPE_CHECKING:
    from framework.server.context import RequestContext

Op, Res = AclOperation, ResourceType

_DENIED: dict[ResourceType, type[StoreError]] = {
    Res.TOPIC: TopicAuthorizationFailed,
    Res.GROUP: GroupAuthorizationFailed,
    Res.CLUSTER: ClusterAuthorizationFailed,
    Res.TRANSACTIONAL_ID: TransactionalIdAuthorizationFailed,
}
_WORDS = {
    Op.READ: "Read",
    Op.WRITE: "Write",
    Op.CREATE: "Create",
    Op.DELETE: "Delete",
    Op.ALTER: "Alter",
    Op.DESCRIBE: "Describe",
    Op.CLUSTER_ACTION: "ClusterAction",
    Op.DESCRIBE_CONFIGS: "DescribeConfigs",
    Op.ALTER_CONFIGS: "AlterConfigs",
    Op.IDEMPOTENT_WRITE: "IdempotentWrite",
}


def host_of(peer: str) -> str:
    """The IP address ACL hosts are compared with: ``10.0.0.1:5432`` → ``10.0.0.1``."""
    return peer.rsplit(":", 1)[0].strip("[]")


class Authz:
    """The broker's authorizer and the decision caches of its connections."""

    MAX_CONNECTIONS = 20_000  # caches kept (closed connections' are dropped); more start over

    def __init__(self, authorizer: StandardAuthorizer) -> None:
        self.authorizer = authorizer
        self._sessions: dict[str, DecisionCache] = {}

    def load(self, acls: list[AclBinding]) -> None:
        """The ACLs changed (CreateAcls/DeleteAcls applied here, or a snapshot restored)."""
        self.authorizer.load(acls)

    def forget(self, peer: str) -> None:
        """The connection from ``peer`` closed: drop its decision cache."""
        self._sessions.pop(peer, None)

    def session(self, peer: str, principal: KafkaPrincipal) -> DecisionCache:
        s = self._sessions.get(peer)
        if s is None or s.principal != principal:  # a new connection (or re-authenticated)
            if len(self._sessions) >= self.MAX_CONNECTIONS:
                self._sessions.clear()
            s = self._sessions[peer] = self.authorizer.session(principal, host_of(peer))
        return s


def enabled(ctx: RequestContext) -> bool:
    return ctx.services.authz is not None


def allowed(ctx: RequestContext, op: AclOperation, rtype: ResourceType, name: str) -> bool:
    authz = ctx.services.authz
    if authz is None:
        return True
    return authz.session(ctx.peer, ctx.principal).allowed(op, rtype, name)


def cluster_allowed(ctx: RequestContext, op: AclOperation) -> bool:
    return allowed(ctx, op, Res.CLUSTER, CLUSTER_NAME)


def denied(op: AclOperation, rtype: ResourceType, name: str) -> StoreError:
    """The Kafka error answering an action the principal may not do."""
    what = "the cluster" if rtype == Res.CLUSTER else f"{rtype.name.lower().replace('_', ' ')} {name!r}"
    return _DENIED[rtype](f"not authorized to {_WORDS.get(op, op.name)} {what}")


def check(ctx: RequestContext, op: AclOperation, rtype: ResourceType, name: str) -> None:
    """Raise the resource type's authorization error unless the principal may do ``op``."""
    if not allowed(ctx, op, rtype, name):
        raise denied(op, rtype, name)


def check_cluster(ctx: RequestContext, op: AclOperation) -> None:
    check(ctx, op, Res.CLUSTER, CLUSTER_NAME)


def by_resource_type(ctx: RequestContext, op: AclOperation, rtype: ResourceType) -> bool:
    """May the principal do ``op`` on some resource of the type (Kafka's authorizeByResourceType)."""
    authz = ctx.services.authz
    if authz is None:
        return True
    return authz.authorizer.authorize_by_resource_type(ctx.principal, host_of(ctx.peer), op, rtype)


def operations(ctx: RequestContext, rtype: ResourceType, name: str) -> int:
    """The authorized-operations bit field (every operation of the type without an authorizer)."""
    authz = ctx.services.authz
    if authz is None:
        return sum(1 << op for op in SUPPORTED_OPERATIONS[rtype])
    s = authz.session(ctx.peer, ctx.principal)
    return sum(1 << op for op in SUPPORTED_OPERATIONS[rtype] if s.allowed(op, rtype, name))


def stream_admin(ctx: RequestContext, stream: str) -> bool:
    """Whether the principal administers the stream's permissions (MapR's ``adminperm``):
    Alter on the cluster (Kafka's right to change any ACL), or an ALLOW of Alter on the LITERAL
    topic pattern ``<stream>.`` (what ``sftraffic streams grant --admin`` creates)."""
    authz = ctx.services.authz
    if authz is None:
        return True
    if cluster_allowed(ctx, Op.ALTER):
        return True
    return authz.authorizer.holds_literal(ctx.principal, host_of(ctx.peer), Op.ALTER, Res.TOPIC, f"{stream}.")
