"""AlterUserScramCredentials (51): set or delete users' SCRAM credentials.

The client sends the salt, the iteration count and the salted password (PBKDF2 done on its
side, as Kafka's AdminClient does); the broker keeps only the derived stored and server keys
(:func:`framework.security.scram.from_salted_password`). All alterations of one user apply
together or not at all; each user gets Kafka's error: UNSUPPORTED_SASL_MECHANISM,
UNACCEPTABLE_CREDENTIAL (iterations outside 4096-16384, empty name), DUPLICATE_RESOURCE (a user
named more than once in the request, whatever the mechanisms, as Kafka's ScramControlManager),
RESOURCE_NOT_FOUND (deleting what does not exist). In a cluster the
change goes through the metadata quorum. With an authorizer: Alter on the cluster.
"""

from __future__ import annotations

import logging

from framework.errors import DuplicateResource, UnsupportedSaslMechanism
from framework.metadata.admin import Committed
from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    AlterUserScramCredentialsResult,
)
from framework.security import scram
from framework.security.authorizer import AclOperation
from framework.server import authz
from framework.server.context import RequestContext
from framework.server.errors import answer_errors, when_committed

log = logging.getLogger("sftraffic.security")


def _mechanism(code: int) -> str:
    name = scram.MECHANISM_NAMES.get(code)
    if name is None:
        raise UnsupportedSaslMechanism(f"unknown SCRAM mechanism {code}")
    return name


async def handle(
    ctx: RequestContext, req: AlterUserScramCredentialsRequest
) -> AlterUserScramCredentialsResponse:
    authz.check_cluster(ctx, AclOperation.ALTER)
    named = [d.name for d in req.deletions] + [u.name for u in req.upsertions]
    users = list(dict.fromkeys(named))
    out = []
    pending: list[tuple[AlterUserScramCredentialsResult, Committed]] = []
    for user in users:
        r = AlterUserScramCredentialsResult(user=user, error_code=ErrorCode.NONE)
        out.append(r)
        with answer_errors(r):
            if named.count(user) > 1:
                raise DuplicateResource("A user credential cannot be altered twice in the same request")
            delete = [_mechanism(d.mechanism) for d in req.deletions if d.name == user]
            upsert = [
                scram.from_salted_password(_mechanism(u.mechanism), u.salt, u.salted_password, u.iterations)
                for u in req.upsertions
                if u.name == user
            ]
            prop = ctx.admin.alter_scram_credentials(user, upsert, delete)
            if prop.committed is not None:
                pending.append((r, prop.committed))
            log.info(
                "SCRAM credentials of %s altered by %s (set %s, deleted %s)",
                user,
                ctx.principal,
                ", ".join(c.mechanism for c in upsert) or "none",
                ", ".join(delete) or "none",
            )
    return await when_committed(AlterUserScramCredentialsResponse(results=out), pending)


def error_response(
    req: AlterUserScramCredentialsRequest, code: int, message: str
) -> AlterUserScramCredentialsResponse:
    users = list(dict.fromkeys([d.name for d in req.deletions] + [u.name for u in req.upsertions]))
    return AlterUserScramCredentialsResponse(
        results=[
            AlterUserScramCredentialsResult(user=u, error_code=code, error_message=message) for u in users
        ]
    )
