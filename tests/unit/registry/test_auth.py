"""The registry's users and permissions (registry.auth): Karapace's file format and
hashes, its permission semantics, header parsing, reloads."""

from __future__ import annotations

import base64
import json
import os
import re
from pathlib import Path

import pytest

from registry.auth import AuthFile, AuthFileError, Operation, hash_password, user_entry
from tests.support.registry_auth import KARAPACE

R, W = Operation.READ, Operation.WRITE


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.fixture
def auth(tmp_path: Path) -> AuthFile:
    p = tmp_path / "auth.json"
    p.write_text(json.dumps(KARAPACE))
    return AuthFile(p)


def test_karapace_hashes_and_passwords_are_accepted(auth: AuthFile) -> None:
    for user, pw in (("admin", "admin"), ("aladdin", "opensesame"), ("reader", "secret")):
        got = auth.authenticate(basic(user, pw))
        assert got is not None and got.username == user
    assert auth.authenticate(basic("aladdin", "opensesame!")) is None
    assert auth.authenticate(basic("nobody", "admin")) is None
    assert auth.authenticate(None) is None
    assert auth.authenticate("Bearer abc") is None
    assert auth.authenticate("Basic !!!not-base64") is None
    assert auth.authenticate("Basic " + base64.b64encode(b"no-colon").decode()) is None
    assert "password_hash" not in repr(auth.users["admin"])


def test_user_entry_round_trips_with_every_algorithm() -> None:
    pw = "correct horse battery"  # spaces: never part of a salt or a base64 hash
    for algo in ("sha1", "sha256", "sha512", "scrypt"):
        e = user_entry("u", pw, algo)
        assert e["password_hash"] == hash_password(algo, e["salt"], pw)
        assert pw not in json.dumps(e)
    assert user_entry("u", "pw", salt="s") == user_entry("u", "pw", salt="s")
    assert user_entry("u", "pw")["salt"] != user_entry("u", "pw")["salt"]
    with pytest.raises(ValueError, match="unknown algorithm"):
        hash_password("md5", "s", "pw")


def test_permissions_as_karapace_grants_them(auth: AuthFile) -> None:
    admin, aladdin, reader = (auth.users[u] for u in ("admin", "aladdin", "reader"))
    assert auth.allowed(admin, W, "Config:") and auth.allowed(admin, W, "Subject:anything")
    assert auth.allowed(aladdin, W, "Subject:cave-1") and auth.allowed(
        aladdin, R, "Subject:cave-1"
    )  # Write ⊃ Read
    assert not auth.allowed(aladdin, R, "Subject:carpet-1") and not auth.allowed(aladdin, R, "Config:")
    assert auth.allowed(reader, R, "Subject:carpet-1") and not auth.allowed(reader, W, "Subject:carpet-1")
    # matched from the start, not anchored at the end (re.match, as Karapace)
    assert auth.allowed(aladdin, W, "Subject:cave-") and not auth.allowed(aladdin, W, "Subject:a-cave-1")
    assert auth.allowed_any(reader, R, ["Subject:cave-1", "Subject:carpet-9"])
    assert not auth.allowed_any(reader, R, ["Subject:cave-1"])


@pytest.mark.parametrize(
    ("data", "says"),
    [
        ("[]", "expected"),
        ('{"users": [{"username": "a"}]}', "users[0]"),
        (
            '{"users": [{"username": "a", "algorithm": "md5", "salt": "s", "password_hash": "h"}]}',
            "unknown algorithm 'md5'",
        ),
        (
            '{"users": [], "permissions": [{"username": "a", "operation": "Delete", "resource": ".*"}]}',
            "Delete",
        ),
        (
            '{"users": [], "permissions": [{"username": "a", "operation": "Read", "resource": "("}]}',
            "regular",
        ),
        ("{not json", "not JSON"),
    ],
)
def test_a_bad_file_is_one_line_naming_it(tmp_path: Path, data: str, says: str) -> None:
    p = tmp_path / "auth.json"
    p.write_text(data)
    with pytest.raises(AuthFileError, match=re.escape(says)) as e:
        AuthFile(p)
    assert str(p) in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(AuthFileError, match="No such file"):
        AuthFile(tmp_path / "missing.json")


def test_a_changed_file_is_read_again_and_a_broken_one_keeps_the_last(tmp_path: Path) -> None:
    p = tmp_path / "auth.json"
    p.write_text(json.dumps(KARAPACE))
    auth = AuthFile(p)
    header = basic("aladdin", "opensesame")
    assert auth.authenticate(header) is not None
    auth.maybe_reload()  # unchanged: nothing re-read, the verified header still known
    assert auth._verified
    changed = {**KARAPACE, "users": [user_entry("aladdin", "new-password"), *KARAPACE["users"][:1]]}
    p.write_text(json.dumps(changed))
    os.utime(p, (1, 1))  # a different modification time, whatever the clock's resolution
    auth.maybe_reload()
    assert auth.authenticate(header) is None, "the old password's verified header was forgotten"
    assert auth.authenticate(basic("aladdin", "new-password")) is not None
    p.write_text("{broken")
    os.utime(p, (2, 2))
    auth.maybe_reload()  # logged, and the users loaded before stay
    assert auth.authenticate(basic("aladdin", "new-password")) is not None
