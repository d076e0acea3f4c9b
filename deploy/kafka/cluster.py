"""Apache Kafka in KRaft mode on this machine: one node, or a cluster of N on loopback ports.

Every node is broker and controller at once (``process.roles=broker,controller``) with a static
quorum (``controller.quorum.voters``): its config is ``server.properties`` beside this module,
filled per node, plus ``overrides``. :meth:`KafkaCluster.prepare` resolves the jars
(:func:`~deploy.kafka.resolve.resolve`), writes the configs and formats every node's log dir
with Kafka's storage tool (``kafka.tools.StorageTool format``; the JVMs run side by side; a dir
formatted before is kept); :meth:`KafkaCluster.start` launches every node and returns once each
has logged ``[KafkaRaftServer nodeId=N] Kafka Server started`` (Kafka's own ready line, an event
read from its output, not a sleep) and the brokers have registered with the quorum; it returns
the bootstrap. :meth:`KafkaCluster.stop` sends SIGTERM (Kafka's controlled shutdown) and
waits; with no ``base_dir`` the data lives in a temporary folder removed by ``stop``.

Ports: with ``port`` given, node i listens on ``port + i`` and its controller on ``port + 10000
+ i`` (as ``sftraffic up --cluster``); without, every port is a free one.
"""

from __future__ import annotations

import base64
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Mapping
from pathlib import Path

from deploy.kafka.resolve import HERE, KAFKA_VERSION, java_cmd, resolve
from deploy.local.process import ManagedProcess, ProcessError, free_port, wait_for

TEMPLATE = HERE / "server.properties"
READY = "Kafka Server started"


