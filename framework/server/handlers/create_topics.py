"""CreateTopics (19): create topics (with stream defaults for ``<stream>.<topic>`` names).

With an authorizer: Create on the cluster or on the topic (else TOPIC_AUTHORIZATION_FAILED);
the created topic's configs are shown only with DescribeConfigs on it (else its
``topic_config_error_code`` is TOPIC_AUTHORIZATION_FAILED), as Kafka does.
"""

from __future__ import annotations

import logging

from framework import config as cfg
from framework.errors import InvalidRequest, StoreError, TopicAuthorizationFailed
from framework.metadata.admin import Committed
from framework.metadata.store import TopicInfo
from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.create_topics import (
    CreatableTopic,
    CreatableTopicConfigs,
    CreatableTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from framework.security.authorizer import AclOperation, ResourceType
from framework.server import authz
from framework.server.context import RequestContext
from framework.server.errors import answer_errors, when_committed
from framework.server.handlers.describe_configs import SOURCE_CODES

log = logging.getLogger("sftraffic.server")


def _assignments(ct: CreatableTopic) -> list[list[int]] | None:
    if not ct.assignments:
        return None
    ordered = sorted(ct.assignments, key=lambda a: a.partition_index)
    if [a.partition_index for a in ordered] != list(range(len(ordered))):
        raise StoreError("assignments must cover partitions 0..n-1", ErrorCode.INVALID_REPLICA_ASSIGNMENT)
    return [list(a.broker_ids) for a in ordered]


def _describe(ctx: RequestContext, r: CreatableTopicResult, t: TopicInfo) -> None:
    r.topic_id = t.id_bytes
    r.num_partitions = t.partitions
    r.replication_factor = t.replication_factor
    r.configs = [
        CreatableTopicConfigs(
            name=k,
            value=cfg.key(k).render(v),
            read_only=False,
            config_source=SOURCE_CODES[src],
            is_sensitive=False,
        )
        for k, (v, src) in sorted(ctx.cluster.topic_config_values(t).items())
    ]


async def handle(ctx: RequestContext, req: CreateTopicsRequest) -> CreateTopicsResponse:
    results = []
    pending: list[tuple[CreatableTopicResult, Committed]] = []
    seen: set[str] = set()
    create_any = authz.cluster_allowed(ctx, AclOperation.CREATE)
    for ct in req.topics:
        r = CreatableTopicResult(
            name=ct.name, error_code=ErrorCode.NONE, num_partitions=-1, replication_factor=-1, configs=None
        )
        results.append(r)
        with answer_errors(r):
            if ct.name in seen:
                raise InvalidRequest(f"topic {ct.name!r} appears twice in the request")
            seen.add(ct.name)
            if not create_any and not authz.allowed(ctx, AclOperation.CREATE, ResourceType.TOPIC, ct.name):
                raise TopicAuthorizationFailed("Authorization failed.")
            configs = {c.name: c.value for c in ct.configs if c.value is not None}
            prop = ctx.admin.create_topic(
                ct.name,
                ct.num_partitions,
                ct.replication_factor,
                configs,
                _assignments(ct),
                validate_only=req.validate_only,
            )
            if prop.committed is not None:
                pending.append((r, prop.committed))
            if not req.validate_only:
                t = prop.result
                log.info(
                    "created topic %s (%d partitions, rf %d) for %s",
                    t.name,
                    t.partitions,
                    t.replication_factor,
                    ctx.peer,
                )
            if authz.allowed(ctx, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, ct.name):
                _describe(ctx, r, prop.result)
            else:  # created, but its configs are not shown
                r.topic_config_error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    return await when_committed(CreateTopicsResponse(topics=results), pending)


def error_response(req: CreateTopicsRequest, code: int, message: str) -> CreateTopicsResponse:
    return CreateTopicsResponse(
        topics=[CreatableTopicResult(name=t.name, error_code=code, error_message=message) for t in req.topics]
    )
