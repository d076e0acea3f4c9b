"""The faults of a ``sftraffic chaos`` run, and what they act on.

A :class:`Target` is a set of broker nodes that can be killed, stopped, paused and cut off:

* :class:`LocalTarget`: brokers this process started (``ClusterProcesses``, or a
  ``NetnsCluster`` whose brokers sit in network namespaces, which adds link cuts);
* :class:`CommandTarget`: an existing cluster, acted on through shell command templates given
  by the user (``{node}`` is replaced by the broker id), e.g. ``ssh {node}.example pkill -9 java``.

The :class:`Nemesis` thread injects one fault at a time, every ``interval`` seconds (uniform
between the two bounds), and heals each before the next: ``kill`` (SIGKILL, down 1-3 s, then
restarted), ``term`` (SIGTERM, waited for, then restarted), ``pause`` (SIGSTOP, 2-10 s, SIGCONT)
and ``partition`` (the node cut from the other brokers, or from everyone including the
clients, for 5-15 s). Every choice comes from one ``random.Random(seed)`` in a fixed order, so
a seed replays the same schedule. Each step is an :class:`Event` on the run's timeline, with
the partitions the node led just before the fault.
"""

from __future__ import annotations

import random
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from testing import ClusterProcesses, ProcessError, wait_for

KINDS = ("kill", "pause", "term", "partition")
# how long each fault is held before it is healed, seconds (uniform between the bounds)
HOLDS: dict[str, tuple[float, float]] = {
    "kill": (1, 3),
    "term": (0, 2),
    "pause": (2, 10),
    "partition": (5, 15),
}


@dataclass(frozen=True, slots=True)
class Event:
    t: float
    action: str
    node: int | None
    detail: str = ""


class Target(Protocol):
    nodes: list[int]
    kinds: tuple[str, ...]  # the faults it can inject

    def kill(self, node: int) -> str: ...
    def term(self, node: int) -> str: ...
    def start(self, node: int) -> str: ...
    def pause(self, node: int) -> str: ...
    def resume(self, node: int) -> str: ...
    def isolate(self, node: int, from_clients: bool) -> str: ...
    def heal_network(self) -> str: ...
    def heal(self) -> list[str]: ...


class LocalTarget:
    """Brokers started by this process; link cuts when the cluster has a ``network``."""

    def __init__(self, cluster: ClusterProcesses, start_timeout: float = 90) -> None:
        self.cluster = cluster
        self.network = getattr(cluster, "network", None)
        self.nodes = [b.node_id for b in cluster.brokers]
        self.kinds: tuple[str, ...] = KINDS if self.network is not None else ("kill", "pause", "term")
        self.paused: set[int] = set()
        self.start_timeout = start_timeout

    def _broker(self, node: int) -> Any:
        return next(b for b in self.cluster.brokers if b.node_id == node)

    def kill(self, node: int) -> str:
        self._broker(node).kill()
        self.paused.discard(node)
        return "SIGKILL"

    def term(self, node: int) -> str:
        t0 = time.monotonic()
        rc = self._broker(node).stop()
        self.paused.discard(node)
        return f"SIGTERM: exited with code {rc} after {time.monotonic() - t0:.1f} s"

    def start(self, node: int) -> str:
        t0 = time.monotonic()
        self._broker(node).start(self.start_timeout)
        return f"listening after {time.monotonic() - t0:.1f} s"

    def pause(self, node: int) -> str:
        self._broker(node).signal(signal.SIGSTOP)
        self.paused.add(node)
        return "SIGSTOP"

    def resume(self, node: int) -> str:
        self._broker(node).signal(signal.SIGCONT)
        self.paused.discard(node)
        return "SIGCONT"

    def isolate(self, node: int, from_clients: bool) -> str:
        if self.network is None:
            raise RuntimeError("link cuts need a cluster in network namespaces")
        self.network.isolate(node, from_host=from_clients)
        return "cut from every broker" + (" and from the clients" if from_clients else "")

    def heal_network(self) -> str:
        if self.network is not None:
            self.network.heal_all()
        return "links restored"

    def heal(self) -> list[str]:
        done = []
        if self.network is not None and self.network.cuts():
            done.append(self.heal_network())
        for node in sorted(self.paused):
            done.append(f"broker {node}: {self.resume(node)}")
        for b in self.cluster.brokers:
            if not b.alive():
                done.append(f"broker {b.node_id}: restarted, {self.start(b.node_id)}")
        return done


