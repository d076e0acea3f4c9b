"""The application's client commands refuse a bad connection in one line, exit code 2, before
they start anything (a fleet, Spark, a server, locust): no broker needed."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from framework.cli.main import main

# the command line of each, up to its connection options
COMMANDS = {
    "sensors": ["sensors", "--duration", "1"],
    "gateway": ["gateway", "--queue-dir", "{tmp}/queue"],
    "pipeline": ["pipeline", "all", "--checkpoint-dir", "{tmp}/ck"],
    "dashboard": ["dashboard"],
    "registry": ["registry"],
    "load": ["load", "steady", "--no-start-services", "--reports", "{tmp}/reports"],
}
# a store that does not answer yet is no error for these: they park, or show it as down
WAIT_FOR_THE_STORE = {"gateway", "dashboard"}


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(argv: list[str], tmp: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert main([a.replace("{tmp}", str(tmp)) for a in argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_missing_settings_file_is_one_line(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SFTRAFFIC_CLIENT_CONFIG", raising=False)
    missing = tmp_path / "client.properties"
    err = _run([*COMMANDS[name], "-b", "127.0.0.1:1", "--command-config", str(missing)], tmp_path, capsys)
    assert err.startswith(f"sftraffic {name}: ") and str(missing) in err


@pytest.mark.parametrize("name", sorted(set(COMMANDS) - WAIT_FOR_THE_STORE))
def test_an_unreachable_store_is_one_line(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("SFTRAFFIC_CLIENT_CONFIG", "SFTRAFFIC_KAFKA_CONFIG"):
        monkeypatch.delenv(var, raising=False)
    where = f"127.0.0.1:{_closed_port()}"
    err = _run([*COMMANDS[name], "--bootstrap-server", where], tmp_path, capsys)
    assert err.startswith(f"sftraffic {name}: no broker reachable at {where}"), err


def test_the_bootstrap_comes_from_the_environment_when_not_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    where = f"127.0.0.1:{_closed_port()}"
    monkeypatch.setenv("SFTRAFFIC_BOOTSTRAP", where)
    err = _run(COMMANDS["sensors"], tmp_path, capsys)
    assert f"no broker reachable at {where}" in err
