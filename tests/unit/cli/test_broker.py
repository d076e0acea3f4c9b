"""``sftraffic broker``'s flags become broker settings (framework/cli/broker.py)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from framework.cli.broker import load_config, node_id_from_hostname
from framework.cli.main import build_parser
from framework.config import BrokerConfig
from framework.errors import ConfigError


def _config(argv: list[str], monkeypatch: pytest.MonkeyPatch, hostname: str = "host") -> BrokerConfig:
    monkeypatch.setattr(socket, "gethostname", lambda: hostname)
    for var in list(os.environ):
        if var.startswith("SFTRAFFIC_"):
            monkeypatch.delenv(var)
    return load_config(build_parser().parse_args(["broker", *argv]))


@pytest.mark.parametrize(
    ("hostname", "node_id"),
    [
        ("sftraffic-broker-1", 1),
        ("sftraffic-broker-12", 12),
        ("broker-3.broker.default.svc.cluster.local", 3),
        ("node0", 0),
        ("kafka-07", 7),
    ],
)
def test_node_id_from_hostname(hostname: str, node_id: int) -> None:
    assert node_id_from_hostname(hostname) == node_id


@pytest.mark.parametrize("hostname", ["broker", "broker-1a", ""])
def test_node_id_from_hostname_refuses_a_name_without_a_number(hostname: str) -> None:
    with pytest.raises(ConfigError, match="does not end with a number"):
        node_id_from_hostname(hostname)


def test_flag_sets_node_id_from_this_hosts_name(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = _config(["--node-id-from-hostname", "--data-dir", "d"], monkeypatch, "sftraffic-broker-2")
    assert cfg.node_id == 2
    assert cfg.sources["node.id"] == "command line"


def test_flag_wins_over_the_environment_as_flags_do(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(socket, "gethostname", lambda: "sftraffic-broker-3")
    monkeypatch.setenv("SFTRAFFIC_NODE_ID", "9")
    cfg = load_config(build_parser().parse_args(["broker", "--node-id-from-hostname"]))
    assert cfg.node_id == 3


def test_node_id_and_node_id_from_hostname_exclude_each_other(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["broker", "--node-id", "1", "--node-id-from-hostname"])
    assert "not allowed with argument" in capsys.readouterr().err


def test_without_either_flag_node_id_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SFTRAFFIC_NODE_ID", "5")
    cfg = load_config(build_parser().parse_args(["broker"]))
    assert cfg.node_id == 5


def test_config_reads_kafkas_server_properties_and_the_flags_win(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    props = tmp_path / "server.properties"
    props.write_text(
        "node.id=3\nlog.dirs=/tmp/kraft-combined-logs\nlog.retention.hours=1\nnum.io.threads=8\n"
    )
    cfg = _config(
        ["--config", str(props), "--data-dir", str(tmp_path / "d"), "-o", "log.retention.minutes=2"],
        monkeypatch,
    )
    assert cfg.node_id == 3
    assert cfg.data_dir == tmp_path / "d"
    assert cfg.topic_default("retention.ms") == 120_000  # the command line's, in Kafka's minutes
    assert [w.split(" ")[0] for w in cfg.warnings] == ["num.io.threads"]


def test_an_unknown_override_names_the_nearest_key(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(
        ConfigError, match=r"'log\.retention\.hour' in command line; did you mean log\.retention\.hours\?"
    ):
        _config(["-o", "log.retention.hour=5"], monkeypatch)


def test_config_help_names_both_formats(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["broker", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert ".toml" in out and ".properties" in out and "server.properties" in out
    assert "sftraffic config reference" in out and "README" not in out
