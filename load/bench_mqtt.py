"""The MQTT edge path of ``sftraffic bench``: Mosquitto alone vs devices → Mosquitto → gateway → store.

Both runs publish the same messages with the same publisher: one paho-mqtt 2.x client (MQTT 5,
as the simulated devices of :mod:`sensors.publish`) in this process, QoS 1, at most
``window`` (1,000) publishes handed to paho and not yet acknowledged (paho 2.2 stalls when it
is handed hundreds of thousands at once). The messages are realistic sensor events from the
fleet simulation (:class:`sensors.fleet.SensorFleet`, ~310-byte JSON) on their device topics
``sf/<stream>/<topic>/<sensor-id>``.

* **Mosquitto QoS 1 publish**: a Mosquitto with no subscriber; timed from the first publish to
  the last PUBACK. This is the rate at which one device connection can hand messages to the
  MQTT broker, the ceiling of the edge path.
* **Gateway path**: a second Mosquitto with one ``sftraffic gateway`` process subscribed to it
  (shared subscription, persistent session), forwarding to our broker with an idempotent
  producer and acknowledging each MQTT message only once the store has it. Timed from the first
  publish until every message is in the store: the sum of the log end offsets of the stream's
  topics, polled with ``AdminClient.list_offsets`` after the last PUBACK. Invalid events
  (dead letters) are counted as errors.

Also reported: gateway CPU (µs/msg and cores while forwarding, from /proc/PID/stat), the
broker's and Mosquitto's CPU per message, and the ratio gateway path / Mosquitto (goal >= 1.0:
the gateway keeps up with what Mosquitto accepts from a device). Repetitions alternate between
the two runs, so background load on a shared machine hits both alike.
"""

from __future__ import annotations

import contextlib
import importlib.util
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from load.bench_broker import (
    BUSY_SHARE,
    IDLE_WINDOW_S,
    MB,
    SETTLE_S,
    Interference,
    _log,
    _own_cpu,
    _settled_cpu,
)
from load.peers import LOOPBACK, OursLauncher, RunningBroker, proc_cpu_seconds, quiet_logger


@dataclass
class MqttConfig:
    count: int = 100_000  # messages per run
    reps: int = 3
    window: int = 1000  # publishes handed to paho and not yet acknowledged
    sensors: int = 2000  # size of the simulated fleet the events come from
    partitions: int = 6  # of each topic of the bench stream
    store_timeout_s: float = 120.0  # after the last PUBACK, for the gateway path to store the rest
    idle_window_s: float = IDLE_WINDOW_S
    quick: bool = False
    gateway_client: str = "gmqtt"  # sftraffic gateway --mqtt-client: gmqtt (asyncio) or paho


@dataclass
class PublishRun:
    """One QoS 1 publish run: first publish() to the last PUBACK."""

    messages: int
    acked: int
    failed: int  # PUBACKs with a failure reason code, or never acknowledged
    seconds: float
    msgs_s: float
    mb_s: float  # payload bytes, 10^6 bytes
    client_cpu_s: float
    detail: str = ""


@dataclass
class EdgeRun:
    """One repetition of either system; ``msgs_s`` is the figure that is compared."""

    system: str  # "mosquitto" or "gateway"
    rep: int
    messages: int
    msgs_s: float | None
    seconds: float | None
    publish: dict[str, Any]
    errors: int = 0
    detail: str = ""
    mosquitto_cpu_us_per_msg: float | None = None
    gateway_cpu_s: float | None = None
    gateway_cpu_us_per_msg: float | None = None
    gateway_cores: float | None = None  # gateway CPU seconds per second of the run
    broker_cpu_us_per_msg: float | None = None
    store_after_puback_s: float | None = None  # last PUBACK to the last message in the store
    dead_letters: int = 0
    other_cpu_share: float | None = None


@dataclass
class MqttReport:
    available: bool = True
    reason: str = ""
    versions: dict[str, str | None] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    payload_bytes_avg: float | None = None
    figures: dict[str, float | None] = field(default_factory=dict)
    runs: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    gateway_errors: list[str] = field(default_factory=list)  # failures of our gateway path
    notes: list[str] = field(default_factory=list)
    drain: dict[str, Any] = field(default_factory=dict)  # gateway_drain_run


