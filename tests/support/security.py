"""TLS and SASL for tests: a CA with a broker certificate and client certificates (:class:`Certs`),
SASL users added to a broker's data dir (:func:`users_add`), and a bare Kafka connection for what
clients hide (:class:`Raw`)."""

from __future__ import annotations

import socket
import struct
import subprocess
from pathlib import Path
from typing import Any

import trustme

from framework.protocol.frames import decode_response, encode_request
from framework.protocol.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from framework.protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse
from framework.security.sasl import SaslClient
from testing import sftraffic


class Certs:
    def __init__(self, d: Path) -> None:
        self.ca = trustme.CA()
        self.dir = d
        self.ca_pem = d / "ca.pem"
        self.ca.cert_pem.write_to_path(str(self.ca_pem))
        server = self.ca.issue_cert("127.0.0.1", "localhost", common_name="broker")
        self.server_pem = d / "server.pem"
        server.private_key_and_cert_chain_pem.write_to_path(str(self.server_pem))
        self.clients: dict[str, tuple[Path, Path]] = {}
        for name in ("alice", "mallory"):
            leaf = self.ca.issue_cert(f"{name}.example", common_name=name, organization_name="sftraffic")
            cert, key = d / f"{name}.crt", d / f"{name}.key"
            leaf.cert_chain_pems[0].write_to_path(str(cert))
            leaf.private_key_pem.write_to_path(str(key))
            self.clients[name] = (cert, key)


def users_add(data_dir: Path, name: str, password: str, *mechs: str) -> str:
    args = ["users", "add", name, "--password", password, "--data-dir", str(data_dir)]
    for m in mechs:
        args += ["--mechanism", m]
    out = subprocess.run(sftraffic(*args), capture_output=True, text=True, timeout=60, check=True)
    return out.stdout


class Raw:
    """A bare Kafka connection (for what clients hide: codes, messages, the socket closing)."""

    def __init__(self, addr: str, timeout: float = 10.0) -> None:
        host, _, port = addr.rpartition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.corr = 0

    def call(self, req: Any, version: int, resp_cls: Any) -> Any:
        self.corr += 1
        self.sock.sendall(encode_request(req.API_KEY, version, self.corr, "raw", req))
        head = self.recv(4)
        return decode_response(
            self.recv(struct.unpack(">i", head)[0]), self.corr, req.API_KEY, version, resp_cls
        )

    def recv(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise EOFError("closed by the broker")
            buf += chunk
        return buf

    def closed(self, within: float = 5.0) -> bool:
        self.sock.settimeout(within)
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False

    def authenticate(self, mech: str, user: str, password: str) -> SaslAuthenticateResponse:
        hs = self.call(SaslHandshakeRequest(mechanism=mech), 1, SaslHandshakeResponse)
        assert hs.error_code == 0, hs
        client = SaslClient(mech, user, password)
        token: bytes | None = client.first()
        resp = None
        while token is not None:
            resp = self.call(SaslAuthenticateRequest(auth_bytes=token), 2, SaslAuthenticateResponse)
            if resp.error_code:
                return resp
            token = client.step(resp.auth_bytes)
        assert resp is not None
        return resp

    def close(self) -> None:
        self.sock.close()