def new_cluster_id() -> str:
    """A cluster id as Kafka's ``Uuid.randomUuid()`` prints it (22 URL-safe base64 characters)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):  # Kafka avoids ids that read as command-line options
            return text


class KafkaNode(ManagedProcess):
    """One ``kafka.Kafka server.properties`` JVM; ready on its ``Kafka Server started`` line."""

    def __init__(
        self,
        node_id: int,
        config: Path,
        host: str,
        port: int,
        heap: str,
        log: Path | None,
        lib: Path,
    ) -> None:
        self.node_id, self.config, self.host, self.port = node_id, config, host, port
        cmd = java_cmd("kafka.Kafka", str(config), heap=heap, daemon=True, lib=lib)
        marker = f"[KafkaRaftServer nodeId={node_id}] {READY}"
        super().__init__(f"kafka-{node_id}", cmd, ready=marker, log=log, grace=30.0)

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"


class KafkaCluster:
    """``nodes`` KRaft nodes (each broker and controller); see the module docstring.

    ``overrides``: broker settings added to every node's config (``{"auto.create.topics.enable":
    "false"}``); ``heap``: each JVM's ``-Xmx`` (the 2-core, 24 GiB machines: 512m is plenty);
    ``log``: a folder for ``kafka-<id>.log`` (default ``<base_dir>/logs``).
    """

    def __init__(
        self,
        nodes: int = 1,
        base_dir: Path | str | None = None,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        overrides: Mapping[str, object] | None = None,
        heap: str = "512m",
        log_dir: Path | str | None = None,
    ) -> None:
        if nodes < 1:
            raise ValueError("a cluster needs at least one node")
        self.size = nodes
        self.host = host
        self._tmp = base_dir is None
        self.base_dir = Path(base_dir) if base_dir is not None else Path(tempfile.mkdtemp(prefix="kafka-"))
        self.ports = [port + i for i in range(nodes)] if port else [free_port(host) for _ in range(nodes)]
        self.controller_ports = (
            [port + 10_000 + i for i in range(nodes)] if port else [free_port(host) for _ in range(nodes)]
        )
        self.overrides = {
            k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in (overrides or {}).items()
        }
        self.heap = heap
        self.log_dir = Path(log_dir) if log_dir is not None else self.base_dir / "logs"
        self.nodes: list[KafkaNode] = []
        self.version = KAFKA_VERSION
        self.timings: dict[str, float] = {}

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{self.host}:{p}" for p in self.ports)

    # -- preparing ---------------------------------------------------------------------------
    def config_text(self, node_id: int) -> str:
        i = node_id - 1
        voters = ",".join(f"{n + 1}@{self.host}:{p}" for n, p in enumerate(self.controller_ports))
        text = TEMPLATE.read_text().format(
            node_id=node_id,
            voters=voters,
            host=self.host,
            port=self.ports[i],
            controller_port=self.controller_ports[i],
            log_dir=self.base_dir / f"node-{node_id}" / "data",
            internal_rf=min(self.size, 3),
            internal_min_isr=min(self.size, 2),
        )
        if self.overrides:
            text += "\n# overrides\n" + "".join(f"{k}={v}\n" for k, v in self.overrides.items())
        return text

    def cluster_id(self) -> str:
        """The cluster's id, kept in ``<base_dir>/cluster.id`` (a restart reuses formatted dirs)."""
        path = self.base_dir / "cluster.id"
        if not path.is_file():
            path.write_text(new_cluster_id() + "\n")
        return path.read_text().strip()

    def prepare(self) -> list[KafkaNode]:
        """Resolve the jars, write each node's config, format the log dirs; the nodes, not started."""
        t0 = time.monotonic()
        lib = resolve()
        self.timings["resolve"] = time.monotonic() - t0
        self.base_dir.mkdir(parents=True, exist_ok=True)
        cid = self.cluster_id()
        configs, formats = [], []
        for n in range(1, self.size + 1):
            d = self.base_dir / f"node-{n}"
            d.mkdir(parents=True, exist_ok=True)
            cfg = d / "server.properties"
            cfg.write_text(self.config_text(n))
            configs.append(cfg)
            if not (d / "data" / "meta.properties").exists():
                cmd = java_cmd(
                    "kafka.tools.StorageTool",
                    "format",
                    "-t",
                    cid,
                    "-c",
                    str(cfg),
                    "--ignore-formatted",
                    lib=lib,
                )
                formats.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
        t1 = time.monotonic()
        for p in formats:
            out, _ = p.communicate(timeout=120)
            if p.returncode != 0:
                raise ProcessError(f"kafka-storage format failed ({p.returncode}):\n{out.decode()[-3000:]}")
        self.timings["format"] = time.monotonic() - t1
        self.nodes = [
            KafkaNode(
                n,
                configs[n - 1],
                self.host,
                self.ports[n - 1],
                self.heap,
                self.log_dir / f"kafka-{n}.log",
                lib,
            )
            for n in range(1, self.size + 1)
        ]
        return self.nodes

    # -- running -----------------------------------------------------------------------------
    def start(self, timeout: float = 120.0) -> str:
        """Prepare (when not done), launch every node, wait until all are up; the bootstrap."""
        if not self.nodes:
            self.prepare()
        t0 = time.monotonic()
        for node in self.nodes:
            node.launch()
        try:
            for node in self.nodes:
                node.wait_ready(max(1.0, timeout - (time.monotonic() - t0)))
            if self.size > 1:
                self.wait_registered(self.size, max(1.0, timeout - (time.monotonic() - t0)))
        except (ProcessError, TimeoutError):
            self.stop()
            raise
        self.timings["start"] = time.monotonic() - t0
        return self.bootstrap

    def live_brokers(self) -> list[int]:
        """Broker ids a Metadata request lists (through the store's small wire client)."""
        from framework.client.admin import live_broker_ids

        for node in self.nodes:
            if node.alive():
                ids = live_broker_ids(node.bootstrap)
                if ids is not None:
                    return ids
        return []

    def wait_registered(self, count: int, timeout: float = 60.0) -> None:
        wait_for(lambda: len(self.live_brokers()) >= count, timeout, 0.2, f"{count} registered Kafka brokers")

    def alive(self) -> bool:
        return bool(self.nodes) and all(n.alive() for n in self.nodes)

    def stop(self, grace: float = 30.0) -> None:
        """SIGTERM every node (Kafka's controlled shutdown), SIGKILL after ``grace``; a temporary
        ``base_dir`` is removed."""
        for node in self.nodes:
            node.signal(15)
        for node in self.nodes:
            node.stop(grace)
        if self._tmp:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def logs(self) -> str:
        return "\n\n".join(f"--- kafka node {n.node_id}\n{n.logs()}" for n in self.nodes)

    def describe(self) -> str:
        kind = "single node" if self.size == 1 else f"{self.size} nodes"
        return f"Apache Kafka {self.version} (KRaft, {kind})"

    def __enter__(self) -> KafkaCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