# -- availability -------------------------------------------------------------------------------
def unavailable() -> str | None:
    """None when Mosquitto and paho-mqtt are here, else why not."""
    from sensors.mosquitto import find_mosquitto

    try:
        find_mosquitto()
    except FileNotFoundError as exc:
        return str(exc)
    if importlib.util.find_spec("paho") is None or importlib.util.find_spec("paho.mqtt") is None:
        return "Python package paho-mqtt is not installed (pip install 'sftraffic[app]')"
    if importlib.util.find_spec("gmqtt") is None:
        return "Python package gmqtt is not installed (pip install 'sftraffic[app]')"
    return None


def mosquitto_version() -> str | None:
    from sensors.mosquitto import find_mosquitto

    try:
        out = subprocess.run(
            [find_mosquitto(), "-h"], check=False, capture_output=True, text=True, timeout=10
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return out.splitlines()[0].strip() if out else None


# -- messages -------------------------------------------------------------------------------
def build_messages(count: int, stream: str, sensors: int) -> list[tuple[str, bytes]]:
    """``count`` events of a ``sensors``-sensor fleet from now on, as (device topic, JSON payload)."""
    from sensors import schema
    from sensors.fleet import SensorFleet

    fleet = SensorFleet(sensors, stream=stream)
    t = int(time.time() * 1000) // 60_000 * 60_000  # a whole minute: weather stations report too
    out: list[tuple[str, bytes]] = []
    while len(out) < count:
        for topic, key, event, _ts in fleet.tick(t):
            name = topic.split(".", 1)[1]
            out.append((f"sf/{stream}/{name}/{key}", schema.encode(event)))
        t += 1000
    return out[:count]


# -- publisher ------------------------------------------------------------------------------
@dataclass
class _PubState:
    """Written by paho's network thread, read by the publishing thread once ``done`` is set."""

    acked: int = 0
    failed: int = 0
    t_last: float = 0.0
    detail: str = ""


def publish_qos1(
    port: int, messages: list[tuple[str, bytes]], window: int, timeout: float, client_id: str
) -> PublishRun:
    """Publish every message at QoS 1 from one paho client; timed until the last PUBACK."""
    import paho.mqtt.client as mqtt

    n = len(messages)
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, protocol=mqtt.MQTTv5)
    client.max_inflight_messages_set(window)
    client.max_queued_messages_set(0)
    slots = threading.Semaphore(window)
    connected, done = threading.Event(), threading.Event()
    state = _PubState()

    def on_connect(c: Any, userdata: Any, flags: Any, reason: Any, props: Any = None) -> None:
        if getattr(reason, "is_failure", False):
            state.detail = f"connect refused: {reason}"
        connected.set()

    def on_publish(c: Any, userdata: Any, mid: int, reason: Any = None, props: Any = None) -> None:
        slots.release()
        # "No matching subscribers" (16) is a success code; failures are >= 0x80.
        if getattr(reason, "is_failure", False):
            state.failed += 1
            state.detail = state.detail or f"PUBACK {reason}"
        else:
            state.acked += 1
        if state.acked + state.failed >= n:
            state.t_last = time.perf_counter()
            done.set()

    client.on_connect = on_connect
    client.on_publish = on_publish
    client.connect(LOOPBACK, port, keepalive=60)
    client.loop_start()
    try:
        if not connected.wait(10) or state.detail:
            raise RuntimeError(f"publisher could not connect to 127.0.0.1:{port} {state.detail}")
        publish, acquire = client.publish, slots.acquire
        own0 = _own_cpu()
        t0 = time.perf_counter()
        deadline = time.monotonic() + timeout
        sent = 0
        for topic, payload in messages:
            if not acquire(timeout=max(0.0, deadline - time.monotonic())):
                break
            publish(topic, payload, qos=1)
            sent += 1
        finished = done.wait(max(0.0, deadline - time.monotonic()))
        t_end = state.t_last if finished else time.perf_counter()
        client_cpu = _own_cpu() - own0
    finally:
        # disconnect() first: it wakes paho's network thread, which loop_stop() would otherwise wait
        # for until its select() times out (up to a second, added to the gateway path's timing).
        client.disconnect()
        client.loop_stop()
    acked, failed, detail = state.acked, state.failed, state.detail
    if not finished:
        detail = detail or f"only {acked + failed}/{n} PUBACKs after {timeout:g} s ({sent} published)"
        failed = n - acked
    seconds = t_end - t0
    size = sum(len(p) for _, p in messages)
    return PublishRun(
        messages=n,
        acked=acked,
        failed=failed,
        seconds=seconds,
        msgs_s=acked / seconds if seconds > 0 else 0.0,
        mb_s=size * acked / n / seconds / MB if seconds > 0 and n else 0.0,
        client_cpu_s=client_cpu,
        detail=detail,
    )


