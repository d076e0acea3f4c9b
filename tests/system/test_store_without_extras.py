"""The store installed alone (``pip install sftraffic``, no ``[app]`` extras) in a fresh venv.

The broker serves a Kafka client (confluent-kafka, a core dependency) a produce/consume round
trip, and an application command answers with the one-line "needs the application extras"
message and exit code 2: the store neither imports nor needs the demo application.

The install compiles the produce record walk with mypyc (setup.py) where there is a C
compiler, and needs no mypy at run time; without a compiler, or with SFTRAFFIC_PURE_PYTHON=1,
it still installs, with a warning, and the module runs as Python.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from testing import ManagedProcess, free_port

pytestmark = [pytest.mark.system, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
# what a non-editable install builds from (the sdist's contents); copied so the build
# leaves nothing (build/, *.egg-info) in the working tree
SOURCES = (
    "pyproject.toml",
    "setup.py",
    "README.md",
    "framework",
    "registry",
    "mirror",
    "sensors",
    "pipelines",
    "dashboard",
    "load",
    "deploy",
)
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


WALK = "import framework.protocol.record_walk as w; print(w.COMPILED, w.__file__)"


def _has_build_backend(py: Path, cwd: Path) -> bool:
    """pyproject's build requirements already in the venv: setuptools >= 77, wheel and mypy
    (without mypy the record walk would be installed as Python)."""
    check = "import setuptools, wheel, mypy, sys; sys.exit(int(setuptools.__version__.split('.')[0]) < 77)"
    return _run([py, "-c", check], cwd).returncode == 0


def _has_c_compiler() -> bool:
    return shutil.which(os.environ.get("CC", "cc").split()[0]) is not None


def _sources(tmp: Path) -> Path:
    """A copy of what an sdist holds (a build leaves build/ and caches in it: one per install)."""
    src = tmp / "src"
    src.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.so", "*.egg-info", "build", "results")
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=ignore)
        else:
            shutil.copy2(path, src / name)
    return src


def _venv(tmp: Path) -> Path:
    venv = tmp / "venv"
    made = _run([sys.executable, "-m", "venv", venv], tmp, timeout=120)
    assert made.returncode == 0, made.stderr
    return venv / "bin" / "python"


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv holding ``sftraffic`` installed without extras; returns its bin dir."""
    tmp = tmp_path_factory.mktemp("bare")
    src = _sources(tmp)
    py = _venv(tmp)
    install: list[str | Path] = [py, "-m", "pip", "install", "-q"]
    if _has_build_backend(py, tmp):
        install.append("--no-build-isolation")
    done = _run([*install, src], tmp, timeout=800)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    return py.parent


@pytest.mark.skipif(not _has_c_compiler(), reason="no C compiler: the record walk installs as Python")
def test_the_bare_install_runs_the_compiled_walk_without_mypy(bare: Path, tmp_path: Path) -> None:
    out = _run([bare / "python", "-c", WALK], tmp_path)
    assert out.returncode == 0, out.stderr
    compiled, path = out.stdout.split()
    assert compiled == "True" and path.endswith(".so") and "site-packages" in path, out.stdout
    probe = "import importlib.util as u; print(u.find_spec('mypy'), u.find_spec('mypyc'))"
    out = _run([bare / "python", "-c", probe], tmp_path)
    assert out.stdout.split() == ["None", "None"], out.stdout + out.stderr  # mypyc: build time only


@pytest.fixture(scope="module")
def plain_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv (no sftraffic yet) for the installs without the extension: each test below
    installs into it afresh (``--force-reinstall``), so building it once is enough."""
    return _venv(tmp_path_factory.mktemp("plain"))


@pytest.mark.parametrize(
    ("env", "why"),
    [
        ({"SFTRAFFIC_PURE_PYTHON": "1"}, "SFTRAFFIC_PURE_PYTHON is set"),
        ({"CC": "/nonexistent/cc"}, "the C compiler failed"),
    ],
    ids=["forced", "no-compiler"],
)
def test_without_the_extension_it_installs_as_python_with_a_warning(
    plain_venv: Path, tmp_path: Path, env: dict[str, str], why: str
) -> None:
    src = _sources(tmp_path)
    py = plain_venv
    # --no-deps: the record walk imports nothing else (the round trip is the bare venv's);
    # --force-reinstall: the other case's install (same version) is replaced, not kept
    done = subprocess.run(
        [py, "-m", "pip", "install", "-v", "--no-deps", "--force-reinstall", src],
        cwd=tmp_path,
        env={**os.environ, **CLEAN_ENV, **env},
        capture_output=True,
        text=True,
        timeout=800,
        check=False,
    )
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-4000:]
    assert "WARNING (sftraffic)" in log and why in log, log[-4000:]
    out = _run([py, "-c", WALK], tmp_path)
    assert out.returncode == 0, out.stderr
    compiled, path = out.stdout.split()
    assert compiled == "False" and path.endswith("record_walk.py"), out.stdout
    installed = Path(path).parent
    assert not list(installed.glob("record_walk*.so")), list(installed.iterdir())
    # the same walk, as Python: one record (length 7, no timestamp/offset delta, key "k", no value)
    body = "bytes([14, 0, 0, 0, 2, 107, 1, 0])"
    walk = f"import framework.protocol.record_walk as w; print(w.walk({body}, 0, 8, 1, 0, -1, 1, True))"
    out = _run([py, "-c", walk], tmp_path)
    assert out.returncode == 0 and out.stdout.strip() == "None", out.stdout + out.stderr


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
        logs = broker.logs()
    assert out.stdout.split() == [f"v{i}" for i in range(200)]
    walk = "record walk compiled (mypyc)" if _has_c_compiler() else "record walk in pure Python"
    assert logs.count("produce validation: ") == 1 and walk in logs, logs[-3000:]


@pytest.mark.parametrize("command", ["sensors", "gateway", "pipeline", "dashboard", "up", "registry"])
def test_application_commands_need_the_extras(bare: Path, tmp_path: Path, command: str) -> None:
    out = _run([bare / "sftraffic", command, "--help"], tmp_path)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "needs the application extras" in out.stderr and "pip install 'sftraffic[app]'" in out.stderr
    assert "Traceback" not in out.stderr
    listed = _run([bare / "sftraffic", "--help"], tmp_path)
    assert listed.returncode == 0 and "sensors" in listed.stdout and "broker" in listed.stdout
