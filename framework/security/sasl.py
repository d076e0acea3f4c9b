"""SASL authentication of one connection, as a state machine over bytes (no sockets).

The listener owns one :class:`SaslServerSession` per connection on a SASL listener and feeds
it the SaslHandshake and SaslAuthenticate requests' contents; the handlers turn its answers
and errors into responses. States (Kafka's ``SaslServerAuthenticator``)::

    HANDSHAKE ──SaslHandshake(mech)──► AUTHENTICATE ──SaslAuthenticate*──► COMPLETE
        ▲                                                                      │
        └──────────────── SaslHandshake again (KIP-368 re-authentication) ◄────┘

* PLAIN (RFC 4616): one token ``authzid NUL user NUL password``; the password is checked
  against the user's stored SCRAM credentials (:func:`framework.security.scram.verify_password`),
  so there is one set of users for every mechanism.
* SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, run by ``scramp``): client-first → server-first,
  client-final → server-final. An unknown user gets a decoy credential
  (:func:`framework.security.scram.decoy`) and fails at the proof like a wrong password.
* Every failure, whatever the cause, raises :class:`SaslAuthenticationFailed` with the one
  message :data:`FAILED`; what went wrong is only in :attr:`SaslServerSession.last_failure`,
  for the broker's log.
* Re-authentication (KIP-368): with ``reauth_ms`` > 0 a completed exchange answers a session
  lifetime, and :meth:`SaslServerSession.expired` tells the listener when a connection that
  did not re-authenticate in time must be closed. A re-authentication must use the same
  mechanism and end with the same principal.

Thread-safety: none needed (one connection, one event loop).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import scramp  # type: ignore[import-untyped]

from framework.clock import SYSTEM, Clock
from framework.errors import IllegalSaslState, SaslAuthenticationFailed, UnsupportedSaslMechanism
from framework.security import scram
from framework.security.principal import KafkaPrincipal

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
MAX_TOKEN = 524_288  # Kafka's sasl.server.max.receive.size default
FAILED = "Authentication failed: invalid credentials"

# (user, mechanism) -> the stored credential, or None for an unknown user
CredentialLookup = Callable[[str, str], "scram.ScramCredential | None"]


class State(enum.Enum):
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    COMPLETE = "complete"


@dataclass(frozen=True, slots=True)
class Step:
    """One SaslAuthenticate answer: bytes for the client; ``principal`` once authenticated."""

    token: bytes
    principal: KafkaPrincipal | None = None
    session_lifetime_ms: int = 0


class _Exchange:
    """One mechanism's exchange; ``step`` returns (answer, user name when done)."""

    def step(self, token: bytes) -> tuple[bytes, str | None]:
        raise NotImplementedError


class _Plain(_Exchange):
    def __init__(self, credentials: CredentialLookup, secret: bytes) -> None:
        self.credentials = credentials
        self.secret = secret

    def step(self, token: bytes) -> tuple[bytes, str | None]:
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise _Refused("PLAIN: malformed token (want authzid NUL user NUL password)")
        try:
            authzid, user, password = (p.decode() for p in parts)
        except UnicodeDecodeError:
            raise _Refused("PLAIN: token is not UTF-8") from None
        if not user or not password:
            raise _Refused("PLAIN: empty user name or password")
        if authzid and authzid != user:
            raise _Refused(f"PLAIN: authorization id {authzid!r} is not the user {user!r}")
        creds = [c for m in scram.HASHES if (c := self.credentials(user, m)) is not None]
        if not creds:
            # spend the same work as a real check, on a decoy, so timing tells nothing either
            scram.verify_password(scram.decoy("SCRAM-SHA-256", user, self.secret), password)
            raise _Refused(f"PLAIN: unknown user {user!r}")
        if not any(scram.verify_password(c, password) for c in creds):
            raise _Refused(f"PLAIN: wrong password for {user!r}")
        return b"", user


def _unescape(saslname: str) -> str:
    """RFC 5802 saslname: ``=2C`` is a comma, ``=3D`` an equals sign."""
    return saslname.replace("=2C", ",").replace("=3D", "=")


class _Scram(_Exchange):
    def __init__(self, mechanism: str, credentials: CredentialLookup, secret: bytes) -> None:
        self.mechanism = mechanism
        self.credentials = credentials
        self.secret = secret
        self.user: str | None = None
        self.known = False
        self.server = scramp.ScramMechanism(mechanism).make_server(self._auth_info)

    def _auth_info(self, name: str) -> tuple[bytes, bytes, bytes, int]:
        user = _unescape(name)
        self.user = user
        cred = self.credentials(user, self.mechanism)
        self.known = cred is not None
        if cred is None:
            cred = scram.decoy(self.mechanism, user, self.secret)
        return cred.auth_info()

    def step(self, token: bytes) -> tuple[bytes, str | None]:
        try:
            text = token.decode()
        except UnicodeDecodeError:
            raise _Refused(f"{self.mechanism}: message is not UTF-8") from None
        try:
            if self.user is None:
                if "tokenauth=" in text:
                    raise _Refused(f"{self.mechanism}: delegation tokens are not supported")
                self.server.set_client_first(text)
                return self.server.get_server_first().encode(), None
            self.server.set_client_final(text)
            final = self.server.get_server_final().encode()
        except scramp.ScramException as exc:
            who = self.user if self.known else f"unknown user {self.user!r}"
            raise _Refused(f"{self.mechanism}: {who}: {exc}") from None
        if not self.known:  # cannot happen (nobody knows a decoy's keys); never let it through
            raise _Refused(f"{self.mechanism}: unknown user {self.user!r}")
        return final, self.user


