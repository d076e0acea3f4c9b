"""Apache Kafka's own clients and tools against our broker (``kafka`` marker).

The jars come from Maven Central through ``deploy/kafka`` (resolved once per session into
``.cache/maven``; a clean clone resolves them in the first test that needs them), the Java
programs of ``java/`` are compiled with ``javac`` against them once per source version. Every
test here runs against the ``broker`` fixture: our broker, or with ``SFTRAFFIC_TEST_BOOTSTRAP``
an external Kafka, which checks the tests' expectations against Apache Kafka itself.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from deploy.kafka.resolve import KAFKA_VERSION, MavenError, lib_dir, resolve, resolved
from deploy.kafka.tools import javac, run_tool
from tests.support.kafka_tools import Tool

JAVA_SOURCES = sorted((Path(__file__).parent / "java").glob("*.java"))
TIMINGS: dict[str, str] = {}


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if TIMINGS:
        terminalreporter.write_line(
            f"Apache Kafka {KAFKA_VERSION}: " + ", ".join(f"{k} {v}" for k, v in TIMINGS.items())
        )


@pytest.fixture(scope="session")
def kafka_lib() -> Path:
    """Kafka's jars (``java -cp '<lib>/*'``), resolved with Maven on first use."""
    if shutil.which("mvn") is None or shutil.which("javac") is None:
        why = "Maven and a JDK are needed (apt-get install maven default-jdk-headless; ./run installs them)"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    cold = not resolved()
    t0 = time.monotonic()
    try:
        lib = resolve()
    except MavenError as exc:
        pytest.fail(str(exc))
    TIMINGS["Maven resolution"] = f"{time.monotonic() - t0:.1f}s" if cold else "cached"
    return lib


@pytest.fixture(scope="session")
def java_classes(kafka_lib: Path) -> Path:
    """The programs of ``java/`` here compiled against Kafka's jars (a classpath entry);
    kept in the Maven cache by the sources' hash, so only a change compiles again."""
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in JAVA_SOURCES)).hexdigest()[:16]
    out = lib_dir().parent / "test-classes" / digest
    if not (out / ".done").exists():
        t0 = time.monotonic()
        tmp = out.with_name(f"{digest}.tmp-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        javac(JAVA_SOURCES, tmp)
        (tmp / ".done").touch()
        shutil.rmtree(out, ignore_errors=True)
        tmp.rename(out)
        TIMINGS["javac"] = f"{time.monotonic() - t0:.1f}s"
    return out


@pytest.fixture(scope="session")
def tool(kafka_lib: Path) -> Tool:
    """``tool("kafka-topics", "--list", ...)``: the tool's result; a non-zero exit fails the test
    with its output unless ``check=False``."""

    def run(name: str, *args: str, check: bool = True, **kw: object) -> subprocess.CompletedProcess[str]:
        out = run_tool(name, *args, check=False, **kw)  # type: ignore[arg-type]
        if check and out.returncode != 0:
            pytest.fail(
                f"{name} {' '.join(args)} exited {out.returncode}:\n{out.stdout}\n{out.stderr[-4000:]}"
            )
        return out

    return run
