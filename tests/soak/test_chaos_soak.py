"""``sftraffic chaos`` for ``SFTRAFFIC_CHAOS_SECONDS`` (default 600) with the defaults: a local
3-broker cluster, acks=all idempotent producers, every fault kind (``./run soak``, or
``pytest --runslow -m slow``). Every check must pass.

The seed is random unless ``SFTRAFFIC_CHAOS_SEED`` is set, and printed: a failing seed
replays the same fault schedule (``sftraffic chaos --duration ... --seed N``). The JSON verdict
with its timeline and the broker logs are kept in ``artifacts/`` when the run fails.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from testing import sftraffic
from tests.conftest import ARTIFACTS

SECONDS = float(os.environ.get("SFTRAFFIC_CHAOS_SECONDS", "600"))

pytestmark = [pytest.mark.slow, pytest.mark.timeout(int(SECONDS) + 900)]


def test_chaos_soak(tmp_path: Path) -> None:
    seed = int(os.environ.get("SFTRAFFIC_CHAOS_SEED") or random.SystemRandom().randrange(1, 10**9))
    out = tmp_path / "chaos-soak.json"
    cmd = sftraffic(
        "chaos",
        "--duration",
        str(SECONDS),
        "--seed",
        str(seed),
        "--data-dir",
        str(tmp_path / "data"),
        "--json",
        str(out),
    )
    r = subprocess.run(
        cmd,
        check=False,
        capture_output=True,
        text=True,
        timeout=SECONDS + 800,
        env={**os.environ, "COLUMNS": "160"},
    )
    assert out.exists(), (
        f"seed {seed}: no verdict (exit code {r.returncode}):\n{(r.stdout + r.stderr)[-3000:]}"
    )
    doc = json.loads(out.read_text())
    checks = {c["name"]: c for c in doc["checks"]}
    failed = {n: (c["summary"], c["examples"][:5]) for n, c in checks.items() if c["status"] == "FAIL"}
    if failed or r.returncode != 0:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shutil.copy(out, ARTIFACTS / f"chaos-soak-{seed}.json")
        for log in (tmp_path / "data").glob("broker-*.log"):
            shutil.copy(log, ARTIFACTS / f"chaos-soak-{seed}-{log.name}")
    assert failed == {}, f"seed {seed}: {failed}\ntimeline: {doc['timeline']}"
    assert r.returncode == 0, (r.stdout + r.stderr)[-2000:]
    assert doc["figures"]["faults"] >= SECONDS / 20
    g = checks["ack gap"]["figures"]
    print(
        f"\nchaos soak: seed {seed}, {SECONDS:.0f} s, {doc['figures']['faults']} faults, "
        f"{checks['lost']['figures']['acknowledged']} acknowledged, 0 lost, "
        f"longest gap {g['longest_gap_s']} s "
        f"(per partition {g['longest_partition_gap_s']} s)"
    )


TXN_SECONDS = float(os.environ.get("SFTRAFFIC_CHAOS_TXN_SECONDS", "300"))


@pytest.mark.timeout(int(TXN_SECONDS) + 900)
def test_chaos_transactions_soak(tmp_path: Path) -> None:
    """``sftraffic chaos --workload transactions`` for ``SFTRAFFIC_CHAOS_TXN_SECONDS`` (default
    300) under SIGKILL, SIGSTOP and SIGTERM: no aborted read, torn transaction, lost commit,
    duplicate or reader going backwards."""
    seed = int(os.environ.get("SFTRAFFIC_CHAOS_SEED") or random.SystemRandom().randrange(1, 10**9))
    out = tmp_path / "chaos-txn-soak.json"
    cmd = sftraffic(
        "chaos", "--workload", "transactions", "--nemesis", "kill,pause,term",
        "--duration", str(TXN_SECONDS), "--seed", str(seed),
        "--data-dir", str(tmp_path / "data"), "--json", str(out),
    )  # fmt: skip
    r = subprocess.run(
        cmd, check=False, capture_output=True, text=True, timeout=TXN_SECONDS + 800,
        env={**os.environ, "COLUMNS": "160"},
    )  # fmt: skip
    assert out.exists(), (
        f"seed {seed}: no verdict (exit code {r.returncode}):\n{(r.stdout + r.stderr)[-3000:]}"
    )
    doc = json.loads(out.read_text())
    checks = {c["name"]: c for c in doc["checks"]}
    failed = {n: (c["summary"], c["examples"][:5]) for n, c in checks.items() if c["status"] == "FAIL"}
    if failed or r.returncode != 0:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shutil.copy(out, ARTIFACTS / f"chaos-txn-soak-{seed}.json")
        for log in (tmp_path / "data").glob("broker-*.log"):
            shutil.copy(log, ARTIFACTS / f"chaos-txn-soak-{seed}-{log.name}")
    assert failed == {}, f"seed {seed}: {failed}\ntimeline: {doc['timeline']}"
    assert r.returncode == 0, (r.stdout + r.stderr)[-2000:]
    f = doc["figures"]
    assert f["faults"] >= TXN_SECONDS / 20
    print(
        f"\nchaos transactions soak: seed {seed}, {TXN_SECONDS:.0f} s, {f['faults']} faults, "
        f"{f['committed']} committed, {f['aborted']} aborted, {f['unknown']} unknown: every check PASS"
    )
