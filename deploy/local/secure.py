"""``sftraffic up --secure``: certificates, passwords, users and permissions of the demo.

Everything is made at the first secure start and kept in ``<data-dir>/secure/`` (mode 0700;
every file holding a key or a password 0600), then reused by later starts:

* ``ca.pem``, ``server.crt``/``server.key`` (and ``server.pem``, both in one file, for the
  store's ``ssl.keystore.location``): a CA made for this data dir and one server certificate
  for 127.0.0.1/localhost, made with ``trustme`` (on ``cryptography``); the store's SASL_SSL
  listener and Mosquitto's TLS listener present it, every client trusts ``ca.pem`` only.
* ``passwords.json``: one random password per principal (:data:`PRINCIPALS`: the store's
  admin, the gateway, the direct fleet, Spark, the dashboard) and per MQTT device, generated
  with :mod:`secrets`. Besides the 0600 files below that hand each part its own, it is the only
  place they are in clear: the store keeps SCRAM credentials (salted, hashed), Mosquitto
  PBKDF2 hashes, and nothing is printed or put on a command line.
* ``<principal>.properties``: each Kafka client's settings in librdkafka's names
  (``security.protocol=SASL_SSL``, ``sasl.mechanism=SCRAM-SHA-256``, ``sasl.username``,
  ``sasl.password``, ``ssl.ca.location``), handed to that part as ``$SFTRAFFIC_CLIENT_CONFIG``
  (:mod:`framework.client.security`; ``up`` sets the old name ``$SFTRAFFIC_KAFKA_CONFIG`` to the
  same); ``mqtt-gateway.password`` and ``mqtt-devices.txt`` (``device:password`` lines) for the
  MQTT side; ``mosquitto.passwd``/``mosquitto.acl``.
* ``registry-auth.json`` (``--format avro``): the schema registry's users, the same names and
  passwords as the store's (salted PBKDF2 hashes, Karapace's format; :func:`registry_auth`),
  and what each may do: the admin everything, the gateway and the fleet register the stream's
  subjects, Spark and the dashboard read them. The registry itself reaches the store as its
  own user, ``schema-registry``, which may use ``_schemas`` and its election group only.

The store's users (as ``sftraffic users add --data-dir``) and its ACLs (:func:`acls`: least
privilege, through stream permissions (MapR's produceperm, consumeperm, topicperm, adminperm)
where they fit, as ``sftraffic streams grant`` makes them) are written into its data dir before
it starts (:func:`prepare_store`).

A cluster (``up --secure --cluster N``) keeps users and ACLs in its metadata quorum: the users
go into the first broker's data dir before the first start (proposed to the quorum by that
broker, as Kafka's ``kafka-storage format --add-scram``), the ACLs are created through the
admin API once the admin can log in (:func:`prepare_cluster`, :func:`grant_in_cluster`). Every
broker has one SASL_SSL listener, which is also the inter-broker listener: replica fetchers
log in as ``sftraffic-broker`` (a super user), and the quorum's Raft links are authenticated
and encrypted with a shared secret (``controller.quorum.password``); those two passwords are in
``broker-secrets.toml`` (0600, the brokers' ``--config``), never on a command line.
"""

from __future__ import annotations

import json
import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deploy.local.mosquitto import MqttSecurity, write_acl_file, write_password_file
from framework.client.security import write_properties
from framework.errors import StoreError
from framework.security.authorizer import AclBinding
from sensors.layout import STREAM

MECHANISM = "SCRAM-SHA-256"
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ADMIN = "sftraffic-admin"
# Kafka principals of the demo's parts (SCRAM users), besides the admin
GATEWAY, SENSORS, SPARK, DASHBOARD = "gateway", "sensors", "spark", "dashboard"
REGISTRY = "schema-registry"  # the schema registry's own Kafka clients (--format avro)
BROKER = "sftraffic-broker"  # a cluster's replica fetchers (the inter-broker user)
PRINCIPALS = (ADMIN, GATEWAY, SENSORS, SPARK, DASHBOARD, REGISTRY, BROKER)
REGISTRY_TOPIC, REGISTRY_GROUP = "_schemas", "schema-registry"  # sftraffic registry's defaults
MQTT_GATEWAY = "sftraffic-gateway"  # the gateway's MQTT user (devices are named by sensor id)


