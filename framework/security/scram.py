"""SCRAM credentials (RFC 5802, Kafka's SCRAM-SHA-256 / SCRAM-SHA-512): made, stored, checked.

A credential is what Kafka's ``ScramCredential`` holds: the salt, the iteration count, and the
two keys derived from the salted password (``StoredKey = H(HMAC(SaltedPassword, "Client
Key"))``, ``ServerKey = HMAC(SaltedPassword, "Server Key")``). The password itself, and the
salted password, are never kept: the keys are enough to verify a SCRAM exchange (done by
``scramp`` in :mod:`framework.security.sasl`) and a PLAIN password (:func:`verify_password`
derives the keys again and compares them in constant time).

Stored form (the metadata store, replicated through the quorum): one JSON object per user and
mechanism, ``{"salt": b64, "stored_key": b64, "server_key": b64, "iterations": int}``.

AlterUserScramCredentials carries ``salt``, ``iterations`` and ``salted_password`` (the client
ran PBKDF2 already, as Kafka's AdminClient does): :func:`from_salted_password` turns them
into a credential; ``sftraffic users add`` uses :func:`from_password`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from framework.errors import UnacceptableCredential, UnsupportedSaslMechanism

HASHES: dict[str, Callable[..., Any]] = {
    "SCRAM-SHA-256": hashlib.sha256,
    "SCRAM-SHA-512": hashlib.sha512,
}
# ScramMechanism codes of DescribeUserScramCredentials / AlterUserScramCredentials
MECHANISM_CODES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
MECHANISM_NAMES = {v: k for k, v in MECHANISM_CODES.items()}
MIN_ITERATIONS = 4096  # Kafka's ScramMechanism.minIterations (both mechanisms)
MAX_ITERATIONS = 16384  # Kafka's AlterUserScramCredentials upper bound
DEFAULT_ITERATIONS = 4096  # Kafka's default (kafka-configs, kafka-storage format --add-scram)


@dataclass(frozen=True, slots=True)
class ScramCredential:
    mechanism: str
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_json(self) -> dict[str, Any]:
        return {
            "salt": _b64(self.salt),
            "stored_key": _b64(self.stored_key),
            "server_key": _b64(self.server_key),
            "iterations": self.iterations,
        }

    @classmethod
    def from_json(cls, mechanism: str, doc: dict[str, Any]) -> ScramCredential:
        return cls(
            mechanism,
            base64.b64decode(doc["salt"]),
            base64.b64decode(doc["stored_key"]),
            base64.b64decode(doc["server_key"]),
            int(doc["iterations"]),
        )

    def auth_info(self) -> tuple[bytes, bytes, bytes, int]:
        """``(salt, stored_key, server_key, iterations)``: what scramp's server asks for."""
        return self.salt, self.stored_key, self.server_key, self.iterations


def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode()


def hash_of(mechanism: str) -> Callable[..., Any]:
    h = HASHES.get(mechanism)
    if h is None:
        raise UnsupportedSaslMechanism(f"unknown SCRAM mechanism {mechanism!r}: use {' or '.join(HASHES)}")
    return h


def check_iterations(iterations: int) -> None:
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise UnacceptableCredential(
            f"iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}, got {iterations}"
        )


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i) of RFC 5802: PBKDF2 with the mechanism's HMAC."""
    name = hash_of(mechanism)().name
    return hashlib.pbkdf2_hmac(name, password.encode(), salt, iterations)


def from_salted_password(mechanism: str, salt: bytes, salted: bytes, iterations: int) -> ScramCredential:
    h = hash_of(mechanism)
    check_iterations(iterations)
    if not salt or not salted:
        raise UnacceptableCredential("salt and salted password must not be empty")
    client_key = hmac.new(salted, b"Client Key", h).digest()
    stored_key = h(client_key).digest()
    server_key = hmac.new(salted, b"Server Key", h).digest()
    return ScramCredential(mechanism, bytes(salt), stored_key, server_key, iterations)


def from_password(
    mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS, salt: bytes | None = None
) -> ScramCredential:
    """A new credential for ``password`` (a random 32-byte salt unless given)."""
    if not password:
        raise UnacceptableCredential("the password must not be empty")
    salt = salt if salt is not None else os.urandom(32)
    return from_salted_password(
        mechanism, salt, salted_password(mechanism, password, salt, iterations), iterations
    )


def verify_password(cred: ScramCredential, password: str) -> bool:
    """Whether ``password`` is the one ``cred`` was made from (SASL/PLAIN over SCRAM credentials)."""
    again = from_salted_password(
        cred.mechanism,
        cred.salt,
        salted_password(cred.mechanism, password, cred.salt, cred.iterations),
        cred.iterations,
    )
    return hmac.compare_digest(again.stored_key, cred.stored_key)


def decoy(mechanism: str, user: str, secret: bytes) -> ScramCredential:
    """A credential for a user that does not exist, the same on every call for the same name.

    The exchange with an unknown user then runs like one with a wrong password (a plausible
    salt and the usual iteration count in the server-first message, a failure at the proof),
    so a client cannot tell the two apart. ``secret`` is per broker process.
    """
    h = hash_of(mechanism)
    seed = hmac.new(secret, f"{mechanism}\0{user}".encode(), hashlib.sha256).digest()
    key = h(seed + b"key").digest()
    return ScramCredential(mechanism, seed, key, key, DEFAULT_ITERATIONS)
