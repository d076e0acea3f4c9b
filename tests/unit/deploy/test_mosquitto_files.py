"""deploy/local/mosquitto.py: Mosquitto 2's password-file hashes and the per-device ACL file.

The hash is checked against ``mosquitto_passwd`` itself where it is installed (it comes with
Mosquitto); tests/integration/test_mqtt_security.py logs in to a real Mosquitto with them.
"""

from __future__ import annotations

import base64
import shutil
import subprocess
from pathlib import Path

import pytest

from deploy.local.mosquitto import hash_password, write_acl_file, write_password_file


def test_the_hash_is_mosquittos_pbkdf2_sha512_format() -> None:
    h = hash_password("s3cret", salt=b"0123456789ab")
    _, kind, iterations, salt, digest = h.split("$")
    assert (kind, iterations) == ("7", "101")
    assert base64.b64decode(salt) == b"0123456789ab" and len(base64.b64decode(digest)) == 64
    assert hash_password("s3cret", salt=b"0123456789ab") == h
    assert hash_password("s3cret") != hash_password("s3cret")  # a fresh salt each time


@pytest.mark.skipif(shutil.which("mosquitto_passwd") is None, reason="mosquitto_passwd is not installed")
def test_mosquitto_passwd_makes_the_same_hash_from_the_same_salt(tmp_path: Path) -> None:
    f = tmp_path / "passwd"
    subprocess.run(["mosquitto_passwd", "-c", "-b", str(f), "dev-1", "pässword-1"], check=True, timeout=10)
    user, theirs = f.read_text().strip().split(":", 1)
    assert user == "dev-1"
    _, _, iterations, salt, _ = theirs.split("$")
    assert hash_password("pässword-1", base64.b64decode(salt), int(iterations)) == theirs


def test_the_files_are_private_and_hold_no_password(tmp_path: Path) -> None:
    pw = write_password_file(tmp_path / "passwd", {"dev-1": "p1", "sftraffic-gateway": "p2"})
    acl = write_acl_file(tmp_path / "acl", ["sftraffic-gateway"])
    for f in (pw, acl):
        assert oct(f.stat().st_mode & 0o777) == "0o600"
    assert [ln.split(":")[0] for ln in pw.read_text().splitlines()] == ["dev-1", "sftraffic-gateway"]
    assert "p1" not in pw.read_text().replace("$", " ").split()
    text = acl.read_text()
    assert "user sftraffic-gateway\ntopic read sf/#" in text and "pattern write sf/+/+/%u" in text
    with pytest.raises(ValueError, match="holding ':'"):
        write_password_file(tmp_path / "x", {"a:b": "p"})
