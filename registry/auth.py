"""Who may use the registry: HTTP Basic authentication and per-subject permissions.

The users and their permissions live in one JSON file in Karapace's ``registry_authfile``
format, so a file made for Karapace (or with ``karapace_mkpasswd``) works here unchanged::

    {"users": [{"username": "gateway", "algorithm": "sha512", "salt": "...", "password_hash": "..."}],
     "permissions": [{"username": "gateway", "operation": "Write", "resource": "Subject:traffic\\\\..*"}]}

* ``password_hash`` is base64 of PBKDF2-HMAC-``algorithm`` (sha1, sha256, sha512; 5,000
  iterations) or of scrypt (n=16384, r=8, p=1) over the UTF-8 password, with the UTF-8 ``salt``:
  no password is ever stored in clear.
* A permission allows ``operation`` on every resource its ``resource`` regular expression
  matches from the start (Python's ``re.match``, as Karapace). Resources are ``Config:`` (the
  global compatibility level and mode) and ``Subject:<name>``. ``Write`` implies ``Read``.
  Nothing is allowed that no permission allows.

Checking a password costs milliseconds (scrypt: tens of them), so the credentials of an
``Authorization`` header verified once are remembered, in memory only, until the file changes
or :data:`CACHE_LIMIT` other headers were verified. The file is read again when its
modification time changes (:meth:`AuthFile.maybe_reload`); a file that no longer parses keeps
the previous users and permissions, with a warning.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import logging
import os
import re
import secrets
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

__all__ = ["ALGORITHMS", "AuthFile", "AuthFileError", "Operation", "User", "hash_password", "user_entry"]

log = logging.getLogger("sftraffic.registry.auth")

ALGORITHMS = ("sha1", "sha256", "sha512", "scrypt")
PBKDF2_ITERATIONS = 5000
CACHE_LIMIT = 4096


class Operation(Enum):
    READ = "Read"
    WRITE = "Write"


class AuthFileError(Exception):
    """The authentication file cannot be used (one line: which file, what is wrong)."""


def hash_password(algorithm: str, salt: str, password: str) -> str:
    """Karapace's password hash: base64 of PBKDF2-HMAC (sha*) or scrypt over the UTF-8 strings."""
    pw, s = password.encode(), salt.encode()
    if algorithm in ("sha1", "sha256", "sha512"):
        digest = hashlib.pbkdf2_hmac(algorithm, pw, s, PBKDF2_ITERATIONS)
    elif algorithm == "scrypt":
        digest = hashlib.scrypt(pw, salt=s, n=16384, r=8, p=1)
    else:
        raise ValueError(f"unknown algorithm {algorithm!r}: use one of {', '.join(ALGORITHMS)}")
    return base64.b64encode(digest).decode("ascii")


def user_entry(
    username: str, password: str, algorithm: str = "sha512", salt: str | None = None
) -> dict[str, str]:
    """A ``users`` entry of the file (a random salt unless given), as ``karapace_mkpasswd`` prints."""
    salt = salt or secrets.token_urlsafe(16)
    return {
        "username": username,
        "algorithm": algorithm,
        "salt": salt,
        "password_hash": hash_password(algorithm, salt, password),
    }


@dataclass(frozen=True)
class User:
    username: str
    algorithm: str
    salt: str
    password_hash: str = field(repr=False)

    def check(self, password: str) -> bool:
        return hmac.compare_digest(self.password_hash, hash_password(self.algorithm, self.salt, password))


@dataclass(frozen=True)
class Permission:
    username: str
    operation: Operation
    resource: re.Pattern[str]

    def allows(self, user: User, operation: Operation, resource: str) -> bool:
        return (
            self.username == user.username
            and (operation is Operation.READ or self.operation is Operation.WRITE)
            and self.resource.match(resource) is not None
        )


