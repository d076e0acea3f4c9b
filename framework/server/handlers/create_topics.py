"""CreateTopics (19): create topics (with stream defaults for ``<stream>.<topic>`` names)."""

from __future__ import annotations

import logging

from framework import config as cfg
from framework.errors import StoreError
from framework.protocol.errors import ErrorCode
from framework.protocol.messages.create_topics import (
    CreatableTopicConfigs,
    CreatableTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from framework.server.context import RequestContext
from framework.server.handlers.describe_configs import SOURCE_CODES

API_KEY = 19
log = logging.getLogger("sftraffic.server")


def handle(ctx: RequestContext, req: CreateTopicsRequest) -> object:
    broker = ctx.broker
    results = []
    seen: set[str] = set()
    for ct in req.topics:
        r = CreatableTopicResult(
            name=ct.name, error_code=0, num_partitions=-1, replication_factor=-1, configs=None
        )
        results.append(r)
        if ct.name in seen:
            r.error_code = 42  # INVALID_REQUEST: duplicate topic in one request
            r.error_message = f"topic {ct.name!r} appears twice in the request"
            continue
        seen.add(ct.name)
        try:
            configs = {c.name: c.value for c in ct.configs if c.value is not None}
            assignments = None
            if ct.assignments:
                ordered = sorted(ct.assignments, key=lambda a: a.partition_index)
                if [a.partition_index for a in ordered] != list(range(len(ordered))):
                    raise StoreError(
                        "assignments must cover partitions 0..n-1",
                        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    )
                assignments = [list(a.broker_ids) for a in ordered]
            t = broker.create_topic(
                ct.name,
                ct.num_partitions,
                ct.replication_factor,
                configs,
                assignments,
                validate_only=req.validate_only,
            )
            broker.bind_pending(r)
            if not req.validate_only:
                log.info(
                    "created topic %s (%d partitions, rf %d) for %s",
                    t.name,
                    t.partitions,
                    t.replication_factor,
                    ctx.peer,
                )
        except StoreError as exc:
            r.error_code = exc.code
            r.error_message = exc.message
            continue
        r.topic_id = t.id_bytes
        r.num_partitions = t.partitions
        r.replication_factor = t.replication_factor
        values = broker.metadata.topic_config_values(t)
        r.configs = [
            CreatableTopicConfigs(
                name=k,
                value=cfg.key(k).render(v),
                read_only=False,
                config_source=SOURCE_CODES[src],
                is_sensitive=False,
            )
            for k, (v, src) in sorted(values.items())
        ]
    return broker.committed(CreateTopicsResponse(topics=results))


def error_response(req: CreateTopicsRequest, code: int, message: str) -> CreateTopicsResponse:
    return CreateTopicsResponse(
        topics=[CreatableTopicResult(name=t.name, error_code=code, error_message=message) for t in req.topics]
    )
