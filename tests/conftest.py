"""Shared fixtures: real broker processes on free 127.0.0.1 ports, and client factories.

With ``SFTRAFFIC_TEST_BOOTSTRAP=HOST:PORT`` (``./run test-on-kafka`` sets it to an Apache Kafka
it started) the ``broker`` fixture and ``broker_factory()`` return that address instead of
starting our broker, so the same tests judge another Kafka implementation. Tests that need a
broker process of their own (restarts, kills, data dirs, clusters, sftraffic's settings or
extensions) are marked ``sftraffic_only`` with the reason (:data:`SFTRAFFIC_ONLY` below, or
``@pytest.mark.sftraffic_only(reason=...)``) and are skipped in that mode with that reason.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from testing import BrokerProcess
from tests.support.brokers import (
    ARTIFACTS,
    EXTERNAL_BOOTSTRAP,
    TEST_BROKER_SETTINGS,
    BrokerFactory,
    ExternalBroker,
)

# ./run test's workers must honour the xdist groups (see the plugin)
pytest_plugins = ["tests.support.xdist_guard"]

# Tests that cannot run against an external Kafka, by node id prefix (a module, a test, or a
# parametrized case), and why; applied as the sftraffic_only marker at collection.
_OWN = "needs a broker process of its own"
_PV = "tests/integration/test_produce_validation.py"
SFTRAFFIC_ONLY: dict[str, str] = {
    # clusters of our brokers: kills, restarts, link cuts, the Raft journal
    "tests/integration/test_cluster.py": f"{_OWN}: a 3-broker sftraffic cluster, SIGKILLs and restarts",
    "tests/integration/test_cluster_lifecycle.py": f"{_OWN}: SIGTERM/SIGKILL of cluster members",
    "tests/integration/test_network_partition.py": f"{_OWN}: brokers in network namespaces, cut links",
    "tests/integration/test_metadata_journal.py": "the store's Raft metadata journal (in process, no Kafka)",
    "tests/system/test_chaos.py": "sftraffic chaos starts and kills its own cluster",
    "tests/system/test_chaos_transactions.py": "sftraffic chaos starts and kills its own cluster",
    # one broker stopped, killed, restarted, or its data dir read
    "tests/integration/test_durability.py": f"{_OWN}: restarts, SIGKILL, segment files in its data dir",
    "tests/integration/test_full_disk.py": f"{_OWN}: its data dir on a 2 MB tmpfs, restarts",
    "tests/integration/test_idempotence.py": f"{_OWN}: advertised through a fault-injecting proxy",
    "tests/integration/test_groups.py::test_commits_survive_a_coordinator_restart": f"{_OWN}: restarts it",
    "tests/integration/test_transactions.py::test_restart_mid_transaction_recovers_coordinator_state": (
        f"{_OWN}: restarts it mid-transaction"
    ),
    "tests/integration/test_transactions.py::test_offsets_sent_before_a_restart_commit_after_it": (
        f"{_OWN}: restarts it mid-transaction"
    ),
    "tests/integration/test_transactions_cluster.py": f"{_OWN}: 3 brokers, the coordinator SIGKILLed",
    "tests/integration/test_transactions_chaos.py": f"{_OWN}: 3 brokers SIGKILLed and restarted",
    f"{_PV}::test_a_damaged_batch_on_disk_answers_precise_errors": (
        f"{_OWN}: damages a segment file in its data dir, restarts it"
    ),
    "tests/integration/test_metrics.py": "sftraffic's Prometheus endpoint (metrics.listen)",
    # security: our brokers started with listeners, SASL users in their data dirs,
    # the authorizer or quota windows; test-on-kafka's Kafka has one PLAINTEXT listener and none
    "tests/integration/test_security.py": f"{_OWN}: SASL/TLS listeners, users added to its data dir",
    "tests/integration/test_security_cluster.py": f"{_OWN}: 3 brokers replicating over SASL_SSL",
    "tests/integration/test_authorization.py": f"{_OWN}: StandardAuthorizer on, SASL users",
    "tests/integration/test_abuse.py": f"{_OWN}: its connection limits, RSS and SASL listener",
    "tests/integration/test_quotas.py": f"{_OWN}: quota windows set at start, a 3-broker cluster",
    "tests/integration/test_mqtt_security.py": f"{_OWN}: SASL_SSL only, users and ACLs in its data dir",
    "tests/system/test_up_secure.py": "sftraffic up --secure starts its own secured store",
    "tests/integration/pipelines/test_secure_source.py": (
        f"{_OWN}: SASL_SSL only, users and ACLs in its data dir"
    ),
    # what our broker answers beyond or unlike Kafka (docs/reference/kafka-compatibility.md)
    "tests/integration/test_bad_input.py::test_bad_crc_is_rejected_and_nothing_written": (
        "asserts our error_message for a CRC failure (Kafka: CORRUPT_MESSAGE without a message)"
    ),
    "tests/integration/test_bad_input.py::test_unsupported_api_versions_version_gets_v0_answer": (
        "asserts our whole API list beside UNSUPPORTED_VERSION (Kafka lists ApiVersions alone)"
    ),
    "tests/integration/test_clients.py::test_offsets_for_times_with_confluent": (
        "makes a topic with segment.bytes=65536 (Kafka 4: at least 1048576, INVALID_CONFIG)"
    ),
    f"{_PV}::test_kafka_python_gets_invalid_record_for_a_keyless_record": (
        "asserts our message text (Kafka: 'Compacted topic cannot accept message without key in "
        "topic partition T-P'; the code, INVALID_RECORD, is the same)"
    ),
    f"{_PV}::test_record_errors_and_error_message_in_the_response": (
        "asserts our per-record message text (codes and record_errors indexes are Kafka's)"
    ),
    f"{_PV}::test_garbage_compressed_body_with_a_valid_crc_is_refused": (
        "Kafka answers UNKNOWN_SERVER_ERROR (-1) to a compressed body that does not decompress; "
        "ours INVALID_RECORD on purpose"
    ),
    f"{_PV}::test_malformed_records_are_refused": (
        "ours is stricter: Kafka stores an uncompressed batch whose offset deltas are not 0..n-1 "
        "and answers INVALID_RECORD without an error_message"
    ),
    "tests/integration/test_gateway.py::TestGateway::test_store_down_gateway_parks_on_disk_and_drains": (
        f"{_OWN}: stops and restarts the store"
    ),
    "tests/integration/test_gateway.py::TestGateway::test_full_disk_queue_holds_acks_and_loses_nothing": (
        f"{_OWN}: stops the store so that the gateway's disk queue fills"
    ),
    "tests/browser/test_dashboard.py::test_banner_appears_when_the_store_stops": f"{_OWN}: stops it",
    # the store's own pieces
    "tests/system/test_store_without_extras.py": "installs and runs the sftraffic store alone",
    "tests/system/test_up.py": (
        "sftraffic up with the embedded store (tests/system/test_up_on_kafka.py runs up on Kafka)"
    ),
}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--runslow",
        action="store_true",
        default=False,
        help="run tests marked slow (soak, chaos, the benchmarks' smoke runs with Kafka or Spark)",
    )


@pytest.hookimpl(tryfirst=True)  # before -m deselects: "not sftraffic_only" sees the table's marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        for prefix, reason in SFTRAFFIC_ONLY.items():
            if item.nodeid == prefix or item.nodeid.startswith((prefix + "::", prefix + "[")):
                item.add_marker(pytest.mark.sftraffic_only(reason=reason))
                break
    if EXTERNAL_BOOTSTRAP:
        for item in items:
            mark = item.get_closest_marker("sftraffic_only")
            if mark is not None:
                why = mark.kwargs.get("reason") or (mark.args[0] if mark.args else "sftraffic only")
                item.add_marker(pytest.mark.skip(reason=f"sftraffic only: {why}"))
    for item in items:
        item.add_marker(pytest.mark.xdist_group(_xdist_group(item)))
    if config.getoption("--runslow") or os.environ.get("SFTRAFFIC_SLOW") == "1":
        return
    skip = pytest.mark.skip(reason="slow: run with --runslow (./run soak: soak, chaos, benchmark smoke runs)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


def _xdist_group(item: pytest.Item) -> str:
    """Under ``pytest -n N --dist loadgroup`` (``./run test``), tests sharing a session-wide
    resource run on one worker: the local SparkSession (the ``spark`` fixture), Apache Kafka's
    cluster and tools (the ``kafka`` marker), and the whole-system runs (each starts Spark, Chromium
    and a fleet: two at once would only compete for the cores)."""
    if "spark" in getattr(item, "fixturenames", ()):
        return "spark"
    if item.get_closest_marker("kafka"):
        return "kafka"
    if item.get_closest_marker("system"):
        return "system"
    # otherwise a module's tests stay together, in order, sharing its module-scoped fixtures
    return item.nodeid.split("::", 1)[0]


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
    """One broker shared by a test module (tests use their own topics); the external one with
    ``SFTRAFFIC_TEST_BOOTSTRAP``."""
    if EXTERNAL_BOOTSTRAP:
        yield ExternalBroker(EXTERNAL_BOOTSTRAP)  # type: ignore[misc]
        return
    d = tmp_path_factory.mktemp("broker")
    b = BrokerProcess(d, overrides=dict(TEST_BROKER_SETTINGS)).start()
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
