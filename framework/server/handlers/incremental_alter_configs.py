"""IncrementalAlterConfigs (44): SET / DELETE / APPEND / SUBTRACT on topic configs, and SET /
DELETE of the dynamic broker configs (the replication throttles) of one broker (resource name
its id) or of every broker (resource name ""), and client-metrics subscriptions (KIP-714:
CLIENT_METRICS resources, as ``kafka-client-metrics.sh --alter`` sends; ALTER_CONFIGS on the
cluster when an authorizer is on)."""

from __future__ import annotations

from typing import Any

from framework import config as cfg
from framework.errors import ConfigError, InvalidRequest, StoreError, UnknownTopicOrPartition
from framework.metadata.admin import Committed
from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.incremental_alter_configs import (
    AlterableConfig,
    AlterConfigsResourceResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from framework.security.authorizer import AclOperation
from framework.server import authz
from framework.server.context import RequestContext
from framework.server.errors import answer_errors, when_committed
from framework.server.handlers.alter_configs import BROKER, check_alterable

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
CLIENT_METRICS = 16  # ConfigResource.Type.CLIENT_METRICS
_CLIENT_METRICS_KEYS = frozenset(k.name for k in cfg.keys(cfg.CLIENT_METRICS))


def _changes(
    current: dict[str, Any], configs: list[AlterableConfig], scope: str = cfg.TOPIC
) -> tuple[dict[str, Any], list[str]]:
    """The SET/DELETE/APPEND/SUBTRACT operations as values to set and keys to delete."""
    set_: dict[str, Any] = {}
    delete: list[str] = []
    for c in configs:
        k = cfg.lookup(c.name)
        if k is None or (scope not in k.scopes and k.broker_name != c.name):
            raise ConfigError(f"unknown {scope} config {c.name!r}")
        if c.config_operation == SET:
            set_[c.name] = c.value
        elif c.config_operation == DELETE:
            delete.append(c.name)
        elif c.config_operation in (APPEND, SUBTRACT):
            if k.type != "list":
                raise ConfigError(f"{c.name} is not a list config; APPEND/SUBTRACT apply to lists")
            items = list(current.get(c.name) or [])
            change = [x.strip() for x in (c.value or "").split(",") if x.strip()]
            if c.config_operation == APPEND:
                items += [x for x in change if x not in items]
            else:
                items = [x for x in items if x not in change]
            set_[c.name] = ",".join(items)
        else:
            raise StoreError(f"unknown config operation {c.config_operation}", ErrorCode.INVALID_REQUEST)
    return set_, delete


async def handle(ctx: RequestContext, req: IncrementalAlterConfigsRequest) -> IncrementalAlterConfigsResponse:
    out = []
    pending: list[tuple[AlterConfigsResourceResponse, Committed]] = []
    for res in req.resources:
        r = AlterConfigsResourceResponse(
            error_code=ErrorCode.NONE, resource_type=res.resource_type, resource_name=res.resource_name
        )
        out.append(r)
        with answer_errors(r):
            if res.resource_type == CLIENT_METRICS:
                authz.check_cluster(ctx, AclOperation.ALTER_CONFIGS)
                unknown = [c.name for c in res.configs if c.name not in _CLIENT_METRICS_KEYS]
                if unknown:  # Kafka: INVALID_REQUEST (a bad value is INVALID_CONFIG)
                    raise InvalidRequest(f"unknown client metrics configs {unknown}")
                current = ctx.cluster.client_metrics().get(res.resource_name, {})
                mset, mdelete = _changes(current, res.configs, cfg.CLIENT_METRICS)
                mprop = ctx.admin.alter_client_metrics(
                    res.resource_name, mset, mdelete, validate_only=req.validate_only
                )
                if mprop.committed is not None:
                    pending.append((r, mprop.committed))
                continue
            check_alterable(ctx, res.resource_type, res.resource_name, dynamic_brokers=True)
            if res.resource_type == BROKER:
                bset, bdelete = _changes({}, res.configs, cfg.BROKER)
                bprop = ctx.admin.alter_broker_configs(
                    res.resource_name, bset, bdelete, validate_only=req.validate_only
                )
                if bprop.committed is not None:
                    pending.append((r, bprop.committed))
                continue
            t = ctx.cluster.topics.get(res.resource_name)
            if t is None:
                raise UnknownTopicOrPartition(f"topic {res.resource_name!r} does not exist")
            current = {k: v for k, (v, _) in ctx.cluster.topic_config_values(t).items()}
            set_, delete = _changes(current, res.configs)
            prop = ctx.admin.alter_topic(res.resource_name, set_, delete, validate_only=req.validate_only)
            if prop.committed is not None:
                pending.append((r, prop.committed))
    return await when_committed(IncrementalAlterConfigsResponse(responses=out), pending)


def error_response(
    req: IncrementalAlterConfigsRequest, code: int, message: str
) -> IncrementalAlterConfigsResponse:
    return IncrementalAlterConfigsResponse(
        responses=[
            AlterConfigsResourceResponse(
                error_code=code,
                error_message=message,
                resource_type=r.resource_type,
                resource_name=r.resource_name,
            )
            for r in req.resources
        ]
    )
