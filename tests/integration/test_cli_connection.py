"""Every client command connects the same way, and fails the same way.

One broker whose only client listener is SASL_SSL (SCRAM-SHA-256, a CA made for the test, an
authorizer with ``admin`` as its super user), and one client properties file written as Kafka's
Java tools take it (``sasl.jaas.config``, a PEM trust store). Every command of the argparse tree
that takes the connection options is run with that same ``--command-config`` file and must
succeed; then each is run with a missing file, a wrong password and an unreachable broker, and
must answer one line on stderr and exit code 2, no traceback. A command added later without an
entry here fails :func:`test_every_client_command_is_covered`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trustme
from confluent_kafka import Consumer, Producer, TopicPartition

from deploy.local.mosquitto import MosquittoProcess
from framework.cli.main import build_parser, main
from framework.client import security
from sensors.layout import topic
from testing import BrokerProcess, ManagedProcess, free_port, sftraffic, wait_for
from tests.support.brokers import TEST_BROKER_SETTINGS, quiet_logger

pytestmark = [
    pytest.mark.integration,
    pytest.mark.sftraffic_only(reason="a broker of its own: a SASL_SSL listener, users and an authorizer"),
]

PASSWORD = "admin-Secret-0123456789"
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
# the commands that are not clients of a cluster, or reach one only through --external
NOT_CLIENTS = {"broker", "config reference", "completion", "registry-passwd", "bench", "chaos"}


@dataclass
class Site:
    bootstrap: str
    dir: Path
    config: Path  # the admin's properties, Java names
    wrong: Path  # the same with a wrong password
    ca: Path

    def conf(self, **extra: Any) -> dict[str, Any]:
        """confluent-kafka settings of the admin, for the test's own clients."""
        return {
            "bootstrap.servers": self.bootstrap,
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": "admin",
            "sasl.password": PASSWORD,
            "ssl.ca.location": str(self.ca),
            "logger": quiet_logger(),
            **extra,
        }


def _java_properties(path: Path, ca: Path, pw: str) -> Path:
    path.write_text(
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-256\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
        f'    username="admin" password="{pw}";\n'
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={ca}\n"
    )
    return path


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    base = tmp_path_factory.mktemp("connection")
    ca = trustme.CA()
    ca_pem = base / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_pem))
    server_pem = base / "server.pem"
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(str(server_pem))
    data = base / "data"
    pw = base / "admin.password"
    pw.write_text(PASSWORD + "\n")
    assert main(["users", "add", "admin", "--password-file", str(pw), "--data-dir", str(data)]) == 0
    ports = {"PLAINTEXT": free_port(), "SASL_SSL": free_port()}  # PLAINTEXT: only the harness's
    settings = {
        **TEST_BROKER_SETTINGS,
        "listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items()),
        "sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "ssl.keystore.location": str(server_pem),
        "authorizer.class.name": AUTHORIZER,
        "super.users": "User:admin",
        "allow.everyone.if.no.acl.found": "false",
    }
    broker = BrokerProcess(data, port=ports["PLAINTEXT"], overrides=settings).start()
    s = Site(
        f"127.0.0.1:{ports['SASL_SSL']}",
        base,
        _java_properties(base / "admin.properties", ca_pem, PASSWORD),
        _java_properties(base / "wrong.properties", ca_pem, "not-the-password"),
        ca_pem,
    )
    try:
        yield s
    finally:
        broker.stop()


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No connection from the environment; an in-process application command's security
    settings (security.configure) do not outlive its test."""
    for var in ("SFTRAFFIC_BOOTSTRAP", security.ENV, "SFTRAFFIC_KAFKA_CONFIG", "SFTRAFFIC_REGISTRY"):
        monkeypatch.setenv(var, "unset")
        monkeypatch.delenv(var)
    monkeypatch.setattr(security, "_overrides", {})
    monkeypatch.setenv("COLUMNS", "200")


RAN: set[str] = set()  # the commands the success tests ran, by their path in the parser tree


def _ran(argv: tuple[str, ...] | list[str]) -> None:
    RAN.add(" ".join(argv[:2]) if " ".join(argv[:2]) in CLIENT_COMMANDS else argv[0])


def run(site: Site, *argv: str, stdin: str = "", timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``sftraffic ARGV -b <SASL_SSL> --command-config <admin's file>`` as a subprocess."""
    _ran(argv)
    cmd = sftraffic(*argv, "-b", site.bootstrap, "--command-config", str(site.config))
    return subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout, check=False)


