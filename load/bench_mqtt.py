"""The MQTT edge path of ``sftraffic bench``: Mosquitto alone vs devices → Mosquitto → gateway → store.

Goal: the gateway path's rate >= 1.0x what Mosquitto alone accepts from one device connection.

How it measures, in full: ``docs/benchmarks.md``, "The MQTT edge (bench)".
"""

from __future__ import annotations

import importlib.util
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.markup import escape

from deploy.local.mosquitto import MosquittoProcess, find_mosquitto
from load.bench_broker import MB
from load.harness import procfs, services
from load.harness.kafka import EndOffsets, delete_topic
from load.harness.procfs import BUSY_SHARE, IDLE_WINDOW_S, SETTLE_S, Interference, cpu_when_idle, probe
from load.harness.report import log, output, package_version
from load.harness.runner import Processes
from load.harness.stats import median
from load.peers import LOOPBACK, OursLauncher, Server
from testing import ManagedProcess


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
    """None when Mosquitto, paho-mqtt and gmqtt are here, else why not."""
    try:
        find_mosquitto()
    except FileNotFoundError as exc:
        return str(exc)
    for module, dist in (("paho", "paho-mqtt"), ("gmqtt", "gmqtt")):
        if importlib.util.find_spec(module) is None:
            return f"Python package {dist} is not installed (pip install 'sftraffic[app]')"
    return None


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


def _send_all(
    client: Any, slots: threading.Semaphore, messages: list[tuple[str, bytes]], deadline: float
) -> int:
    """Publish at QoS 1, at most ``window`` unacknowledged (``slots``); returns how many went."""
    publish, acquire = client.publish, slots.acquire
    sent = 0
    for topic, payload in messages:
        if not acquire(timeout=max(0.0, deadline - time.monotonic())):
            break
        publish(topic, payload, qos=1)
        sent += 1
    return sent


def publish_qos1(
    port: int, messages: list[tuple[str, bytes]], window: int, timeout: float, client_id: str
) -> PublishRun:
    """Publish every message at QoS 1 from one paho client; timed until the last PUBACK."""
    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion

    n = len(messages)
    client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=client_id, protocol=mqtt.MQTTv5)
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
        own0 = procfs.own_cpu()
        t0 = time.perf_counter()
        deadline = time.monotonic() + timeout
        sent = _send_all(client, slots, messages, deadline)
        finished = done.wait(max(0.0, deadline - time.monotonic()))
        t_end = state.t_last if finished else time.perf_counter()
        client_cpu = procfs.own_cpu() - own0
    finally:
        # disconnect() first: it wakes paho's network thread, which loop_stop() would otherwise wait
        # for until its select() times out (up to a second, added to the gateway path's timing).
        client.disconnect()
        client.loop_stop()
    acked, failed, detail = state.acked, state.failed, str(state.detail)
    if not finished:
        detail = detail or f"only {acked + failed}/{n} PUBACKs after {timeout:g} s ({sent} published)"
        failed = n - acked
    seconds = t_end - t0
    rate = acked / seconds if seconds > 0 else 0.0
    mb_s = rate * sum(len(p) for _, p in messages) / n / MB if n else 0.0
    return PublishRun(n, acked, failed, seconds, rate, mb_s, client_cpu, detail)


# -- the store side -----------------------------------------------------------------------------
class StoreCounter(EndOffsets):
    """Messages in the bench stream's topics (sum of log end offsets); ``dead``: its dead letters."""

    def __init__(self, bootstrap: str, stream: str, partitions: int) -> None:
        from sensors.layout import TOPICS

        super().__init__(bootstrap, [f"{stream}.{t}" for t in TOPICS if t != "dead_letter"], partitions)
        self.dead = EndOffsets(bootstrap, [f"{stream}.dead_letter"], partitions)


def _us_per_msg(c0: float | None, c1: float | None, n: int) -> float | None:
    return (c1 - c0) / n * 1e6 if c0 is not None and c1 is not None and n > 0 else None


def _publish(port: int, messages: list[tuple[str, bytes]], cfg: MqttConfig, client_id: str) -> PublishRun:
    return publish_qos1(port, messages, cfg.window, max(60.0, len(messages) / 500), client_id)


