"""``sftraffic mirror``'s refusals: one line, exit code 2, no traceback, no broker needed."""

from __future__ import annotations

import socket

import pytest

from framework.cli.main import main

SIDES = ["--source-bootstrap-server", "h:1", "--target-bootstrap-server", "h:1"]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--source-bootstrap-server", "nohost", "--target-bootstrap-server", "127.0.0.1:1"],
            "--source-bootstrap-server 'nohost'",
        ),
        (
            ["--target-bootstrap-server", "h:1"],
            "--source-bootstrap-server HOST:PORT (or --source) is required",
        ),
        (["--source", "h:1"], "--target-bootstrap-server HOST:PORT (or --target) is required"),
        ([*SIDES, "--source-alias", "a.b"], "no dot"),
        ([*SIDES, "--topics", "("], "not a regular"),
        ([*SIDES, "--source-alias", "target"], "must differ"),
        ([*SIDES, "--source-command-config", "/nonexistent"], "--source-command-config /nonexistent"),
        ([*SIDES, "--target-config", "/nonexistent"], "--target-command-config /nonexistent"),
        ([*SIDES, "--source-X", "no.such.setting=1"], "no.such.setting"),
    ],
)
def test_bad_input_is_one_line(extra: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["mirror", *extra]
    if "--source-alias" not in extra:
        argv += ["--source-alias", "a"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and "Traceback" not in err


def test_an_unreachable_source_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    port = _closed_port()
    where = f"127.0.0.1:{port}"
    args = [
        "mirror",
        "--source-bootstrap-server",
        where,
        "--target-bootstrap-server",
        where,
        "--source-alias",
        "a",
    ]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"--source-bootstrap-server {where}" in err and "no broker reachable" in err
    assert len(err.strip().splitlines()) == 1


def test_the_old_spellings_name_the_same_options() -> None:
    from framework.cli.main import build_parser

    old = ["mirror", "--source", "a:1", "--target", "b:2", "--source-alias", "a"]
    old += ["--source-config", "s.properties", "--target-config", "t.properties"]
    args = build_parser().parse_args(old)
    assert (args.source_bootstrap, args.target_bootstrap) == ("a:1", "b:2")
    assert (args.source_command_config, args.target_command_config) == ("s.properties", "t.properties")


def test_a_bad_interval_is_refused_by_argparse() -> None:
    with pytest.raises(SystemExit) as exc:
        main(["mirror", *SIDES, "--source-alias", "a", "--commit-interval", "0"])
    assert exc.value.code == 2
