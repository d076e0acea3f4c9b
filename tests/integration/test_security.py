"""Listeners, TLS and SASL with real clients over TCP on 127.0.0.1.

One broker with four listeners (PLAINTEXT, SASL_PLAINTEXT, SASL_SSL, SSL with mutual TLS),
certificates made by ``trustme`` for the test, users made with ``sftraffic users add --data-dir``
before its first start. confluent-kafka, kafka-python and aiokafka each produce and consume over
SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN, with and without TLS; confluent-kafka over mutual TLS.
Then what must be refused (wrong password, unknown user, a plaintext client on a TLS listener,
a request before authenticating, an exchange that never finishes), what must not be on disk
(the password), re-authentication (KIP-368) and the connection limits.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from framework.protocol.frames import encode_request
from framework.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from framework.protocol.messages.metadata import MetadataRequest, MetadataResponse
from testing import BrokerProcess, free_port, sftraffic
from tests.support.brokers import quiet_logger
from tests.support.security import Certs, Raw, users_add

pytestmark = [
    pytest.mark.integration,
    pytest.mark.sftraffic_only(reason="starts brokers with their own listeners, TLS files and users"),
]

PASSWORD = "alice-Secret-0123456789"
MECHS = ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"]
DELAY_MS = 300


class Secure:
    """The module's broker: its listeners' addresses and the files clients need."""

    def __init__(self, tmp: Path) -> None:
        self.certs = Certs(tmp)
        self.data = tmp / "data"
        users_add(self.data, "alice", PASSWORD, "SCRAM-SHA-256", "SCRAM-SHA-512")
        self.ports = {n: free_port() for n in ("PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL", "SSL")}
        listeners = ",".join(f"{n}://127.0.0.1:{p}" for n, p in self.ports.items())
        self.broker = BrokerProcess(
            self.data,
            port=self.ports["PLAINTEXT"],
            overrides={
                "listeners": listeners,
                "sasl.enabled.mechanisms": ",".join(MECHS),
                "ssl.keystore.location": str(self.certs.server_pem),
                "ssl.truststore.location": str(self.certs.ca_pem),
                "ssl.client.auth": "required",
                "ssl.principal.mapping.rules": "RULE:^CN=(alice|bob),.*$/$1/L",
                "connection.failed.authentication.delay.ms": DELAY_MS,
                "connections.authentication.timeout.ms": 2000,
                "sasl.inter.broker.password": "not-Shown-123",
                "group.initial.rebalance.delay.ms": 0,
            },
        ).start()

    def addr(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Any:
    s = Secure(tmp_path_factory.mktemp("secure"))
    yield s
    s.broker.stop()


def make_topic(secure: Secure, name: str) -> None:
    a = AdminClient({"bootstrap.servers": secure.addr("PLAINTEXT"), "logger": quiet_logger()})
    a.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])[name].result(30)


# -- clients ------------------------------------------------------------------------------------
def confluent_conf(
    secure: Secure, mech: str, tls: bool, user: str = "alice", password: str = PASSWORD
) -> dict:
    conf = {
        "bootstrap.servers": secure.addr("SASL_SSL" if tls else "SASL_PLAINTEXT"),
        "security.protocol": "SASL_SSL" if tls else "SASL_PLAINTEXT",
        "sasl.mechanism": mech,
        "sasl.username": user,
        "sasl.password": password,
        "logger": quiet_logger(),
    }
    if tls:
        conf["ssl.ca.location"] = str(secure.certs.ca_pem)
    return conf


def confluent_roundtrip(conf: dict, topic: str, n: int = 5) -> list[bytes]:
    p = Producer({**conf, "acks": "all"})
    done: list[Any] = []
    for i in range(n):
        p.produce(topic, b"%d" % i, on_delivery=lambda e, m: done.append(e))
    assert p.flush(30) == 0
    assert len(done) == n and all(e is None for e in done), done
    c = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 40
    while len(got) < n and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.close()
    return got


@pytest.mark.parametrize("tls", [False, True], ids=["sasl_plaintext", "sasl_ssl"])
@pytest.mark.parametrize("mech", MECHS)
def test_confluent_kafka(secure: Secure, mech: str, tls: bool, topic_name: Any) -> None:
    topic = topic_name("ck")
    make_topic(secure, topic)
    assert confluent_roundtrip(confluent_conf(secure, mech, tls), topic) == [b"0", b"1", b"2", b"3", b"4"]


@pytest.mark.parametrize("tls", [False, True], ids=["sasl_plaintext", "sasl_ssl"])
@pytest.mark.parametrize("mech", MECHS)
def test_kafka_python(secure: Secure, mech: str, tls: bool, topic_name: Any) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    topic = topic_name("kp")
    make_topic(secure, topic)
    conf: dict[str, Any] = {
        "bootstrap_servers": secure.addr("SASL_SSL" if tls else "SASL_PLAINTEXT"),
        "security_protocol": "SASL_SSL" if tls else "SASL_PLAINTEXT",
        "sasl_mechanism": mech,
        "sasl_plain_username": "alice",
        "sasl_plain_password": PASSWORD,
    }
    if tls:
        conf["ssl_cafile"] = str(secure.certs.ca_pem)
    prod = KafkaProducer(acks="all", **conf)
    for i in range(5):
        prod.send(topic, b"%d" % i).get(timeout=30)
    prod.close()
    cons = KafkaConsumer(topic, group_id=f"g-{topic}", auto_offset_reset="earliest", **conf)
    got: list[bytes] = []
    deadline = time.monotonic() + 40
    while len(got) < 5 and time.monotonic() < deadline:
        for records in cons.poll(timeout_ms=500).values():
            got += [r.value for r in records]
    cons.close()
    assert got == [b"0", b"1", b"2", b"3", b"4"]


@pytest.mark.parametrize("tls", [False, True], ids=["sasl_plaintext", "sasl_ssl"])
@pytest.mark.parametrize("mech", MECHS)
def test_aiokafka(secure: Secure, mech: str, tls: bool, topic_name: Any) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    topic = topic_name("ak")
    make_topic(secure, topic)

    async def run() -> list[bytes]:
        conf: dict[str, Any] = {
            "bootstrap_servers": secure.addr("SASL_SSL" if tls else "SASL_PLAINTEXT"),
            "security_protocol": "SASL_SSL" if tls else "SASL_PLAINTEXT",
            "sasl_mechanism": mech,
            "sasl_plain_username": "alice",
            "sasl_plain_password": PASSWORD,
        }
        if tls:
            conf["ssl_context"] = create_ssl_context(cafile=str(secure.certs.ca_pem))
        prod = AIOKafkaProducer(acks="all", **conf)
        await prod.start()
        try:
            for i in range(5):
                await prod.send_and_wait(topic, b"%d" % i)
        finally:
            await prod.stop()
        cons = AIOKafkaConsumer(topic, group_id=f"g-{topic}", auto_offset_reset="earliest", **conf)
        await cons.start()
        got: list[bytes] = []
        try:
            async with asyncio.timeout(40):
                while len(got) < 5:
                    for records in (await cons.getmany(timeout_ms=500)).values():
                        got += [r.value for r in records]
        finally:
            await cons.stop()
        return got

    assert asyncio.run(run()) == [b"0", b"1", b"2", b"3", b"4"]


def test_mutual_tls_with_confluent_kafka(secure: Secure, topic_name: Any) -> None:
    topic = topic_name("mtls")
    make_topic(secure, topic)
    cert, key = secure.certs.clients["alice"]
    base = {
        "bootstrap.servers": secure.addr("SSL"),
        "security.protocol": "SSL",
        "ssl.ca.location": str(secure.certs.ca_pem),
        "logger": quiet_logger(),
    }
    conf = {**base, "ssl.certificate.location": str(cert), "ssl.key.location": str(key)}
    assert confluent_roundtrip(conf, topic) == [b"0", b"1", b"2", b"3", b"4"]
    # no certificate (ssl.client.auth=required), or one whose subject no mapping rule takes
    mallory_cert, mallory_key = secure.certs.clients["mallory"]
    for refused in (
        base,
        {**base, "ssl.certificate.location": str(mallory_cert), "ssl.key.location": str(mallory_key)},
    ):
        assert not produce_one(refused, topic)
    assert "no ssl.principal.mapping.rules rule applies to 'CN=mallory" in secure.broker.logs()


def produce_one(conf: dict, topic: str, timeout: float = 6.0) -> bool:
    """One message through a producer: True when delivered (errors are swallowed)."""
    errors: list[KafkaError] = []
    p = Producer({**conf, "message.timeout.ms": int(timeout * 1000), "error_cb": errors.append})
    done: list[Any] = []
    p.produce(topic, b"x", on_delivery=lambda e, m: done.append(e))
    p.flush(timeout + 5)
    return len(done) == 1 and done[0] is None  # (a KafkaError == None raises)


# -- refusals -------------------------------------------------------------------------------------
def test_wrong_password_and_unknown_user_are_refused_alike(secure: Secure, topic_name: Any) -> None:
    topic = topic_name("refused")
    make_topic(secure, topic)
    for mech in MECHS:
        for user, pw in (("alice", "wrong"), ("nobody", PASSWORD)):
            errors: list[KafkaError] = []
            conf = confluent_conf(secure, mech, tls=False, user=user, password=pw)
            p = Producer({**conf, "message.timeout.ms": 3000, "error_cb": errors.append})
            done: list[Any] = []
            p.produce(topic, b"x", on_delivery=lambda e, m, done=done: done.append(e))
            p.flush(10)
            assert len(done) == 1 and done[0] is not None, (mech, user)  # never delivered
            auth = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
            assert auth, (mech, user, errors)
            assert "Authentication failed: invalid credentials" in auth[0].str()


@pytest.mark.parametrize("mech", MECHS)
def test_a_failed_exchange_says_one_thing_after_the_delay_then_closes(secure: Secure, mech: str) -> None:
    answers = []
    for user, pw in (("alice", "wrong"), ("nobody", "whatever")):
        raw = Raw(secure.addr("SASL_PLAINTEXT"))
        t0 = time.monotonic()
        resp = raw.authenticate(mech, user, pw)
        elapsed = time.monotonic() - t0
        assert resp.error_code == 58  # SASL_AUTHENTICATION_FAILED
        assert elapsed >= DELAY_MS / 1000 * 0.9
        assert raw.closed()
        answers.append((resp.error_code, resp.error_message, resp.auth_bytes))
        raw.close()
    assert answers[0] == answers[1]


def test_requests_before_authenticating_close_the_connection(secure: Secure) -> None:
    raw = Raw(secure.addr("SASL_PLAINTEXT"))
    assert raw.call(ApiVersionsRequest(), 0, ApiVersionsResponse).error_code == 0  # allowed
    raw.sock.sendall(encode_request(3, 1, 99, "raw", MetadataRequest(topics=None)))
    assert raw.closed()
    raw.close()
    # after authenticating, the same request is answered, with the SASL listener's address
    raw = Raw(secure.addr("SASL_PLAINTEXT"))
    assert raw.authenticate("SCRAM-SHA-256", "alice", PASSWORD).error_code == 0
    md = raw.call(MetadataRequest(topics=[]), 12, MetadataResponse)
    assert [(b.host, b.port) for b in md.brokers] == [("127.0.0.1", secure.ports["SASL_PLAINTEXT"])]
    raw.close()


def test_each_listener_advertises_itself(secure: Secure) -> None:
    raw = Raw(secure.addr("PLAINTEXT"))
    md = raw.call(MetadataRequest(topics=[]), 12, MetadataResponse)
    assert [(b.host, b.port) for b in md.brokers] == [("127.0.0.1", secure.ports["PLAINTEXT"])]
    raw.close()


def test_plaintext_clients_on_tls_listeners_are_refused(secure: Secure, topic_name: Any) -> None:
    topic = topic_name("clear")
    make_topic(secure, topic)
    conf = confluent_conf(secure, "SCRAM-SHA-256", tls=False)
    conf["bootstrap.servers"] = secure.addr("SASL_SSL")
    assert not produce_one(conf, topic)
    # a Kafka request in clear on a TLS port gets no Kafka answer: the handshake fails, it closes
    for listener in ("SASL_SSL", "SSL"):
        raw = Raw(secure.addr(listener))
        raw.sock.sendall(encode_request(18, 0, 1, "raw", ApiVersionsRequest()))
        assert raw.closed()
        raw.close()


def test_an_exchange_that_never_finishes_is_cut_off(secure: Secure) -> None:
    """connections.authentication.timeout.ms=2000: a silent SASL connection, and a TCP
    connection to a TLS listener that never starts its handshake, are closed."""
    for listener in ("SASL_PLAINTEXT", "SSL"):
        raw = Raw(secure.addr(listener))
        t0 = time.monotonic()
        assert raw.closed(within=8.0), listener
        assert 1.5 <= time.monotonic() - t0 <= 6.0
        raw.close()


def test_describe_configs_never_shows_a_password(secure: Secure) -> None:
    from confluent_kafka.admin import ConfigResource

    a = AdminClient({"bootstrap.servers": secure.addr("PLAINTEXT"), "logger": quiet_logger()})
    res = ConfigResource(ConfigResource.Type.BROKER, "1")
    entries = a.describe_configs([res])[res].result(30)
    pw = entries["sasl.inter.broker.password"]
    assert pw.is_sensitive and pw.value is None
    assert entries["ssl.client.auth"].value == "required" and not entries["ssl.client.auth"].is_sensitive


def test_the_password_is_nowhere_in_the_data_dir(secure: Secure) -> None:
    found = [p for p in secure.data.rglob("*") if p.is_file() and PASSWORD.encode() in p.read_bytes()]
    assert found == []
    assert b"alice" in (secure.data / "__metadata" / "metadata.json").read_bytes()


# -- users --------------------------------------------------------------------------------------
def test_users_add_list_delete_with_a_data_dir(tmp_path: Path) -> None:
    d = tmp_path / "d"
    assert "user bob: SCRAM-SHA-512 set" in users_add(d, "bob", "bob-pw-1234", "SCRAM-SHA-512")
    users_add(d, "carol", "carol-pw-1234")

    def run(*args: str) -> str:
        return subprocess.run(
            sftraffic("users", *args, "--data-dir", str(d)),
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout

    assert run("list").splitlines() == [
        "bob\tSCRAM-SHA-512 (iterations 4096)",
        "carol\tSCRAM-SHA-256 (iterations 4096)",
    ]
    run("delete", "bob")
    assert run("list").splitlines() == ["carol\tSCRAM-SHA-256 (iterations 4096)"]
    assert not any(b"carol-pw-1234" in p.read_bytes() for p in d.rglob("*") if p.is_file())


def test_users_through_a_running_broker(broker_factory: Any) -> None:
    b = broker_factory()  # PLAINTEXT only: AdminClient manages users over it

    def run(*args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            sftraffic("users", *args, "--bootstrap", b.bootstrap),
            capture_output=True,
            text=True,
            timeout=60,
            check=ok,
        )

    run(
        "add",
        "dave",
        "--password",
        "dave-pw-1234",
        "--mechanism",
        "SCRAM-SHA-256",
        "--mechanism",
        "SCRAM-SHA-512",
    )
    assert run("list").stdout.splitlines() == [
        "dave\tSCRAM-SHA-256 (iterations 4096), SCRAM-SHA-512 (iterations 4096)"
    ]
    run("delete", "dave", "--mechanism", "SCRAM-SHA-256")
    assert run("list").stdout.splitlines() == ["dave\tSCRAM-SHA-512 (iterations 4096)"]
    run("delete", "dave")
    assert run("list").stdout == ""
    assert "no user" in run("delete", "dave", ok=False).stderr

    # a user named twice in one request is refused as a whole (Kafka's DUPLICATE_RESOURCE)
    a = AdminClient({"bootstrap.servers": b.bootstrap, "logger": quiet_logger()})
    twice = [
        UserScramCredentialUpsertion("erin", ScramCredentialInfo(m, 4096), b"erin-pw-1234")
        for m in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)
    ]
    with pytest.raises(KafkaException) as refused:
        a.alter_user_scram_credentials(twice)["erin"].result(30)
    assert refused.value.args[0].code() == KafkaError.DUPLICATE_RESOURCE
    assert run("list").stdout == ""


# -- re-authentication and limits -------------------------------------------------------------------
def test_reauthentication(broker_factory: Any, tmp_path: Path, topic_name: Any) -> None:
    """connections.max.reauth.ms=2000: the session lifetime is answered; librdkafka re-authenticates
    on its own and keeps producing; a connection that does not is closed at its next request."""
    data = tmp_path / "reauth"
    users_add(data, "alice", PASSWORD)
    sasl = free_port()
    b = broker_factory(
        {
            "listeners": f"PLAINTEXT://127.0.0.1:{free_port()},SASL_PLAINTEXT://127.0.0.1:{sasl}",
            "connections.max.reauth.ms": 2000,
        },
        data_dir=data,
    )
    addr = f"127.0.0.1:{sasl}"
    raw = Raw(addr)
    assert raw.authenticate("SCRAM-SHA-256", "alice", PASSWORD).session_lifetime_ms == 2000
    time.sleep(1.0)
    assert raw.authenticate("SCRAM-SHA-256", "alice", PASSWORD).error_code == 0  # renewed in time
    time.sleep(1.5)  # 2.5 s after the first exchange, 1.5 s after the second: still valid
    assert raw.call(MetadataRequest(topics=[]), 12, MetadataResponse).brokers
    time.sleep(1.0)  # now past the renewed lifetime
    raw.sock.sendall(encode_request(3, 12, 99, "raw", MetadataRequest(topics=[])))
    assert raw.closed()
    raw.close()
    # a client that re-authenticates keeps one connection working across several lifetimes
    topic = topic_name("reauth")
    errors: list[KafkaError] = []
    p = Producer(
        {
            "bootstrap.servers": addr,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": "alice",
            "sasl.password": PASSWORD,
            "error_cb": errors.append,
            "logger": quiet_logger(),
        }
    )
    done: list[Any] = []
    for i in range(14):
        p.produce(topic, b"%d" % i, on_delivery=lambda e, m: done.append(e))
        p.flush(10)
        time.sleep(0.5)
    assert len(done) == 14 and all(e is None for e in done), done
    assert not [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
    # one connection closed for expiry: the raw one above (librdkafka re-authenticated in time)
    assert b.logs().count("SASL session expired") == 1


def test_connection_limits(broker_factory: Any) -> None:
    b = broker_factory({"max.connections.per.ip": 3, "connections.max.idle.ms": 1000})
    conns = [Raw(b.bootstrap) for _ in range(3)]
    for c in conns:
        assert c.call(ApiVersionsRequest(), 0, ApiVersionsResponse).error_code == 0
    extra = Raw(b.bootstrap)
    assert extra.closed(within=3.0)
    extra.close()
    # idle ones are closed after connections.max.idle.ms, which frees the slots
    t0 = time.monotonic()
    assert all(c.closed(within=6.0) for c in conns)
    assert time.monotonic() - t0 >= 0.5
    again = Raw(b.bootstrap)
    assert again.call(ApiVersionsRequest(), 0, ApiVersionsResponse).error_code == 0
    again.close()
    assert "max.connections.per.ip=3 reached" in b.logs()