class CommandTarget:
    """An existing cluster acted on through shell command templates (``{node}``: broker id).

    Without a ``start`` template a killed or stopped broker is expected to be restarted by its
    supervisor (systemd, Kubernetes): :meth:`start` waits until Metadata lists it again.
    """

    def __init__(
        self,
        nodes: list[int],
        templates: dict[str, str | None],
        registered: Callable[[], list[int]],
        start_timeout: float = 120,
    ) -> None:
        self.nodes = nodes
        self.templates = templates
        self.registered = registered
        self.start_timeout = start_timeout
        kinds = []
        if templates.get("kill"):
            kinds.append("kill")
        if templates.get("pause") and templates.get("resume"):
            kinds.append("pause")
        if templates.get("term"):
            kinds.append("term")
        self.kinds = tuple(kinds)
        self.paused: set[int] = set()
        self.down: set[int] = set()

    def _run(self, what: str, node: int) -> str:
        template = self.templates.get(what)
        if not template:
            raise RuntimeError(f"no --{what}-cmd given")
        cmd = template.replace("{node}", str(node))
        r = subprocess.run(["/bin/sh", "-c", cmd], check=False, capture_output=True, text=True, timeout=120)
        out = (r.stdout + r.stderr).strip().splitlines()
        detail = f"`{cmd}` exited {r.returncode}" + (f": {out[-1]}" if out else "")
        if r.returncode != 0:
            raise RuntimeError(detail)
        return detail

    def kill(self, node: int) -> str:
        self.down.add(node)
        return self._run("kill", node)

    def term(self, node: int) -> str:
        self.down.add(node)
        return self._run("term", node)

    def start(self, node: int) -> str:
        detail = self._run("start", node) if self.templates.get("start") else "left to its supervisor"
        wait_for(
            lambda: node in self.registered(), self.start_timeout, 0.5, f"broker {node} registered again"
        )
        self.down.discard(node)
        return detail

    def pause(self, node: int) -> str:
        self.paused.add(node)
        return self._run("pause", node)

    def resume(self, node: int) -> str:
        self.paused.discard(node)
        return self._run("resume", node)

    def isolate(self, node: int, from_clients: bool) -> str:
        raise RuntimeError("link cuts are only available on a local cluster")

    def heal_network(self) -> str:
        return "no links cut"

    def heal(self) -> list[str]:
        done = [f"broker {n}: {self.resume(n)}" for n in sorted(self.paused)]
        done += [f"broker {n}: {self.start(n)}" for n in sorted(self.down)]
        return done


class Nemesis(threading.Thread):
    """One fault at a time on ``target``, until :meth:`stop` (which heals the current one)."""

    def __init__(
        self,
        target: Target,
        kinds: list[str],
        rng: random.Random,
        clock: Callable[[], float],
        interval: tuple[float, float] = (5.0, 10.0),
        describe: Callable[[], dict[int, list[int]]] | None = None,
        on_event: Callable[[Event], None] | None = None,
        holds: dict[str, tuple[float, float]] | None = None,
    ) -> None:
        super().__init__(name="chaos-nemesis", daemon=True)
        self.target = target
        self.kinds = kinds
        self.rng = rng
        self.clock = clock
        self.interval = interval
        self.describe = describe or (lambda: {})
        self.on_event = on_event or (lambda _e: None)
        self.holds = {**HOLDS, **(holds or {})}
        self.events: list[Event] = []
        self._halt = threading.Event()

    def event(self, action: str, node: int | None, detail: str = "") -> None:
        e = Event(round(self.clock(), 3), action, node, detail)
        self.events.append(e)
        self.on_event(e)

    def run(self) -> None:
        while not self._halt.wait(self.rng.uniform(*self.interval)):
            kind = self.rng.choice(self.kinds)
            node = self.rng.choice(self.target.nodes)
            try:
                self.fault(kind, node)
            except (ProcessError, RuntimeError, TimeoutError, OSError, subprocess.SubprocessError) as exc:
                self.event("error", node, f"{kind}: {exc}".splitlines()[0])

    def _hold(self, kind: str) -> None:
        """Keep the fault for a random time; cut short when the run ends."""
        self._halt.wait(self.rng.uniform(*self.holds[kind]))

    def _leads(self, node: int) -> str:
        try:
            parts = self.describe().get(node, [])
        except Exception:  # Metadata is best effort here: a fault may be on
            parts = []
        return f"leader of partitions {parts}" if parts else "leads no partition"

    def fault(self, kind: str, node: int) -> None:
        leads = self._leads(node)
        if kind == "kill":
            self.event("kill", node, f"{self.target.kill(node)}; {leads}")
            self._hold("kill")
            self.event("restart", node, self.target.start(node))
        elif kind == "term":
            self.event("term", node, leads)
            self.event("stopped", node, self.target.term(node))
            self._hold("term")
            self.event("restart", node, self.target.start(node))
        elif kind == "pause":
            self.event("pause", node, f"{self.target.pause(node)}; {leads}")
            self._hold("pause")
            self.event("resume", node, self.target.resume(node))
        elif kind == "partition":
            from_clients = self.rng.random() < 0.5
            self.event("partition", node, f"{self.target.isolate(node, from_clients)}; {leads}")
            self._hold("partition")
            self.event("heal", node, self.target.heal_network())
        else:
            raise RuntimeError(f"unknown fault {kind}")

    def stop(self) -> None:
        self._halt.set()
        self.join()
