"""Start a broker as a child process and know when it is ready (tests, benchmarks, ``up``).

Readiness is an event, not a sleep: the broker logs "listening on HOST:PORT" once its socket
accepts connections; the launcher waits for that line on the child's stderr.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class BrokerProcess:
    def __init__(
        self,
        data_dir: Path | str,
        port: int | None = None,
        node_id: int = 1,
        overrides: dict[str, object] | None = None,
        host: str = "127.0.0.1",
        extra_args: list[str] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.host = host
        self.port = port or free_port(host)
        self.node_id = node_id
        self.overrides = dict(overrides or {})
        self.extra_args = list(extra_args or [])
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_lines: deque[str] = deque(maxlen=2000)
        self._ready = threading.Event()
        self._reader: threading.Thread | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def command(self) -> list[str]:
        cmd = [
            sys.executable,
            "-m",
            "framework.cli.main",
            "broker",
            "--node-id",
            str(self.node_id),
            "--listen",
            self.bootstrap,
            "--data-dir",
            str(self.data_dir),
        ]
        for k, v in self.overrides.items():
            cmd += ["-o", f"{k}={v}"]
        return cmd + self.extra_args

    def start(self, timeout: float = 30.0) -> BrokerProcess:
        self._ready.clear()
        env = dict(os.environ)
        if self.env:
            env.update(self.env)
        self.proc = subprocess.Popen(
            self.command(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env
        )
        self._reader = threading.Thread(target=self._read, args=(self.proc,), daemon=True)
        self._reader.start()
        if not self._ready.wait(timeout):
            self.kill()
            raise RuntimeError(f"broker did not start in {timeout}s:\n" + "\n".join(self.log_lines))
        if self.proc.poll() is not None:
            raise RuntimeError("broker exited at start:\n" + "\n".join(self.log_lines))
        return self

    def _read(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip()
            self.log_lines.append(line)
            if " listening on " in line:
                self._ready.set()
        self._ready.set()  # exited: wake the waiter

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait for a clean exit; returns the exit code."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()
        finally:
            if self._reader is not None:
                self._reader.join(5)

    def kill(self) -> None:
        """SIGKILL: no shutdown hooks run (crash simulation)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self._reader is not None:
            self._reader.join(5)

    def restart(self, timeout: float = 30.0) -> BrokerProcess:
        self.stop()
        return self.start(timeout)

    def logs(self) -> str:
        return "\n".join(self.log_lines)

    def cpu_seconds(self) -> float:
        """user+system CPU time of the broker process so far (from /proc)."""
        with open(f"/proc/{self.pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        tick = os.sysconf("SC_CLK_TCK")
        return (int(fields[11]) + int(fields[12])) / tick

    def rss_bytes(self) -> int:
        with open(f"/proc/{self.pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0

    def __enter__(self) -> BrokerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def wait_for(
    predicate: object, timeout: float = 30.0, interval: float = 0.05, what: str = "condition"
) -> None:
    """Poll ``predicate`` until true (for states only observable by asking, e.g. a client)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what}")


class ClusterProcesses:
    """N brokers forming one cluster on free 127.0.0.1 ports (tests, ``sftraffic up --cluster``).

    Each broker gets a Kafka listener and a controller (Raft) endpoint; ``start`` returns once
    every broker is listening and all of them are registered with the controller.
    """

    def __init__(
        self,
        base_dir: Path | str,
        size: int = 3,
        overrides: dict[str, object] | None = None,
        host: str = "127.0.0.1",
        ports: list[int] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.base_dir = Path(base_dir)
        self.size = size
        kafka_ports = ports or [free_port(host) for _ in range(size)]
        raft_ports = [free_port(host) for _ in range(size)]
        voters = ",".join(f"{i + 1}@{host}:{raft_ports[i]}" for i in range(size))
        self.brokers = [
            BrokerProcess(
                self.base_dir / f"broker-{i + 1}",
                port=kafka_ports[i],
                node_id=i + 1,
                overrides={**(overrides or {}), "controller.quorum.voters": voters},
                host=host,
                env=env,
            )
            for i in range(size)
        ]

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    def start(self, timeout: float = 60.0) -> ClusterProcesses:
        procs = []
        for b in self.brokers:
            t = threading.Thread(target=b.start, args=(timeout,), daemon=True)
            t.start()
            procs.append(t)
        for t in procs:
            t.join(timeout)
        for b in self.brokers:
            if b.proc is None or b.proc.poll() is not None:
                raise RuntimeError(f"broker {b.node_id} did not start:\n" + b.logs())
        self.wait_registered(self.size, timeout)
        return self

    def live_brokers(self) -> list[int]:
        """Broker ids the cluster's Metadata lists (asking any broker that answers)."""
        from framework.client.wire import WireClient
        from framework.errors import StoreError
        from framework.protocol.messages.metadata import MetadataRequest, MetadataResponse

        for b in self.brokers:
            if b.proc is None or b.proc.poll() is not None:
                continue
            try:
                with WireClient(b.bootstrap, timeout=3) as c:
                    md = c.send(MetadataRequest(topics=[]), MetadataResponse)
                return sorted(x.node_id for x in md.brokers)
            except (OSError, StoreError):
                continue  # this one is down or starting: ask the next
        return []

    def wait_registered(self, count: int, timeout: float = 60.0) -> None:
        wait_for(lambda: len(self.live_brokers()) >= count, timeout, 0.2, f"{count} registered brokers")

    def stop(self) -> None:
        for b in self.brokers:
            b.stop()

    def logs(self) -> str:
        return "\n\n".join(f"--- broker {b.node_id}\n{b.logs()}" for b in self.brokers)

    def __enter__(self) -> ClusterProcesses:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