# -- the two runs -------------------------------------------------------------------------------
def mosquitto_run(
    rep: int, mosquitto: MosquittoProcess, messages: list[tuple[str, bytes]], cfg: MqttConfig
) -> EdgeRun:
    load = Interference([mosquitto.pid])
    c0 = probe(mosquitto.pid)()
    pub = _publish(mosquitto.port, messages, cfg, f"bench-pub-a{rep}")
    _, c1 = cpu_when_idle(probe(mosquitto.pid), SETTLE_S, cfg.idle_window_s)
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
    mosquitto: MosquittoProcess,
    gateway: ManagedProcess,
    broker: Server,
    counter: StoreCounter,
    messages: list[tuple[str, bytes]],
    cfg: MqttConfig,
) -> EdgeRun:
    n = len(messages)
    base, dead0 = counter.total(), counter.dead.total()
    pids = [mosquitto.pid, gateway.pid, broker.pid]
    load = Interference(pids)
    c0 = [probe(p)() for p in pids]
    t0 = time.perf_counter()
    pub = _publish(mosquitto.port, messages, cfg, f"bench-pub-b{rep}")
    stored, t_stored = counter.wait_for(base + pub.acked, cfg.store_timeout_s)
    seconds = t_stored - t0
    gw_run_cpu = probe(gateway.pid)()
    # What the processes still do after the last message is stored (MQTT acks, flushes) counts too.
    c1 = [cpu_when_idle(probe(p), SETTLE_S, cfg.idle_window_s)[1] for p in pids]
    dead = counter.dead.total() - dead0
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
        errors, detail = max(errors, 1), f"gateway exited: {gateway.tail()}"
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
        store_after_puback_s=t_stored - (t0 + pub.seconds),
        dead_letters=dead,
        other_cpu_share=load.share(),
    )


def gateway_drain_run(
    mosquitto: MosquittoProcess,
    broker: Server,
    counter: StoreCounter,
    messages: list[tuple[str, bytes]],
    workdir: Path,
    cfg: MqttConfig,
    running: Processes,
) -> dict[str, Any]:
    """How fast one gateway forwards when devices are not the limit (goal: ≥ 30k msgs/s).

    A gateway subscribes (persistent session) and is SIGKILLed; the messages are then published
    QoS 1 and queue in Mosquitto for its session; a new gateway process with the same id
    connects and drains the backlog. Rate = messages stored after the first one appeared /
    time from that first one to the last (process start-up excluded). Run on a Mosquitto of its
    own: with another gateway of the share group subscribed, Mosquitto would hand that one half
    of the messages live, and the "first stored" would not be the draining gateway's."""

    def drainer() -> ManagedProcess:
        gw = services.gateway(broker.bootstrap, mosquitto.address, workdir / "drain", "gw-drain", quiet=True)
        return running.add(gw)

    subscriber = drainer().start(60)
    warm_up_gateway(mosquitto.port, counter, messages[:1], cfg)
    subscriber.kill()  # no UNSUBSCRIBE: Mosquitto queues for the session
    base = counter.total()
    pub = _publish(mosquitto.port, messages, cfg, "bench-pub-drain")
    # Not waiting for "ready": Mosquitto sends the session's backlog right after CONNACK, before the
    # SUBACK the gateway waits for, so it can be drained by then.
    gw = drainer().launch()
    pids = [gw.pid, mosquitto.pid, broker.pid]
    try:
        first, t_first = counter.wait_for(base + 1, 60, interval=0.002)
        c0 = [probe(p)() for p in pids]
        stored, t_last = counter.wait_for(base + pub.acked, cfg.store_timeout_s, interval=0.01)
        c1 = [probe(p)() for p in pids]
    finally:
        gw.stop()
    n, seconds = stored - first, t_last - t_first
    return {
        "messages": pub.acked,
        "stored": stored - base,
        "msgs_s": n / seconds if seconds > 0 and stored >= base + pub.acked else None,
        "seconds": seconds,
        **{
            f"{who}_cpu_us_per_msg": _us_per_msg(c0[i], c1[i], n)
            for i, who in enumerate(("gateway", "mosquitto", "broker"))
        },
        "publish_msgs_s": pub.msgs_s,
    }


