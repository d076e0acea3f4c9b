"""Shared fixtures: real broker processes on free 127.0.0.1 ports, and client factories."""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from deploy.local.process import BrokerProcess

ARTIFACTS = Path(os.environ.get("SFTRAFFIC_ARTIFACTS", Path(__file__).resolve().parent.parent / "artifacts"))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--runslow", action="store_true", default=False, help="run tests marked slow (soak, chaos)"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--runslow") or os.environ.get("SFTRAFFIC_SLOW") == "1":
        return
    skip = pytest.mark.skip(reason="slow: run with --runslow (the soak/chaos command)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


def quiet_logger() -> logging.Logger:
    lg = logging.getLogger("tests.librdkafka")
    lg.addHandler(logging.NullHandler())
    lg.propagate = False
    return lg


class BrokerFactory:
    """Start brokers for a test; every one is stopped at teardown (logs kept on failure)."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.brokers: list[BrokerProcess] = []

    def __call__(
        self, overrides: dict[str, object] | None = None, data_dir: Path | None = None, **kw: Any
    ) -> BrokerProcess:
        d = data_dir or (self.tmp / f"broker-{len(self.brokers)}")
        base = {"log.retention.check.interval.ms": 500, "group.initial.rebalance.delay.ms": 0}
        base.update(overrides or {})
        b = BrokerProcess(d, overrides=base, **kw).start()
        self.brokers.append(b)
        return b

    def close(self) -> None:
        for b in self.brokers:
            b.stop()


@pytest.fixture
def broker_factory(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[BrokerFactory]:
    f = BrokerFactory(tmp_path)
    yield f
    f.close()
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        for i, b in enumerate(f.brokers):
            (ARTIFACTS / f"{request.node.name}-broker{i}.log").write_text(b.logs())


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker shared by a test module (tests use their own topics)."""
    d = tmp_path_factory.mktemp("broker")
    b = BrokerProcess(
        d, overrides={"log.retention.check.interval.ms": 500, "group.initial.rebalance.delay.ms": 0}
    ).start()
    yield b
    b.stop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    rep = outcome.get_result()  # type: ignore[attr-defined]
    setattr(item, "rep_" + rep.when, rep)


@pytest.fixture
def topic_name() -> Callable[[str], str]:
    return lambda prefix="t": f"{prefix}-{uuid.uuid4().hex[:10]}"


def create_topic(
    bootstrap: str, name: str, partitions: int = 1, config: dict[str, str] | None = None
) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    a = AdminClient({"bootstrap.servers": bootstrap, "logger": quiet_logger()})
    fut = a.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})]
    )
    fut[name].result(30)
