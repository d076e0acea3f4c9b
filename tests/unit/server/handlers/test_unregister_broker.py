"""UnregisterBroker (64) on a single node (a real metadata store, no sockets; requests and
responses pass through the codec). The cluster's behaviour is in
tests/unit/metadata/test_quorum_observers.py and tests/integration/test_cluster_grow.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from framework import config as cfg
from framework.metadata.store import MetadataStore
from framework.protocol.error_codes import ErrorCode
from framework.protocol.messages.unregister_broker import UnregisterBrokerRequest, UnregisterBrokerResponse
from framework.server.context import BrokerServices
from framework.server.handlers import unregister_broker
from framework.server.router import supported_versions
from tests.unit.server.handlers.test_admin_describe import NODE, call, services


@pytest.fixture
def b(tmp_path: Path) -> BrokerServices:
    s = MetadataStore(tmp_path / "md", cfg.BrokerConfig.load(overrides={"node.id": NODE}, environ={}))
    s.load()
    return services(s, admin=True)


def unregister(b: BrokerServices, broker_id: int) -> UnregisterBrokerResponse:
    resp: UnregisterBrokerResponse = call(
        b, unregister_broker, UnregisterBrokerRequest(broker_id=broker_id), UnregisterBrokerResponse, 0
    )
    return resp


def test_api_versions_advertises_it() -> None:
    assert (64, 0, 0) in supported_versions()


def test_a_single_node_has_no_other_broker_and_cannot_remove_itself(b: Any) -> None:
    other = unregister(b, 7)
    assert other.error_code == ErrorCode.BROKER_ID_NOT_REGISTERED and "7" in (other.error_message or "")
    me = unregister(b, NODE)
    assert me.error_code == ErrorCode.INVALID_REQUEST and me.error_message
