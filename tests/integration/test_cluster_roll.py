"""A rolling restart: ``framework.client.roll`` restarts the brokers of a 3-broker
cluster one at a time, each once every partition is in sync, under an idempotent acks=all
producer: zero failed writes, zero lost ones, none twice. And ``sftraffic cluster roll``'s
command line: the order (controller last), a restart command that fails, a bad template.

Real brokers (``ClusterProcesses``), real confluent-kafka clients over TCP on 127.0.0.1.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from framework.client.roll import roll
from testing import ClusterProcesses, wait_for
from tests.support.brokers import quiet_logger
from tests.support.cluster import Traffic, create_topic, read_partitions, settle, start_cluster

pytestmark = [pytest.mark.integration, pytest.mark.sftraffic_only(reason="restarts brokers of its own")]

SFTRAFFIC = str(Path(sys.executable).with_name("sftraffic"))


def test_a_rolling_restart_under_acks_all_traffic_fails_and_loses_no_write(tmp_path: Path) -> None:
    c: ClusterProcesses = start_cluster(tmp_path)
    try:
        topic = "rolled"
        create_topic(c.bootstrap, topic, partitions=6, config={"min.insync.replicas": "2"})
        settle(c, topic, 6)
        by_id = {b.node_id: b for b in c.brokers}
        restarted: list[int] = []

        def restart(node_id: int) -> None:
            b = by_id[node_id]
            assert b.stop(grace=30) == 0, b.tail()  # SIGTERM
            assert "controlled shutdown" in b.logs()  # its leaderships handed over first
            b.start()
            restarted.append(node_id)

        conf = {"bootstrap.servers": c.bootstrap, "logger": quiet_logger()}
        with Traffic(c.bootstrap, topic, 6) as traffic:
            wait_for(lambda: len(traffic.acked) > 1000, 30, 0.05, "traffic flowing")
            done = roll(conf, restart, timeout=120, say=lambda _line: None)
            seen = len(traffic.acked)
            wait_for(lambda: len(traffic.acked) > seen + 1000, 30, 0.05, "traffic after the roll")
        assert sorted(done) == [1, 2, 3] and restarted == done
        assert traffic.failed == [], f"{len(traffic.failed)} writes failed, e.g. {traffic.failed[:3]}"
        got = {(m.partition(), m.offset()): m.value() for m in read_partitions(c.bootstrap, topic, 6)}
        assert not traffic.lost(got), traffic.lost(got)
        dupes = [v for v, n in Counter(got.values()).items() if n > 1 and v != b"probe"]  # settle()'s
        assert not dupes, f"written twice: {dupes[:5]}"
        print(f"rolled {done} under {len(traffic.acked)} acknowledged writes, 0 failed, 0 lost")

        # the command line on the same (healthy) cluster: the order, and refusals in one line
        ok = subprocess.run(
            [SFTRAFFIC, "cluster", "roll", "-b", c.bootstrap, "--restart-command", "true {id}", "--no-elect"],
            check=False,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert ok.returncode == 0, ok.stderr
        m = re.search(r"restart order (\d), (\d), (\d) \(controller (-?\d+) last\)", ok.stdout)
        assert m is not None, ok.stdout
        assert m.group(3) == m.group(4) and sorted(m.group(1, 2, 3)) == ["1", "2", "3"], ok.stdout
        assert f"rolled 3 brokers: {m.group(1)}, {m.group(2)}, {m.group(3)}" in ok.stdout
        bad = subprocess.run(
            [SFTRAFFIC, "cluster", "roll", "-b", c.bootstrap, "--restart-command", "false {id}"],
            check=False,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert bad.returncode == 2 and "false" in bad.stderr and "exited 1" in bad.stderr, bad.stderr
        assert "Traceback" not in bad.stderr
        no_id = subprocess.run(
            [SFTRAFFIC, "cluster", "roll", "-b", c.bootstrap, "--restart-command", "systemctl restart x"],
            check=False,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert no_id.returncode == 2 and "{id}" in no_id.stderr and "Traceback" not in no_id.stderr
    finally:
        c.stop()
