"""``sftraffic users add``: where the password comes from (framework/cli/users.py)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from framework.cli.main import build_parser, main
from framework.cli.users import read_password
from framework.errors import StoreError


def _args(*argv: str):  # type: ignore[no-untyped-def]
    return build_parser().parse_args(["users", "add", "alice", *argv])


def test_password_from_stdin_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("s3cret pass\r\nsecond line\n"))
    assert read_password(_args("--password", "-")) == "s3cret pass"


def test_password_from_a_file_is_its_first_line(tmp_path: Path) -> None:
    f = tmp_path / "pw"
    f.write_text("from-the-file\nignored\n")
    assert read_password(_args("--password-file", str(f))) == "from-the-file"


def test_an_empty_password_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    with pytest.raises(StoreError, match="no password"):
        read_password(_args("--password", "-"))


def test_a_missing_password_file_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope"
    assert main(["users", "add", "alice", "--password-file", str(missing), "--data-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err == f"sftraffic users: --password-file {missing}: No such file or directory\n"


def test_the_password_flag_warns_of_ps(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["users", "add", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "shows in `ps`" in text and "--password-file FILE" in text