# -- the store side -----------------------------------------------------------------------------
class StoreCounter:
    """Messages in the bench stream's topics: the sum of their log end offsets (one request)."""

    def __init__(self, bootstrap: str, stream: str, partitions: int) -> None:
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import AdminClient, OffsetSpec

        from sensors.layout import TOPICS

        self.admin = AdminClient({"bootstrap.servers": bootstrap, "logger": quiet_logger()})
        self.data = {
            TopicPartition(f"{stream}.{t}", p): OffsetSpec.latest()
            for t in TOPICS
            if t != "dead_letter"
            for p in range(partitions)
        }
        self.dead = {
            TopicPartition(f"{stream}.dead_letter", p): OffsetSpec.latest() for p in range(partitions)
        }

    def _sum(self, specs: dict[Any, Any]) -> int:
        futures = self.admin.list_offsets(specs, request_timeout=10)
        return sum(int(f.result(timeout=15).offset) for f in futures.values())

    def stored(self) -> int:
        return self._sum(self.data)

    def dead_letters(self) -> int:
        return self._sum(self.dead)

    def wait_for(self, target: int, timeout: float, interval: float = 0.01) -> tuple[int, float]:
        """Poll until ``target`` messages are stored; (count, perf_counter when seen)."""
        deadline = time.monotonic() + timeout
        while True:
            n = self.stored()
            now = time.perf_counter()
            if n >= target or time.monotonic() > deadline:
                return n, now
            time.sleep(interval)


