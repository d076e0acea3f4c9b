"""AlterClientQuotas (49): set and remove quota keys of user / client-id entities.

Each entry (an entity and its operations) is checked as Kafka does and answers its own error:
INVALID_REQUEST for an empty entity, an entity type twice, an unknown type or key, a value not
positive or, for the byte rates, not whole. The valid entries are applied together (through
the metadata quorum in a cluster), so every broker throttles with them from its next request;
``validate_only`` checks and changes nothing. With an authorizer: AlterConfigs on the cluster.
"""

from __future__ import annotations

import logging

from framework.errors import InvalidRequest
from framework.metadata.admin import Committed
from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.alter_client_quotas import (
    AlterClientQuotasRequest,
    AlterClientQuotasRequestEntryData,
    AlterClientQuotasResponse,
    AlterClientQuotasResponseEntityData,
    AlterClientQuotasResponseEntryData,
)
from framework.security import quotas
from framework.security.authorizer import AclOperation
from framework.server import authz
from framework.server.context import RequestContext
from framework.server.errors import answer_errors, when_committed

log = logging.getLogger("sftraffic.security")


def _result(entry: AlterClientQuotasRequestEntryData) -> AlterClientQuotasResponseEntryData:
    return AlterClientQuotasResponseEntryData(
        error_code=ErrorCode.NONE,
        entity=[
            AlterClientQuotasResponseEntityData(entity_type=e.entity_type, entity_name=e.entity_name)
            for e in entry.entity
        ],
    )


def _changes(entry: AlterClientQuotasRequestEntryData) -> dict[str, float | None]:
    changes: dict[str, float | None] = {}
    for op in entry.ops:
        if op.key in changes:
            raise InvalidRequest(f"Duplicate quota key {op.key} in one entity")
        if op.remove:
            if op.key not in quotas.QUOTA_KEYS:
                raise InvalidRequest(f"Invalid configuration key {op.key}")
            changes[op.key] = None
        else:
            quotas.check_value(op.key, op.value)
            changes[op.key] = float(op.value)
    return changes


async def handle(ctx: RequestContext, req: AlterClientQuotasRequest) -> AlterClientQuotasResponse:
    authz.check_cluster(ctx, AclOperation.ALTER_CONFIGS)
    out = []
    valid: list[tuple[AlterClientQuotasResponseEntryData, quotas.Entity, dict[str, float | None]]] = []
    seen: set[quotas.Entity] = set()
    for entry in req.entries:
        r = _result(entry)
        out.append(r)
        with answer_errors(r):
            ent = quotas.entity((e.entity_type, e.entity_name) for e in entry.entity)
            if ent in seen:
                raise InvalidRequest("The same entity is altered twice in one request")
            seen.add(ent)
            valid.append((r, ent, _changes(entry)))
    if req.validate_only or not valid:
        return AlterClientQuotasResponse(entries=out)
    prop = ctx.admin.alter_client_quotas([(ent, changes) for _, ent, changes in valid])
    for _, ent, changes in valid:
        log.info("client quotas of %s altered by %s: %s", ent, ctx.principal, changes)
    pending: list[tuple[AlterClientQuotasResponseEntryData, Committed]] = []
    if prop.committed is not None:
        pending = [(r, prop.committed) for r, _, _ in valid]
    return await when_committed(AlterClientQuotasResponse(entries=out), pending)


def error_response(req: AlterClientQuotasRequest, code: int, message: str) -> AlterClientQuotasResponse:
    out = []
    for entry in req.entries:
        r = _result(entry)
        r.error_code, r.error_message = code, message
        out.append(r)
    return AlterClientQuotasResponse(entries=out)
