"""SCRAM credentials (framework/security/scram.py): derived keys, checks, nothing in clear."""

from __future__ import annotations

import hashlib

import pytest
import scramp

from framework.errors import UnacceptableCredential, UnsupportedSaslMechanism
from framework.security import scram


@pytest.mark.parametrize("mech", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_keys_match_scramp(mech: str) -> None:
    salt = b"0123456789abcdef"
    c = scram.from_password(mech, "pencil", 4096, salt)
    s, stored, server, i = scramp.ScramMechanism(mech).make_auth_info("pencil", 4096, salt)
    assert (c.salt, c.stored_key, c.server_key, c.iterations) == (s, stored, server, i)
    assert b"pencil" not in repr(c.to_json()).encode()
    assert scram.ScramCredential.from_json(mech, c.to_json()) == c


def test_from_salted_password_is_what_the_admin_client_sends() -> None:
    salted = hashlib.pbkdf2_hmac("sha512", b"pw", b"salt", 5000)
    assert scram.from_salted_password("SCRAM-SHA-512", b"salt", salted, 5000) == scram.from_password(
        "SCRAM-SHA-512", "pw", 5000, b"salt"
    )


def test_verify_password() -> None:
    c = scram.from_password("SCRAM-SHA-256", "right")
    assert scram.verify_password(c, "right") and not scram.verify_password(c, "wrong")


def test_refusals() -> None:
    with pytest.raises(UnacceptableCredential):
        scram.from_password("SCRAM-SHA-256", "pw", 1000)
    with pytest.raises(UnacceptableCredential):
        scram.from_password("SCRAM-SHA-256", "pw", 20000)
    with pytest.raises(UnacceptableCredential):
        scram.from_password("SCRAM-SHA-256", "")
    with pytest.raises(UnsupportedSaslMechanism):
        scram.from_password("SCRAM-SHA-1", "pw")


def test_decoys_are_stable_per_user_and_secret() -> None:
    a = scram.decoy("SCRAM-SHA-256", "mallory", b"k1")
    assert a == scram.decoy("SCRAM-SHA-256", "mallory", b"k1")
    assert a != scram.decoy("SCRAM-SHA-256", "eve", b"k1")
    assert a != scram.decoy("SCRAM-SHA-256", "mallory", b"k2")
