"""Run a Mosquitto broker with its own config on a chosen port (demo, tests, benchmarks).

Readiness is an event: Mosquitto logs "mosquitto version ... running" once its listener is up.
The config allows anonymous clients on 127.0.0.1 only, lifts the in-flight and queue limits
that would otherwise throttle (20 in-flight) or drop (1000 queued) QoS 1 traffic to gateways.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
from collections import deque
from pathlib import Path

from deploy.local.process import free_port

CONF = """\
listener {port} 127.0.0.1
allow_anonymous true
persistence {persistence}
persistence_location {data}/
max_inflight_messages 0
max_queued_messages 1000000
max_queued_bytes 0
persistent_client_expiration 1d
set_tcp_nodelay true
log_dest stderr
log_type error
log_type warning
log_type notice
log_type information
connection_messages false
"""


def find_mosquitto() -> str:
    for cand in (shutil.which("mosquitto"), "/usr/sbin/mosquitto", "/usr/local/sbin/mosquitto"):
        if cand and Path(cand).exists():
            return cand
    raise FileNotFoundError(
        "mosquitto is not installed: run ./run demo (installs it) or apt-get install mosquitto"
    )


class MosquittoProcess:
    def __init__(self, workdir: Path | str, port: int | None = None, persistence: bool = False) -> None:
        self.dir = Path(workdir)
        self.port = port or free_port()
        self.persistence = persistence
        self.proc: subprocess.Popen[bytes] | None = None
        self.lines: deque[str] = deque(maxlen=500)
        self._ready = threading.Event()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 15.0) -> MosquittoProcess:
        self.dir.mkdir(parents=True, exist_ok=True)
        conf = self.dir / "mosquitto.conf"
        conf.write_text(
            CONF.format(port=self.port, persistence="true" if self.persistence else "false", data=self.dir)
        )
        self._ready.clear()
        self.proc = subprocess.Popen(
            [find_mosquitto(), "-c", str(conf)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        threading.Thread(target=self._read, daemon=True).start()
        if not self._ready.wait(timeout) or self.proc.poll() is not None:
            self.stop()
            raise RuntimeError("mosquitto did not start:\n" + "\n".join(self.lines))
        return self

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", "replace").rstrip()
            self.lines.append(line)
            if " running" in line and "mosquitto version" in line:
                self._ready.set()
        self._ready.set()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> MosquittoProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
