"""``sftraffic up`` for the whole-system tests: its command line on free ports (:func:`up_cmd`,
:func:`free_block` for a cluster's ports), started and stopped with Ctrl-C, checking that nothing
it started is left (:func:`stop_and_check_nothing_left`), and one MQTT reading traced to the
dashboard (:func:`trace_mqtt_reading`)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from sensors import layout
from testing import ManagedProcess, free_port, sftraffic, wait_for


def get_json(url: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=3) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, None
    except (urllib.error.URLError, OSError):
        return 0, None


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead for our purpose
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except FileNotFoundError:
        return False


def trace_mqtt_reading(mqtt_port: int, dash: str, timeout: float = 60) -> None:
    """Publish one reading from a device that exists only for this call; wait to see it shown."""
    import paho.mqtt.client as mqtt

    sensor = f"probe-{uuid.uuid4().hex[:8]}"
    speed = 12.345
    ev = {
        "type": "traffic",
        "sensor_id": sensor,
        "seq": 0,
        "event_time": int(time.time() * 1000),
        "segment_id": "market-st-03",
        "speed_kmh": speed,
        "vehicle_class": "bus",
        "lat": 37.78,
        "lon": -122.41,
    }
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=sensor, protocol=mqtt.MQTTv5)
    c.connect("127.0.0.1", mqtt_port)
    c.loop_start()
    c.publish(f"sf/{layout.STREAM}/traffic/{sensor}", json.dumps(ev), qos=1).wait_for_publish(10)
    c.loop_stop()
    c.disconnect()
    wait_for(
        lambda: get_json(f"{dash}/api/sensor/{sensor}")[0] == 200,
        timeout=timeout,
        interval=0.3,
        what=f"the MQTT reading of {sensor} on the dashboard",
    )
    _status, shown = get_json(f"{dash}/api/sensor/{sensor}")
    assert shown["speed_kmh"] == speed and shown["vehicle_class"] == "bus"


def start_up(cmd: list[str], log: Path) -> ManagedProcess:
    """``sftraffic up`` as a managed process, its output in ``log`` (readiness: see the tests)."""
    return ManagedProcess("up", cmd, log=log, grace=60.0).launch()


def stop_and_check_nothing_left(proc: ManagedProcess, log: Path, pids: dict[str, int], data: Path) -> None:
    proc.signal(signal.SIGINT)  # Ctrl-C: to up's process group, as a terminal sends it
    assert proc.proc is not None
    try:
        proc.proc.wait(120)
    finally:
        rc = proc.stop()  # reaped (SIGTERM, then SIGKILL, if Ctrl-C did not stop it); its output is in
    assert rc == 0, log.read_text()[-3000:]
    assert "all parts stopped" in log.read_text()
    left = {name: pid for name, pid in pids.items() if alive(pid)}
    assert not left, f"still running after Ctrl-C: {left}"
    orphans = subprocess.run(
        ["pgrep", "-f", str(data)], check=False, capture_output=True, text=True
    ).stdout.split()
    assert not orphans, f"processes still using the demo's data dir: {orphans}"


def up_cmd(tmp_path: Path, store_port: int, ports: dict[str, int], *extra: str) -> list[str]:
    """``sftraffic up`` on free ports with a small fleet (300 direct sensors, 30 MQTT devices),
    going live at once (the backfill has its own test: tests/system/test_up_backfill.py)."""
    cmd = sftraffic("up", "--data-dir", str(tmp_path / "up"))
    cmd += ["--port", str(store_port), "--metrics-port", str(ports["metrics"])]
    cmd += ["--mqtt-port", str(ports["mqtt"]), "--dashboard-port", str(ports["dash"])]
    return [*cmd, "--sensors", "300", "--mqtt-devices", "30", "--backfill", "0", *extra]


def free_block(n: int, raft_offset: int = 10_000) -> int:
    """A base port with base..base+n-1 and the same + raft_offset free (up --cluster's layout),
    all below the kernel's ephemeral range: ports found free there stay free until ``up`` binds
    them, as no outgoing connection of another test is given one (a Raft port inside the range
    was once taken by one between this check and the broker's bind)."""
    import random
    import socket

    low = 32768
    with contextlib.suppress(OSError, ValueError, IndexError):
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    top = low - raft_offset - n
    for _ in range(200):
        base = random.randrange(10_000, top) if top > 10_000 else free_port()
        socks = []
        try:
            for port in sorted({*range(base, base + n), *range(base + raft_offset, base + raft_offset + n)}):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free block of ports")