@dataclass(frozen=True)
class Secrets:
    """The files of ``<data-dir>/secure``."""

    dir: Path

    @property
    def ca(self) -> Path:
        return self.dir / "ca.pem"

    @property
    def server_pem(self) -> Path:
        return self.dir / "server.pem"

    @property
    def passwords_file(self) -> Path:
        return self.dir / "passwords.json"

    def properties(self, principal: str) -> Path:
        return self.dir / f"{principal}.properties"

    @property
    def broker_secrets(self) -> Path:
        return self.dir / "broker-secrets.toml"

    @property
    def registry_auth(self) -> Path:
        return self.dir / "registry-auth.json"

    def registry_url(self, port: int, principal: str | None = None) -> str:
        """The registry's https URL, with ``principal``'s Basic credentials when given."""
        if principal is None:
            return f"https://127.0.0.1:{port}"
        return f"https://{principal}:{self.passwords()[f'kafka:{principal}']}@127.0.0.1:{port}"

    @property
    def mqtt_gateway_password(self) -> Path:
        return self.dir / "mqtt-gateway.password"

    @property
    def mqtt_devices(self) -> Path:
        return self.dir / "mqtt-devices.txt"

    @property
    def mqtt(self) -> MqttSecurity:
        return MqttSecurity(
            certfile=self.dir / "server.crt",
            keyfile=self.dir / "server.key",
            password_file=self.dir / "mosquitto.passwd",
            acl_file=self.dir / "mosquitto.acl",
        )

    def passwords(self) -> dict[str, str]:
        data: dict[str, str] = json.loads(self.passwords_file.read_text())
        return data


def _password() -> str:
    return secrets.token_urlsafe(24)


