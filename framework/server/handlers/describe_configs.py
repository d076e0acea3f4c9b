"""DescribeConfigs (32): topic and broker configuration with sources and synonyms.

Config sources follow Kafka's codes. A value inherited from the topic's stream is reported as
DYNAMIC_DEFAULT_BROKER_CONFIG (3), with a synonym named ``stream:<stream>:<key>``; Kafka has no
stream level, so this is the closest code a Kafka tool understands.

With an authorizer: DescribeConfigs on the topic (else TOPIC_AUTHORIZATION_FAILED), on the
cluster for broker configs and client-metrics subscriptions (else CLUSTER_AUTHORIZATION_FAILED).

A CLIENT_METRICS resource (16, KIP-714) is a client-metrics subscription: the ``metrics``,
``interval.ms`` and ``match`` set on it; an unknown name has none (as Kafka answers).
"""

from __future__ import annotations

from typing import Any

from framework import config as cfg
from framework.errors import StoreError, UnknownTopicOrPartition
from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    DescribeConfigsSynonym,
)
from framework.security.authorizer import AclOperation, ResourceType
from framework.server import authz
from framework.server.context import RequestContext
from framework.server.errors import answer_errors

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS = 2, 4, 8, 16
CLIENT_METRICS_CONFIG = 7  # ConfigSource of a client-metrics subscription's configs
SOURCE_CODES = {"topic": 1, "dynamic_broker": 2, "stream": 3, "dynamic_default": 3, "broker": 4, "default": 5}


def _entry(
    name: str,
    value: Any,
    source: str,
    read_only: bool,
    stream: str | None,
    synonyms: bool,
    docs: bool,
    broker_cfg: cfg.BrokerConfig,
) -> DescribeConfigsResourceResult:
    k = cfg.key(name)
    syn: list[DescribeConfigsSynonym] = []
    if synonyms:
        if source == "topic":
            syn.append(DescribeConfigsSynonym(name=name, value=k.render(value), source=1))
        if source in ("topic", "stream") and stream is not None:
            syn.append(
                DescribeConfigsSynonym(name=f"stream:{stream}:{name}", value=k.render(value), source=3)
            )
        if k.broker_name and k.broker_name in broker_cfg.values:
            syn.append(
                DescribeConfigsSynonym(
                    name=k.broker_name, value=k.render(broker_cfg.values[k.broker_name]), source=4
                )
            )
        syn.append(DescribeConfigsSynonym(name=k.broker_name or name, value=k.render(k.default), source=5))
    sensitive = k.type == "password"
    if sensitive:  # as Kafka: a sensitive value is never sent (null), nor its synonyms
        syn = []
    return DescribeConfigsResourceResult(
        name=name,
        value=None if sensitive else k.render(value),
        read_only=read_only,
        config_source=SOURCE_CODES[source],
        is_sensitive=sensitive,
        synonyms=syn,
        config_type=cfg.TYPE_CODES.get(k.type, 2),
        documentation=k.doc if docs else None,
    )


def describe_topic(
    ctx: RequestContext, name: str, keys: list[str] | None, synonyms: bool, docs: bool
) -> list[DescribeConfigsResourceResult]:
    t = ctx.cluster.topics.get(name)
    if t is None:
        raise UnknownTopicOrPartition(f"topic {name!r} does not exist")
    values = ctx.cluster.topic_config_values(t)
    out = []
    for k, (v, src) in sorted(values.items()):
        if keys is not None and k not in keys:
            continue
        out.append(_entry(k, v, src, False, t.stream, synonyms, docs, ctx.config))
    return out


def describe_broker(
    ctx: RequestContext, keys: list[str] | None, synonyms: bool, docs: bool
) -> list[DescribeConfigsResourceResult]:
    bc = ctx.config
    out = []
    for k in cfg.keys(cfg.BROKER):
        if keys is not None and k.name not in keys:
            continue
        if k.dynamic:  # may be set at run time (IncrementalAlterConfigs), for one broker or all
            value, src = ctx.cluster.broker_config_value(k.name)
            out.append(_entry(k.name, value, src, False, None, synonyms, docs, bc))
            continue
        src = "broker" if k.name in bc.values else "default"
        out.append(_entry(k.name, bc.value(k.name), src, True, None, synonyms, docs, bc))
    for k in cfg.keys(cfg.TOPIC):
        if not k.broker_name or (keys is not None and k.broker_name not in keys):
            continue
        src = "broker" if k.broker_name in bc.values else "default"
        e = _entry(k.name, bc.topic_default(k.name), src, True, None, synonyms, docs, bc)
        e.name = k.broker_name
        out.append(e)
    return out


def describe_client_metrics(
    ctx: RequestContext, name: str, keys: list[str] | None, docs: bool
) -> list[DescribeConfigsResourceResult]:
    """The configs set on a client-metrics subscription, each from CLIENT_METRICS_CONFIG (7), as
    Kafka answers (no defaults, no synonyms)."""
    if not name:
        raise StoreError("client metrics subscription name must not be empty", ErrorCode.INVALID_REQUEST)
    configs = ctx.cluster.client_metrics().get(name, {})
    return [
        DescribeConfigsResourceResult(
            name=k.name,
            value=k.render(configs[k.name]),
            read_only=False,
            config_source=CLIENT_METRICS_CONFIG,
            is_sensitive=False,
            synonyms=[],
            config_type=cfg.TYPE_CODES.get(k.type, 2),
            documentation=k.doc if docs else None,
        )
        for k in cfg.keys(cfg.CLIENT_METRICS)
        if k.name in configs and (keys is None or k.name in keys)
    ]


async def handle(ctx: RequestContext, req: DescribeConfigsRequest) -> DescribeConfigsResponse:
    results = []
    docs = req.include_documentation
    for res in req.resources:
        r = DescribeConfigsResult(
            error_code=ErrorCode.NONE, resource_type=res.resource_type, resource_name=res.resource_name
        )
        results.append(r)
        keys = list(res.configuration_keys) if res.configuration_keys is not None else None
        with answer_errors(r):
            if res.resource_type == TOPIC:
                authz.check(ctx, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, res.resource_name)
                r.configs = describe_topic(ctx, res.resource_name, keys, req.include_synonyms, docs)
            elif res.resource_type == BROKER:
                authz.check_cluster(ctx, AclOperation.DESCRIBE_CONFIGS)
                if res.resource_name not in ("", str(ctx.node_id)):
                    raise StoreError(
                        f"broker {res.resource_name} is not this broker", ErrorCode.INVALID_REQUEST
                    )
                r.configs = describe_broker(ctx, keys, req.include_synonyms, docs)
            elif res.resource_type == CLIENT_METRICS:
                authz.check_cluster(ctx, AclOperation.DESCRIBE_CONFIGS)
                r.configs = describe_client_metrics(ctx, res.resource_name, keys, docs)
            elif res.resource_type == BROKER_LOGGER:
                authz.check_cluster(ctx, AclOperation.DESCRIBE_CONFIGS)
                r.configs = []
            else:
                raise StoreError(
                    f"resource type {res.resource_type} is not supported", ErrorCode.INVALID_REQUEST
                )
    return DescribeConfigsResponse(results=results)


def error_response(req: DescribeConfigsRequest, code: int, message: str) -> DescribeConfigsResponse:
    return DescribeConfigsResponse(
        results=[
            DescribeConfigsResult(
                error_code=code,
                error_message=message,
                resource_type=r.resource_type,
                resource_name=r.resource_name,
            )
            for r in req.resources
        ]
    )
