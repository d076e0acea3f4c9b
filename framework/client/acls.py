"""CreateAcls (30) over the wire: what ``sftraffic streams grant`` and ``up --secure --cluster``
send. A plain Kafka API: it works against Apache Kafka as against our store."""

from __future__ import annotations

from framework.client.wire import WireClient
from framework.protocol.messages.create_acls import AclCreation, CreateAclsRequest, CreateAclsResponse
from framework.security.authorizer import AclBinding

__all__ = ["create_acls"]


def create_acls(client: WireClient, new: list[AclBinding]) -> list[tuple[AclBinding, int, str | None]]:
    """Create ``new`` (an ACL already there stays as it is); the refused ones, each with its
    error code and message, in the order given."""
    creations = [
        AclCreation(
            resource_type=b.resource_type,
            resource_name=b.name,
            resource_pattern_type=b.pattern_type,
            principal=b.principal,
            host=b.host,
            operation=b.operation,
            permission_type=b.permission,
        )
        for b in new
    ]
    resp = client.send(CreateAclsRequest(creations=creations), CreateAclsResponse)
    answers = zip(new, resp.results, strict=True)
    return [(b, r.error_code, r.error_message) for b, r in answers if r.error_code]
