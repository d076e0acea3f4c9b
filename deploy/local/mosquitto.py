"""Run a Mosquitto broker with its own config on a chosen port (demo, tests, benchmarks).

:class:`MosquittoProcess` is a :class:`~deploy.local.process.ManagedProcess`: its own session,
SIGTERM then SIGKILL on stop, killed at exit if still running. Readiness is an event: Mosquitto
logs "mosquitto version ... running" once its listener is up. The config (:data:`CONF`) allows
anonymous clients on 127.0.0.1 only and lifts the in-flight and queue limits that would
otherwise throttle (20 in-flight) or drop (1000 queued) QoS 1 traffic to gateways.

**Secured** (``security=MqttSecurity(...)``, what ``sftraffic up --secure`` runs): the one
listener speaks TLS only (the server certificate and key, TLS 1.2+), anonymous clients are
refused, every client authenticates with a username and password from Mosquitto's password
file, and the ACL file lets a device (its username = its sensor id) publish only to its own
topics ``sf/<stream>/<topic>/<sensor-id>`` (``pattern write sf/+/+/%u``) while the gateway
users may read everything under ``sf/``. Both files are written here from plain mappings:
:func:`hash_password` is Mosquitto 2's own format (``$7$``: PBKDF2-HMAC-SHA512, 101 iterations,
a 12-byte salt, both base64), so no ``mosquitto_passwd`` is needed and no password is stored.
A publish the ACL refuses is dropped by Mosquitto (MQTT 5: PUBACK "not authorized").
"""

from __future__ import annotations

import base64
import hashlib
import os
import pwd
import secrets
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from deploy.local.process import ManagedProcess, free_port

# what every broker here sets, behind its listener and authentication lines
_COMMON = """\
persistence {persistence}
persistence_location {data}/
max_inflight_messages 0
max_queued_messages 1000000
max_queued_bytes 0
persistent_client_expiration 1d
set_tcp_nodelay true
log_dest stderr
log_type error
log_type warning
log_type notice
log_type information
connection_messages false
"""

CONF = (
    """\
listener {port} 127.0.0.1
allow_anonymous true
"""
    + _COMMON
)


SECURE_CONF = (
    """\
user {user}
per_listener_settings false
listener {port} 127.0.0.1
certfile {certfile}
keyfile {keyfile}
tls_version tlsv1.2
allow_anonymous false
password_file {password_file}
acl_file {acl_file}
"""
    + _COMMON
)

PBKDF2_ITERATIONS = 101  # Mosquitto 2's default for $7$ hashes
SALT_BYTES = 12


@dataclass(frozen=True)
class MqttSecurity:
    """What a secured Mosquitto needs: TLS material (PEM) and its password and ACL files."""

    certfile: Path  # the server certificate chain
    keyfile: Path
    password_file: Path
    acl_file: Path


def hash_password(password: str, salt: bytes | None = None, iterations: int = PBKDF2_ITERATIONS) -> str:
    """A Mosquitto 2 password-file hash: ``$7$<iterations>$<salt b64>$<PBKDF2-SHA512 b64>``."""
    salt = salt if salt is not None else secrets.token_bytes(SALT_BYTES)
    digest = hashlib.pbkdf2_hmac("sha512", password.encode(), salt, iterations, 64)
    return f"$7${iterations}${base64.b64encode(salt).decode()}${base64.b64encode(digest).decode()}"


def _private(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(path, 0o600)
    return path


def write_password_file(path: Path, users: Mapping[str, str]) -> Path:
    """Mosquitto's password file for ``users`` (name -> password), hashed, mode 0600."""
    for name in users:
        if not name or any(c in name for c in ":\n"):
            raise ValueError(f"MQTT user name {name!r}: empty or holding ':' or a line break")
    return _private(path, "".join(f"{u}:{hash_password(p)}\n" for u, p in users.items()))


def write_acl_file(path: Path, readers: Iterable[str], root: str = "sf") -> Path:
    """The ACL: ``readers`` (gateways) read ``<root>/#``; any user writes ``<root>/+/+/<its name>``."""
    lines = ["# written by deploy/local/mosquitto.py: gateways read every device's topics"]
    for r in readers:
        lines += [f"user {r}", f"topic read {root}/#", ""]
    lines += [
        "# a device (username = sensor id) publishes to its own topics only",
        f"pattern write {root}/+/+/%u",
    ]
    return _private(path, "\n".join(lines) + "\n")


def find_mosquitto() -> str:
    for cand in (shutil.which("mosquitto"), "/usr/sbin/mosquitto", "/usr/local/sbin/mosquitto"):
        if cand and Path(cand).exists():
            return cand
    raise FileNotFoundError(
        "mosquitto is not installed: run ./run demo (installs it) or apt-get install mosquitto"
    )


def _running(line: str) -> bool:
    return "mosquitto version" in line and " running" in line


class MosquittoProcess(ManagedProcess):
    """Mosquitto on 127.0.0.1 (a free port unless given), config and persistence in ``workdir``.

    ``log``: also append its output to that file (``sftraffic up`` keeps one per part).
    """

    def __init__(
        self,
        workdir: Path | str,
        port: int | None = None,
        persistence: bool = False,
        log: Path | str | None = None,
        security: MqttSecurity | None = None,
    ) -> None:
        self.dir = Path(workdir)
        self.security = security
        self.port = port or free_port()
        self.persistence = persistence
        self.conf = self.dir / "mosquitto.conf"
        cmd = ["mosquitto", "-c", str(self.conf)]  # the binary is looked up at launch
        super().__init__("mosquitto", cmd, ready=_running, log=log, grace=10.0)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def launch(self) -> MosquittoProcess:
        """Write the config, then start Mosquitto (see :meth:`ManagedProcess.launch`)."""
        self.cmd = [find_mosquitto(), "-c", str(self.conf)]
        self.dir.mkdir(parents=True, exist_ok=True)
        persistence = "true" if self.persistence else "false"
        if self.security is None:
            text = CONF.format(port=self.port, persistence=persistence, data=self.dir)
        else:
            sec = self.security
            text = SECURE_CONF.format(
                # started as root, Mosquitto would become user "mosquitto", who cannot read
                # the 0600 password file and key: it stays the user who started it
                user=pwd.getpwuid(os.getuid()).pw_name,
                port=self.port,
                persistence=persistence,
                data=self.dir,
                certfile=sec.certfile,
                keyfile=sec.keyfile,
                password_file=sec.password_file,
                acl_file=sec.acl_file,
            )
        self.conf.write_text(text)
        super().launch()
        return self

    def start(self, timeout: float = 15.0) -> MosquittoProcess:
        self.launch().wait_ready(timeout)
        return self

    def __enter__(self) -> MosquittoProcess:
        return self.start()
