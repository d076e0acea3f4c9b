"""The store installed alone (``pip install sftraffic``, no ``[app]`` extras) in a fresh venv.

The broker serves a Kafka client (confluent-kafka, a core dependency) a produce/consume round
trip, and an application command answers with the one-line "needs the application extras"
message and exit code 2: the store neither imports nor needs the demo application.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from deploy.local.process import ManagedProcess, free_port

pytestmark = [pytest.mark.system, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
# what a non-editable install builds from (the sdist's contents); copied so the build
# leaves nothing (build/, *.egg-info) in the working tree
SOURCES = ("pyproject.toml", "README.md", "framework", "sensors", "pipelines", "dashboard", "load", "deploy")
# the fresh venv must see only what it installed: not this checkout, not user site-packages
CLEAN_ENV = {"PYTHONPATH": "", "PYTHONNOUSERSITE": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}

ROUND_TRIP = """
import sys
from confluent_kafka import Consumer, Producer, TopicPartition, OFFSET_BEGINNING
from confluent_kafka.admin import AdminClient, NewTopic

bootstrap, topic, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
admin = AdminClient({"bootstrap.servers": bootstrap})
admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(30)
p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
for i in range(n):
    p.produce(topic, key=b"k%d" % i, value=b"v%d" % i)
assert p.flush(30) == 0, "undelivered messages"
c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bare", "enable.auto.commit": False})
c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
got = []
for _ in range(60):
    got += [m.value().decode() for m in c.consume(n, timeout=0.5) if m.error() is None]
    if len(got) >= n:
        break
c.close()
print(" ".join(got))
"""


def _run(cmd: list[str | Path], cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(c) for c in cmd],
        cwd=cwd,
        env={**os.environ, **CLEAN_ENV},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _has_build_backend(py: Path, cwd: Path) -> bool:
    """setuptools >= 77 (pyproject's build requirement) and wheel already in the venv."""
    check = "import setuptools, wheel, sys; sys.exit(int(setuptools.__version__.split('.')[0]) < 77)"
    return _run([py, "-c", check], cwd).returncode == 0


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv holding ``sftraffic`` installed without extras; returns its bin dir."""
    tmp = tmp_path_factory.mktemp("bare")
    src = tmp / "src"
    src.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build", "results")
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=ignore)
        else:
            shutil.copy2(path, src / name)
    venv = tmp / "venv"
    made = _run([sys.executable, "-m", "venv", venv], tmp, timeout=120)
    assert made.returncode == 0, made.stderr
    py = venv / "bin" / "python"
    install: list[str | Path] = [py, "-m", "pip", "install", "-q"]
    if _has_build_backend(py, tmp):
        install.append("--no-build-isolation")
    done = _run([*install, src], tmp, timeout=800)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    return venv / "bin"


def test_the_bare_install_has_no_application_extras(bare: Path, tmp_path: Path) -> None:
    app_only = ("numpy", "paho", "pyspark", "dash")
    probe = f"import importlib.util as u; print([m for m in {app_only!r} if u.find_spec(m)])"
    out = _run([bare / "python", "-c", probe], tmp_path)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr


def test_broker_round_trip_with_confluent_kafka(bare: Path, tmp_path: Path) -> None:
    port = free_port()
    cmd = [bare / "sftraffic", "broker", "--node-id", "1", "--listen", f"127.0.0.1:{port}"]
    cmd += ["--data-dir", tmp_path / "data"]
    broker = ManagedProcess("bare-broker", cmd, ready=" listening on ", env=CLEAN_ENV, cwd=tmp_path)
    with broker:
        out = _run([bare / "python", "-c", ROUND_TRIP, f"127.0.0.1:{port}", "bare-topic", "200"], tmp_path)
        assert out.returncode == 0, out.stderr[-3000:] + broker.tail(40)
    assert out.stdout.split() == [f"v{i}" for i in range(200)]


@pytest.mark.parametrize("command", ["sensors", "gateway", "pipeline", "dashboard", "up"])
def test_application_commands_need_the_extras(bare: Path, tmp_path: Path, command: str) -> None:
    out = _run([bare / "sftraffic", command, "--help"], tmp_path)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "needs the application extras" in out.stderr and "pip install 'sftraffic[app]'" in out.stderr
    assert "Traceback" not in out.stderr
    listed = _run([bare / "sftraffic", "--help"], tmp_path)
    assert listed.returncode == 0 and "sensors" in listed.stdout and "broker" in listed.stdout
