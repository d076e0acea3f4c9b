"""The routing table (framework/server/router.py): every API ApiVersions advertises has exactly
one handler and every handler is advertised, each handler module serves one API with the one
signature, and what handlers await before they run in a Task needs none."""

from __future__ import annotations

import asyncio
import inspect
import pkgutil
import re
import typing
from pathlib import Path

from framework.protocol.api import API_TABLE
from framework.protocol.messages.api_versions import ApiVersionsRequest
from framework.protocol.messages.produce import (
    PartitionProduceData,
    ProduceRequest,
    ProduceResponse,
    TopicProduceData,
)
from framework.server import handlers
from framework.server.context import NO_RESPONSE
from framework.server.handlers import api_versions, produce
from framework.server.router import routes, supported_versions
from tests.support.broker_parts import request_context, services

ROOT = Path(__file__).resolve().parents[3]


def advertised() -> dict[int, tuple[int, int]]:
    ctx = request_context(services(), ApiVersionsRequest.API_KEY, 3)
    resp = asyncio.run(api_versions.handle(ctx, ApiVersionsRequest()))
    assert resp.error_code == 0
    return {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}


def test_every_api_advertised_has_exactly_one_handler_and_every_handler_is_advertised() -> None:
    table = routes()
    assert advertised() == {k: (r.min_version, r.max_version) for k, r in table.items()}
    assert set(table) == set(API_TABLE)  # every API the protocol knows is served
    modules = {m.name for m in pkgutil.iter_modules(handlers.__path__)}
    serving = [r.handle.__module__.rsplit(".", 1)[1] for r in table.values()]
    assert sorted(serving) == sorted(modules), "a handler module serves no API, or two"
    assert supported_versions() == sorted((k, lo, hi) for k, (lo, hi) in advertised().items())


def test_each_route_pairs_its_api_with_one_modules_handler_in_the_one_signature() -> None:
    for key, r in routes().items():
        assert r.entry is API_TABLE[key]
        assert r.handle.__module__ == r.error_response.__module__, r.entry.name
        assert inspect.iscoroutinefunction(r.handle), f"{r.entry.name}: handle must be async def"
        hints = typing.get_type_hints(r.handle)
        assert list(inspect.signature(r.handle).parameters) == ["ctx", "req"], r.entry.name
        assert hints["req"] is r.entry.request, r.entry.name
        answers = typing.get_args(hints["return"]) or (hints["return"],)
        assert r.entry.response in answers, r.entry.name
        assert API_TABLE[key].min_version <= r.min_version <= r.max_version <= API_TABLE[key].max_version


def test_only_acks_0_produce_answers_no_response() -> None:
    req = ProduceRequest(
        acks=0,
        timeout_ms=1000,
        topic_data=[
            TopicProduceData(name="nope", partition_data=[PartitionProduceData(index=0, records=None)])
        ],
    )
    ctx = request_context(services(), ProduceRequest.API_KEY, 9)
    assert asyncio.run(produce.handle(ctx, req)) is NO_RESPONSE
    assert produce.error_response(req, 87, "refused") is NO_RESPONSE
    req.acks = 1
    resp = asyncio.run(produce.handle(ctx, req))
    assert isinstance(resp, ProduceResponse)
    assert resp.responses[0].partition_responses[0].error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION
    assert isinstance(produce.error_response(req, 87, "refused"), ProduceResponse)


# what needs the current Task (Python 3.11; wait_for from 3.12), which an eager handler has not
_NEEDS_A_TASK = re.compile(r"asyncio\.(timeout|timeout_at|wait_for|TaskGroup)\(")


def test_what_handlers_await_before_they_run_in_a_task_needs_none() -> None:
    """The listener starts a handler outside any Task (framework/server/router.py): the handlers
    and what they await of the coordinators and the metadata quorum wait with asyncio.wait."""
    paths = [
        *sorted((ROOT / "framework/server/handlers").glob("*.py")),
        ROOT / "framework/server/errors.py",
        ROOT / "framework/server/authz.py",
        ROOT / "framework/server/txn.py",
        *sorted((ROOT / "framework/coordinator").glob("*.py")),
        ROOT / "framework/metadata/admin.py",
    ]
    found = [
        f"{p.relative_to(ROOT)}:{n}: {line.strip()}"
        for p in paths
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if _NEEDS_A_TASK.search(line)
    ]
    assert not found, found
