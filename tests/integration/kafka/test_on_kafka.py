"""A short ``./run test-on-kafka`` inside the normal suite: a few representative integration
tests, run by :mod:`deploy.kafka.testrun` (Apache Kafka single node, a child pytest with
``SFTRAFFIC_TEST_BOOTSTRAP``) exactly as the full run does; each must pass on Kafka too.

The full run (every broker-facing suite; about 40 minutes here) is ``./run test-on-kafka``.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from deploy.kafka import testrun
from tests.support.brokers import EXTERNAL_BOOTSTRAP

pytestmark = [
    pytest.mark.integration,
    pytest.mark.kafka,
    pytest.mark.skipif(bool(EXTERNAL_BOOTSTRAP), reason="already running against an external Kafka"),
]

# one or two of each kind: the three Python clients, groups, offsets by time, validation
REPRESENTATIVE = [
    "tests/integration/test_clients.py::test_confluent_kafka_roundtrip",
    "tests/integration/test_clients.py::test_kafka_python_roundtrip",
    "tests/integration/test_clients.py::test_aiokafka_roundtrip_and_offsets_for_times",
    "tests/integration/test_groups.py::test_aiokafka_group_shares_partitions_and_commits",
    "tests/integration/test_groups.py::test_consumer_lag_is_visible",
    "tests/integration/test_produce_validation.py::test_timestamps_out_of_range_get_invalid_timestamp",
    "tests/integration/test_produce_validation.py::test_every_codec_from_both_clients_is_accepted",
]


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory, kafka_lib: Path) -> dict[str, str]:
    """node id → passed / failed / error / skipped, from one test-on-kafka run of the list."""
    report = tmp_path_factory.mktemp("on-kafka") / "junit.xml"
    testrun.main(["-q", "-p", "no:cacheprovider", f"--junitxml={report}", *REPRESENTATIVE])
    result: dict[str, str] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        module = case.get("classname", "").replace(".", "/")
        name = case.get("name", "")
        base = name.split("[", 1)[0]
        node = f"{module}.py::{base}"
        outcome = "passed"
        for child, what in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
            found = case.find(child)
            if found is not None:
                outcome = f"{what}: {(found.get('message') or '')[:500]}"
        previous = result.get(node, "passed")
        result[node] = outcome if previous == "passed" else previous  # a failed case wins
    return result


@pytest.mark.parametrize("node", REPRESENTATIVE, ids=lambda n: n.rsplit("::", 1)[-1])
def test_passes_on_apache_kafka(outcomes: dict[str, str], node: str) -> None:
    assert outcomes.get(node) == "passed", f"{node} on Apache Kafka: {outcomes.get(node, 'not run')}"
