"""``sftraffic up``: the whole demo on this machine, until Ctrl-C.

Starts, in order, each part as a :class:`~deploy.local.process.ManagedProcess` (its own
session, its output appended to ``<data-dir>/logs/<part>.log``):

1. the event store (127.0.0.1:9092, metrics on :9644, data in ``<data-dir>/store-1``); with
   ``--cluster N`` N brokers on 9092.. 9092+N-1 (metrics 9644.., controller endpoints
   19092..), data in ``store-1`` .. ``store-N``, topics replicated min(N, 3) times;
   with ``--store kafka`` Apache Kafka instead (:mod:`deploy.kafka`: KRaft, the same ports,
   data in ``<data-dir>/kafka``); with ``--external HOST:PORT`` none: an existing Kafka cluster,
   secured or not (``--command-config FILE``, ``-X KEY=VALUE``: its client settings, as every
   client command takes them; ``--bootstrap`` is a deprecated alias of ``--external``)
2. Mosquitto (127.0.0.1:1883) and the stream layout (stream + topics, created if missing)
3. an MQTT edge gateway
4. the Spark application (started early: its JVM warms up while the past is replayed) and the
   dashboard on http://127.0.0.1:8050
5. a backfill (``--backfill 6h``, ``0`` to skip): the fleet replays the last six simulated
   hours as fast as the store takes them (~250 pavement sensors, a share through MQTT and
   the gateway), with a progress bar; see :mod:`sensors.backfill`
6. in Spark, the batch jobs over the backfill (aggregates, traffic x weather with the effect
   estimates, congestion alerts, all published like the live results), with the machine to
   themselves
7. the live sensor fleet: 10,000 sensors producing directly, plus 500 MQTT devices through the
   gateway, from the minute the backfill ends (they catch up the minutes since at once), and
   Spark's streaming jobs over event time from the end of the backfill on

``--secure`` runs the same demo with authentication, TLS and least privilege everywhere
(:mod:`deploy.local.secure`): the store has one SASL_SSL listener (SCRAM-SHA-256) and Kafka's
StandardAuthorizer; Mosquitto one TLS listener, a password file and per-device ACLs; each part
logs in as its own user (the gateway, the fleets, Spark, the dashboard; ``up`` itself as the
admin) with the settings file ``<data-dir>/secure/<user>.properties`` handed to it as
``$SFTRAFFIC_CLIENT_CONFIG``, and every MQTT device as itself. Certificates and passwords are
made at the first secure start and kept in ``<data-dir>/secure`` (0600) for later ones. With
``--cluster N`` every broker's one SASL_SSL listener carries replication too (the brokers log in
as ``sftraffic-broker``), the quorum's links are encrypted, the users reach the quorum from the
first broker's data dir and the ACLs are created through the admin API. With
``--format avro`` the schema registry serves HTTPS and lets in the same users (HTTP Basic, its
auth file ``<data-dir>/secure/registry-auth.json``), each part with its own credentials in
``$SFTRAFFIC_REGISTRY`` and the demo's CA in ``$REQUESTS_CA_BUNDLE``.

The backfill runs once per data dir (``<data-dir>/backfill/plan.json``); a data dir whose Spark
jobs already ran is continued as it is. Its range and the configured weather effects are in the
``traffic_monitoring.ground_truth`` topic (:mod:`sensors.ground_truth`).

A part is "ready" when it logs its ready line (an event, not a timer). A cluster broker may be
lost while the demo runs (the cluster carries on); any other part exiting stops the demo.
Ctrl-C (or SIGTERM) stops every part in reverse order — SIGTERM to its process group, SIGKILL
after a grace period — so nothing is left running; the pids are kept in ``<data-dir>/up.json``
meanwhile.

Each part's Kafka clients get their settings file through ``$SFTRAFFIC_CLIENT_CONFIG`` (and the
old name ``$SFTRAFFIC_KAFKA_CONFIG`` set to the same, so that a value left in the shell never
wins): its own user's with ``--secure``; with ``--external`` the security settings of
``--command-config``/``-X`` (or ``$SFTRAFFIC_CLIENT_CONFIG``), copied to
``<data-dir>/external.properties`` (0600); none (PLAINTEXT) for a store started here.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from deploy.local import external, secure
from deploy.local.external import add_external
from deploy.local.mosquitto import MosquittoProcess
from deploy.local.process import ManagedProcess, sftraffic
from framework.cli.common import require_modules
from framework.client.connection import LEGACY_CONFIG_ENV, Connection
from framework.client.security import ENV, write_properties
from framework.config import parse_duration_ms
from framework.errors import StoreError
from pipelines.jobs import STREAMING_CHECKPOINTS, result_topics
from sensors import backfill as bf
from sensors import ground_truth
from sensors.layout import STREAM, ensure_layout, topic

# the parts it starts need the app extras (pyspark: through pipelines.jobs)
require_modules("numpy", "msgspec", "paho", "gmqtt", "dash")

# into a file or a pipe, lines stay whole (paths stay copyable); on a terminal rich wraps them
console = Console(stderr=True, soft_wrap=not sys.stderr.isatty())


EPILOG = """\
examples:
  sftraffic up --no-spark --backfill 0          # the store, Mosquitto, gateway, fleet, dashboard
  sftraffic up --external kafka-1:9092 --command-config client.properties   # on a running cluster"""


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "up",
        help="run the whole demo locally until Ctrl-C",
        description="The whole traffic demo on this machine: the event store (or --external: a "
        "running Kafka cluster), Mosquitto, an MQTT gateway, the sensor fleet, the Spark jobs and "
        "the dashboard, until Ctrl-C stops every part.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--data-dir", default=".sftraffic", help="where the demo keeps its data (default ./.sftraffic)"
    )
    p.add_argument("--port", type=int, default=9092, help="Kafka port of the embedded store (default 9092)")
    p.add_argument(
        "--metrics-port", type=int, default=9644, help="Prometheus port of the store (default 9644)"
    )
    p.add_argument("--mqtt-port", type=int, default=1883, help="Mosquitto port (default 1883)")
    p.add_argument("--dashboard-port", type=int, default=8050, help="dashboard port (default 8050)")
    p.add_argument(
        "--sensors", type=int, default=10_000, help="pavement sensors producing directly (default 10000)"
    )
    p.add_argument("--mqtt-devices", type=int, default=500, help="sensors publishing over MQTT (default 500)")
    p.add_argument("--speed", type=float, default=1.0, help="simulated seconds per second (1 = live)")
    p.add_argument("--no-spark", action="store_true", help="skip the Spark jobs (quicker start, less CPU)")
    p.add_argument(
        "--backfill",
        metavar="DURATION",
        help=f"replay this much simulated past first, then the batch jobs over it (default "
        f"{bf.DEFAULT_DURATION}; 0: none; none by default with --no-spark)",
    )
    p.add_argument(
        "--backfill-sample",
        type=int,
        metavar="N",
        help=f"the backfill replays every N-th pavement sensor (default: about {bf.DEFAULT_SENSORS} "
        f"of them, 1 in {bf.sample_for(10_000)} of 10,000)",
    )
    _add_store_options(p)
    add_external(
        p.add_argument_group("an existing cluster instead of the store"),
        secured=True,
        what=" (not with --store, --cluster or --secure)",
    )
    p.set_defaults(func=run)


