"""Client-metrics subscriptions (KIP-714) as CLIENT_METRICS config resources on a single node:
IncrementalAlterConfigs sets, appends and deletes them, with Kafka's error codes for bad names
and values; DescribeConfigs shows what is set; ListConfigResources lists them (a real metadata
store, requests and responses through the codec)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from framework import config as cfg
from framework.metadata.admin import MetadataAdmin
from framework.metadata.cache import MetadataCache
from framework.metadata.store import MetadataStore
from framework.protocol import codec
from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsResponse,
)
from framework.protocol.messages.incremental_alter_configs import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from framework.protocol.messages.list_config_resources import (
    ListConfigResourcesRequest,
    ListConfigResourcesResponse,
)
from framework.server.context import BrokerServices
from framework.server.handlers import describe_configs, incremental_alter_configs, list_config_resources
from framework.server.router import supported_versions
from tests.support import broker_parts
from tests.support.broker_parts import NODE, request_context

CLIENT_METRICS, TOPIC = 16, 2
SET, DELETE, APPEND = 0, 1, 2


@pytest.fixture
def store(tmp_path: Path) -> MetadataStore:
    s = MetadataStore(tmp_path / "md", cfg.BrokerConfig.load(overrides={"node.id": NODE}, environ={}))
    s.load()
    return s


@pytest.fixture
def b(store: MetadataStore) -> BrokerServices:
    cache = MetadataCache(NODE, store, ("127.0.0.1", 9092))
    return broker_parts.services(
        cluster=cache, config=store.broker, admin=MetadataAdmin(store, cache, store.broker)
    )


def call(b: BrokerServices, handler: Any, req: Any, resp_cls: type, version: int) -> Any:
    """``req`` through the codec to the handler, its answer (or its error's) back through it."""
    req, _ = codec.decode(type(req), version, codec.encode(req, version))
    try:
        resp = asyncio.run(handler.handle(request_context(b, type(req).API_KEY, version), req))
    except Exception as exc:  # what the listener does with a StoreError
        if getattr(exc, "code", None) is None:
            raise
        resp = handler.error_response(req, int(exc.code), str(exc))  # type: ignore[attr-defined]
    return codec.decode(resp_cls, version, codec.encode(resp, version))[0]


def alter(b: BrokerServices, name: str, *ops: tuple[str, int, str | None]) -> tuple[int, str | None]:
    req = IncrementalAlterConfigsRequest(
        resources=[
            AlterConfigsResource(
                resource_type=CLIENT_METRICS,
                resource_name=name,
                configs=[AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops],
            )
        ]
    )
    resp = call(b, incremental_alter_configs, req, IncrementalAlterConfigsResponse, 1)
    (r,) = resp.responses
    return r.error_code, r.error_message


def describe(b: BrokerServices, name: str) -> dict[str, tuple[str | None, int]]:
    req = DescribeConfigsRequest(
        resources=[
            DescribeConfigsResource(resource_type=CLIENT_METRICS, resource_name=name, configuration_keys=None)
        ]
    )
    (r,) = call(b, describe_configs, req, DescribeConfigsResponse, 4).results
    assert r.error_code == ErrorCode.NONE, r.error_message
    return {c.name: (c.value, c.config_source) for c in r.configs}


def listed(b: BrokerServices, version: int, types: list[int] | None = None) -> list[tuple[str, int]]:
    req = ListConfigResourcesRequest(resource_types=types or [])
    resp = call(b, list_config_resources, req, ListConfigResourcesResponse, version)
    assert resp.error_code == ErrorCode.NONE
    return [(r.resource_name, r.resource_type) for r in resp.config_resources]


def test_the_telemetry_apis_and_list_config_resources_are_served() -> None:
    served = supported_versions()
    assert {(71, 0, 0), (72, 0, 0), (74, 0, 1)} <= set(served)


def test_a_subscription_is_set_described_appended_and_deleted(
    b: BrokerServices, store: MetadataStore
) -> None:
    ok = alter(
        b,
        "producers",
        ("metrics", SET, "org.apache.kafka.producer."),
        ("interval.ms", SET, "1000"),
        ("match", SET, "client_id=a.*"),
    )
    assert ok == (ErrorCode.NONE, None)
    assert store.client_metrics["producers"] == {
        "metrics": ["org.apache.kafka.producer."],
        "interval.ms": 1000,
        "match": ["client_id=a.*"],
    }
    assert describe(b, "producers") == {
        "metrics": ("org.apache.kafka.producer.", 7),  # CLIENT_METRICS_CONFIG
        "interval.ms": ("1000", 7),
        "match": ("client_id=a.*", 7),
    }
    assert alter(b, "producers", ("metrics", APPEND, "org.apache.kafka.consumer."))[0] == ErrorCode.NONE
    assert store.client_metrics["producers"]["metrics"] == [
        "org.apache.kafka.producer.",
        "org.apache.kafka.consumer.",
    ]
    assert (
        alter(
            b, "producers", ("metrics", DELETE, None), ("interval.ms", DELETE, None), ("match", DELETE, None)
        )[0]
        == 0
    )
    assert "producers" not in store.client_metrics
    assert describe(b, "producers") == {}


def test_bad_names_and_values_are_refused_as_kafka_refuses_them(
    b: BrokerServices, store: MetadataStore
) -> None:
    assert alter(b, "s", ("interval.ms", SET, "50"))[0] == ErrorCode.INVALID_CONFIG
    assert alter(b, "s", ("match", SET, "client_rack=x"))[0] == ErrorCode.INVALID_CONFIG
    assert alter(b, "s", ("match", SET, "client_id=("))[0] == ErrorCode.INVALID_CONFIG
    assert alter(b, "s", ("retention.ms", SET, "1"))[0] == ErrorCode.INVALID_REQUEST
    assert alter(b, "s", ("no.such.config", SET, "1"))[0] == ErrorCode.INVALID_REQUEST
    assert alter(b, "", ("metrics", SET, "*"))[0] == ErrorCode.INVALID_REQUEST
    assert store.client_metrics == {}


def test_list_config_resources_lists_subscriptions_and_by_type_topics_and_brokers(
    b: BrokerServices, store: MetadataStore
) -> None:
    alter(b, "everyone", ("metrics", SET, "*"))
    store.create_topic("orders", 1, 1)
    assert listed(b, 0) == [("everyone", CLIENT_METRICS)]
    assert listed(b, 1, [CLIENT_METRICS]) == [("everyone", CLIENT_METRICS)]
    assert listed(b, 1, [TOPIC]) == [("orders", TOPIC)]
    assert ("everyone", CLIENT_METRICS) in listed(b, 1) and (str(NODE), 4) in listed(b, 1)
    resp = call(
        b,
        list_config_resources,
        ListConfigResourcesRequest(resource_types=[99]),
        ListConfigResourcesResponse,
        1,
    )
    assert resp.error_code == ErrorCode.INVALID_REQUEST
