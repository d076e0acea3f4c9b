"""Brokers for tests: the factory that starts ours, the stand-in for an external Kafka, and the
client helpers every broker-facing test uses (a quiet librdkafka logger, topic creation).

With ``SFTRAFFIC_TEST_BOOTSTRAP=HOST:PORT`` (``./run test-on-kafka`` sets it to an Apache Kafka
it started) :class:`BrokerFactory` returns that address instead of starting our broker, so the
same tests judge another Kafka implementation; ``tests/conftest.py`` makes the ``broker`` and
``broker_factory`` fixtures of these.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import pytest

from testing import BrokerProcess

ARTIFACTS = Path(os.environ.get("SFTRAFFIC_ARTIFACTS", Path(__file__).resolve().parents[2] / "artifacts"))

# an external Kafka cluster to test instead of our broker (./run test-on-kafka)
EXTERNAL_BOOTSTRAP = os.environ.get("SFTRAFFIC_TEST_BOOTSTRAP", "").strip()

# the broker settings every test broker gets (BrokerFactory, broker); ./run test-on-kafka starts
# Apache Kafka with the same ones, so a test asking for no more than these can use it
TEST_BROKER_SETTINGS: dict[str, object] = {
    "log.retention.check.interval.ms": 500,
    "group.initial.rebalance.delay.ms": 0,
}


def quiet_logger() -> logging.Logger:
    lg = logging.getLogger("tests.librdkafka")
    lg.addHandler(logging.NullHandler())
    lg.propagate = False
    return lg


class ExternalBroker:
    """A broker somebody else runs (``SFTRAFFIC_TEST_BOOTSTRAP``): only its address; not ours to
    stop, no logs, no data dir."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.host, _, port = bootstrap.split(",", maxsplit=1)[0].rpartition(":")
        self.port = int(port)

    def alive(self) -> bool:
        return True

    def logs(self) -> str:
        pytest.skip("sftraffic only: the rest reads our broker's log lines (the Kafka part passed)")

    def tail(self, n: int = 15) -> str:
        return self.logs()

    def stop(self, grace: float | None = None) -> int:
        return 0

    def __getattr__(self, name: str) -> Any:
        pytest.skip(f"sftraffic only: uses the broker's {name!r}, which an external Kafka has not")


def external_for(overrides: dict[str, object] | None, **kw: Any) -> ExternalBroker:
    """The external broker for a test that asks for ``overrides``/``kw``; skips the test when it
    needs what a shared external cluster cannot give (its own process, data dir or settings)."""
    own = {k: v for k, v in (overrides or {}).items() if TEST_BROKER_SETTINGS.get(k, object()) != v}
    wants = sorted({*own, *(k for k, v in kw.items() if v is not None)})
    if wants:
        pytest.skip(f"sftraffic only: needs a broker of its own ({', '.join(wants)})")
    empty_cluster(EXTERNAL_BOOTSTRAP)
    return ExternalBroker(EXTERNAL_BOOTSTRAP)


def empty_cluster(bootstrap: str, timeout: float = 60.0) -> None:
    """Delete every topic but the internal ones, and every consumer group: a test asking the
    factory for a broker expects a fresh, empty one (fixed names such as the demo's topics would
    otherwise hold earlier tests' records)."""
    import time

    from confluent_kafka.admin import AdminClient

    a = AdminClient({"bootstrap.servers": bootstrap, "logger": quiet_logger()})
    groups = [g.group_id for g in a.list_consumer_groups(request_timeout=30).result(30).valid]
    for fut in (a.delete_consumer_groups(groups, request_timeout=30) if groups else {}).values():
        try:
            fut.result(30)
        except Exception:  # a group with members cannot go; it keeps its name
            pass
    names = [t for t in a.list_topics(timeout=30).topics if not t.startswith("__")]
    for fut in (a.delete_topics(names, operation_timeout=30) if names else {}).values():
        fut.result(30)
    deadline = time.monotonic() + timeout
    while set(names) & set(a.list_topics(timeout=30).topics) and time.monotonic() < deadline:
        time.sleep(0.2)


class BrokerFactory:
    """Start brokers for a test; every one is stopped at teardown (logs kept on failure).

    With ``SFTRAFFIC_TEST_BOOTSTRAP`` it returns the external broker instead (see
    :func:`external_for`).
    """

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.brokers: list[BrokerProcess] = []

    def __call__(
        self, overrides: dict[str, object] | None = None, data_dir: Path | None = None, **kw: Any
    ) -> BrokerProcess:
        if EXTERNAL_BOOTSTRAP:
            return external_for(overrides, data_dir=data_dir, **kw)  # type: ignore[return-value]
        d = data_dir or (self.tmp / f"broker-{len(self.brokers)}")
        base = dict(TEST_BROKER_SETTINGS)
        base.update(overrides or {})
        b = BrokerProcess(d, overrides=base, **kw).start()
        self.brokers.append(b)
        return b

    def close(self) -> None:
        for b in self.brokers:
            b.stop()


def create_topic(
    bootstrap: str, name: str, partitions: int = 1, config: dict[str, str] | None = None
) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    a = AdminClient({"bootstrap.servers": bootstrap, "logger": quiet_logger()})
    fut = a.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})]
    )
    fut[name].result(30)
