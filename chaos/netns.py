"""Real network partitions between local brokers: one network namespace per broker (root only).

Layout of a :class:`Network` of N nodes (all names carry a random tag, so concurrent runs and
leftovers of a crashed run never collide)::

    root namespace: bridge sf<tag>br, address 10.A.B.1/24 (the "host" endpoint: clients here)
       ├── veth sf<tag>v1 ── namespace sf<tag>n1, eth0 10.A.B.11/24, lo up
       ├── veth sf<tag>v2 ── namespace sf<tag>n2, eth0 10.A.B.12/24
       └── ...

A broker runs inside its namespace (``ip netns exec sf<tag>nI python -m framework.cli.main
broker --listen 10.A.B.1I:9092 ...``); clients in the root namespace reach every broker
through the bridge, and a client started inside a broker's namespace (same prefix) reaches
that broker over its local address whatever happens to the links.

**Cutting a link** between two endpoints (two nodes, or a node and the host) adds a
``blackhole`` route to the other's /32 on *both* sides: packets of established connections
are dropped silently (TCP retransmits into the void, as across a real partition) and new
connections fail at once. Only routes change, so this needs iproute2 and root, not iptables or
the ``netem`` qdisc (neither is available on every machine). :meth:`Network.heal` removes the
routes; :meth:`Network.destroy` removes everything (routes, veths, bridge, namespaces) and is
also run at interpreter exit for every network still up.

Thread-safety: one lock per network serialises changes to its set of cuts.
"""

from __future__ import annotations

import atexit
import ipaddress
import random
import secrets
import shutil
import subprocess
import threading
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from testing import BrokerProcess, ClusterProcesses, sftraffic

HOST = 0  # the root namespace as an endpoint of a cut (nodes are numbered from 1)
KAFKA_PORT = 9092
RAFT_PORT = 19092

_LIVE: weakref.WeakSet[Network] = weakref.WeakSet()


class NetnsError(RuntimeError):
    """An ``ip`` command failed; the message holds the command and its stderr."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(["ip", *args], check=False, capture_output=True, text=True, timeout=20)
    if check and r.returncode != 0:
        raise NetnsError(f"ip {' '.join(args)}: {r.stderr.strip() or f'exit code {r.returncode}'}")
    return r


def unavailable_reason() -> str | None:
    """None when network namespaces can be made here; otherwise why not (one line)."""
    if shutil.which("ip") is None:
        return "the `ip` command (iproute2) is not installed"
    probe = f"sfprobe{secrets.token_hex(3)}"
    try:
        r = _ip("netns", "add", probe, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"`ip netns add` failed: {exc}"
    if r.returncode != 0:
        return f"`ip netns add` refused: {r.stderr.strip() or f'exit code {r.returncode}'}"
    _ip("netns", "del", probe, check=False)
    return None


def _free_subnet(rng: random.Random) -> str:
    """A 10.A.B.0/24 that no address or route of the root namespace overlaps ("10.A.B")."""
    used = _ip("-4", "route", "show", "table", "all", check=False).stdout + _ip("-4", "addr").stdout
    taken: list[ipaddress.IPv4Network] = []
    for word in used.split():
        try:
            taken.append(ipaddress.IPv4Network(word, strict=False))
        except ValueError:
            continue
    for _ in range(200):
        prefix = f"10.{rng.randrange(100, 250)}.{rng.randrange(0, 256)}"
        net = ipaddress.IPv4Network(f"{prefix}.0/24")
        if not any(net.overlaps(t) for t in taken if t.prefixlen > 0):
            return prefix
    raise NetnsError("no free 10.x.y.0/24 subnet found")


@dataclass(frozen=True, slots=True)
class Node:
    index: int  # 1-based
    ns: str
    ip: str
    veth: str  # the root-namespace end of its veth pair (on the bridge)


class Network:
    """A bridge and one namespace per node; see the module docstring."""

    def __init__(self, size: int, tag: str | None = None, seed: int | None = None) -> None:
        self.tag = tag or secrets.token_hex(3)
        self.size = size
        self.subnet = _free_subnet(random.Random(seed))
        self.bridge = f"sf{self.tag}br"
        self.host_ip = f"{self.subnet}.1"
        self.nodes = [
            Node(i, f"sf{self.tag}n{i}", f"{self.subnet}.{10 + i}", f"sf{self.tag}v{i}")
            for i in range(1, size + 1)
        ]
        self._cuts: set[frozenset[int]] = set()
        self._lock = threading.Lock()
        self._created: list[str] = []  # what destroy() must remove: "ns:NAME", "link:NAME"

    # -- building ----------------------------------------------------------------------------
    def create(self) -> Network:
        """Make the bridge, the namespaces and the veth pairs; on any failure undo them."""
        _LIVE.add(self)
        try:
            _ip("link", "add", self.bridge, "type", "bridge")
            self._created.append(f"link:{self.bridge}")
            _ip("addr", "add", f"{self.host_ip}/24", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
            for n in self.nodes:
                _ip("netns", "add", n.ns)
                self._created.append(f"ns:{n.ns}")
                _ip("link", "add", n.veth, "type", "veth", "peer", "name", "eth0", "netns", n.ns)
                self._created.append(f"link:{n.veth}")
                _ip("link", "set", n.veth, "master", self.bridge)
                _ip("link", "set", n.veth, "up")
                _ip("-n", n.ns, "addr", "add", f"{n.ip}/24", "dev", "eth0")
                _ip("-n", n.ns, "link", "set", "eth0", "up")
                _ip("-n", n.ns, "link", "set", "lo", "up")
        except BaseException:
            self.destroy()
            raise
        return self

    def node(self, index: int) -> Node:
        return self.nodes[index - 1]

    def exec_prefix(self, index: int) -> list[str]:
        """The command prefix that runs a program inside node ``index``'s namespace."""
        return ["ip", "netns", "exec", self.node(index).ns]

    def _addr(self, endpoint: int) -> str:
        return self.host_ip if endpoint == HOST else self.node(endpoint).ip

    def _route(self, op: str, at: int, to: int) -> None:
        where = [] if at == HOST else ["-n", self.node(at).ns]
        _ip(*where, "route", op, "blackhole", f"{self._addr(to)}/32", check=op != "del")

    # -- cutting and healing -----------------------------------------------------------------
    def cut(self, a: int, b: int) -> None:
        """Drop all traffic between endpoints ``a`` and ``b`` (node indexes, or HOST), both ways."""
        if a == b:
            return
        with self._lock:
            self._route("replace", a, b)
            self._route("replace", b, a)
            self._cuts.add(frozenset((a, b)))

    def heal(self, a: int, b: int) -> None:
        with self._lock:
            self._route("del", a, b)
            self._route("del", b, a)
            self._cuts.discard(frozenset((a, b)))

    def isolate(self, index: int, from_host: bool = True) -> list[int]:
        """Cut node ``index`` from every other node (and from the host unless ``from_host`` is
        False); returns the endpoints it was cut from."""
        others = [n.index for n in self.nodes if n.index != index]
        if from_host:
            others.append(HOST)
        for o in others:
            self.cut(index, o)
        return others

    def split(self, side: Iterable[int]) -> None:
        """Cut every node of ``side`` from every node not in it (the host stays with both)."""
        inside = set(side)
        for a in inside:
            for n in self.nodes:
                if n.index not in inside:
                    self.cut(a, n.index)

    def heal_all(self) -> None:
        with self._lock:
            cuts = [tuple(c) for c in self._cuts]
        for a, b in cuts:
            self.heal(a, b)

    def cuts(self) -> list[tuple[int, int]]:
        with self._lock:
            return sorted((min(c), max(c)) for c in self._cuts)

    # -- tearing down ------------------------------------------------------------------------
    def destroy(self) -> None:
        """Remove the routes, links and namespaces made here; safe to call twice, never raises."""
        try:
            self.heal_all()
        except (NetnsError, OSError, subprocess.TimeoutExpired):
            pass
        while self._created:
            kind, name = self._created.pop().split(":", 1)
            try:
                if kind == "ns":
                    _ip("netns", "del", name, check=False)
                else:
                    _ip("link", "del", name, check=False)
            except (OSError, subprocess.TimeoutExpired):
                pass
        _LIVE.discard(self)

    def __enter__(self) -> Network:
        return self.create()

    def __exit__(self, *exc: object) -> None:
        self.destroy()


