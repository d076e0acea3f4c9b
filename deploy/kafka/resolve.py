"""Apache Kafka's jars from Maven Central, and the ``java`` command lines that run them.

:func:`resolve` runs Maven once per pom (``deploy/kafka/pom.xml``): ``mvn -q
dependency:copy-dependencies`` into ``<cache>/kafka-<version>/lib``, with Maven's own local
repository under ``<cache>/repository``, so that a clean clone resolves everything itself and
nothing of Kafka lands in git or in ``~/.m2``. ``<cache>`` is ``$SFTRAFFIC_MAVEN_CACHE`` or
``.cache/maven`` at the top of the checkout. The copy goes to a temporary folder renamed into
place when complete, under a file lock: concurrent callers (pytest-xdist workers, ``./run
kafka`` while the tests run) resolve once; a finished copy carries a stamp with the pom's hash,
so editing the pom resolves again.

:func:`java_cmd` is ``java <heap> -cp '<lib>/*' -Dlog4j2.configurationFile=... MAIN ARGS``;
``daemon=True`` gives a server's JVM options (G1, INFO to stdout), otherwise a short-lived
tool's (C1 only, serial GC, WARN to stderr: its stdout is its answer).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
POM = HERE / "pom.xml"
LOG4J2 = HERE / "log4j2.properties"


def _pom_version() -> str:
    m = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", POM.read_text())
    if m is None:
        raise RuntimeError(f"{POM} declares no <kafka.version>")
    return m.group(1).strip()


KAFKA_VERSION = _pom_version()


class MavenError(RuntimeError):
    """Maven or Java is missing, or the resolution failed (the message holds Maven's last lines)."""


def cache_dir() -> Path:
    env = os.environ.get("SFTRAFFIC_MAVEN_CACHE")
    return Path(env).resolve() if env else ROOT / ".cache" / "maven"


def lib_dir(version: str = KAFKA_VERSION) -> Path:
    return cache_dir() / f"kafka-{version}" / "lib"


def _stamp(pom: Path = POM) -> str:
    return hashlib.sha256(pom.read_bytes()).hexdigest()


def resolved(version: str = KAFKA_VERSION) -> bool:
    return pom_resolved(POM, lib_dir(version))


def resolve(quiet: bool = True, timeout: float = 900.0) -> Path:
    """The folder of Kafka's jars (every one its ``java -cp`` needs), resolving it first if needed."""
    return resolve_pom(POM, lib_dir(), quiet=quiet, timeout=timeout)


def pom_resolved(pom: Path, lib: Path) -> bool:
    """Whether ``lib`` holds the complete copy of ``pom``'s dependencies (its stamp matches)."""
    stamp = lib.parent / ".resolved"
    return stamp.is_file() and stamp.read_text().strip() == _stamp(pom)


def resolve_pom(pom: Path, lib: Path, quiet: bool = True, timeout: float = 900.0) -> Path:
    """``mvn dependency:copy-dependencies`` of ``pom`` into ``lib`` (Maven's repository in
    :func:`cache_dir`), once: under the cache's lock, into a temporary folder renamed into place,
    stamped with the pom's hash. Other poms use it too (``deploy/spark``: Spark's Kafka connector)."""
    if pom_resolved(pom, lib):
        return lib
    mvn = shutil.which("mvn")
    if mvn is None:
        raise MavenError("Maven (mvn) is not installed: apt-get install maven (./run kafka installs it)")
    if shutil.which("java") is None:
        raise MavenError("Java is not installed: apt-get install default-jdk-headless")
    cache = cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be resolving: wait for it
        if pom_resolved(pom, lib):
            return lib
        tmp = lib.parent.with_name(lib.parent.name + f".tmp-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        cmd = [
            mvn,
            "-B",
            *(["-q"] if quiet else []),
            "-f",
            str(pom),
            f"-Dmaven.repo.local={cache / 'repository'}",
            "dependency:copy-dependencies",
            f"-DoutputDirectory={tmp / 'lib'}",
        ]
        t0 = time.monotonic()
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        if out.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            tail = "\n".join((out.stdout + out.stderr).strip().splitlines()[-30:])
            raise MavenError(f"mvn dependency:copy-dependencies failed ({out.returncode}):\n{tail}")
        (tmp / "resolve-seconds").write_text(f"{time.monotonic() - t0:.1f}\n")
        shutil.rmtree(lib.parent, ignore_errors=True)
        tmp.rename(lib.parent)
        (lib.parent / ".resolved").write_text(_stamp(pom) + "\n")
    return lib


SERVER_OPTS = ("-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:+ExitOnOutOfMemoryError")
TOOL_OPTS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xss1m")


def java_cmd(
    main: str,
    *args: str,
    heap: str = "256m",
    daemon: bool = False,
    extra_classpath: Sequence[Path | str] = (),
    jvm_opts: Sequence[str] = (),
    lib: Path | None = None,
) -> list[str]:
    """``java ... -cp '<lib>/*' main args`` (the jars resolved first)."""
    lib = lib or resolve()
    cp = os.pathsep.join([*(str(p) for p in extra_classpath), str(lib / "*")])
    level, target = ("info", "SYSTEM_OUT") if daemon else ("warn", "SYSTEM_ERR")
    return [
        shutil.which("java") or "java",
        f"-Xmx{heap}",
        "-Xms64m",
        *(SERVER_OPTS if daemon else TOOL_OPTS),
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={LOG4J2}",
        f"-Dsftraffic.kafka.log.level={level}",
        f"-Dsftraffic.kafka.log.target={target}",
        *jvm_opts,
        "-cp",
        cp,
        main,
        *args,
    ]
