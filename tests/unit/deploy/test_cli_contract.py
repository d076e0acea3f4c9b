"""Every ``sftraffic`` command line in ``deploy/`` is one the CLI accepts, and every setting it
is given (``-o KEY=VALUE``, a ``--config`` file, ``SFTRAFFIC_*`` variables) one the broker
knows, with a value it takes: the deployment files cannot drift from the command contract.

The commands are parsed by the CLI's own parser (``framework.cli.main.build_parser``); a
broker's settings are resolved as ``sftraffic broker`` resolves them at start
(``framework.cli.broker.load_config``: file < environment < flags), then its listeners and
quorum are checked as the broker checks them before it binds anything.

The command contract itself, over the whole argparse tree: every client command connects the
same way (``-b/--bootstrap-server``, ``-X``, ``--command-config``; ``mirror`` with a prefix per
cluster), and the commands that otherwise start a store of their own (``up``, ``bench``,
``chaos``) take ``--external`` for a running one, ``--bootstrap`` there a deprecated alias.
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import socket
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from framework import config as cfg
from framework.cli.broker import load_config
from framework.cli.main import build_parser
from framework.metadata.quorum import parse_voters
from framework.security.listeners import ListenerConfig
from tests.support import deployfiles as df
from tests.support.deployfiles import Invocation

INVOCATIONS = df.all_invocations()
BROKERS = [i for i in INVOCATIONS if i.argv[:1] == ["broker"]]


def _id(inv: Invocation) -> str:
    return inv.where


@functools.cache
def _parser() -> argparse.ArgumentParser:
    return build_parser()


def _parse(inv: Invocation) -> argparse.Namespace:
    try:
        return _parser().parse_args(inv.argv)
    except SystemExit as exc:
        raise AssertionError(f"the CLI refuses {inv}") from exc


def _app_variables() -> set[str]:
    """SFTRAFFIC_* names the application and the CLI read (string literals in their source)."""
    names: set[str] = set()
    for package in ("framework", "sensors", "pipelines", "dashboard", "deploy"):
        for path in (df.ROOT / package).rglob("*.py"):
            names.update(re.findall(r"[\"'](SFTRAFFIC_[A-Z0-9_]*[A-Z0-9])[\"']", path.read_text()))
    return names


def _read_by_the_broker(var: str, value: str) -> bool:
    """The broker takes ``var`` as one of its settings (it ignores the applications' ones)."""
    config = cfg.BrokerConfig.load(None, None, environ={var: value})
    return any(var in source for source in config.sources.values())


def _resolve(inv: Invocation, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> cfg.BrokerConfig:
    """The broker's settings as ``sftraffic broker`` would resolve them where ``inv`` runs."""
    args = _parse(inv)
    if args.config:
        assert args.config in inv.files, f"{inv}: --config {args.config} is not mounted there"
        local = tmp_path / Path(args.config).name
        local.write_text(inv.files[args.config])
        args.config = str(local)
    for var in list(os.environ):
        if var.startswith("SFTRAFFIC_"):
            monkeypatch.delenv(var)
    for var, value in inv.env.items():
        monkeypatch.setenv(var, value)
    monkeypatch.setattr(socket, "gethostname", lambda: inv.hostname)
    return load_config(args)


def test_the_deployment_files_run_sftraffic() -> None:
    where = {i.where.split(" ")[0] for i in INVOCATIONS}
    assert where == {"compose", "k8s", "systemd"}
    commands = {i.argv[0] for i in INVOCATIONS}
    assert {"broker", "gateway", "sensors", "pipeline", "dashboard", "streams", "topics"} <= commands
    assert len(BROKERS) == 3 + 3 + 1  # compose, the StatefulSet's pods, the systemd unit


@pytest.mark.parametrize("inv", INVOCATIONS, ids=_id)
def test_every_command_line_is_accepted_by_the_cli(inv: Invocation) -> None:
    args = _parse(inv)
    assert callable(args.func)


@pytest.mark.parametrize("inv", INVOCATIONS, ids=_id)
def test_every_sftraffic_variable_is_read_by_someone(inv: Invocation) -> None:
    """A broker's SFTRAFFIC_<KEY> must be a broker setting (the broker parses its value);
    anything else one the applications read."""
    apps = _app_variables()
    broker = inv.argv[0] == "broker"
    unknown = sorted(
        var
        for var, value in inv.env.items()
        if var.startswith("SFTRAFFIC_")
        and not (broker and _read_by_the_broker(var, value))
        and (broker or var not in apps)
    )
    assert not unknown, f"{inv.where} sets {unknown}, which nothing there reads"


@pytest.mark.parametrize("inv", BROKERS, ids=_id)
def test_broker_settings_resolve_and_make_a_cluster_member(
    inv: Invocation, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = _resolve(inv, tmp_path, monkeypatch)  # unknown keys, bad values: ConfigError
    listeners = ListenerConfig.from_config(config)  # as the broker checks them at start
    voters = parse_voters(config.list("controller.quorum.voters"))
    assert len(voters) == 3 and config.node_id in voters, f"{inv}: node {config.node_id} is no voter"
    # the other brokers reach this one's inter-broker listener at a name of its own
    advertised = config.str("advertised.listeners")
    inter = next(a for a in advertised.split(",") if a.startswith(f"{listeners.inter_broker}://"))
    assert "127.0.0.1" not in inter and "localhost" not in inter, f"{inv}: advertises {inter}"
    assert config.str("metrics.listen"), f"{inv}: no health/metrics endpoint"
    assert config.int("default.replication.factor") == 3
    assert config.int("min.insync.replicas") == 2


def test_compose_brokers_bind_their_own_voter_entry_and_advertise_their_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    services = df.compose()["services"]
    for inv in (i for i in BROKERS if i.where.startswith("compose")):
        config = _resolve(inv, tmp_path, monkeypatch)
        voters = parse_voters(config.list("controller.quorum.voters"))
        host = voters[config.node_id].split(":")[0]
        assert host == inv.hostname, f"{inv}: node {config.node_id}'s voter entry is {host}"
        advertised = config.str("advertised.listeners")
        assert f"PLAINTEXT://{inv.hostname}:9092" in advertised
        # the EXTERNAL listener is advertised at the port the host publishes
        external = re.search(r"EXTERNAL://127\.0\.0\.1:(\d+)", advertised)
        assert external is not None
        name = inv.where.split()[-1]
        assert f"127.0.0.1:{external.group(1)}:9093" in services[name]["ports"]


def test_k8s_brokers_take_their_id_from_the_pod_ordinal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sts = df.k8s_statefulsets()["sftraffic-broker"]
    service = df.k8s_services()[sts["spec"]["serviceName"]]
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["publishNotReadyAddresses"]
    ids = set()
    for inv in (i for i in BROKERS if i.where.startswith("k8s")):
        assert "--node-id-from-hostname" in inv.argv
        config = _resolve(inv, tmp_path, monkeypatch)
        voters = parse_voters(config.list("controller.quorum.voters"))
        # this pod binds its own entry: <pod>.<headless service>
        assert voters[config.node_id].split(":")[0] == f"{inv.hostname}.{service['metadata']['name']}"
        assert config.str("advertised.listeners").startswith(
            f"PLAINTEXT://{inv.hostname}.{service['metadata']['name']}.{df.NAMESPACE}.svc:"
        )
        ids.add(config.node_id)
    assert ids == set(parse_voters(config.list("controller.quorum.voters")))


def test_k8s_readiness_probe_is_the_brokers_metrics_endpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from framework.server.metrics import MetricsServer

    sts = df.k8s_statefulsets()["sftraffic-broker"]
    container = sts["spec"]["template"]["spec"]["containers"][0]
    probe = container["readinessProbe"]["httpGet"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    inv = next(i for i in BROKERS if i.where.startswith("k8s"))
    config = _resolve(inv, tmp_path, monkeypatch)
    assert int(config.str("metrics.listen").rsplit(":", 1)[1]) == ports[probe["port"]]
    # the endpoint answers that path with 200 (MetricsServer's own routing, no socket)
    server = MetricsServer.__new__(MetricsServer)
    server.render = lambda: b"# metrics\n"  # type: ignore[method-assign]
    assert server._answer(f"GET {probe['path']} HTTP/1.1")[0] == 200
    assert server._answer("GET /nope HTTP/1.1")[0] == 404
    pdb = next(d for _, d in df.k8s_documents() if d["kind"] == "PodDisruptionBudget")
    labels = sts["spec"]["template"]["metadata"]["labels"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert pdb["spec"]["maxUnavailable"] == 1


def test_k8s_network_policy_admits_only_brokers_to_the_controller_port() -> None:
    sts = df.k8s_statefulsets()["sftraffic-broker"]
    labels = sts["spec"]["template"]["metadata"]["labels"]
    ports = {p["name"]: p["containerPort"] for p in sts["spec"]["template"]["spec"]["containers"][0]["ports"]}
    policy = next(d for _, d in df.k8s_documents() if d["kind"] == "NetworkPolicy")
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= labels.items()
    rules = {r["ports"][0]["port"]: r.get("from") for r in policy["spec"]["ingress"]}
    assert set(rules) == set(ports.values())
    (peer,) = rules[ports["controller"]]
    assert peer["podSelector"]["matchLabels"].items() <= labels.items()
    assert rules[ports["metrics"]] is None  # Prometheus, from anywhere


def test_systemd_unit_takes_the_node_id_from_the_instance(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for instance in ("1", "2", "3"):
        (inv,) = df.systemd_invocations(instance)
        config = _resolve(inv, tmp_path, monkeypatch)
        assert config.node_id == int(instance)
        assert str(config.data_dir) == f"/var/lib/sftraffic/broker-{instance}"
    settings = df.unit_settings()
    assert settings["StateDirectory"] == ["sftraffic/broker-%i"]
    assert {"-/etc/sftraffic/broker.env", "-/etc/sftraffic/broker-%i.env"} == set(settings["EnvironmentFile"])


def test_the_layout_jobs_create_every_topic_the_applications_use() -> None:
    """The init jobs create the stream's topics with 3 replicas; the applications would create
    missing ones with 1. Kept in step with sensors.layout, pipelines.jobs and ground truth."""
    from pipelines.jobs import RESULT_TOPICS
    from sensors import ground_truth
    from sensors.layout import STREAM, TOPICS, topic

    wanted = {topic(n) for n in (*TOPICS, *RESULT_TOPICS)} | {ground_truth.TOPIC}
    for prefix in ("compose", "k8s"):
        created: set[str] = set()
        streams: set[str] = set()
        for inv in INVOCATIONS:
            if not inv.where.startswith(prefix):
                continue
            args = _parse(inv)
            if args.command == "topics" and args.action == "create":
                assert args.replication_factor == 3, inv
                created.update(args.names)
            elif args.command == "streams" and args.action == "create":
                assert args.replication_factor == 3, inv
                streams.add(args.name)
        assert streams == {STREAM}, prefix
        assert created == wanted, f"{prefix}: missing {wanted - created}, extra {created - wanted}"


def test_application_addresses_name_services_that_exist() -> None:
    services = df.compose()["services"]
    compose_hosts = {s.get("hostname", n) for n, s in services.items()} | set(services)
    k8s_hosts = set(df.k8s_services())
    for inv in INVOCATIONS:
        if inv.argv[0] == "broker":
            continue
        args = _parse(inv)
        bootstrap = inv.env.get("SFTRAFFIC_BOOTSTRAP", "")
        hosts = [a.rsplit(":", 1)[0] for a in bootstrap.split(",") if a]
        if args.command == "gateway" or getattr(args, "via", None) == "mqtt":
            hosts.append(args.mqtt.rsplit(":", 1)[0])
        if getattr(args, "master", None) and args.master.startswith("spark://"):
            hosts.append(args.master[len("spark://") :].rsplit(":", 1)[0])
        assert hosts or inv.where.startswith("systemd"), f"{inv}: no store address"
        known = compose_hosts if inv.where.startswith("compose") else k8s_hosts
        assert set(hosts) <= known, f"{inv}: {sorted(set(hosts) - known)} is no service"


def test_spark_standalone_services_run_classes_pyspark_ships() -> None:
    import pyspark

    commands = df.compose_spark_commands()
    assert [c[0] for c in commands.values()] == [
        "org.apache.spark.deploy.master.Master",
        "org.apache.spark.deploy.worker.Worker",
    ]
    jars = Path(pyspark.__file__).parent / "jars"
    core = next(jars.glob("spark-core_*.jar"))
    with zipfile.ZipFile(core) as z:
        names = set(z.namelist())
    for command in commands.values():
        assert command[0].replace(".", "/") + ".class" in names
    master = commands["spark-master"]
    worker = commands["spark-worker"]
    url = f"spark://{master[master.index('--host') + 1]}:{master[master.index('--port') + 1]}"
    assert url in worker
    pipeline = _parse(next(i for i in INVOCATIONS if i.where == "compose service pipeline"))
    assert pipeline.master == url


# -- the command contract ----------------------------------------------------------------------
# the commands that start a store of their own unless given --external (a running cluster)
EXTERNAL = {"up", "bench", "chaos"}
# the application's commands (entry points) and the store's that the same set serves: each has
# an epilog with an example and a one-line help
APP_COMMANDS = {
    "up",
    "sensors",
    "gateway",
    "pipeline",
    "dashboard",
    "load",
    "bench",
    "chaos",
    "registry",
    "mirror",
}
EXAMPLED = {*APP_COMMANDS, "registry-passwd"}


def _leaves(
    p: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
    if not any(a.required for a in subs):  # runs by itself (``bench``: its subcommands optional)
        yield " ".join(path), p
    for a in subs:
        for name, sp in a.choices.items():
            yield from _leaves(sp, (*path, name))


def _options(p: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return dict(p._option_string_actions)


COMMANDS = dict(_leaves(_parser()))
CLIENTS = sorted(
    name
    for name, p in COMMANDS.items()
    if any("bootstrap" in o for o in _options(p)) and name.split()[0] not in EXTERNAL and name != "mirror"
)


def test_the_client_commands_are_found() -> None:
    assert {"sensors", "gateway", "pipeline", "dashboard", "registry", "load"} <= set(CLIENTS)
    assert {"topics create", "streams list"} <= set(CLIENTS)


@pytest.mark.parametrize("name", CLIENTS)
def test_every_client_command_takes_the_one_connection_option_set(name: str) -> None:
    opts = _options(COMMANDS[name])
    for flag, dest in (
        ("-b", "bootstrap"),
        ("--bootstrap-server", "bootstrap"),
        ("--bootstrap", "bootstrap"),
        ("-X", "client_config"),
        ("--command-config", "command_config"),
        ("--kafka-config", "command_config"),
    ):
        assert flag in opts and opts[flag].dest == dest, f"{name}: no {flag} (-> {dest})"
    assert opts["-b"] is opts["--bootstrap-server"] is opts["--bootstrap"], name
    # no default of its own: framework.cli.connection resolves $SFTRAFFIC_BOOTSTRAP, a file's
    # bootstrap.servers, then 127.0.0.1:9092
    assert opts["-b"].default is None, f"{name}: -b defaults to {opts['-b'].default!r}"
    assert opts["-X"].default == [] and opts["-X"].nargs is None, name


def test_the_mirror_takes_the_set_once_per_cluster() -> None:
    opts = _options(COMMANDS["mirror"])
    for side in ("source", "target"):
        assert opts[f"--{side}-bootstrap-server"] is opts[f"--{side}"], side
        assert opts[f"--{side}-bootstrap-server"].dest == f"{side}_bootstrap"
        assert opts[f"--{side}-command-config"] is opts[f"--{side}-config"], side
        assert opts[f"--{side}-X"].dest == f"{side}_client_config"


@pytest.mark.parametrize("name", sorted(EXTERNAL))
def test_a_running_cluster_is_external_and_bootstrap_its_deprecated_alias(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    opts = _options(COMMANDS[name])
    assert opts["--external"].dest == "external" and "--bootstrap-server" not in opts
    args = _parser().parse_args([name, "--external", "h:1"])
    assert args.external == "h:1" and capsys.readouterr().err == ""
    args = _parser().parse_args([name, "--bootstrap", "h:2"])
    err = capsys.readouterr().err.strip().splitlines()
    assert args.external == "h:2"
    assert len(err) == 1 and "--bootstrap is deprecated here, use --external h:2" in err[0], err
    assert "deprecated alias of --external" in COMMANDS[name].format_help()
    if name == "up":  # up reaches a secured cluster: its settings come with it
        assert opts["--command-config"].dest == "command_config" and opts["-X"].dest == "client_config"
        args = _parser().parse_args([name, "--external", "h:1", "--command-config", "c.properties"])
        assert args.command_config == "c.properties"


@pytest.mark.parametrize("name", sorted(EXAMPLED))
def test_the_commands_help_ends_with_an_example(name: str) -> None:
    p = COMMANDS[name]
    assert p.formatter_class is argparse.RawDescriptionHelpFormatter, name
    assert p.epilog and f"sftraffic {name} " in p.epilog, f"{name}: no example in its epilog"
    assert p.epilog in p.format_help()  # kept as written (raw), not re-wrapped
    top = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    helps = {a.dest: a.help for a in top._choices_actions}
    assert helps[name] and "\n" not in helps[name], f"{name}: no one-line help"
