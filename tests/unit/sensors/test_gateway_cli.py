"""``sftraffic gateway``'s options (sensors/gateway_cli.py): parsed only, nothing started."""

from __future__ import annotations

import argparse

import pytest


def _parser() -> argparse.ArgumentParser:
    from sensors.gateway_cli import add_parser

    p = argparse.ArgumentParser(prog="sftraffic")
    add_parser(p.add_subparsers())
    return p


@pytest.mark.parametrize("client", ["gmqtt", "paho"])
def test_the_deprecated_mqtt_client_option_is_accepted_with_one_warning_line(
    client: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = _parser().parse_args(["gateway", "--mqtt-client", client, "--id", "gw-2"])
    assert args.id == "gw-2"
    assert args.mqtt_client is None, "it chooses nothing: there is one gateway"
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "sftraffic gateway: warning: --mqtt-client is deprecated and ignored: the gateway runs on gmqtt "
        "(the threaded paho-mqtt gateway was removed)"
    ]


def test_without_the_deprecated_option_nothing_is_printed(capsys: pytest.CaptureFixture[str]) -> None:
    _parser().parse_args(["gateway"])
    assert capsys.readouterr().err == ""
