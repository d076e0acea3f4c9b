"""Brokers with StandardAuthorizer and SASL users for the authorization tests: the users and their
passwords, the brokers' settings (:func:`secured`), and how each user reaches them (:class:`Site`)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

from testing import sftraffic
from tests.support.brokers import quiet_logger

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
USERS = ("admin", "prod", "cons", "sadmin", "tadmin", "carol", "nobody", "broker", "txer")
MECH = "SCRAM-SHA-256"


def password(user: str) -> str:
    return f"{user}-pw-0123456789"


def users_add(data_dir: Path) -> None:
    for u in USERS:
        subprocess.run(
            sftraffic("users", "add", u, "--password", password(u), "--data-dir", str(data_dir)),
            check=True,
            capture_output=True,
            timeout=60,
        )


def secured(ports: dict[str, int], **more: object) -> dict[str, object]:
    return {
        "listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items()),
        "sasl.enabled.mechanisms": f"{MECH},PLAIN",
        "authorizer.class.name": AUTHORIZER,
        "super.users": "User:admin;User:broker",
        "group.initial.rebalance.delay.ms": 0,
        **more,
    }


class Site:
    """Brokers (one, or a cluster) and how each user reaches them over SASL."""

    def __init__(self, sasl_bootstrap: str, plain_bootstrap: str) -> None:
        self.sasl = sasl_bootstrap
        self.plain = plain_bootstrap

    def conf(self, user: str, **more: Any) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.sasl,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": MECH,
            "sasl.username": user,
            "sasl.password": password(user),
            "logger": quiet_logger(),
            **more,
        }

    def admin(self, user: str = "admin") -> AdminClient:
        return AdminClient(self.conf(user))

    def cli(self, *args: str, user: str = "admin", check: bool = True) -> subprocess.CompletedProcess[str]:
        sec = ["-X", "security.protocol=SASL_PLAINTEXT", "-X", f"sasl.mechanism={MECH}"]
        sec += ["-X", f"sasl.username={user}", "-X", f"sasl.password={password(user)}"]
        out = subprocess.run(
            sftraffic("streams", *args, "--bootstrap", self.sasl.split(",")[0], *sec),
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "COLUMNS": "200"},
            check=False,
        )
        if check:
            assert out.returncode == 0, out.stdout + out.stderr
        return out

    def topics(self, *names: str, partitions: int = 1, rf: int = 1) -> None:
        a = self.admin()
        futs = a.create_topics([NewTopic(n, num_partitions=partitions, replication_factor=rf) for n in names])
        for f in futs.values():
            f.result(30)
