"""The parts of the system a benchmark or load test starts, each a
:class:`deploy.local.process.ManagedProcess` (own process group, ready line, stopped by pid):
the MQTT gateway, the dashboard, the sensor fleet. The broker is
:class:`testing.BrokerProcess`, Mosquitto
:class:`deploy.local.mosquitto.MosquittoProcess`; peers are in :mod:`load.peers`.
"""

from __future__ import annotations

from pathlib import Path

from testing import BrokerProcess, ManagedProcess, sftraffic

# Python children print their ready lines to a pipe: unbuffered, so that they arrive at once.
UNBUFFERED = {"PYTHONUNBUFFERED": "1"}


def broker(workdir: Path, **overrides: object) -> BrokerProcess:
    """A fresh broker of ours, data in ``workdir``/broker (retention checks once a minute)."""
    return BrokerProcess(
        workdir / "broker", overrides={"log.retention.check.interval.ms": 60_000, **overrides}
    )


def gateway(
    bootstrap: str, mqtt: str, workdir: Path, gateway_id: str = "gw-bench", quiet: bool = False
) -> ManagedProcess:
    """``sftraffic gateway`` (the console command, as in production), queue in ``workdir``;
    ``quiet``: no line per batch."""
    cmd = sftraffic("gateway", "-b", bootstrap, "--mqtt", mqtt, "--id", gateway_id)
    cmd += ["--queue-dir", str(workdir / "queue"), *(["--quiet"] if quiet else [])]
    return ManagedProcess(gateway_id, cmd, ready=f"gateway {gateway_id} ready", env=UNBUFFERED, grace=30.0)


def dashboard(bootstrap: str, port: int, *extra: str) -> ManagedProcess:
    cmd = sftraffic("dashboard", "-b", bootstrap, "--host", "127.0.0.1", "--port", str(port), *extra)
    return ManagedProcess("dashboard", cmd, ready="dashboard on", env=UNBUFFERED)


def fleet(bootstrap: str, *args: str, name: str = "fleet") -> ManagedProcess:
    """``sftraffic sensors --via kafka ...``; ready at once (it has no ready line)."""
    return ManagedProcess(
        name, sftraffic("sensors", "-b", bootstrap, "--via", "kafka", *args), env=UNBUFFERED
    )
