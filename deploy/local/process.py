"""Child processes that start, report ready, and stop without leaving anything behind.

One class, :class:`ManagedProcess`, is what ``sftraffic up``, the tests and the benchmarks use
to run brokers, Mosquitto, gateways, Spark jobs and peer systems:

* each child runs in its own session (its own process group), so a stop reaches everything
  it started (a Spark driver's JVM, a shell's children): SIGTERM to the group, SIGKILL to the
  group after a grace period, and every process still running when the interpreter exits is
  killed by an ``atexit`` hook: no orphans;
* readiness is an event, not a sleep: a reader thread watches the child's output (stdout and
  stderr, merged) for a ready line and sets an event when it appears (or when the child
  exits, so that a waiter wakes at once and reports the exit with the last lines);
* the output is kept in memory (the last ``keep_lines`` lines) and, when ``log`` is given,
  appended to that file as well.
"""

from __future__ import annotations

import atexit
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO

Ready = str | re.Pattern[str] | Callable[[str], bool] | None

_LIVE: weakref.WeakSet[ManagedProcess] = weakref.WeakSet()


class ProcessError(RuntimeError):
    """A managed process did not start, or exited while starting; the message holds its last lines."""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def wait_for(
    predicate: Callable[[], object], timeout: float = 30.0, interval: float = 0.05, what: str = "condition"
) -> None:
    """Poll ``predicate`` until true (for states only observable by asking, e.g. a client)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what}")


def _matcher(ready: Ready) -> Callable[[str], bool] | None:
    if ready is None or callable(ready):
        return ready
    if isinstance(ready, str):
        return lambda line, s=ready: s in line  # type: ignore[misc]
    return lambda line, r=ready: r.search(line) is not None  # type: ignore[misc]


class ManagedProcess:
    """One child process in its own session; see the module docstring."""

    def __init__(
        self,
        name: str,
        cmd: Sequence[str],
        *,
        ready: Ready = None,
        log: Path | str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: Path | str | None = None,
        keep_lines: int = 2000,
        grace: float = 20.0,
    ) -> None:
        self.name = name
        self.cmd = [str(c) for c in cmd]
        self._ready_when = _matcher(ready)
        self.log = Path(log) if log is not None else None
        self.env = dict(env or {})
        self.cwd = cwd
        self.grace = grace
        self.lines: deque[str] = deque(maxlen=keep_lines)
        self.proc: subprocess.Popen[bytes] | None = None
        self._ready = threading.Event()
        self._exited = threading.Event()
        self._reader: threading.Thread | None = None
        self._on_line: list[Callable[[str], None]] = []

    # -- state -------------------------------------------------------------------------------
    @property
    def pid(self) -> int:
        if self.proc is None:
            raise ProcessError(f"{self.name} was never started")
        return self.proc.pid

    @property
    def returncode(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def is_ready(self) -> bool:
        return self._ready.is_set() and self.alive()

    def logs(self) -> str:
        return "\n".join(self.lines)

    def tail(self, n: int = 15) -> str:
        return "\n".join(list(self.lines)[-n:])

    def on_line(self, fn: Callable[[str], None]) -> None:
        """Call ``fn`` with every output line from now on (on the reader thread)."""
        self._on_line.append(fn)

    # -- starting ----------------------------------------------------------------------------
    def launch(self) -> ManagedProcess:
        """Start the child and return at once (see :meth:`wait_ready`)."""
        if self.alive():
            raise ProcessError(f"{self.name} is already running (pid {self.pid})")
        self._ready.clear()
        self._exited.clear()
        self.lines.clear()
        sink: IO[bytes] | None = None
        if self.log is not None:
            self.log.parent.mkdir(parents=True, exist_ok=True)
            sink = open(self.log, "ab")  # noqa: SIM115 (closed by the reader thread)
            sink.write(f"\n--- {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(self.cmd)}\n".encode())
            sink.flush()
        self.proc = subprocess.Popen(
            self.cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env={**os.environ, **self.env},
            cwd=self.cwd,
            start_new_session=True,
        )
        _LIVE.add(self)
        if self._ready_when is None:
            self._ready.set()
        self._reader = threading.Thread(
            target=self._read, args=(self.proc, sink), name=f"{self.name}-output", daemon=True
        )
        self._reader.start()
        return self

    def _read(self, proc: subprocess.Popen[bytes], sink: IO[bytes] | None) -> None:
        assert proc.stdout is not None
        try:
            for raw in proc.stdout:
                if sink is not None:
                    sink.write(raw)
                    sink.flush()
                line = raw.decode("utf-8", "replace").rstrip()
                self.lines.append(line)
                for fn in self._on_line:
                    fn(line)
                if not self._ready.is_set() and self._ready_when is not None and self._ready_when(line):
                    self._ready.set()
        finally:
            if sink is not None:
                sink.close()
            proc.wait()
            self._exited.set()
            self._ready.set()  # wake a waiter: it sees the exit

    def wait_ready(self, timeout: float = 30.0) -> ManagedProcess:
        """Block until the ready line appeared; raise ProcessError (and stop it) otherwise."""
        if not self._ready.wait(timeout):
            self.kill()
            raise ProcessError(
                f"{self.name} was not ready after {timeout:.0f} s; last lines:\n{self.tail(40)}"
            )
        if not self.alive():
            self._exited.wait(5)
            raise ProcessError(
                f"{self.name} exited with code {self.returncode} while starting; last lines:\n{self.tail(40)}"
            )
        return self

    def start(self, timeout: float = 30.0) -> ManagedProcess:
        return self.launch().wait_ready(timeout)

    # -- stopping ----------------------------------------------------------------------------
    def signal(self, sig: int) -> None:
        """Send ``sig`` to the child's whole process group (SIGSTOP/SIGCONT for chaos tests)."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def stop(self, grace: float | None = None) -> int:
        """SIGTERM to the group, wait up to ``grace`` s, then SIGKILL; returns the exit code."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            wait = self.grace if grace is None else grace
            self.signal(signal.SIGTERM)
            try:
                self.proc.wait(wait)
            except subprocess.TimeoutExpired:
                self.lines.append(f"[{self.name} did not stop within {wait:.0f} s: killed]")
        self._reap()
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL to the group: no shutdown hooks run (a crash)."""
        if self.proc is not None:
            self._reap()

    def _reap(self) -> None:
        assert self.proc is not None
        self.signal(signal.SIGKILL)  # also whatever the child left in its group
        self.proc.wait()
        if self._reader is not None and self._reader is not threading.current_thread():
            self._reader.join(5)
        _LIVE.discard(self)

    # -- resource use (procfs) ---------------------------------------------------------------
    def cpu_seconds(self) -> float:
        """user+system CPU time of the child so far."""
        with open(f"/proc/{self.pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss_bytes(self) -> int:
        with open(f"/proc/{self.pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0

    def __enter__(self) -> ManagedProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@atexit.register
def _kill_leftovers() -> None:
    for p in list(_LIVE):
        p.kill()


def sftraffic(*args: str) -> list[str]:
    """The command line of an ``sftraffic`` subcommand run with this interpreter."""
    return [sys.executable, "-m", "framework.cli.main", *args]