def warm_up_gateway(port: int, counter: StoreCounter, warm: list[tuple[str, bytes]], cfg: MqttConfig) -> None:
    """Before timing: the gateway's subscription is live (it subscribes after "ready"; a message
    published before that is dropped by Mosquitto), and every topic's metadata is known."""
    deadline = time.monotonic() + 60
    base = counter.total()
    while True:
        publish_qos1(port, warm[:1], cfg.window, 10, "bench-probe")
        if counter.wait_for(base + 1, 1.0, interval=0.05)[0] > base:
            break
        if time.monotonic() > deadline:
            raise RuntimeError("warm-up: no message reached the store in 60 s")
    base = counter.total()
    publish_qos1(port, warm, cfg.window, 60, "bench-warm")
    got, _ = counter.wait_for(base + len(warm), 60, interval=0.05)
    if got < base + len(warm):
        raise RuntimeError(f"warm-up: {got - base}/{len(warm)} messages reached the store in 60 s")


def _describe(run: EdgeRun) -> str:
    if run.msgs_s is None:
        return f"{run.system} [red]failed: {escape(run.detail)}[/red]"
    text = f"{run.system} {run.msgs_s:,.0f} msgs/s"
    if run.system == "gateway":
        gw, stored = run.gateway_cpu_us_per_msg, run.store_after_puback_s
        text += f" (PUBACKs at {run.publish['msgs_s']:,.0f} msgs/s, stored {stored:.2f} s after the last"
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
    f["mosquitto_qos1_msgs_s"] = median(r["msgs_s"] for r in mos)
    f["mosquitto_cpu_us_per_msg"] = median(r["mosquitto_cpu_us_per_msg"] for r in mos)
    for key in ("gateway_cpu_us_per_msg", "gateway_cores", "store_after_puback_s"):
        f[key] = median(r[key] for r in gw)
    f["gateway_msgs_s"] = median(r["msgs_s"] for r in gw)
    f["gateway_broker_cpu_us_per_msg"] = median(r["broker_cpu_us_per_msg"] for r in gw)
    f["gateway_mosquitto_cpu_us_per_msg"] = median(r["mosquitto_cpu_us_per_msg"] for r in gw)
    f["gateway_puback_msgs_s"] = median(r["publish"]["msgs_s"] for r in gw)
    a, b = f["gateway_msgs_s"], f["mosquitto_qos1_msgs_s"]
    f["gateway_over_mosquitto"] = a / b if a is not None and b else None


def run_mqtt(
    cfg: MqttConfig, workdir: Path, bootstrap: str | None = None, broker_pid: int | None = None
) -> MqttReport:
    """Mosquitto alone and the gateway path, repetitions alternating. ``bootstrap``: forward to that
    already-running Kafka-compatible broker (its topics are deleted afterwards) instead of ours."""
    report = MqttReport(config=asdict(cfg))
    reason = unavailable()
    if reason is not None:
        report.available, report.reason = False, reason
        log(f"[yellow]mosquitto: not available ({escape(reason)})[/yellow]")
        return report
    versions = {"paho-mqtt": package_version("paho-mqtt"), "gmqtt": package_version("gmqtt")}
    report.versions = {"mosquitto": output(find_mosquitto(), "-h").partition("\n")[0] or None, **versions}
    stream = f"bench_{uuid.uuid4().hex[:8]}"
    messages = build_messages(cfg.count, stream, cfg.sensors)
    report.payload_bytes_avg = sum(len(p) for _, p in messages) / len(messages)
    warm = messages[: min(200, len(messages))]
    with Processes() as running:
        try:
            bare = running.start(MosquittoProcess(workdir / "mosquitto-alone"), 15)
            fronted = running.start(MosquittoProcess(workdir / "mosquitto-gateway"), 15)
        except Exception as exc:
            _fail(report, "mosquitto", f"{type(exc).__name__}: {exc}", False)
            return report
        log(f"mosquitto: started at {bare.address} (alone) and {fronted.address} (gateway)")
        path: tuple[Server, StoreCounter, ManagedProcess] | None = None
        try:
            path = _gateway_path(cfg, workdir, running, fronted, stream, bootstrap, broker_pid)
            warm_up_gateway(fronted.port, path[1], warm, cfg)
        except Exception as exc:
            _fail(report, "gateway path", f"{type(exc).__name__}: {exc}", True)
            path = None
        publish_qos1(bare.port, warm, cfg.window, 60, "bench-warm-a")
        avg = report.payload_bytes_avg
        log(f"mqtt: {len(messages):,} messages/run, {avg:.0f} bytes on average, QoS 1, window {cfg.window}")
        _alternate(report, cfg, bare, fronted, path, messages)
        if path is not None:
            _drain(report, cfg, workdir, running, path, messages)
    summarise(report)
    report.notes.append(
        "Both runs: one paho-mqtt publisher in the benchmark process, QoS 1, MQTT 5, gateway MQTT 3.1.1 "
        f"(gmqtt), window {cfg.window}; the gateway path counts until the last message is "
        "in the store."
    )
    return report