@atexit.register
def _destroy_leftovers() -> None:
    for net in list(_LIVE):
        net.destroy()


class NetnsCluster(ClusterProcesses):
    """N brokers forming one cluster, each in its own namespace of a :class:`Network`.

    Same interface as :class:`ClusterProcesses` (``brokers``, ``bootstrap``, ``start``,
    ``stop``, ``live_brokers``, ``logs``); broker ``i`` listens on ``10.A.B.1i:9092`` with its
    Raft endpoint on port 19092 of the same address. ``stop`` stops the brokers and
    :meth:`destroy` (or leaving the ``with`` block) also removes the network.
    """

    def __init__(
        self,
        base_dir: Path | str,
        size: int = 3,
        overrides: Mapping[str, object] | None = None,
        env: Mapping[str, str] | None = None,
        network: Network | None = None,
        logs: Path | str | None = None,
    ) -> None:
        # ClusterProcesses.__init__ picks 127.0.0.1 ports; only its attributes are reused here
        self.base_dir = Path(base_dir)
        self.size = size
        self.network = network or Network(size)
        if not self.network._created:
            self.network.create()
        voters = ",".join(f"{n.index}@{n.ip}:{RAFT_PORT}" for n in self.network.nodes)
        self.brokers = []
        for n in self.network.nodes:
            b = BrokerProcess(
                self.base_dir / f"broker-{n.index}",
                port=KAFKA_PORT,
                node_id=n.index,
                overrides={**(overrides or {}), "controller.quorum.voters": voters},
                host=n.ip,
                env=env,
                log=Path(logs) / f"broker-{n.index}.log" if logs is not None else None,
            )
            b.cmd = [*self.network.exec_prefix(n.index), *b.cmd]
            self.brokers.append(b)

    def in_namespace(self, index: int, *args: str) -> list[str]:
        """An ``sftraffic`` command line run inside broker ``index``'s namespace."""
        return [*self.network.exec_prefix(index), *sftraffic(*args)]

    def destroy(self) -> None:
        self.stop()
        self.network.destroy()

    def __enter__(self) -> NetnsCluster:
        try:
            self.start()
        except BaseException:
            self.destroy()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.destroy()