def ok(r: subprocess.CompletedProcess[str]) -> str:
    assert r.returncode == 0, f"{r.args}\n{r.stdout}\n{r.stderr}"
    return r.stdout


def started(
    site: Site, name: str, argv: list[str], ready: str | Callable[[str], bool], connect: bool = True
) -> ManagedProcess:
    """A long-running command (with the admin's connection unless it gives its own), once it
    says it is ready."""
    _ran(argv)
    conn = ["-b", site.bootstrap, "--command-config", str(site.config)] if connect else []
    cmd = sftraffic(*argv, *conn)
    return ManagedProcess(name, cmd, ready=ready, log=site.dir / f"{name}.log", grace=30.0).start(90)


def keep(stack: ExitStack, p: ManagedProcess) -> ManagedProcess:
    """``p``, stopped when ``stack`` closes (a failed test leaves nothing running)."""
    stack.callback(p.stop)
    return p


def stopped_cleanly(p: ManagedProcess) -> None:
    assert p.alive(), p.tail(30)
    p.signal(signal.SIGINT)
    assert p.proc is not None
    try:
        rc = p.proc.wait(60)
    except subprocess.TimeoutExpired:  # where it hangs, for whoever reads the failure
        stacks = _stacks(p.proc.pid)
        p.proc.kill()
        raise AssertionError(f"no exit 60 s after SIGINT\n{stacks}\n{p.tail(30)}") from None
    assert rc in (0, 130, -signal.SIGINT), p.tail(30)
    assert "Traceback" not in p.logs(), p.tail(40)


