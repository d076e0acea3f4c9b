"""DescribeUserScramCredentials (50): which SCRAM mechanisms (and iterations) each user has.

Never a salt or a key. No users named (null or empty): every user. A user named twice answers
DUPLICATE_RESOURCE, an unknown one RESOURCE_NOT_FOUND, as Kafka does. With an authorizer:
Describe on the cluster.
"""

from __future__ import annotations

from framework.errors import DuplicateResource, ResourceNotFound
from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.describe_user_scram_credentials import (
    CredentialInfo,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    DescribeUserScramCredentialsResult,
)
from framework.security.authorizer import AclOperation
from framework.security.scram import MECHANISM_CODES
from framework.server import authz
from framework.server.context import RequestContext
from framework.server.errors import answer_errors


def _infos(mechs: dict[str, int]) -> list[CredentialInfo]:
    return [CredentialInfo(mechanism=MECHANISM_CODES[m], iterations=i) for m, i in sorted(mechs.items())]


async def handle(
    ctx: RequestContext, req: DescribeUserScramCredentialsRequest
) -> DescribeUserScramCredentialsResponse:
    authz.check_cluster(ctx, AclOperation.DESCRIBE)
    users = ctx.cluster.scram_users()
    if not req.users:
        return DescribeUserScramCredentialsResponse(
            results=[
                DescribeUserScramCredentialsResult(user=u, credential_infos=_infos(m))
                for u, m in sorted(users.items())
            ]
        )
    names = [u.name for u in req.users]
    out = []
    for name in names:
        r = DescribeUserScramCredentialsResult(user=name, error_code=ErrorCode.NONE)
        out.append(r)
        with answer_errors(r):
            if names.count(name) > 1:
                raise DuplicateResource(f"user {name!r} is named more than once")
            if name not in users:
                raise ResourceNotFound(f"attempt to describe a user credential that does not exist: {name}")
            r.credential_infos = _infos(users[name])
    return DescribeUserScramCredentialsResponse(results=out)


def error_response(
    req: DescribeUserScramCredentialsRequest, code: int, message: str
) -> DescribeUserScramCredentialsResponse:
    return DescribeUserScramCredentialsResponse(error_code=code, error_message=message)
