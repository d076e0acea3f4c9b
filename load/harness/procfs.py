"""What processes and the machine used, from ``/proc`` (Linux).

* ``cpu_seconds(pid)``: user+system CPU of a process (fields 14 and 15 of ``/proc/PID/stat``),
  with ``descendants=True`` plus that of its live descendants;
* ``rss_bytes(pid)`` (VmRSS) and ``threads(pid)``;
* ``own_cpu()``: this process, all its threads (``children=True``: its reaped children);
* ``machine_busy_seconds()``: CPU seconds of all cores since boot counted as busy: **user + nice
  + system + irq + softirq + steal** of ``/proc/stat`` (idle and iowait are not busy). irq and
  softirq are charged to no process: the loopback traffic of a benchmark itself lands there too.

The kernel counts in clock ticks (usually 10 ms): take a CPU figure over >= 1 s of work.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")
CpuProbe = Callable[[], float | None]


def _stat(pid: int) -> list[str]:
    with open(f"/proc/{pid}/stat") as fh:
        # The command name (field 2) may hold spaces and parentheses: split after the last ")".
        return fh.read().rsplit(")", 1)[1].split()


def cpu_seconds(pid: int, descendants: bool = False, reaped: bool = False) -> float:
    """user+system CPU seconds of ``pid`` so far, with ``reaped`` plus those of the children it
    has waited for (cutime + cstime); raises OSError when it is gone."""
    f = _stat(pid)
    total = sum(map(int, f[11:15] if reaped else f[11:13])) / TICK
    for kid in children(pid, recursive=True) if descendants else ():
        total += probe(kid)() or 0.0  # 0 when it exited meanwhile
    return total


def parent(pid: int) -> int:
    return int(_stat(pid)[1])


def _status(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith(key):
                return int(line.split()[1])
    return 0


def rss_bytes(pid: int) -> int:
    """Resident set size of ``pid`` (VmRSS)."""
    return _status(pid, "VmRSS:") * 1024


def threads(pid: int) -> int:
    return _status(pid, "Threads:")


def cmdline(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode("utf-8", "replace").strip()


def children(pid: int, recursive: bool = False) -> list[int]:
    """Live children of ``pid`` (every thread's), with ``recursive`` all descendants."""
    out: list[int] = []
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                kids = [int(k) for k in Path(f"/proc/{p}/task/{task}/children").read_text().split()]
            except OSError:
                continue
            out += kids
            if recursive:
                todo += kids
    return out


def own_cpu(children: bool = False) -> float:
    t = os.times()
    return t.children_user + t.children_system if children else t.user + t.system


def machine_busy_seconds() -> float | None:
    """user+nice+system+irq+softirq+steal seconds of all cores since boot (None without /proc)."""
    try:
        with open("/proc/stat") as fh:
            f = [int(x) for x in fh.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    f += [0] * (8 - len(f))
    user, nice, system, _idle, _iowait, irq, softirq, steal = f
    return (user + nice + system + irq + softirq + steal) / TICK


def probe(pid: int | None, descendants: bool = False) -> CpuProbe:
    """A CPU probe for ``pid``: its CPU seconds, None when unknown or gone."""

    def read() -> float | None:
        if pid is None:
            return None
        try:
            return cpu_seconds(pid, descendants)
        except OSError:
            return None

    return read


# Some servers finish work after the client is done (noida-db keeps a core busy for seconds after a
# 1M-message phase, in bursts ~0.5 s apart). That work is part of the cost per message and, left
# running, would slow the next phase: after each phase the server is watched until it has been
# idle for IDLE_WINDOW_S, at most SETTLE_S.
SETTLE_S = 15.0
IDLE_WINDOW_S = 1.5


def cpu_when_idle(
    cpu: CpuProbe | None, timeout: float = SETTLE_S, window: float = IDLE_WINDOW_S, rest: float = 0.0
) -> tuple[float | None, float | None]:
    """(CPU seconds now, CPU seconds once idle: at most 3 % of a core above ``rest``, the cores
    it uses when nothing is asked of it (:func:`rest_cores`), during ``window``)."""
    if cpu is None:
        return None, None
    now = last = cpu()
    if now is None or timeout <= 0:
        return now, now
    idle = max(2 / TICK, (0.03 + rest) * window)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        time.sleep(window)
        cur = cpu()
        if cur is None:
            break
        if cur - last <= idle:  # type: ignore[operator]
            return now, cur
        last = cur
    return now, last


def rest_cores(cpu: CpuProbe | None, seconds: float = 3.0) -> float | None:
    """Cores a server uses when nothing is asked of it (a JVM broker's timers, a Raft quorum's
    heartbeats): its CPU over ``seconds`` of quiet, per second."""
    before = cpu() if cpu is not None else None
    if cpu is None or before is None:
        return None
    time.sleep(seconds)
    after = cpu()
    return max(0.0, after - before) / seconds if after is not None else None


class PhaseCpu:
    """CPU over one measured phase: this process's from creation to :meth:`client_done`, and a
    server's (any probe) from creation until it is idle again after the phase (:meth:`settle`).
    ``rest``: the server's CPU at rest in cores (:func:`rest_cores`): "idle" is then 3 % of a
    core above it, and :meth:`above_rest` takes it out of the cost per message."""

    def __init__(self, server: CpuProbe | None = None, rest: float = 0.0) -> None:
        self.server, self.server0 = server, server() if server is not None else None
        self.own0, self.client_s = own_cpu(), 0.0
        self.rest, self.t0, self.seconds = rest, time.monotonic(), 0.0
        self.used: float | None = None

    def client_done(self) -> float:
        self.client_s = own_cpu() - self.own0
        return self.client_s

    def settle(
        self, messages: int, timeout: float = SETTLE_S, window: float = IDLE_WINDOW_S
    ) -> tuple[float | None, float | None, float | None]:
        """(server CPU s, µs per message, of which s after the phase); None where unknown."""
        end, idle = cpu_when_idle(self.server, timeout, window, self.rest)
        self.seconds = time.monotonic() - self.t0
        if self.server0 is None or idle is None or messages <= 0:
            return None, None, None
        self.used = used = idle - self.server0
        return used, used / messages * 1e6, idle - end if end is not None else None

    def above_rest(self, messages: int) -> float | None:
        """After :meth:`settle`: µs per message of the server's CPU above its rest, i.e. less
        ``rest`` × the phase's seconds (from creation to the end of :meth:`settle`)."""
        if self.used is None or messages <= 0:
            return None
        return max(0.0, self.used - self.rest * self.seconds) / messages * 1e6


# Above this share of the machine's CPU taken by other processes a figure is flagged as busy.
BUSY_SHARE = 0.10


class Interference:
    """CPU used by processes other than this one and ``pids`` (those being measured), from
    creation to :meth:`share`, as a share of all cores (None when a pid is unknown or gone).
    Client and servers share the machine: another job's load changes every figure.
    ``children``: this process's reaped children are its own too (a client run as a
    subprocess, e.g. a Java tool, waited for before :meth:`share`)."""

    def __init__(self, pids: Iterable[int | None], children: bool = False) -> None:
        self.pids, self.children = list(pids), children
        self.t0, self.busy0, self.own0 = time.monotonic(), machine_busy_seconds(), self._own()

    def _own(self) -> float | None:
        cpu = [probe(pid)() for pid in self.pids]
        mine = own_cpu() + (own_cpu(children=True) if self.children else 0.0)
        return None if None in cpu else mine + sum(cpu)  # type: ignore[arg-type]

    def share(self) -> float | None:
        busy1, own1 = machine_busy_seconds(), self._own()
        if self.busy0 is None or busy1 is None or self.own0 is None or own1 is None:
            return None
        elapsed = (time.monotonic() - self.t0) * (os.cpu_count() or 1)
        return max(0.0, (busy1 - self.busy0) - (own1 - self.own0)) / elapsed if elapsed > 0 else None
