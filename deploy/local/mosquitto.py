"""Run a Mosquitto broker with its own config on a chosen port (demo, tests, benchmarks).

:class:`MosquittoProcess` is a :class:`~deploy.local.process.ManagedProcess`: its own session,
SIGTERM then SIGKILL on stop, killed at exit if still running. Readiness is an event: Mosquitto
logs "mosquitto version ... running" once its listener is up. The config (:data:`CONF`) allows
anonymous clients on 127.0.0.1 only and lifts the in-flight and queue limits that would
otherwise throttle (20 in-flight) or drop (1000 queued) QoS 1 traffic to gateways.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from deploy.local.process import ManagedProcess, free_port

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


def _running(line: str) -> bool:
    return "mosquitto version" in line and " running" in line


class MosquittoProcess(ManagedProcess):
    """Mosquitto on 127.0.0.1 (a free port unless given), config and persistence in ``workdir``.

    ``log``: also append its output to that file (``sftraffic up`` keeps one per part).
    """

    def __init__(
        self,
        workdir: Path | str,
        port: int | None = None,
        persistence: bool = False,
        log: Path | str | None = None,
    ) -> None:
        self.dir = Path(workdir)
        self.port = port or free_port()
        self.persistence = persistence
        self.conf = self.dir / "mosquitto.conf"
        cmd = ["mosquitto", "-c", str(self.conf)]  # the binary is looked up at launch
        super().__init__("mosquitto", cmd, ready=_running, log=log, grace=10.0)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def launch(self) -> MosquittoProcess:
        """Write the config, then start Mosquitto (see :meth:`ManagedProcess.launch`)."""
        self.cmd = [find_mosquitto(), "-c", str(self.conf)]
        self.dir.mkdir(parents=True, exist_ok=True)
        self.conf.write_text(
            CONF.format(port=self.port, persistence="true" if self.persistence else "false", data=self.dir)
        )
        super().launch()
        return self

    def start(self, timeout: float = 15.0) -> MosquittoProcess:
        self.launch().wait_ready(timeout)
        return self

    def __enter__(self) -> MosquittoProcess:
        return self.start()
