"""``sftraffic chaos --workload transactions`` end to end: transactional producers
writing 12-record transactions over 6 partitions (every fifth aborted on purpose) and two live
readers, under faults, then the transactional verdict (chaos/txn_checker.py).

* A broken setup (readers at read_uncommitted: consumers that ignore transactions) must FAIL
  ``aborted read (G1a)``, exit code 1: the checker can fail.
* The real setup (read_committed) under a few seconds of SIGKILL/SIGSTOP/SIGTERM on a 3-broker
  cluster: every check passes. The 5-minute run is in ``tests/soak/test_chaos_soak.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.system.test_chaos import checks, keep, run_chaos

pytestmark = [pytest.mark.system, pytest.mark.timeout(300)]


def test_readers_at_read_uncommitted_are_reported_as_aborted_reads(tmp_path: Path) -> None:
    rc, doc, text = run_chaos(
        tmp_path, "txn-broken",
        "--workload", "transactions", "--isolation", "read_uncommitted", "--brokers", "1",
        "--duration", "5", "--nemesis", "pause", "--interval", "1-2", "--seed", "3",
        timeout=200,
    )  # fmt: skip
    c = checks(doc)
    try:
        assert (
            doc["config"]["workload"] == "transactions" and doc["config"]["isolation"] == "read_uncommitted"
        )
        g1a = c["aborted read (G1a)"]
        assert g1a["status"] == "FAIL", g1a
        assert g1a["figures"]["visible"] == g1a["figures"]["aborted"] > 0
        assert g1a["figures"]["live_reads"] > 0
        assert g1a["examples"][0].endswith("aborted, 12 visible")
        assert c["torn"]["status"] == c["lost"]["status"] == c["duplicated"]["status"] == "PASS"
        assert doc["passed"] is False and rc == 1, text[-2000:]
    except AssertionError:
        keep(tmp_path, "txn-broken")
        raise


def test_transactions_stay_whole_under_a_few_seconds_of_faults(tmp_path: Path) -> None:
    rc, doc, text = run_chaos(
        tmp_path, "txn",
        "--workload", "transactions", "--duration", "8", "--nemesis", "kill,pause,term",
        "--interval", "1-2", "--seed", "7",
        timeout=280,
    )  # fmt: skip
    c = checks(doc)
    failed = {n: (x["summary"], x["examples"][:5]) for n, x in c.items() if x["status"] == "FAIL"}
    if failed or rc != 0:
        keep(tmp_path, "txn")
    assert failed == {}, f"seed {doc['seed']}: {failed}\ntimeline: {doc['timeline']}"
    assert rc == 0 and doc["passed"] is True, text[-2000:]
    f = doc["figures"]
    assert f["faults"] >= 1 and f["committed"] >= 20 and f["aborted"] >= 4
    assert c["offsets"]["figures"]["readers"] == ["final", "reader1", "reader2"]
    print(
        f"\ntransactions under faults (seed {doc['seed']}, {f['faults']} faults): "
        f"{f['committed']} committed, {f['aborted']} aborted, {f['unknown']} unknown, "
        f"{f['reads']} live reads; every check PASS"
    )