def _stacks(pid: int) -> str:
    """Every thread's stack of a running process (py-spy, native frames too), or why not."""
    exe = Path(sys.executable).with_name("py-spy")
    try:
        cmd = [str(exe), "dump", "--native", "--pid", str(pid)]
        out = subprocess.run(cmd, check=False, capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"(no stacks: {exc})"
    return out.stdout.decode(errors="replace") + out.stderr.decode(errors="replace")


# -- every client command, with the same file --------------------------------------------------------
def _seed(site: Site, topic: str, group: str, n: int = 3) -> None:
    """Records in ``topic`` and ``group``'s offsets on it, with the test's own clients."""
    p = Producer(site.conf())
    for i in range(n):
        p.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode())
    assert p.flush(30) == 0
    c = Consumer(
        site.conf(**{"group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    )
    c.subscribe([topic])
    got = 0
    while got < n:
        m = c.poll(10)
        assert m is not None and m.error() is None
        got += 1
    c.commit(asynchronous=False)
    c.close()


# which success test runs which command: together, every client command
APPLICATION = {"sensors", "registry", "gateway", "dashboard", "pipeline", "mirror"}
ELSEWHERE = {
    # `up --external` on a secured cluster runs the whole demo: tests/system/test_up.py
    "up",
    # its locust users speak PLAINTEXT only: it refuses security settings in one line (below)
    "load",
}


def test_the_store_commands_with_one_file(site: Site) -> None:
    RAN.clear()
    t, g, s = "orders", "billing", "fleet"
    ok(run(site, "topics", "create", t, "--partitions", "2"))
    ok(run(site, "produce", t, "-K", ":", stdin="k1:hello\nk2:world\n"))
    out = ok(run(site, "consume", t, "--from-beginning", "-e", "-f", "%k=%v\\n"))
    assert sorted(out.split()) == ["k1=hello", "k2=world"]
    _seed(site, t, g)
    assert t in [x["name"] for x in json.loads(ok(run(site, "topics", "list", "-o", "json")))["topics"]]
    ok(run(site, "topics", "describe", t))
    ok(run(site, "topics", "alter", t, "--partitions", "3", "-c", "retention.ms=86400000"))
    ok(run(site, "configs", "alter", "--topic", t, "--add-config", "segment.ms=3600000"))
    described = json.loads(ok(run(site, "configs", "describe", "--topic", t, "-o", "json")))
    assert "segment.ms" in json.dumps(described)
    assert g in ok(run(site, "groups", "list"))
    ok(run(site, "groups", "describe", g, "--members"))
    ok(run(site, "groups", "reset-offsets", g, "--topic", t, "--to-earliest", "--execute"))
    ok(run(site, "groups", "delete", g))
    ok(run(site, "acls", "add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", t))
    assert "User:alice" in ok(run(site, "acls", "list", "--topic", t))
    ok(run(site, "acls", "remove", "--allow-principal", "User:alice", "--operation", "Read", "--topic", t))
    ok(run(site, "users", "add", "bob", "--password", "-", stdin="bob-Secret-0123456789\n"))
    assert "bob" in ok(run(site, "users", "list"))
    ok(run(site, "users", "delete", "bob"))
    ok(run(site, "streams", "create", s, "--ttl", "7d"))
    ok(run(site, "streams", "list"))
    ok(run(site, "streams", "alter", s, "--ttl", "14d"))
    ok(run(site, "streams", "grant", s, "alice", "--consume"))
    ok(run(site, "streams", "describe", s))
    ok(run(site, "streams", "revoke", s, "alice", "--consume"))
    ok(run(site, "streams", "delete", s))
    info = json.loads(ok(run(site, "cluster", "info", "-o", "json")))
    assert len(info["brokers"]) == 1
    ok(
        run(
            site,
            "cluster",
            "roll",
            "--restart-command",
            f"{sys.executable} -c pass # {{id}}",
            "--timeout",
            "60",
        )
    )
    _hanging_transaction(site, t)
    listed = json.loads(ok(run(site, "transactions", "list", "-o", "json")))
    assert "hanging" in json.dumps(listed)
    ok(run(site, "transactions", "describe", "hanging"))
    producers = json.loads(
        ok(run(site, "transactions", "describe-producers", "--topic", t, "--partition", "0", "-o", "json"))
    )
    (start,) = [
        p["current_txn_start_offset"]
        for p in producers["active_producers"]
        if p["current_txn_start_offset"] >= 0
    ]
    ok(run(site, "transactions", "abort", "--topic", t, "--partition", "0", "--start-offset", str(start)))
    ok(run(site, "topics", "delete", t))
    assert set(CLIENT_COMMANDS) - APPLICATION - ELSEWHERE == RAN


def _hanging_transaction(site: Site, topic: str) -> None:
    """An open transaction on partition 0 of ``topic`` whose producer goes away."""
    code = (
        "import sys, json; from confluent_kafka import Producer\n"
        "p = Producer(json.loads(sys.argv[1])); p.init_transactions(30); p.begin_transaction()\n"
        "p.produce(sys.argv[2], value=b'open', partition=0); p.flush(30)\n"
        "import os; os._exit(0)\n"  # no commit, no abort, no close: the transaction hangs
    )
    conf = {k: v for k, v in site.conf().items() if k != "logger"}
    conf["transactional.id"] = "hanging"
    subprocess.run([sys.executable, "-c", code, json.dumps(conf), topic], check=True, timeout=60)


@pytest.fixture(scope="module")
def mqtt(site: Site) -> Iterator[MosquittoProcess]:
    with MosquittoProcess(site.dir / "mosquitto") as m:
        yield m


def test_the_application_commands_with_one_file(site: Site, mqtt: MosquittoProcess) -> None:
    RAN.clear()
    ok(run(site, "sensors", "--sensors", "20", "--duration", "30", "--speed", "max", "--quiet"))
    traffic = topic("traffic")
    with ExitStack() as running:
        registry = keep(
            running,
            started(site, "registry", ["registry", "--listen", f"127.0.0.1:{free_port()}"], "listening on"),
        )
        gateway = keep(
            running, started(site, "gateway", ["gateway", "--mqtt", mqtt.address, "--id", "gw-c"], "ready")
        )
        dash_port = free_port()
        dashboard = keep(
            running, started(site, "dashboard", ["dashboard", "--port", str(dash_port)], "dashboard on")
        )
        wait_for(lambda: _health(dash_port) is not None, 60, 0.2, "the dashboard's /api/health")
        mirror = keep(running,
            started(
                site,
                "mirror",
                [
                    "mirror", "--source-alias", "here", "--topics", re.escape(traffic),
                    "--source-bootstrap-server", site.bootstrap, "--source-command-config", str(site.config),
                    "--target-bootstrap-server", site.bootstrap, "--target-command-config", str(site.config),
                ],
                "copying",
                connect=False,
            )
        )  # fmt: skip
        pipeline = ok(
            run(
                site, "pipeline", "aggregates", "--batch", "--checkpoint-dir", str(site.dir / "ck"),
                "--output-dir", str(site.dir / "out"), timeout=300,
            )
        )  # fmt: skip
        summary = json.loads(next(x for x in pipeline.splitlines() if x.startswith('{"aggregates"')))
        assert summary["aggregates"] > 0  # the fleet's events, read over SASL_SSL by Spark
        wait_for(lambda: _has_records(site, f"here.{traffic}"), 60, 0.5, "the mirror's copy")
        for p in (mirror, dashboard, gateway, registry):
            stopped_cleanly(p)
    assert RAN == APPLICATION


def _health(port: int) -> Any:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=5) as r:
            return json.load(r)
    except OSError:  # not listening yet
        return None


def _has_records(site: Site, name: str) -> bool:
    c = Consumer(site.conf(**{"group.id": "probe", "enable.auto.commit": False}))
    try:
        md = c.list_topics(name, timeout=10).topics.get(name)
        if md is None or md.error is not None:
            return False
        return any(c.get_watermark_offsets(TopicPartition(name, p), timeout=10)[1] > 0 for p in md.partitions)
    finally:
        c.close()


# -- and fails the same way ------------------------------------------------------------------------
def client_commands() -> dict[str, list[str]]:
    """Every leaf command taking the connection options, with the arguments it needs to parse."""
    needs: dict[str, list[str]] = {
        "produce": ["t"], "consume": ["t", "-e"],
        "topics create": ["t"], "topics describe": ["t"], "topics alter": ["t", "--partitions", "2"],
        "topics delete": ["t"],
        "streams create": ["s"], "streams describe": ["s"], "streams alter": ["s", "--ttl", "1d"],
        "streams delete": ["s"], "streams grant": ["s", "u", "--consume"],
        "streams revoke": ["s", "u", "--consume"],
        "groups describe": ["g"], "groups delete": ["g"],
        "groups reset-offsets": ["g", "--topic", "t", "--to-earliest"],
        "configs describe": ["--topic", "t"], "configs alter": ["--topic", "t", "--add-config", "a=b"],
        "acls add": ["--allow-principal", "User:u", "--operation", "Read", "--topic", "t"],
        "acls remove": ["--allow-principal", "User:u", "--operation", "Read", "--topic", "t"],
        "users add": ["u", "--password", "u-pw-0123456789"], "users delete": ["u"],
        "transactions describe": ["x"],
        "transactions describe-producers": ["--topic", "t", "--partition", "0"],
        "transactions abort": ["--topic", "t", "--partition", "0", "--start-offset", "0"],
        "cluster roll": ["--restart-command", "true {id}"],
        "pipeline": ["aggregates", "--batch"], "load": ["smoke", "--no-start-services"],
        "mirror": ["--source-alias", "a"],
    }  # fmt: skip
    out: dict[str, list[str]] = {}
    for path, parser in _leaves(build_parser(), []):
        name = " ".join(path)
        opts = {o for a in parser._actions for o in a.option_strings}
        if "--command-config" in opts or "--source-command-config" in opts:
            out[name] = [*path, *needs.get(name, [])]
    return out


def _leaves(parser: argparse.ArgumentParser, path: list[str]) -> Iterator[tuple[list[str], Any]]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not any(a.required for a in subs):  # ``bench``: its scenarios take its options
        yield path, parser
        return
    for name, child in subs[0].choices.items():
        yield from _leaves(child, [*path, name])


CLIENT_COMMANDS = client_commands()
CASES = list(CLIENT_COMMANDS.values())


def test_no_client_command_lacks_the_connection_options() -> None:
    every = {" ".join(p) for p, _ in _leaves(build_parser(), [])}
    assert every - set(CLIENT_COMMANDS) == NOT_CLIENTS
    assert set(CLIENT_COMMANDS) >= APPLICATION


def _with(argv: list[str], site: Site, how: str, tmp: Path) -> list[str]:
    if argv[0] == "mirror":  # two clusters: break the source, keep the target good
        good = ["--target-bootstrap-server", site.bootstrap, "--target-command-config", str(site.config)]
        broken = {
            "missing file": ["--source-bootstrap-server", site.bootstrap, "--source-command-config",
                             str(tmp / "nope.properties")],
            "wrong password": ["--source-bootstrap-server", site.bootstrap, "--source-command-config",
                               str(site.wrong)],
            "unreachable": ["--source-bootstrap-server", f"127.0.0.1:{free_port()}",
                            "--source-command-config", str(site.config)],
        }[how]  # fmt: skip
        return [*argv, *good, *broken]
    b = "--external" if argv[0] == "up" else "-b"  # up's cluster to use instead of its own
    conn = {
        "missing file": [b, site.bootstrap, "--command-config", str(tmp / "nope.properties")],
        "wrong password": [b, site.bootstrap, "--command-config", str(site.wrong)],
        "unreachable": [b, f"127.0.0.1:{free_port()}", "--command-config", str(site.config)],
    }[how]
    return [*argv, *conn]


EXPECTED = {
    "missing file": "No such file",
    "wrong password": "refused to authenticate as 'admin'",
    "unreachable": "no broker reachable",
}
# the load test's users cannot log in: any security setting is refused, whatever the store says
LOAD_REFUSES = "a secured store is not supported"
# an edge gateway parks what it receives on disk, and the dashboard shows a banner, until the
# store answers: started while it is down they warn in one line and run (tests/integration/
# test_gateway.py, tests/unit/dashboard/test_status.py)
RUN_WITHOUT_STORE = {"gateway", "dashboard"}
BAD = [
    (argv, how)
    for argv in CASES
    for how in EXPECTED
    if not (how == "unreachable" and argv[0] in RUN_WITHOUT_STORE)
]


@pytest.mark.parametrize(("argv", "how"), BAD, ids=[f"{' '.join(a[:2])}-{h}" for a, h in BAD])
def test_bad_connections_are_one_line_and_exit_2(
    site: Site, argv: list[str], how: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    expected = LOAD_REFUSES if argv[0] == "load" and how != "missing file" else EXPECTED[how]
    rc = main(_with(argv, site, how, tmp_path))
    out, err = capfd.readouterr()
    lines = err.strip().splitlines()
    assert rc == 2, out + err
    assert len(lines) == 1 and "Traceback" not in err, err
    assert expected in lines[0], lines[0]
    assert os.environ.get(security.ENV) in (None, str(site.config.resolve()), str(site.wrong.resolve()))
