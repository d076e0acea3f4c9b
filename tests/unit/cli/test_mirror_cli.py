"""``sftraffic mirror``'s refusals: one line, exit code 2, no traceback, no broker needed."""

from __future__ import annotations

import socket

import pytest

from framework.cli.main import main


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--source", "nohost", "--target", "127.0.0.1:1", "--source-alias", "a"], "--source 'nohost'"),
        (["--source", "h:1", "--target", "h:1", "--source-alias", "a.b"], "no dot"),
        (["--source", "h:1", "--target", "h:1", "--source-alias", "a", "--topics", "("], "not a regular"),
        (["--source", "h:1", "--target", "h:1", "--source-alias", "target"], "must differ"),
        (
            ["--source", "h:1", "--target", "h:1", "--source-alias", "a", "--source-config", "/nonexistent"],
            "/nonexistent",
        ),
    ],
)
def test_bad_input_is_one_line(extra: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mirror", *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and "Traceback" not in err


def test_an_unreachable_source_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    port = _closed_port()
    args = ["mirror", "--source", f"127.0.0.1:{port}", "--target", f"127.0.0.1:{port}", "--source-alias", "a"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "--source 127.0.0.1:" in err and "no broker reachable" in err


def test_a_bad_interval_is_refused_by_argparse() -> None:
    with pytest.raises(SystemExit) as exc:
        main(
            ["mirror", "--source", "h:1", "--target", "h:1", "--source-alias", "a", "--commit-interval", "0"]
        )
    assert exc.value.code == 2