class _Refused(Exception):
    """Why an exchange failed (logged by the broker; the client sees FAILED only)."""


class SaslServerSession:
    """The SASL state of one connection (see the module docstring)."""

    def __init__(
        self,
        mechanisms: Sequence[str],
        credentials: CredentialLookup,
        secret: bytes,
        reauth_ms: int = 0,
        clock: Clock = SYSTEM,
    ) -> None:
        self.mechanisms = list(mechanisms)
        self.credentials = credentials
        self.secret = secret
        self.reauth_ms = reauth_ms
        self.clock = clock  # the session's expiry (connections.max.reauth.ms)
        self.state = State.HANDSHAKE
        self.mechanism: str | None = None
        self.principal: KafkaPrincipal | None = None
        self.expires_at_ms: int | None = None
        self.reauthenticating = False
        self.last_failure = ""
        self._exchange: _Exchange | None = None

    @property
    def authenticated(self) -> bool:
        """The connection may send other requests (it completed an exchange at least once)."""
        return self.principal is not None

    def expired(self, now_ms: int | None = None) -> bool:
        """The session's lifetime (``connections.max.reauth.ms``) is over."""
        if self.expires_at_ms is None:
            return False
        return (self.clock.wall_ms() if now_ms is None else now_ms) >= self.expires_at_ms

    def handshake(self, mechanism: str) -> None:
        """SaslHandshake: choose the mechanism (again, to re-authenticate)."""
        if self.state is State.AUTHENTICATE:
            raise IllegalSaslState("SaslHandshake received while an authentication is under way")
        if mechanism not in self.mechanisms:
            raise UnsupportedSaslMechanism(
                f"unsupported SASL mechanism {mechanism}; enabled: {', '.join(self.mechanisms)}"
            )
        if self.state is State.COMPLETE:
            if mechanism != self.mechanism:
                raise IllegalSaslState(
                    f"re-authentication must use the same mechanism ({self.mechanism}), not {mechanism}"
                )
            self.reauthenticating = True
        self.mechanism = mechanism
        if mechanism == "PLAIN":
            self._exchange = _Plain(self.credentials, self.secret)
        else:
            self._exchange = _Scram(mechanism, self.credentials, self.secret)
        self.state = State.AUTHENTICATE

    def authenticate(self, token: bytes) -> Step:
        """SaslAuthenticate: one token of the exchange; raises SaslAuthenticationFailed."""
        if self.state is not State.AUTHENTICATE or self._exchange is None:
            raise IllegalSaslState("SaslAuthenticate received before SaslHandshake")
        if len(token) > MAX_TOKEN:
            return self._fail(f"token of {len(token)} bytes (at most {MAX_TOKEN})")
        try:
            answer, user = self._exchange.step(bytes(token))
        except _Refused as exc:
            return self._fail(str(exc))
        if user is None:
            return Step(answer)
        principal = KafkaPrincipal("User", user)
        if self.reauthenticating and principal != self.principal:
            return self._fail(f"re-authentication as {principal} on a connection of {self.principal}")
        self.principal = principal
        self.state = State.COMPLETE
        self.reauthenticating = False
        self._exchange = None
        lifetime = 0
        if self.reauth_ms > 0:
            lifetime = self.reauth_ms
            self.expires_at_ms = self.clock.wall_ms() + lifetime
        return Step(answer, principal, lifetime)

    def _fail(self, why: str) -> Step:
        self.last_failure = why
        self.state = State.HANDSHAKE if not self.reauthenticating else State.COMPLETE
        self._exchange = None
        raise SaslAuthenticationFailed(FAILED)


@dataclass(frozen=True, slots=True)
class SaslLogin:
    """Who a client (a replica fetcher) authenticates as, and how."""

    mechanism: str
    username: str
    password: str = field(repr=False)


class SaslClient:
    """The client side of one exchange (the replica fetcher, ``sftraffic`` tools).

    ``first()`` is the first SaslAuthenticate token; ``step(answer)`` the next one, or None when
    the exchange is over (the server's last answer verified, for SCRAM).
    """

    def __init__(self, mechanism: str, username: str, password: str) -> None:
        if mechanism not in MECHANISMS:
            raise UnsupportedSaslMechanism(f"unsupported SASL mechanism {mechanism}")
        self.mechanism = mechanism
        self.username = username
        self.password = password
        self._scram = scramp.ScramClient([mechanism], username, password) if mechanism != "PLAIN" else None
        self._round = 0

    def first(self) -> bytes:
        self._round = 1
        if self._scram is None:
            return b"\0" + self.username.encode() + b"\0" + self.password.encode()
        return str(self._scram.get_client_first()).encode()

    def step(self, answer: bytes) -> bytes | None:
        if self._scram is None:
            return None
        try:
            if self._round == 1:
                self._round = 2
                self._scram.set_server_first(answer.decode())
                return str(self._scram.get_client_final()).encode()
            self._scram.set_server_final(answer.decode())
        except (scramp.ScramException, UnicodeDecodeError) as exc:
            raise SaslAuthenticationFailed(
                f"{self.mechanism}: the server's answer is not valid: {exc}"
            ) from None
        return None