def _add_store_options(p: argparse.ArgumentParser) -> None:
    """The store ``up`` starts (its size, kind and security) and the events' format."""
    p.add_argument(
        "--cluster",
        type=int,
        default=1,
        help="store brokers: 1 (default) or a replicated cluster of 3-9 (topics get min(N, 3) replicas)",
    )
    p.add_argument(
        "--voters",
        type=int,
        metavar="M",
        help="with --cluster N: brokers 1..M are the metadata quorum's voters (3 or 5; default all N), "
        "the others non-voting observers",
    )
    p.add_argument(
        "--store",
        choices=("sftraffic", "kafka"),
        default="sftraffic",
        help="the event store: ours (default) or Apache Kafka 4.x (KRaft, resolved with Maven on first "
        "use; --cluster N nodes)",
    )
    p.add_argument(
        "--secure",
        action="store_true",
        help="authentication, TLS and ACLs everywhere: the store on SASL_SSL (SCRAM-SHA-256) with its "
        "authorizer, Mosquitto on TLS with a password per device; certificates and passwords made at "
        "the first start in <data-dir>/secure (the embedded store: one node or --cluster)",
    )
    p.add_argument(
        "--format",
        choices=("json", "avro"),
        default="json",
        help="the events' format in the store: json (default), or avro (Confluent's wire format; "
        "starts `sftraffic registry` and registers the events' schemas; MQTT devices still send JSON, "
        "the gateway converts)",
    )
    p.add_argument(
        "--registry-port", type=int, default=8081, help="schema registry port with --format avro (8081)"
    )


def _part(name: str, cmd: list[str], ready: str | None, root: Path, env: dict[str, str]) -> ManagedProcess:
    return ManagedProcess(name, cmd, ready=ready, log=root / "logs" / f"{name}.log", env=env)


def store_part(
    py: list[str],
    root: Path,
    bootstrap: str,
    metrics_port: int,
    env: dict[str, str],
    settings: dict[str, str] | None = None,
) -> ManagedProcess:
    """The embedded single-node store, data in ``<root>/store-1``; ``settings`` as ``-o``."""
    cmd = [*py, "broker", "--node-id", "1", "--listen", bootstrap, "--data-dir", str(root / "store-1")]
    for k, v in (settings or {}).items():
        cmd += ["-o", f"{k}={v}"]
    if metrics_port:
        cmd += ["--metrics", f"127.0.0.1:{metrics_port}"]
    return _part("store", cmd, " listening on ", root, env)


def cluster_parts(
    py: list[str],
    root: Path,
    size: int,
    port: int,
    metrics_port: int,
    env: dict[str, str],
    n_voters: int | None = None,
    sec: secure.Secrets | None = None,
) -> list[ManagedProcess]:
    """``size`` brokers of one cluster: Kafka on port.., controller (Raft) on port+10000.. for
    the first ``n_voters`` (all by default); the others are observers of the metadata log.
    Secured: each broker's one listener SASL_SSL (:func:`secure.broker_settings`), its
    passwords from ``broker-secrets.toml``."""
    n_voters = size if n_voters is None else n_voters
    voters = ",".join(f"{i}@127.0.0.1:{port + 10_000 + i - 1}" for i in range(1, n_voters + 1))
    parts = []
    for i in range(1, size + 1):
        listen = f"127.0.0.1:{port + i - 1}"
        cmd = [*py, "broker", "--node-id", str(i), "--listen", listen]
        cmd += ["--data-dir", str(root / f"store-{i}"), "--voters", voters]
        if metrics_port:
            cmd += ["--metrics", f"127.0.0.1:{metrics_port + i - 1}"]
        if sec is not None:
            cmd += ["--config", str(sec.broker_secrets)]
            for k, v in secure.broker_settings(sec, listen, cluster=True).items():
                cmd += ["-o", f"{k}={v}"]
        parts.append(_part(f"store-{i}", cmd, "registered with the controller", root, env))
    return parts


