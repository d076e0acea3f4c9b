"""A minimal blocking Kafka-protocol client over our codec (CLI admin, tests).

It speaks to one broker: negotiates versions with ApiVersions, then sends requests and
decodes responses with the same message classes the broker uses. On a secured listener it
wraps the socket in TLS (``ssl_context``) and authenticates with SaslHandshake and
SaslAuthenticate (``sasl=(mechanism, user, password)``: PLAIN, SCRAM-SHA-256/512), as Kafka
clients do; :func:`from_client_config` reads the librdkafka-named settings the CLI takes.
Data-path clients should use confluent-kafka; this exists for sftraffic's extension APIs and
for protocol tests.
"""

from __future__ import annotations

import socket
import ssl
import struct
from collections.abc import Mapping
from typing import Any, TypeVar

from framework.errors import StoreError
from framework.protocol import codec
from framework.protocol.api import API_TABLE
from framework.protocol.error_codes import ErrorCode
from framework.protocol.frames import decode_response, encode_request
from framework.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from framework.protocol.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from framework.protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse
from framework.security.sasl import SaslClient

T = TypeVar("T")


class BrokerUnavailable(StoreError):
    pass


class WireClient:
    def __init__(
        self,
        bootstrap: str,
        timeout: float = 10.0,
        client_id: str = "sftraffic-cli",
        sasl: tuple[str, str, str] | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        host, _, port = bootstrap.split(",", maxsplit=1)[0].strip().rpartition(":")
        self.addr = (host.strip("[]") or "127.0.0.1", int(port))
        self.sasl = sasl
        self.ssl_context = ssl_context
        self.timeout = timeout
        self.client_id = client_id
        self.sock: socket.socket | None = None
        self.corr = 0
        self.versions: dict[int, tuple[int, int]] = {}

    def connect(self) -> WireClient:
        try:
            self.sock = socket.create_connection(self.addr, timeout=self.timeout)
            if self.ssl_context is not None:
                self.sock = self.ssl_context.wrap_socket(self.sock, server_hostname=self.addr[0])
        except OSError as exc:
            raise BrokerUnavailable(
                f"cannot reach a broker at {self.addr[0]}:{self.addr[1]} ({exc.strerror or exc}); "
                "is it running? start one with `sftraffic broker` or `sftraffic up`"
            ) from None
        # Kafka refuses (INVALID_REQUEST, no api keys) an ApiVersions v3+ whose client software
        # name or version is empty or not [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?
        hello = ApiVersionsRequest(client_software_name="sftraffic", client_software_version="1")
        resp = self._call(hello, 3, ApiVersionsResponse)
        if resp.error_code == ErrorCode.UNSUPPORTED_VERSION:
            resp = self._call(ApiVersionsRequest(), 0, ApiVersionsResponse)
        self.versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
        if self.sasl is not None:
            self._authenticate(*self.sasl)
        return self

    def _authenticate(self, mechanism: str, user: str, password: str) -> None:
        shake = self._call(SaslHandshakeRequest(mechanism=mechanism), 1, SaslHandshakeResponse)
        if shake.error_code:
            raise StoreError(
                f"the broker at {self.addr[0]}:{self.addr[1]} does not offer SASL {mechanism} "
                f"(it offers {', '.join(shake.mechanisms) or 'none'})",
                ErrorCode(shake.error_code),
            )
        client = SaslClient(mechanism, user, password)
        token: bytes | None = client.first()
        while token is not None:
            answer = self._call(SaslAuthenticateRequest(auth_bytes=token), 1, SaslAuthenticateResponse)
            if answer.error_code:
                raise StoreError(
                    answer.error_message or "authentication failed", ErrorCode(answer.error_code)
                )
            token = client.step(bytes(answer.auth_bytes))

    def version_for(self, api_key: int) -> int | None:
        ours = API_TABLE[api_key]
        theirs = self.versions.get(api_key)
        if theirs is None:
            return None
        v = min(ours.max_version, theirs[1])
        return v if v >= max(ours.min_version, theirs[0]) else None

    def send(self, req: Any, response_cls: type[T], version: int | None = None) -> T:
        key = req.API_KEY
        v = version if version is not None else self.version_for(key)
        if v is None:
            raise StoreError(
                f"the broker at {self.addr[0]}:{self.addr[1]} does not support {API_TABLE[key].name}"
            )
        return self._call(req, v, response_cls)

    def send_raw(self, frame: bytes) -> bytes:
        assert self.sock is not None
        self.sock.sendall(frame)
        return self._read_frame()

    def _call(self, req: Any, version: int, response_cls: type[T]) -> T:
        if self.sock is None:
            raise BrokerUnavailable("not connected")
        self.corr += 1
        frame = encode_request(req.API_KEY, version, self.corr, self.client_id, req)
        try:
            self.sock.sendall(frame)
            data = self._read_frame()
        except (OSError, EOFError) as exc:
            raise BrokerUnavailable(f"connection to {self.addr[0]}:{self.addr[1]} failed: {exc}") from None
        try:
            return decode_response(data, self.corr, req.API_KEY, version, response_cls)
        except codec.DecodeError as exc:
            raise StoreError(f"unreadable {API_TABLE[req.API_KEY].name} response: {exc}") from None

    def _read_frame(self) -> bytes:
        head = self._recv_exact(4)
        (size,) = struct.unpack(">i", head)
        return self._recv_exact(size)

    def _recv_exact(self, n: int) -> bytes:
        assert self.sock is not None
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise EOFError("connection closed by broker")
            buf += chunk
        return bytes(buf)

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def __enter__(self) -> WireClient:
        return self.connect()

    def __exit__(self, *exc: object) -> None:
        self.close()


def from_client_config(bootstrap: str, conf: Mapping[str, str], timeout: float = 10.0) -> WireClient:
    """A client with librdkafka's security settings: ``security.protocol`` (PLAINTEXT, SSL,
    SASL_PLAINTEXT, SASL_SSL), ``sasl.mechanism`` (default SCRAM-SHA-256; PLAIN),
    ``sasl.username``, ``sasl.password``, ``ssl.ca.location``, ``ssl.certificate.location``,
    ``ssl.key.location``, ``ssl.endpoint.identification.algorithm`` (``none`` to skip the check)."""
    protocol = conf.get("security.protocol", "PLAINTEXT").upper()
    if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        raise StoreError(f"security.protocol={protocol}: use PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL")
    context = None
    if protocol in ("SSL", "SASL_SSL"):
        context = ssl.create_default_context(cafile=conf.get("ssl.ca.location") or None)
        if conf.get("ssl.endpoint.identification.algorithm", "https").lower() == "none":
            context.check_hostname = False
        if conf.get("ssl.certificate.location"):
            context.load_cert_chain(conf["ssl.certificate.location"], conf.get("ssl.key.location") or None)
    sasl = None
    if protocol.startswith("SASL_"):
        sasl = (
            conf.get("sasl.mechanism", "SCRAM-SHA-256").upper(),
            conf.get("sasl.username", ""),
            conf.get("sasl.password", ""),
        )
    return WireClient(bootstrap, timeout, sasl=sasl, ssl_context=context)