def _parse(path: Path, data: Any) -> tuple[dict[str, User], list[Permission]]:
    def bad(what: str) -> AuthFileError:
        return AuthFileError(f"registry auth file {path}: {what}")

    if not isinstance(data, dict) or not isinstance(data.get("users"), list):
        raise bad('expected {"users": [...], "permissions": [...]}')
    users: dict[str, User] = {}
    for i, u in enumerate(data["users"]):
        if not isinstance(u, dict) or not all(
            isinstance(u.get(k), str) for k in ("username", "algorithm", "salt", "password_hash")
        ):
            raise bad(f"users[{i}]: username, algorithm, salt and password_hash (strings) are required")
        if u["algorithm"] not in ALGORITHMS:
            known = ", ".join(ALGORITHMS)
            raise bad(f"users[{i}] ({u['username']}): unknown algorithm {u['algorithm']!r} ({known})")
        users[u["username"]] = User(u["username"], u["algorithm"], u["salt"], u["password_hash"])
    perms: list[Permission] = []
    for i, p in enumerate(data.get("permissions") or []):
        if not isinstance(p, dict) or not all(
            isinstance(p.get(k), str) for k in ("username", "operation", "resource")
        ):
            raise bad(f"permissions[{i}]: username, operation and resource (strings) are required")
        try:
            op = Operation(p["operation"])
        except ValueError:
            raise bad(f"permissions[{i}]: operation {p['operation']!r} is neither Read nor Write") from None
        try:
            rx = re.compile(p["resource"])
        except re.error as exc:
            what = f"resource {p['resource']!r} is not a regular expression ({exc})"
            raise bad(f"permissions[{i}]: {what}") from None
        perms.append(Permission(p["username"], op, rx))
    return users, perms


class AuthFile:
    """The users and permissions of one file, reloaded when it changes."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.users: dict[str, User] = {}
        self.permissions: list[Permission] = []
        self._mtime: float | None = None
        self._verified: dict[str, User] = {}  # Authorization header -> its user, verified
        self.load()

    def load(self) -> None:
        """Read the file; :class:`AuthFileError` (and nothing changed) when it cannot be used."""
        try:
            mtime = os.stat(self.path).st_mtime
            data = json.loads(self.path.read_text())
        except OSError as exc:
            raise AuthFileError(f"registry auth file {self.path}: {exc.strerror or exc}") from None
        except ValueError as exc:
            raise AuthFileError(f"registry auth file {self.path}: not JSON ({exc})") from None
        self.users, self.permissions = _parse(self.path, data)
        self._mtime = mtime
        self._verified = {}
        n_users, n_perms = len(self.users), len(self.permissions)
        log.info("registry auth file %s: %d user(s), %d permission(s)", self.path, n_users, n_perms)

    def maybe_reload(self) -> None:
        """Read the file again if it changed since; keep what is loaded if it no longer parses."""
        try:
            mtime = os.stat(self.path).st_mtime
        except OSError as exc:
            log.warning("registry auth file %s: %s; keeping the users loaded before", self.path, exc.strerror)
            return
        if mtime == self._mtime:
            return
        try:
            self.load()
        except AuthFileError as exc:
            self._mtime = mtime  # said once per change
            log.warning("%s; keeping the users loaded before", exc)

    def authenticate(self, header: str | None) -> User | None:
        """The user of an ``Authorization: Basic ...`` header, None when missing or refused."""
        if not header:
            return None
        known = self._verified.get(header)
        if known is not None:
            return known
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "basic":
            return None
        try:
            username, sep, password = base64.b64decode(token.strip(), validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return None
        user = self.users.get(username)
        if not sep or user is None or not user.check(password):
            return None
        if len(self._verified) >= CACHE_LIMIT:
            self._verified.clear()
        self._verified[header] = user
        return user

    def allowed(self, user: User, operation: Operation, resource: str) -> bool:
        return any(p.allows(user, operation, resource) for p in self.permissions)

    def allowed_any(self, user: User, operation: Operation, resources: list[str]) -> bool:
        return any(self.allowed(user, operation, r) for r in resources)