def _fail(report: MqttReport, what: str, error: str, gateway: bool) -> None:
    report.errors.append(f"{what}: {error}")
    if gateway:
        report.gateway_errors.append(f"{what}: {error}")
    log(f"[red]{escape(what)}: {escape(error)}[/red]")


def _gateway_path(
    cfg: MqttConfig,
    workdir: Path,
    running: Processes,
    fronted: MosquittoProcess,
    stream: str,
    bootstrap: str | None,
    broker_pid: int | None,
) -> tuple[Server, StoreCounter, ManagedProcess]:
    """The store (ours, or the one at ``bootstrap``), its stream's topics and the gateway."""
    from sensors.layout import ensure_layout

    if bootstrap:
        broker = Server(bootstrap, external_pid=broker_pid)
    else:
        broker = running.add(OursLauncher().start(workdir / "broker"))
    ensure_layout(broker.bootstrap, partitions=cfg.partitions, stream=stream)
    if bootstrap:
        running.callback(_delete_stream_topics, bootstrap, stream)
    counter = StoreCounter(broker.bootstrap, stream, cfg.partitions)
    gw = services.gateway(broker.bootstrap, fronted.address, workdir / "gateway", quiet=True)
    gateway = running.start(gw, 60)
    log(f"gateway: pid {gateway.pid}, forwarding to {broker.bootstrap}")
    return broker, counter, gateway


def _alternate(
    report: MqttReport,
    cfg: MqttConfig,
    bare: MosquittoProcess,
    fronted: MosquittoProcess,
    path: tuple[Server, StoreCounter, ManagedProcess] | None,
    messages: list[tuple[str, bytes]],
) -> None:
    """The repetitions, the order of Mosquitto alone and the gateway path alternating."""
    for rep in range(1, cfg.reps + 1):
        for system in ["mosquitto", "gateway"] if rep % 2 else ["gateway", "mosquitto"]:
            if system == "gateway" and path is None:
                continue
            try:
                if system == "mosquitto":
                    run = mosquitto_run(rep, bare, messages, cfg)
                else:
                    assert path is not None
                    broker, counter, gateway = path
                    run = gateway_run(rep, fronted, gateway, broker, counter, messages, cfg)
            except Exception as exc:
                _fail(report, f"rep {rep} {system}", f"{type(exc).__name__}: {exc}", system == "gateway")
                continue
            report.runs.append(asdict(run))
            if run.errors:
                _fail(
                    report, f"rep {rep} {system}", f"{run.errors} errors: {run.detail}", system == "gateway"
                )
            log(f"mqtt rep {rep}/{cfg.reps}: {_describe(run)}")


def _drain(
    report: MqttReport,
    cfg: MqttConfig,
    workdir: Path,
    running: Processes,
    path: tuple[Server, StoreCounter, ManagedProcess],
    messages: list[tuple[str, bytes]],
) -> None:
    """The gateway emptying a backlog queued in Mosquitto."""
    broker, counter, _gateway = path
    try:
        drained = running.start(MosquittoProcess(workdir / "mosquitto-drain"), 15)
        drain = gateway_drain_run(drained, broker, counter, messages, workdir, cfg, running)
        report.figures["gateway_drain_msgs_s"] = drain["msgs_s"]
        report.figures["gateway_drain_cpu_us_per_msg"] = drain["gateway_cpu_us_per_msg"]
        report.drain = drain
        backlog = f"{drain['messages']:,}-message backlog"
        log(f"mqtt gateway drain: {drain['msgs_s'] or 0:,.0f} msgs/s from a {backlog} in Mosquitto")
    except Exception as exc:
        _fail(report, "gateway drain", f"{type(exc).__name__}: {exc}", True)


def _delete_stream_topics(bootstrap: str, stream: str) -> None:
    from sensors.layout import TOPICS

    for t in TOPICS:
        delete_topic(bootstrap, f"{stream}.{t}")
