"""``./run test-on-kafka``: the test suite with Apache Kafka as the broker.

Starts a KRaft single node (:class:`~deploy.kafka.cluster.KafkaCluster`) with the settings of
the tests' own brokers, runs pytest with ``SFTRAFFIC_TEST_BOOTSTRAP`` pointing at it (the
``broker`` fixtures then return that address, and tests marked ``sftraffic_only`` are skipped
with their reason), stops Kafka, and exits with pytest's code.

    python -m deploy.kafka.testrun [PYTEST ARGS]   # default: the suites that talk to a broker
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from deploy.kafka.cluster import KafkaCluster
from deploy.kafka.resolve import ROOT

# the suites whose tests talk to a broker (unit tests do not; soak tests are --runslow)
SUITES = [
    "tests/integration",
    "tests/browser",
    "tests/load",
    "tests/system",
]
# as the tests' brokers (tests/conftest.py TEST_BROKER_SETTINGS)
SETTINGS = {"log.retention.check.interval.ms": 500, "group.initial.rebalance.delay.ms": 0}


def main(argv: list[str]) -> int:
    cluster = KafkaCluster(1, overrides=SETTINGS, heap="768m")
    t0 = time.monotonic()
    bootstrap = cluster.start()
    print(
        f"[test-on-kafka] {cluster.describe()} on {bootstrap} in {time.monotonic() - t0:.1f}s "
        f"(resolve {cluster.timings.get('resolve', 0):.1f}s, format {cluster.timings.get('format', 0):.1f}s, "
        f"start {cluster.timings['start']:.1f}s); logs: {cluster.log_dir}",
        flush=True,
    )
    # no test path among the arguments (only options): the broker-facing suites
    paths = [a for a in argv if not a.startswith("-") and (ROOT / a.split("::")[0]).exists()]
    args = argv if paths else [*argv, *SUITES]
    env = {**os.environ, "SFTRAFFIC_TEST_BOOTSTRAP": bootstrap}
    try:
        return subprocess.call([sys.executable, "-m", "pytest", *args], cwd=ROOT, env=env)
    finally:
        if not cluster.alive():
            print(f"[test-on-kafka] Kafka exited during the run:\n{cluster.nodes[0].tail(40)}", flush=True)
        cluster.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
