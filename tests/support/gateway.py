"""The gateway for tests: ``sftraffic gateway`` as a process (:class:`GatewayProc`), and a valid
event of each kind the devices send (:func:`event`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from testing import ManagedProcess, sftraffic


class GatewayProc(ManagedProcess):
    """``sftraffic gateway``; its output appended to ``<workdir>/<gid>.log`` (a restart appends)."""

    def __init__(
        self,
        bootstrap: str,
        mqtt: str,
        workdir: Path,
        gid: str = "gw-test",
        version: str = "3.1.1",
        extra: tuple[str, ...] = (),
    ) -> None:
        cmd = sftraffic("gateway", "-b", bootstrap, "--mqtt", mqtt, "--id", gid)
        cmd += ["--queue-dir", str(workdir / "queue"), "--mqtt-version", version, *extra]
        super().__init__(gid, cmd, ready="ready", log=workdir / f"{gid}.log", grace=30.0)

    def start(self, timeout: float = 30.0) -> GatewayProc:
        super().start(timeout)
        return self

    def text(self) -> str:
        assert self.log is not None
        if self.proc is not None and not self.alive():
            self.stop()  # reaped: everything it wrote is in the log
        return self.log.read_text()


def event(kind: str, sensor: str, seq: int, t: int) -> dict[str, Any]:
    if kind == "traffic":
        return {
            "type": "traffic",
            "sensor_id": sensor,
            "seq": seq,
            "event_time": t,
            "segment_id": "market-st-00",
            "speed_kmh": 31.5,
            "vehicle_class": "car",
            "lat": 37.79,
            "lon": -122.39,
        }
    if kind == "weather":
        return {
            "type": "weather",
            "sensor_id": sensor,
            "seq": seq,
            "event_time": t,
            "station": sensor,
            "precipitation_mm_h": 0.0,
            "visibility_m": 9000,
            "condition": "clear",
        }
    return {
        "type": "infrastructure",
        "sensor_id": sensor,
        "seq": seq,
        "event_time": t,
        "kind": "parking",
        "asset": sensor,
    }