class GatewayProcess:
    """One ``sftraffic gateway`` child process (the console script, as in production)."""

    def __init__(
        self, bootstrap: str, mqtt: str, workdir: Path, gateway_id: str = "gw-bench", client: str = "gmqtt"
    ) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.args = [
            sys.executable,
            "-m",
            "framework.cli.main",
            "gateway",
            "--bootstrap",
            bootstrap,
            "--mqtt",
            mqtt,
            "--id",
            gateway_id,
            "--queue-dir",
            str(workdir / "queue"),
            "--mqtt-client",
            client,
            "--quiet",
        ]
        self.log = workdir / f"{gateway_id}.log"
        self._log_from = 0
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""

    def start(self, timeout: float = 60.0, wait_ready: bool = True) -> GatewayProcess:
        with open(self.log, "ab") as fh:
            self._log_from = fh.tell()  # a restarted gateway appends: look for *its* "ready"
            self.proc = subprocess.Popen(
                self.args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=fh
            )
        deadline = time.monotonic() + timeout
        while wait_ready and "ready" not in self.text()[self._log_from :]:
            if not self.alive():
                raise RuntimeError(f"gateway exited at start:\n{self.tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"gateway not ready after {timeout:g}s:\n{self.tail()}")
            time.sleep(0.05)
        return self

    def tail(self, lines: int = 20) -> str:
        return "\n".join(self.text().splitlines()[-lines:])

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _cpu_of(pid: int | None) -> float | None:
    if pid is None:
        return None
    try:
        return proc_cpu_seconds(pid)
    except OSError:
        return None


def _us_per_msg(c0: float | None, c1: float | None, n: int) -> float | None:
    return (c1 - c0) / n * 1e6 if c0 is not None and c1 is not None and n > 0 else None


class _Probe(RunningBroker):
    """CPU of one process, for :class:`load.bench_broker.Interference`."""

    def __init__(self, pid: int | None) -> None:
        self._pid = pid
        self.bootstrap = ""

    @property
    def pid(self) -> int | None:
        return self._pid

    def stop(self) -> None:
        pass


# -- the two runs -------------------------------------------------------------------------------
def mosquitto_run(
    rep: int, port: int, mosquitto_pid: int | None, messages: list[tuple[str, bytes]], cfg: MqttConfig
) -> EdgeRun:
    load = Interference([_Probe(mosquitto_pid)])
    c0 = _cpu_of(mosquitto_pid)
    pub = publish_qos1(port, messages, cfg.window, max(60.0, len(messages) / 500), f"bench-pub-a{rep}")
    _, c1 = _settled_cpu(lambda: _cpu_of(mosquitto_pid), SETTLE_S, cfg.idle_window_s)
    return EdgeRun(
        system="mosquitto",
        rep=rep,
        messages=pub.messages,
        msgs_s=pub.msgs_s if not pub.failed else None,
        seconds=pub.seconds,
        publish=asdict(pub),
        errors=pub.failed,
        detail=pub.detail,
        mosquitto_cpu_us_per_msg=_us_per_msg(c0, c1, pub.acked),
        other_cpu_share=load.share(),
    )


def gateway_run(
    rep: int,
    port: int,
    mosquitto_pid: int | None,
    gateway: GatewayProcess,
    broker: RunningBroker,
    counter: StoreCounter,
    messages: list[tuple[str, bytes]],
    cfg: MqttConfig,
) -> EdgeRun:
    n = len(messages)
    base, dead0 = counter.stored(), counter.dead_letters()
    procs = [_Probe(mosquitto_pid), _Probe(gateway.pid), broker]
    load = Interference(procs)
    pids = [mosquitto_pid, gateway.pid, broker.pid]
    c0 = [_cpu_of(p) for p in pids]
    t0 = time.perf_counter()
    pub = publish_qos1(port, messages, cfg.window, max(60.0, n / 500), f"bench-pub-b{rep}")
    t_puback = t0 + pub.seconds
    stored, t_stored = counter.wait_for(base + pub.acked, cfg.store_timeout_s)
    seconds = t_stored - t0
    gw_run_cpu = _cpu_of(gateway.pid)
    # What the processes still do after the last message is stored (MQTT acks, flushes) counts too.
    c1 = [_settled_cpu(lambda p=p: _cpu_of(p), SETTLE_S, cfg.idle_window_s)[1] for p in pids]
    dead = counter.dead_letters() - dead0
    missing = base + n - stored
    errors = max(0, missing) + dead + pub.failed
    detail = pub.detail
    if missing > 0:
        detail = (
            detail or f"{missing}/{n} messages not stored {cfg.store_timeout_s:g} s after the last PUBACK"
        )
    if dead:
        detail = detail or f"{dead} messages went to the dead-letter topic"
    if not gateway.alive():
        errors = max(errors, 1)
        detail = f"gateway exited: {gateway.tail()}"
    gw_cpu = c1[1] - c0[1] if c1[1] is not None and c0[1] is not None else None
    gw_cores = gw_run_cpu - c0[1] if gw_run_cpu is not None and c0[1] is not None else None
    return EdgeRun(
        system="gateway",
        rep=rep,
        messages=n,
        msgs_s=n / seconds if errors == 0 and seconds > 0 else None,
        seconds=seconds,
        publish=asdict(pub),
        errors=errors,
        detail=detail,
        mosquitto_cpu_us_per_msg=_us_per_msg(c0[0], c1[0], n),
        gateway_cpu_s=gw_cpu,
        gateway_cpu_us_per_msg=_us_per_msg(c0[1], c1[1], n),
        gateway_cores=gw_cores / seconds if gw_cores is not None and seconds > 0 else None,
        broker_cpu_us_per_msg=_us_per_msg(c0[2], c1[2], n),
        store_after_puback_s=t_stored - t_puback,
        dead_letters=dead,
        other_cpu_share=load.share(),
    )


def gateway_drain_run(
    port: int,
    mqtt: str,
    broker: RunningBroker,
    counter: StoreCounter,
    messages: list[tuple[str, bytes]],
    workdir: Path,
    cfg: MqttConfig,
    mosquitto_pid: int | None = None,
) -> dict[str, Any]:
    """How fast one gateway forwards when devices are not the limit (issue 7: ≥ 30k msgs/s).

    A gateway subscribes (persistent session) and is SIGKILLed; the messages are then published
    QoS 1 and queue in Mosquitto for its session; a new gateway process with the same id
    connects and drains the backlog. Rate = messages stored after the first one appeared /
    time from that first one to the last (process start-up excluded). Run on a Mosquitto of its
    own: with another gateway of the share group subscribed, Mosquitto would hand that one half
    of the messages live, and the "first stored" would not be the draining gateway's."""
    gw = GatewayProcess(
        broker.bootstrap, mqtt, workdir / "drain", gateway_id="gw-drain", client=cfg.gateway_client
    ).start()
    warm_up_gateway(port, counter, messages[:1], cfg)
    assert gw.proc is not None
    gw.proc.kill()  # no UNSUBSCRIBE: Mosquitto queues for the session
    gw.proc.wait()
    base = counter.stored()
    pub = publish_qos1(port, messages, cfg.window, max(60.0, len(messages) / 500), "bench-pub-drain")
    # Not waiting for "ready": Mosquitto sends the session's backlog right after CONNACK, before the
    # SUBACK the gateway waits for, so it can be drained by then.
    gw = GatewayProcess(
        broker.bootstrap, mqtt, workdir / "drain", gateway_id="gw-drain", client=cfg.gateway_client
    )
    gw.start(wait_ready=False)
    pids = [gw.pid, mosquitto_pid, broker.pid]
    try:
        first, t_first = counter.wait_for(base + 1, 60, interval=0.002)
        c0 = [_cpu_of(p) for p in pids]
        stored, t_last = counter.wait_for(base + pub.acked, cfg.store_timeout_s, interval=0.01)
        c1 = [_cpu_of(p) for p in pids]
    finally:
        gw.stop()
    n = stored - first
    seconds = t_last - t_first
    return {
        "messages": pub.acked,
        "stored": stored - base,
        "msgs_s": n / seconds if seconds > 0 and stored >= base + pub.acked else None,
        "seconds": seconds,
        "gateway_cpu_us_per_msg": _us_per_msg(c0[0], c1[0], n),
        "mosquitto_cpu_us_per_msg": _us_per_msg(c0[1], c1[1], n),
        "broker_cpu_us_per_msg": _us_per_msg(c0[2], c1[2], n),
        "publish_msgs_s": pub.msgs_s,
    }


def warm_up_gateway(port: int, counter: StoreCounter, warm: list[tuple[str, bytes]], cfg: MqttConfig) -> None:
    """Before timing: the gateway's subscription is live (it subscribes after "ready"; a message
    published before that is dropped by Mosquitto), and every topic's metadata is known."""
    deadline = time.monotonic() + 60
    base = counter.stored()
    while True:
        publish_qos1(port, warm[:1], cfg.window, 10, "bench-probe")
        got, _ = counter.wait_for(base + 1, 1.0, interval=0.05)
        if got > base:
            break
        if time.monotonic() > deadline:
            raise RuntimeError("warm-up: no message reached the store in 60 s")
    base = counter.stored()
    publish_qos1(port, warm, cfg.window, 60, "bench-warm")
    got, _ = counter.wait_for(base + len(warm), 60, interval=0.05)
    if got < base + len(warm):
        raise RuntimeError(f"warm-up: {got - base}/{len(warm)} messages reached the store in 60 s")


def _median(values: list[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def _describe(run: EdgeRun) -> str:
    if run.msgs_s is None:
        return f"{run.system} [red]failed: {escape(run.detail)}[/red]"
    text = f"{run.system} {run.msgs_s:,.0f} msgs/s"
    if run.system == "gateway":
        pub = run.publish["msgs_s"]
        gw = run.gateway_cpu_us_per_msg
        text += f" (PUBACKs at {pub:,.0f} msgs/s, stored {run.store_after_puback_s:.2f} s after the last"
        text += f"; gateway {gw:.1f} µs/msg)" if gw is not None else ")"
    elif run.mosquitto_cpu_us_per_msg is not None:
        text += f" (mosquitto {run.mosquitto_cpu_us_per_msg:.1f} µs/msg)"
    if run.other_cpu_share is not None and run.other_cpu_share > BUSY_SHARE:
        text += f" [yellow](other processes used {run.other_cpu_share:.0%} of the CPU)[/yellow]"
    return text


def summarise(report: MqttReport) -> None:
    """Medians over repetitions without errors; quiet repetitions only when there are some."""

    def pick(system: str) -> list[dict[str, Any]]:
        ok = [r for r in report.runs if r["system"] == system and r["errors"] == 0]
        quiet = [r for r in ok if r["other_cpu_share"] is None or r["other_cpu_share"] <= BUSY_SHARE]
        return quiet or ok

    mos, gw = pick("mosquitto"), pick("gateway")
    f = report.figures
    f["mosquitto_qos1_msgs_s"] = _median([r["msgs_s"] for r in mos])
    f["mosquitto_cpu_us_per_msg"] = _median([r["mosquitto_cpu_us_per_msg"] for r in mos])
    f["gateway_msgs_s"] = _median([r["msgs_s"] for r in gw])
    f["gateway_puback_msgs_s"] = _median([r["publish"]["msgs_s"] for r in gw])
    f["gateway_cpu_us_per_msg"] = _median([r["gateway_cpu_us_per_msg"] for r in gw])
    f["gateway_cores"] = _median([r["gateway_cores"] for r in gw])
    f["gateway_broker_cpu_us_per_msg"] = _median([r["broker_cpu_us_per_msg"] for r in gw])
    f["gateway_mosquitto_cpu_us_per_msg"] = _median([r["mosquitto_cpu_us_per_msg"] for r in gw])
    f["store_after_puback_s"] = _median([r["store_after_puback_s"] for r in gw])
    a, b = f["gateway_msgs_s"], f["mosquitto_qos1_msgs_s"]
    f["gateway_over_mosquitto"] = a / b if a is not None and b else None


def run_mqtt(
    cfg: MqttConfig,
    workdir: Path,
    console: Console,
    bootstrap: str | None = None,
    broker_pid: int | None = None,
) -> MqttReport:
    """Mosquitto alone and the gateway path, repetitions alternating. ``bootstrap``: forward to that
    already-running Kafka-compatible broker (its topics are deleted afterwards) instead of ours."""
    from load.peers import ExternalRunning
    from sensors.mosquitto import MosquittoProcess

    report = MqttReport(config=asdict(cfg))
    reason = unavailable()
    if reason is not None:
        report.available, report.reason = False, reason
        _log(console, f"[yellow]mosquitto: not available ({escape(reason)})[/yellow]")
        return report
    report.versions = {
        "mosquitto": mosquitto_version(),
        "paho-mqtt": _dist_version("paho-mqtt"),
        "gmqtt": _dist_version("gmqtt"),
    }
    stream = f"bench_{uuid.uuid4().hex[:8]}"
    messages = build_messages(cfg.count, stream, cfg.sensors)
    report.payload_bytes_avg = sum(len(p) for _, p in messages) / len(messages)
    warm = messages[: min(200, len(messages))]
    with contextlib.ExitStack() as stack:
        try:
            bare = MosquittoProcess(workdir / "mosquitto-alone").start()
            stack.callback(bare.stop)
            fronted = MosquittoProcess(workdir / "mosquitto-gateway").start()
            stack.callback(fronted.stop)
        except Exception as exc:
            report.errors.append(f"mosquitto: {type(exc).__name__}: {exc}")
            _log(console, f"[red]mosquitto: could not start: {escape(str(exc))}[/red]")
            return report
        mos_pid = bare.proc.pid if bare.proc else None
        front_pid = fronted.proc.pid if fronted.proc else None
        _log(console, f"mosquitto: started at {bare.address} (alone) and {fronted.address} (gateway)")
        gateway_ok = True
        broker: RunningBroker | None = None
        try:
            if bootstrap:
                broker = ExternalRunning(bootstrap, broker_pid)
            else:
                broker = OursLauncher().start(workdir / "broker")
                stack.callback(broker.stop)
            from sensors.layout import ensure_layout

            ensure_layout(broker.bootstrap, partitions=cfg.partitions, stream=stream)
            if bootstrap:
                stack.callback(_delete_stream_topics, bootstrap, stream)
            counter = StoreCounter(broker.bootstrap, stream, cfg.partitions)
            gateway = GatewayProcess(
                broker.bootstrap, fronted.address, workdir / "gateway", client=cfg.gateway_client
            )
            gateway.start()
            stack.callback(gateway.stop)
            _log(console, f"gateway: pid {gateway.pid}, forwarding to {broker.bootstrap}")
            warm_up_gateway(fronted.port, counter, warm, cfg)
        except Exception as exc:
            gateway_ok = False
            msg = f"gateway path: {type(exc).__name__}: {exc}"
            report.errors.append(msg)
            report.gateway_errors.append(msg)
            _log(console, f"[red]{escape(msg)}[/red]")
        publish_qos1(bare.port, warm, cfg.window, 60, "bench-warm-a")
        _log(
            console,
            f"mqtt: {len(messages):,} messages/run, {report.payload_bytes_avg:.0f} bytes on average, "
            f"QoS 1, window {cfg.window}",
        )
        for rep in range(1, cfg.reps + 1):
            order = ["mosquitto", "gateway"] if rep % 2 else ["gateway", "mosquitto"]
            for system in order:
                if system == "gateway" and not gateway_ok:
                    continue
                try:
                    if system == "mosquitto":
                        run = mosquitto_run(rep, bare.port, mos_pid, messages, cfg)
                    else:
                        assert broker is not None
                        run = gateway_run(
                            rep, fronted.port, front_pid, gateway, broker, counter, messages, cfg
                        )
                except Exception as exc:
                    msg = f"rep {rep} {system}: {type(exc).__name__}: {exc}"
                    report.errors.append(msg)
                    if system == "gateway":
                        report.gateway_errors.append(msg)
                    _log(console, f"[red]{escape(msg)}[/red]")
                    continue
                report.runs.append(asdict(run))
                if run.errors:
                    msg = f"rep {rep} {system}: {run.errors} errors: {run.detail}"
                    report.errors.append(msg)
                    if system == "gateway":
                        report.gateway_errors.append(msg)
                _log(console, f"mqtt rep {rep}/{cfg.reps}: {_describe(run)}")
        if gateway_ok and broker is not None:
            try:
                drained = MosquittoProcess(workdir / "mosquitto-drain").start()
                stack.callback(drained.stop)
                drain_pid = drained.proc.pid if drained.proc else None
                drain = gateway_drain_run(
                    drained.port, drained.address, broker, counter, messages, workdir, cfg, drain_pid
                )
                report.figures["gateway_drain_msgs_s"] = drain["msgs_s"]
                report.figures["gateway_drain_cpu_us_per_msg"] = drain["gateway_cpu_us_per_msg"]
                report.drain = drain
                rate = drain["msgs_s"]
                _log(
                    console,
                    f"mqtt gateway drain: {rate or 0:,.0f} msgs/s from a {drain['messages']:,}-message "
                    "backlog in Mosquitto",
                )
            except Exception as exc:
                msg = f"gateway drain: {type(exc).__name__}: {exc}"
                report.errors.append(msg)
                report.gateway_errors.append(msg)
                _log(console, f"[red]{escape(msg)}[/red]")
    summarise(report)
    report.notes.append(
        "Both runs: one paho-mqtt publisher in the benchmark process, QoS 1, MQTT 5, gateway MQTT 3.1.1 "
        f"({cfg.gateway_client}), window {cfg.window}; the gateway path counts until the last message is "
        "in the store."
    )
    return report


def _dist_version(dist: str) -> str | None:
    from load.peers import package_version

    return package_version(dist)


def _delete_stream_topics(bootstrap: str, stream: str) -> None:
    from load.bench_broker import delete_topic
    from sensors.layout import TOPICS

    for t in TOPICS:
        delete_topic(bootstrap, f"{stream}.{t}")