def kafka_parts(root: Path, size: int, port: int) -> list[ManagedProcess]:
    """Apache Kafka as the store (``--store kafka``): ``size`` KRaft nodes, Kafka on port..,
    controllers on port+10000.., data in ``<root>/kafka`` (formatted on first use), logs in
    ``<root>/logs/kafka-N.log``; the nodes, not started (their bootstrap: :func:`bootstrap_of`)."""
    from deploy.kafka import KafkaCluster

    cluster = KafkaCluster(size, root / "kafka", port=port, heap="1g", log_dir=root / "logs")
    console.print(f"preparing {cluster.describe()} (Maven resolves it on first use) ...")
    return list(cluster.prepare())


def external_replication(bootstrap: str) -> int:
    """Replicas for the demo's topics on an existing cluster (``--external``): min(brokers, 3)."""
    from framework.client.admin import live_broker_ids

    ids = live_broker_ids(bootstrap, timeout=10)
    if ids is None:
        raise StoreError(f"no Kafka broker answers at {bootstrap} (--external)")
    return max(1, min(len(ids), 3))


def client_env(path: Path | None) -> dict[str, str]:
    """A part's client settings file as ``$SFTRAFFIC_CLIENT_CONFIG``, and the old name set to the
    same (a child reads the new name first, the old one when the new is empty: a value of the
    old one inherited from the shell must not win); ``None``: none, PLAINTEXT."""
    value = str(path) if path is not None else ""
    return {ENV: value, LEGACY_CONFIG_ENV: value}


def external_client_file(root: Path, conn: Connection) -> Path | None:
    """The ``--external`` cluster's security settings (file and ``-X`` merged, in librdkafka's
    names) as ``<root>/external.properties`` (0600) for the parts; None when it has none."""
    sec = conn.security()
    return write_properties(root / "external.properties", sec) if sec else None


def mosquitto_part(root: Path, port: int, sec: secure.Secrets | None = None) -> MosquittoProcess:
    """Mosquitto with its own config and persistence in ``<root>/mosquitto`` (secured: TLS,
    passwords and ACLs from ``<root>/secure``)."""
    return MosquittoProcess(
        root / "mosquitto",
        port,
        persistence=True,
        log=root / "logs" / "mosquitto.log",
        security=sec.mqtt if sec is not None else None,
    )


def gateway_part(
    py: list[str],
    root: Path,
    bootstrap: str,
    mqtt: str,
    env: dict[str, str],
    sec: secure.Secrets | None = None,
    fmt: str = "json",
) -> ManagedProcess:
    cmd = [*py, "gateway", "-b", bootstrap, "--mqtt", mqtt, "--id", "gw-1"]
    cmd += ["--queue-dir", str(root / "gateway-queue"), "--format", fmt]
    if sec is not None:
        cmd += [
            "--mqtt-username",
            secure.MQTT_GATEWAY,
            "--mqtt-password-file",
            str(sec.mqtt_gateway_password),
        ]
        cmd += ["--mqtt-ca", str(sec.ca)]
    return _part("gateway", cmd, "ready", root, env)


def device_args(sec: secure.Secrets | None) -> list[str]:
    """The MQTT devices' extra arguments when secured: their passwords and the CA."""
    if sec is None:
        return []
    return ["--mqtt-credentials", str(sec.mqtt_devices), "--mqtt-ca", str(sec.ca)]


def mqtt_device_ids(n: int) -> list[str]:
    """The ids (MQTT user names) of the ``n`` MQTT devices ``up`` runs (``--prefix mqtt-``)."""
    from sensors import geo

    return ["mqtt-" + s.sensor_id for s in geo.build_fleet(n).traffic] if n else []


class Envs:
    """Each part's environment: with ``--secure`` its own user's client settings (and, with a
    secured registry on ``registry_port``, its credentials there and the CA)."""

    def __init__(
        self, base: dict[str, str], sec: secure.Secrets | None, registry_port: int | None = None
    ) -> None:
        self.base = base
        self.sec = sec
        self.registry_port = registry_port

    def __call__(self, principal: str) -> dict[str, str]:
        if self.sec is None:
            return self.base
        env = {**self.base, **client_env(self.sec.properties(principal))}
        if self.registry_port is not None and principal != secure.REGISTRY:
            env["SFTRAFFIC_REGISTRY"] = self.sec.registry_url(self.registry_port, principal)
            env["REQUESTS_CA_BUNDLE"] = str(self.sec.ca)
        return env


def registry_part(
    py: list[str],
    root: Path,
    bootstrap: str,
    port: int,
    env: dict[str, str],
    sec: secure.Secrets | None = None,
) -> ManagedProcess:
    """``sftraffic registry`` (``--format avro``): schemas in ``_schemas`` on the store; secured,
    over HTTPS with the server certificate, letting in the users of its auth file."""
    cmd = [*py, "registry", "-b", bootstrap, "--listen", f"127.0.0.1:{port}"]
    if sec is not None:
        cmd += ["--auth-file", str(sec.registry_auth), "--tls-cert", str(sec.dir / "server.crt")]
        cmd += ["--tls-key", str(sec.dir / "server.key"), "--tls-ca", str(sec.ca)]
    return _part("registry", cmd, "registry listening on", root, env)


def format_args(fmt: str) -> list[str]:
    """What the direct fleets and the Spark jobs add for ``--format``."""
    return [] if fmt == "json" else ["--format", fmt]


def dashboard_part(
    py: list[str], root: Path, bootstrap: str, port: int, env: dict[str, str]
) -> ManagedProcess:
    cmd = [*py, "dashboard", "-b", bootstrap, "--port", str(port)]
    return _part("dashboard", cmd, "dashboard on", root, env)


