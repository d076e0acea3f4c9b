"""A broker started as the StatefulSet starts it: ``--node-id-from-hostname`` on a host named
``sftraffic-broker-3`` (a UTS namespace of its own, made with ``unshare``) is node 3, and its
metrics endpoint, the readiness probe's, answers once it serves clients."""

from __future__ import annotations

import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from framework import __version__
from testing import ManagedProcess, free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

HOSTNAME = "sftraffic-broker-3"


def _own_hostname_works() -> str | None:
    """Why a UTS namespace with its own host name cannot be made here, or None."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return "unshare (util-linux) is not installed"
    probe = subprocess.run(
        [unshare, "--uts", "sh", "-c", f"hostname {HOSTNAME} && hostname"],
        check=False,
        capture_output=True,
        text=True,
        timeout=10,
    )
    if probe.returncode != 0 or probe.stdout.strip() != HOSTNAME:
        return f"the kernel refuses a UTS namespace here: {probe.stderr.strip()}"
    return None


def test_node_id_from_the_host_name_of_a_running_broker(tmp_path: Path) -> None:
    reason = _own_hostname_works()
    if reason is not None:
        pytest.skip(reason)
    port, metrics = free_port(), free_port()
    broker = [sys.executable, "-m", "framework.cli.main", "broker", "--node-id-from-hostname"]
    broker += ["--listen", f"127.0.0.1:{port}", "--data-dir", str(tmp_path / "data")]
    broker += ["--metrics", f"127.0.0.1:{metrics}"]
    proc = ManagedProcess(
        "broker",
        ["unshare", "--uts", "sh", "-c", f'hostname {HOSTNAME} && exec "$@"', "sh", *broker],
        ready=" listening on ",
        grace=15.0,
    )
    try:
        proc.start(timeout=40)
        assert f"broker 3 listening on PLAINTEXT://127.0.0.1:{port}" in proc.logs(), proc.tail()
        assert f"sftraffic {__version__})" in proc.logs()  # which version runs, mid-upgrade
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=5) as r:
            assert r.status == 200
            assert b"sftraffic_" in r.read()
    finally:
        assert proc.stop() == 0, proc.tail()