def _private(path: Path, text: str) -> None:
    """Write ``text`` readable by the owner only (created so: never readable by others)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(path, 0o600)


def ensure_certs(d: Path) -> bool:
    """A CA and a server certificate for 127.0.0.1/localhost in ``d``; False when already there."""
    if all((d / n).exists() for n in ("ca.pem", "server.crt", "server.key", "server.pem")):
        return False
    import trustme

    ca = trustme.CA(organization_name="sftraffic demo")
    server = ca.issue_cert("127.0.0.1", "localhost", common_name="sftraffic")
    ca.cert_pem.write_to_path(str(d / "ca.pem"))
    chain = b"".join(p.bytes() for p in server.cert_chain_pems)
    (d / "server.crt").write_bytes(chain)
    for name, data in (
        ("server.key", server.private_key_pem.bytes()),
        ("server.pem", server.private_key_and_cert_chain_pem.bytes()),
    ):
        fd = os.open(d / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
    return True


def ensure(root: Path, devices: list[str]) -> tuple[Secrets, list[str]]:
    """Make (or reuse) everything in ``<root>/secure`` for these MQTT ``devices``; returns the
    secrets and what was made this time (for the start-up lines)."""
    d = root / "secure"
    d.mkdir(parents=True, exist_ok=True)
    os.chmod(d, 0o700)
    s = Secrets(d)
    made: list[str] = []
    if ensure_certs(d):
        made.append("certificates")
    try:
        pw = s.passwords() if s.passwords_file.exists() else {}
    except (OSError, ValueError) as exc:
        raise StoreError(f"{s.passwords_file}: unreadable ({exc}); remove it to start afresh") from None
    wanted = [*(f"kafka:{p}" for p in PRINCIPALS), f"mqtt:{MQTT_GATEWAY}", *(f"mqtt:{x}" for x in devices)]
    wanted.append("quorum")  # a cluster's controller.quorum.password
    new = [k for k in wanted if k not in pw]
    if new:
        pw.update({k: _password() for k in new})
        _private(s.passwords_file, json.dumps(pw, indent=1))
        made.append(f"{len(new)} passwords")
    for p in PRINCIPALS:
        write_properties(
            s.properties(p),
            {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": MECHANISM,
                "sasl.username": p,
                "sasl.password": pw[f"kafka:{p}"],
                "ssl.ca.location": str(s.ca),
            },
        )
    _private(s.mqtt_gateway_password, pw[f"mqtt:{MQTT_GATEWAY}"] + "\n")
    mqtt_users = {k.split(":", 1)[1]: v for k, v in pw.items() if k.startswith("mqtt:")}
    _private(s.mqtt_devices, "".join(f"{u}:{v}\n" for u, v in mqtt_users.items() if u != MQTT_GATEWAY))
    write_password_file(s.mqtt.password_file, mqtt_users)
    write_acl_file(s.mqtt.acl_file, [MQTT_GATEWAY])
    _private(s.registry_auth, json.dumps(registry_auth(pw), indent=1))
    # a cluster's passwords, as the brokers' --config (TOML strings: JSON's quoting is TOML's)
    toml = {"sasl.inter.broker.password": pw[f"kafka:{BROKER}"], "controller.quorum.password": pw["quorum"]}
    _private(s.broker_secrets, "".join(f"{json.dumps(k)} = {json.dumps(v)}\n" for k, v in toml.items()))
    return s, made


def registry_auth(pw: dict[str, str], stream: str = STREAM) -> dict[str, object]:
    """The schema registry's auth file: the store's users, who may register the stream's
    subjects (``<stream>.<topic>-value``) and who may read them."""
    from registry.auth import user_entry

    users = [ADMIN, GATEWAY, SENSORS, SPARK, DASHBOARD]
    subjects = f"Subject:{re.escape(stream)}\\."
    may = [(ADMIN, "Write", ".*"), (GATEWAY, "Write", subjects), (SENSORS, "Write", subjects)]
    may += [(SPARK, "Read", subjects), (DASHBOARD, "Read", subjects)]
    return {
        "users": [user_entry(u, pw[f"kafka:{u}"]) for u in users],
        "permissions": [{"username": u, "operation": op, "resource": rx} for u, op, rx in may],
    }


# -- the store ------------------------------------------------------------------------------------
def broker_settings(s: Secrets, listen: str, cluster: bool = False) -> dict[str, str]:
    """The settings of the secured store (``-o KEY=VALUE`` each): one SASL_SSL listener on ``listen``,
    SCRAM-SHA-256, the server certificate, Kafka's StandardAuthorizer with the admin as the only
    super user and nothing allowed that no ACL allows. No password among them. In a ``cluster``
    the listener is the inter-broker one too, its replica fetchers (``sftraffic-broker``, a super
    user) trust the CA, and the passwords come from ``broker-secrets.toml`` (``--config``)."""
    opts = {
        "listeners": f"SASL_SSL://{listen}",
        "sasl.enabled.mechanisms": MECHANISM,
        "ssl.keystore.location": str(s.server_pem),
        "authorizer.class.name": AUTHORIZER,
        "super.users": f"User:{ADMIN}",
        "allow.everyone.if.no.acl.found": "false",
    }
    if cluster:
        opts["super.users"] = f"User:{ADMIN};User:{BROKER}"
        opts["sasl.mechanism.inter.broker.protocol"] = MECHANISM
        opts["sasl.inter.broker.username"] = BROKER
        opts["ssl.truststore.location"] = str(s.ca)
    return opts


def acls(stream: str = STREAM) -> list[AclBinding]:
    """Least privilege, as ``sftraffic streams grant`` makes it: the gateway and the direct fleet
    produce to the stream; Spark consumes and produces (its results are topics of the stream) in
    transactions (its transactional ids: ``sftraffic-pipeline-`` prefixed);
    the dashboard consumes, and may describe the cluster (brokers) and groups (lag); each
    consumer may describe its own groups."""
    from framework.security.authorizer import AclOperation, PatternType, Permission, ResourceType
    from framework.security.stream_permissions import bindings

    grants = {GATEWAY: ("produce",), SENSORS: ("produce",), SPARK: ("produce", "consume")}
    grants[DASHBOARD] = ("consume",)
    out = [b for user, perms in grants.items() for p in perms for b in bindings(stream, p, f"User:{user}")]
    # librdkafka's consumers look their group's coordinator up even when they only assign
    # partitions and commit nothing (FindCoordinator: Describe on the group)
    for user, rt, name, pt in (
        (SPARK, ResourceType.GROUP, "sftraffic-spark", PatternType.PREFIXED),
        (DASHBOARD, ResourceType.GROUP, "*", PatternType.LITERAL),  # and the lag of every group
        (DASHBOARD, ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL),  # brokers, groups
    ):
        out.append(AclBinding(rt, name, pt, f"User:{user}", "*", AclOperation.DESCRIBE, Permission.ALLOW))
    # the schema registry: its topic (created at its first start, compacted) and its groups (the
    # election's, and its readers' schema-registry-reader-<id>)
    registry = f"User:{REGISTRY}"
    for op in (
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.CREATE,
        AclOperation.DESCRIBE,
        AclOperation.DESCRIBE_CONFIGS,
    ):
        out.append(
            AclBinding(
                ResourceType.TOPIC, REGISTRY_TOPIC, PatternType.LITERAL, registry, "*", op, Permission.ALLOW
            )
        )
    for op in (AclOperation.READ, AclOperation.DESCRIBE):
        out.append(
            AclBinding(
                ResourceType.GROUP, REGISTRY_GROUP, PatternType.PREFIXED, registry, "*", op, Permission.ALLOW
            )
        )
    # the streaming sinks' transactional producers (pipelines.sink: sftraffic-pipeline-<query>-...)
    for op in (AclOperation.WRITE, AclOperation.DESCRIBE):
        out.append(
            AclBinding(
                ResourceType.TRANSACTIONAL_ID,
                "sftraffic-pipeline-",
                PatternType.PREFIXED,
                f"User:{SPARK}",
                "*",
                op,
                Permission.ALLOW,
            )
        )
    return out


def prepare_cluster(first_data_dir: Path, s: Secrets) -> None:
    """Before a cluster's start: every user into its first broker's data dir (as ``sftraffic
    users add --data-dir``), which proposes them to the quorum; the ACLs follow once it runs
    (:func:`grant_in_cluster`)."""
    _add_users(first_data_dir, s)


def grant_in_cluster(bootstrap: str, timeout: float = 60.0) -> None:
    """The demo's ACLs through the admin API (CreateAcls; an ACL already there stays as it is),
    as the admin (this process's client security): once the quorum has the users, the admin's
    first login succeeds; until then this waits, at most ``timeout``."""
    import time

    from framework.client.acls import create_acls
    from framework.client.security import check_credentials, wire_client

    deadline = time.monotonic() + timeout
    while True:
        try:
            check_credentials(bootstrap)
            break
        except (StoreError, OSError) as exc:
            if time.monotonic() > deadline:
                raise StoreError(f"the cluster never let the admin in ({exc})") from None
            time.sleep(0.5)
    with wire_client(bootstrap, timeout, client_id="sftraffic-up") as c:
        failed = create_acls(c, acls())
    if failed:
        b, code, message = failed[0]
        raise StoreError(f"the demo's ACLs: {b}: error {code} {message or ''}")


def _add_users(data_dir: Path, s: Secrets) -> Any:
    from framework import config as cfg
    from framework.metadata.store import MetadataStore
    from framework.security import scram

    pw = s.passwords()
    data_dir.mkdir(parents=True, exist_ok=True)
    store = MetadataStore(data_dir, cfg.BrokerConfig.load(overrides={"log.dirs": str(data_dir)}, environ={}))
    store.load()
    for p in PRINCIPALS:
        store.scram_credentials(p, [scram.from_password(MECHANISM, pw[f"kafka:{p}"])], [])
    return store


def prepare_store(data_dir: Path, s: Secrets) -> None:
    """Before the store starts: its SCRAM users (as ``sftraffic users add --data-dir``, with the
    passwords of ``passwords.json``) and the ACLs of :func:`acls`, written into its data dir.
    Users are set again on every start (the passwords file is the reference); an ACL that is
    already there is left as it is."""
    store = _add_users(data_dir, s)
    failed = [e for e in store.create_acls(acls()) if e is not None]
    if failed:
        raise StoreError(f"the demo's ACLs: {failed[0].message}")