class Supervisor:
    """The parts started so far, in order; stops them in reverse order."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.parts: list[ManagedProcess] = []
        self.survivable: set[str] = set()  # cluster brokers: the demo goes on without one
        self.stopping = threading.Event()

    def install_signals(self) -> None:
        def handler(signum: int, frame: object) -> None:
            self.stopping.set()

        signal.signal(signal.SIGINT, handler)
        signal.signal(signal.SIGTERM, handler)

    def record(self) -> None:
        (self.root / "up.json").write_text(
            json.dumps({p.name: p.pid for p in self.parts if p.proc is not None}, indent=1)
        )

    def start(self, part: ManagedProcess | list[ManagedProcess], survivable: bool = False) -> None:
        """Start a part (or several) without waiting for it."""
        group = part if isinstance(part, list) else [part]
        for p in group:
            try:
                p.launch()
            except OSError as exc:  # e.g. Mosquitto not installed
                raise StoreError(f"cannot start {p.name}: {exc}") from None
            self.parts.append(p)
            if survivable:
                self.survivable.add(p.name)
        self.record()

    def forget(self, part: ManagedProcess) -> None:
        """A part that finished its job (a replay): no longer watched nor listed."""
        part.stop()  # reaped
        self.parts.remove(part)
        self.record()

    def check(self, exclude: tuple[ManagedProcess, ...] = ()) -> None:
        """Raise when Ctrl-C was pressed or a part (other than ``exclude``) exited."""
        if self.stopping.is_set():
            raise KeyboardInterrupt
        for p in self.parts:
            if p not in exclude and p.name not in self.survivable and not p.alive():
                p.stop()  # reaped: its last lines are in
                raise StoreError(f"{p.name} exited (code {p.returncode}); its log ({p.log}):\n{p.tail()}")

    def launch(
        self, part: ManagedProcess | list[ManagedProcess], timeout: float, what: str, survivable: bool = False
    ) -> None:
        """Start a part (or several that need each other, e.g. a cluster) and wait until ready."""
        self.start(part, survivable)
        self.wait_ready(part, timeout, what)

    def wait_ready(
        self,
        part: ManagedProcess | list[ManagedProcess],
        timeout: float,
        what: str,
        doing: Callable[[], str] | None = None,
    ) -> None:
        """Wait until every part of ``part`` logged its ready line; ``doing`` says what it is at."""
        group = part if isinstance(part, list) else [part]
        t0 = time.monotonic()
        with console.status(f"starting {what} ...") as status:
            while not all(p.is_ready() for p in group):
                if self.stopping.is_set():
                    raise KeyboardInterrupt
                for p in group:
                    if not p.alive():
                        p.stop()  # reaped: its last lines are in
                        raise StoreError(f"{p.name} exited while starting; its log ({p.log}):\n{p.tail()}")
                self.check()
                if time.monotonic() - t0 > timeout:
                    late = ", ".join(p.name for p in group if not p.is_ready())
                    logs = ", ".join(str(p.log) for p in group)
                    raise StoreError(f"{late} not ready after {timeout:.0f}s; see {logs}")
                now = doing() if doing is not None else ""
                status.update(f"starting {what} ... {time.monotonic() - t0:.0f}s{now}")
                self.stopping.wait(0.2)
        console.print(f"[green]✓[/green] {what} ({time.monotonic() - t0:.1f}s)")

    def watch(self) -> None:
        """Until Ctrl-C: report a lost cluster broker; stop when any other part exits."""
        lost: set[str] = set()
        while not self.stopping.is_set():
            for p in self.parts:
                if p.alive() or p.name in lost:
                    continue
                if p.name in self.survivable:
                    lost.add(p.name)
                    console.print(
                        f"[yellow]{p.name} exited[/yellow] (code {p.returncode}); "
                        f"the cluster carries on without it (restart: sftraffic {' '.join(p.cmd[3:])})"
                    )
                    continue
                p.stop()  # reaped: its last lines are in
                console.print(
                    f"[red]{p.name} exited[/red] (code {p.returncode}); last lines of {p.log}:\n{p.tail()}"
                )
                self.stopping.set()
                break
            self.stopping.wait(0.5)

    def stop_all(self) -> None:
        for p in reversed(self.parts):
            if p.alive():
                console.print(f"stopping {p.name} ...")
                if p.stop() == -signal.SIGKILL:
                    console.print(f"[yellow]{p.name} did not stop in {p.grace:.0f}s: killed it[/yellow]")
            else:
                p.stop()  # already gone: reap it and whatever it left in its process group
        (self.root / "up.json").unlink(missing_ok=True)


def backfill_plan(demo: Plan) -> tuple[bf.Backfill | None, bool]:
    """(the run's backfill, whether it still has to be replayed).

    A data dir keeps its first run's backfill (``backfill/plan.json``): later runs continue it
    (the Spark jobs filter by its end; the batch over it runs once). A data dir whose streaming
    jobs ran without one gets none. Otherwise ``--backfill`` (default 6h with Spark, 0 without).
    """
    root = demo.root
    plan_file = root / "backfill" / "plan.json"
    if plan_file.exists():
        return bf.Backfill.from_json(plan_file.read_text())[0], False
    if any((root / "checkpoints" / q).exists() for q in STREAMING_CHECKPOINTS):
        return None, False
    duration = parse_duration_ms(demo.backfill)
    if duration <= 0:
        return None, False
    sample = demo.backfill_sample or bf.sample_for(demo.sensors)
    return bf.Backfill.ending_now(duration, sample), True


def _sim(ms: int) -> str:
    h, m = divmod(max(0, ms) // 60_000, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m"


def replay(sup: Supervisor, plan: bf.Backfill, demo: Plan, ctx: Context) -> dict[str, Any]:
    """Run the backfill's fleets (direct, and a share over MQTT) to the end, with a progress
    bar; return once the store holds every event they sent."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    root, bootstrap, env = demo.root, demo.bootstrap, ctx.env
    inputs = [topic(n) for n in ("traffic", "weather_conditions", "infrastructure")]
    base = bf.end_offsets(bootstrap, inputs)
    cmd = [*ctx.py, "sensors", "-b", bootstrap, *plan.replay_args()]
    direct = [*cmd, *format_args(demo.fmt), "--sensors", str(demo.sensors)]
    parts = [
        _part(
            "backfill",
            [*direct, "--seq-state", str(root / "fleet" / "sensors.json")],
            None,
            root,
            env(secure.SENSORS),
        )
    ]
    if demo.mqtt_devices:
        mqtt = ["--via", "mqtt", "--mqtt", demo.mqtt, "--sensors", str(demo.mqtt_devices)]
        mqtt += ["--prefix", "mqtt-", "--no-infrastructure", *device_args(ctx.sec)]
        mqtt += ["--seq-state", str(root / "fleet" / "devices.json")]
        parts.append(_part("backfill-mqtt", [*cmd, *mqtt], None, root, env(secure.SENSORS)))
    seen: dict[str, bf.Progress] = {p.name: bf.Progress(sim_ms=plan.from_ms) for p in parts}
    for p in parts:
        p.on_line(functools.partial(_progress_line, seen, p.name))
    t0 = time.monotonic()
    sup.start(parts)
    columns = (
        TextColumn("[bold]backfill[/bold]"),
        BarColumn(),
        TextColumn("{task.fields[sim]} of {task.fields[span]} simulated"),
        TextColumn("{task.fields[events]:>10,} events"),
        TextColumn("{task.fields[rate]:>8,.0f} events/s"),
        TimeElapsedColumn(),
    )
    total = _sim(plan.duration_ms)
    with Progress(*columns, console=console) as bar:
        task = bar.add_task("backfill", total=plan.duration_ms, sim="0m", span=total, events=0, rate=0.0)
        while any(p.alive() for p in parts):
            sup.check(exclude=tuple(parts))
            covered = min(pr.sim_ms for pr in seen.values()) - plan.from_ms
            events = sum(pr.events for pr in seen.values())
            rate = sum(pr.rate for pr in seen.values() if not pr.done)
            bar.update(task, completed=covered, sim=_sim(covered), events=events, rate=rate)
            sup.stopping.wait(0.25)
        took = time.monotonic() - t0
        events = sum(pr.events for pr in seen.values())
        bar.update(task, completed=plan.duration_ms, sim=total, events=events, rate=events / max(took, 1e-6))
    for p in parts:
        if p.returncode != 0:
            raise StoreError(f"{p.name} failed (code {p.returncode}); its log ({p.log}):\n{p.tail()}")
        sup.forget(p)
    # the MQTT share is acknowledged by Mosquitto: wait for the gateway to have stored it too
    deadline = time.monotonic() + 60
    with console.status("backfill: waiting for the gateway to store the MQTT share ..."):
        while (stored := bf.end_offsets(bootstrap, inputs) - base) < events:
            sup.check()
            if time.monotonic() > deadline:
                missing = events - stored
                console.print(f"[yellow]backfill: {missing:,} events not in the store after 60 s[/yellow]")
                break
            sup.stopping.wait(0.3)
    took = time.monotonic() - t0
    console.print(
        f"[green]✓[/green] backfill: {_sim(plan.duration_ms)} of simulated time ({plan.describe()}), "
        f"{events:,} events in {took:.1f}s ({events / max(took, 1e-6):,.0f} events/s)"
    )
    return {"events": events, "seconds": round(took, 1), "events_per_s": round(events / max(took, 1e-6))}


def _progress_line(seen: dict[str, bf.Progress], name: str, line: str) -> None:
    pr = bf.parse_progress(line)
    if pr is not None:
        seen[name] = pr


def _publish_backfill(bootstrap: str, plan: bf.Backfill, **extra: Any) -> None:
    record = {**json.loads(plan.to_json()), "showcase": list(plan.showcase), **extra}
    try:
        ground_truth.publish(bootstrap, "backfill", record)
    except Exception as exc:  # the dashboard's reference only
        console.print(f"[yellow]backfill range not published: {exc}[/yellow]")


def _spark_doing(spark: ManagedProcess) -> Callable[[], str]:
    """What the Spark part is at, from its last lines (for the status line)."""

    def doing() -> str:
        for line in reversed(list(spark.lines)[-50:]):
            if "backfill batch done" in line:
                return ": starting the streaming queries"
            if "backfill batch running" in line:
                return " (aggregates, traffic x weather, effect estimates, alerts)"
            if "waiting for the backfill" in line:
                return " (Spark is up, waiting for the backfill)"
            if "starting Spark" in line:
                return " (Spark's JVM is starting)"
        return ""

    return doing


def wait_line(
    sup: Supervisor, part: ManagedProcess, text: str, timeout: float, what: str, doing: Callable[[], str]
) -> None:
    """Wait until ``part`` logs a line containing ``text`` (a stage before its ready line)."""
    t0 = time.monotonic()
    with console.status(what) as status:
        while not any(text in line for line in list(part.lines)[-200:]):
            sup.check()
            if time.monotonic() - t0 > timeout:
                raise StoreError(f"{part.name}: no '{text}' after {timeout:.0f}s; see {part.log}")
            status.update(f"{what} ... {time.monotonic() - t0:.0f}s{doing()}")
            sup.stopping.wait(0.2)


def _report_batch(spark: ManagedProcess) -> None:
    for line in spark.lines:
        if "backfill batch done:" in line:
            d = json.loads(line.split("backfill batch done:", 1)[1])
            what = "skipped (done before)" if d.get("skipped") else f"in {d.get('seconds', 0):.1f}s"
            console.print(
                f"[green]✓[/green] batch jobs over the backfill {what}: {d.get('aggregates', 0):,} windows, "
                f"{d.get('traffic_weather', 0):,} with weather, {d.get('alerts', 0):,} alerts, "
                f"effects for {', '.join(e['condition'] for e in d.get('effects', [])) or 'no regime'}"
            )
            return


# -- plan, start, wait -------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """What ``up`` starts, decided from its arguments alone: no file, process or connection is
    touched (but the ``--command-config`` file read).

    ``parts`` names the long-running parts in the order they start; between the dashboard and
    the sensors a backfill's fleets may come and go, decided from the data dir once the store
    runs (:func:`backfill_plan`)."""

    root: Path
    # "sftraffic" (the embedded store), "kafka" (Apache Kafka) or "external" (none started)
    store: str
    brokers: int  # the store's nodes started here (0 with --external)
    voters: int | None  # --voters: the first M brokers of the cluster vote (None: all)
    bootstrap: str
    external: Connection | None  # the running cluster with --external, and its client settings
    port: int
    metrics_port: int
    mqtt_port: int
    dashboard_port: int
    registry_port: int | None  # the schema registry's (--format avro), None: no registry
    secure: bool
    fmt: str
    # the demo's topics' replication factor; None: min(brokers, 3) of the external cluster,
    # asked once it answers
    replicas: int | None
    sensors: int
    mqtt_devices: int
    speed: float
    backfill: str  # --backfill (a duration), its default resolved
    backfill_sample: int | None
    parts: tuple[str, ...]

    @property
    def mqtt(self) -> str:
        return f"127.0.0.1:{self.mqtt_port}"

    @property
    def avro(self) -> bool:
        return self.fmt == "avro"


def _check_args(args: argparse.Namespace) -> None:
    if not (args.cluster == 1 or 3 <= args.cluster <= 9):
        raise StoreError(
            f"--cluster {args.cluster}: use 1 (a single node) or 3 to 9 brokers "
            "(a 2-broker quorum cannot survive the loss of either)"
        )
    if args.voters is not None and not (3 <= args.voters <= args.cluster and args.voters % 2 == 1):
        raise StoreError(
            f"--voters {args.voters}: an odd number from 3 to --cluster ({args.cluster}); "
            "the other brokers join as observers"
        )
    if args.secure and (args.external or args.store != "sftraffic"):
        raise StoreError(
            "--secure runs the embedded store (one node or --cluster): not with --store kafka or --external"
        )
    if args.external and (args.store != "sftraffic" or args.cluster != 1):
        raise StoreError("--external uses a running cluster: --store and --cluster start one, give either")


def _store_parts(store: str, brokers: int) -> list[str]:
    if store == "external":
        return []
    if store == "kafka":
        return [f"kafka-{i}" for i in range(1, brokers + 1)]
    return ["store"] if brokers == 1 else [f"store-{i}" for i in range(1, brokers + 1)]


def plan(args: argparse.Namespace) -> Plan:
    """The parts to start, their ports, security and replication, from ``up``'s arguments;
    a contradiction among them is refused here, before anything starts."""
    _check_args(args)
    ext = external.external_connection(args)  # None: a store started here
    store = "external" if ext is not None else args.store
    brokers = 0 if ext is not None else args.cluster
    fmt = getattr(args, "format", "json")
    backfill = args.backfill if args.backfill is not None else ("0" if args.no_spark else bf.DEFAULT_DURATION)
    parts = [*_store_parts(store, brokers), "mosquitto", *(["registry"] if fmt == "avro" else [])]
    parts += ["gateway", *([] if args.no_spark else ["spark"]), "dashboard", "sensors"]
    parts += ["devices"] if args.mqtt_devices else []
    return Plan(
        root=Path(args.data_dir).resolve(),
        store=store,
        brokers=brokers,
        voters=args.voters,
        bootstrap=ext.bootstrap if ext is not None else bootstrap_of(args.port, args.cluster),
        external=ext,
        port=args.port,
        metrics_port=args.metrics_port,
        mqtt_port=args.mqtt_port,
        dashboard_port=args.dashboard_port,
        registry_port=args.registry_port if fmt == "avro" else None,
        secure=args.secure,
        fmt=fmt,
        replicas=None if ext is not None else min(brokers, 3),
        sensors=args.sensors,
        mqtt_devices=args.mqtt_devices,
        speed=args.speed,
        backfill=backfill,
        backfill_sample=args.backfill_sample,
        parts=tuple(parts),
    )


def bootstrap_of(port: int, size: int) -> str:
    """The bootstrap of a store of ``size`` nodes started here on port.. (ours or Kafka)."""
    return ",".join(f"127.0.0.1:{port + i}" for i in range(size))


@dataclass(frozen=True)
class Context:
    """What the start step makes before the first part: the command line of ``sftraffic``, the
    secrets (``--secure``), each part's environment and, with ``--store kafka``, its nodes."""

    py: list[str]
    env: Envs
    sec: secure.Secrets | None
    kafka: list[ManagedProcess]


def prepare(demo: Plan) -> Context:
    """Before any part starts: the external cluster checked, the data dir, Kafka's nodes
    prepared, the secrets made or reused, and the environment of up's own clients and the parts'."""
    if demo.external is not None:
        external.check(demo.external)  # unreachable, a refused password: one line before anything starts
    root = demo.root
    root.mkdir(parents=True, exist_ok=True)
    # the settings file of up's own clients (layout, ground truth) and, but with --secure, the parts'
    clients = external_client_file(root, demo.external) if demo.external is not None else None
    kafka = kafka_parts(root, demo.brokers, demo.port) if demo.store == "kafka" else []
    sec: secure.Secrets | None = None
    if demo.secure:
        sec, made = secure.ensure(root, mqtt_device_ids(demo.mqtt_devices))
        clients = sec.properties(secure.ADMIN)  # up's own clients as the admin
        what = f"made {' and '.join(made)}" if made else "certificates and passwords reused"
        console.print(
            f"[green]✓[/green] security: {what} in {sec.dir} (mode 0600; each part's in its "
            f"<user>.properties, the MQTT devices' in {sec.mqtt_devices.name})"
        )
    os.environ.update(client_env(clients))
    # with --secure each part logs in as its own user (Envs), the store's processes as none
    base_env = {"SFTRAFFIC_BOOTSTRAP": demo.bootstrap, "PYTHONUNBUFFERED": "1"}
    base_env |= client_env(clients if sec is None else None)
    if demo.registry_port is not None:  # every part finds it there (sensors, gateway, Spark, dashboard)
        scheme = "https" if sec is not None else "http"
        base_env["SFTRAFFIC_REGISTRY"] = f"{scheme}://127.0.0.1:{demo.registry_port}"
        if sec is not None:  # up's own registry client (it registers the schemas) trusts the CA
            os.environ["REQUESTS_CA_BUNDLE"] = str(sec.ca)
    return Context(sftraffic(), Envs(base_env, sec, demo.registry_port), sec, kafka)


def _start_store(demo: Plan, ctx: Context, sup: Supervisor) -> int:
    """The store (or the external cluster checked); the demo's topics' replication factor."""
    root, bootstrap, sec = demo.root, demo.bootstrap, ctx.sec
    if demo.external is not None:
        replicas = external_replication(bootstrap)
        console.print(f"[green]✓[/green] the Kafka cluster at {bootstrap} (not started here)")
        return replicas
    if demo.store == "kafka":
        what = f"Apache Kafka ({demo.brokers} KRaft node{'s' if demo.brokers > 1 else ''}) on {bootstrap}"
        sup.launch(ctx.kafka, 120, what, survivable=demo.brokers > 1)
    elif demo.brokers == 1:
        settings = None
        if sec is not None:
            secure.prepare_store(root / "store-1", sec)  # its users and ACLs, before it starts
            settings = secure.broker_settings(sec, bootstrap)
        sup.launch(
            store_part(ctx.py, root, bootstrap, demo.metrics_port, ctx.env.base, settings),
            60,
            f"event store on {bootstrap}{' (SASL_SSL, SCRAM-SHA-256, ACLs)' if sec else ''}",
        )
    else:
        if sec is not None:
            secure.prepare_cluster(root / "store-1", sec)  # its users, proposed to the quorum
        sup.launch(
            cluster_parts(
                ctx.py, root, demo.brokers, demo.port, demo.metrics_port, ctx.env.base, demo.voters, sec
            ),
            90,
            f"{demo.brokers}-broker event store cluster on {bootstrap}"
            f"{' (SASL_SSL, SCRAM-SHA-256, encrypted quorum)' if sec else ''}",
            survivable=True,
        )
        if sec is not None:
            secure.grant_in_cluster(bootstrap)
            console.print("[green]✓[/green] the demo's ACLs, through the admin API")
    assert demo.replicas is not None  # a store started here
    return demo.replicas


def _start_messaging(demo: Plan, ctx: Context, sup: Supervisor, replicas: int) -> None:
    """Mosquitto, the stream's layout, the schema registry (``--format avro``) and the gateway."""
    root, bootstrap, sec = demo.root, demo.bootstrap, ctx.sec
    sup.launch(
        mosquitto_part(root, demo.mqtt_port, sec),
        30,
        f"Mosquitto on {demo.mqtt}{' (TLS, a password per device, ACLs)' if sec else ''}",
    )
    ensure_layout(
        bootstrap,
        replication_factor=replicas,
        extra_topics=result_topics(),
    )
    ground_truth.ensure_topic(bootstrap, replication_factor=replicas)
    console.print(f"[green]✓[/green] stream {STREAM} and its topics")
    if demo.registry_port is not None:  # "registry" in demo.parts
        from sensors.avro import register_all

        url = ctx.env.base["SFTRAFFIC_REGISTRY"]
        secured = " (HTTPS, HTTP Basic users, ACLs)" if sec is not None else ""
        sup.launch(
            registry_part(ctx.py, root, bootstrap, demo.registry_port, ctx.env(secure.REGISTRY), sec),
            60,
            f"schema registry on {url}{secured}",
        )
        ids = register_all(sec.registry_url(demo.registry_port, secure.ADMIN) if sec else url)
        names = ", ".join(f"{t}-value id {i}" for t, i in ids.items())
        console.print(f"[green]✓[/green] Avro schemas registered: {names}")
    gateway = gateway_part(ctx.py, root, bootstrap, demo.mqtt, ctx.env(secure.GATEWAY), sec, demo.fmt)
    sup.launch(gateway, 60, "MQTT gateway")


def _start_spark(
    demo: Plan, ctx: Context, sup: Supervisor, backfill: bf.Backfill | None, stored: Path
) -> ManagedProcess | None:
    """Spark's application, not waited for: its JVM warms up while the past is replayed."""
    if "spark" not in demo.parts:
        return None
    root = demo.root
    cmd = [*ctx.py, "pipeline", "all", "-b", demo.bootstrap, "--checkpoint-dir", str(root / "checkpoints")]
    cmd += ["--output-dir", str(root / "parquet"), "--trigger", "2 seconds", *format_args(demo.fmt)]
    if backfill is not None:
        cmd += ["--backfill", f"{backfill.from_ms},{backfill.until_ms}", "--wait-for", str(stored)]
    spark = _part("spark", cmd, "pipeline all running", root, ctx.env(secure.SPARK))
    sup.start(spark)
    return spark


def _run_backfill(demo: Plan, ctx: Context, sup: Supervisor, backfill: bf.Backfill, stored: Path) -> None:
    """Replay the backfill's simulated past, its plan file and the ground truth kept up to date."""
    plan_file = demo.root / "backfill" / "plan.json"
    console.print(
        f"backfill: replaying {_sim(backfill.duration_ms)} of simulated time ({backfill.describe()}), "
        f"1 in {backfill.sample} pavement sensors, a showery spell with coastal fog"
    )
    bf.save_plan(plan_file, backfill, state="replaying")
    _publish_backfill(demo.bootstrap, backfill, state="replaying")
    figures = replay(sup, backfill, demo, ctx)
    bf.save_plan(plan_file, backfill, state="stored", **figures)
    stored.touch()
    _publish_backfill(demo.bootstrap, backfill, state="stored", **figures)


def _start_fleets(
    demo: Plan, ctx: Context, sup: Supervisor, backfill: bf.Backfill | None, fresh: bool
) -> None:
    """The live sensors producing directly and the MQTT devices (from the backfill's end on)."""
    root = demo.root
    live = [*ctx.py, "sensors", "-b", demo.bootstrap, "--speed", str(demo.speed), "--quiet"]
    if backfill is not None:
        live += backfill.live_args() if fresh and demo.speed == 1 else backfill.showcase_arg()
    fleet = root / "fleet"
    sensors = [*live, *format_args(demo.fmt), "--sensors", str(demo.sensors)]
    sensors += ["--seq-state", str(fleet / "sensors.json")]
    sup.launch(
        _part("sensors", sensors, None, root, ctx.env(secure.SENSORS)),
        10,
        f"{demo.sensors:,} sensors producing directly",
    )
    if "devices" in demo.parts:
        devices = [*live, "--via", "mqtt", "--mqtt", demo.mqtt, "--sensors", str(demo.mqtt_devices)]
        devices += ["--prefix", "mqtt-", "--no-infrastructure", *device_args(ctx.sec)]
        devices += ["--seq-state", str(fleet / "devices.json")]
        sup.launch(
            _part("devices", devices, None, root, ctx.env(secure.SENSORS)),
            10,
            f"{demo.mqtt_devices} MQTT devices via the gateway",
        )


def _report_ready(demo: Plan, ctx: Context) -> None:
    ours = demo.store == "sftraffic"
    metrics = f"   metrics: http://127.0.0.1:{demo.metrics_port}/metrics" if ours else ""
    kind = "" if ours else " (Apache Kafka)" if demo.store == "kafka" else " (external)"
    console.print(
        f"\n[bold]dashboard: http://127.0.0.1:{demo.dashboard_port}[/bold]   store: {demo.bootstrap}"
        f"{kind}   MQTT: {demo.mqtt}{metrics}"
    )
    if ctx.sec is not None:
        console.print(
            f"secured: store SASL_SSL (SCRAM-SHA-256), MQTT over TLS; CA {ctx.sec.ca}; "
            f"client settings (passwords, 0600) in {ctx.sec.dir}/<user>.properties"
        )


def start(demo: Plan, ctx: Context, sup: Supervisor) -> None:
    """Start the plan's parts in order through ``sup``, each ready before the next but Spark
    (its JVM warms up meanwhile); the backfill and the batch jobs over it before the live fleets."""
    replicas = _start_store(demo, ctx, sup)
    _start_messaging(demo, ctx, sup, replicas)
    backfill, fresh = backfill_plan(demo)
    stored = demo.root / "backfill" / "stored"
    if backfill is not None and not fresh and not stored.exists():
        console.print("[yellow]backfill interrupted: the batch jobs take what was stored[/yellow]")
        stored.touch()
    spark = _start_spark(demo, ctx, sup, backfill, stored)
    dash = f"dashboard on http://127.0.0.1:{demo.dashboard_port}"
    board = dashboard_part(ctx.py, demo.root, demo.bootstrap, demo.dashboard_port, ctx.env(secure.DASHBOARD))
    sup.launch(board, 60, dash)
    if backfill is not None and fresh:
        _run_backfill(demo, ctx, sup, backfill, stored)
    if spark is not None and backfill is not None:
        # the batch first, with the machine to itself: the live fleets catch up afterwards
        doing = _spark_doing(spark)
        wait_line(sup, spark, "backfill batch done", 300, "batch jobs over the backfill", doing)
        _report_batch(spark)
    _start_fleets(demo, ctx, sup, backfill, fresh)
    if spark is not None:
        sup.wait_ready(spark, 300, "Spark streaming jobs", _spark_doing(spark))
    _report_ready(demo, ctx)


def wait(sup: Supervisor) -> None:
    """Until Ctrl-C (or SIGTERM): a lost cluster broker is reported, any other part exiting
    ends the wait (the caller then stops every part)."""
    console.print("press Ctrl-C to stop everything")
    sup.watch()


def run(args: argparse.Namespace) -> int:
    """``sftraffic up``: plan, start, wait; then every part stopped, in reverse order."""
    demo = plan(args)
    ctx = prepare(demo)
    sup = Supervisor(demo.root)
    sup.install_signals()
    try:
        start(demo, ctx, sup)
        wait(sup)
    except KeyboardInterrupt:
        pass
    finally:
        sup.stop_all()
    console.print("all parts stopped")
    return 0
