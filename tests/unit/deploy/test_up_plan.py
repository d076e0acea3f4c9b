"""``sftraffic up``'s plan step (deploy/local/up.py ``plan``): from the command's arguments, the
parts it would start and in which order, their ports, security and replication. Nothing is
started and the data dir is not made."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from deploy.local.up import add_parser, plan
from framework.client.connection import CONFIG_ENV, LEGACY_CONFIG_ENV
from framework.errors import StoreError
from sensors.backfill import DEFAULT_DURATION


def parse(tmp_path: Path, *argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="sftraffic")
    add_parser(parser.add_subparsers())
    return parser.parse_args(["up", "--data-dir", str(tmp_path / "data"), *argv])


@pytest.fixture(autouse=True)
def _no_client_config(monkeypatch: pytest.MonkeyPatch) -> None:
    """A settings file named in the shell running the tests is not the external cluster's."""
    monkeypatch.delenv(CONFIG_ENV, raising=False)
    monkeypatch.delenv(LEGACY_CONFIG_ENV, raising=False)


def test_by_default_one_store_node_and_every_part_of_the_demo(tmp_path: Path) -> None:
    demo = plan(parse(tmp_path))
    assert demo.parts == ("store", "mosquitto", "gateway", "spark", "dashboard", "sensors", "devices")
    assert (demo.store, demo.brokers, demo.bootstrap, demo.replicas) == ("sftraffic", 1, "127.0.0.1:9092", 1)
    assert (demo.mqtt, demo.metrics_port, demo.dashboard_port) == ("127.0.0.1:1883", 9644, 8050)
    assert (demo.secure, demo.fmt, demo.registry_port, demo.external) == (False, "json", None, None)
    assert demo.backfill == DEFAULT_DURATION
    assert demo.root == (tmp_path / "data").resolve()
    assert not demo.root.exists()


@pytest.mark.parametrize(("size", "replicas"), [(3, 3), (5, 3)])
def test_a_cluster_is_one_part_per_broker_on_consecutive_ports(
    tmp_path: Path, size: int, replicas: int
) -> None:
    demo = plan(parse(tmp_path, "--cluster", str(size), "--port", "19200", "--voters", "3"))
    assert demo.parts[:size] == tuple(f"store-{i}" for i in range(1, size + 1))
    assert demo.parts[size] == "mosquitto"
    assert demo.bootstrap == ",".join(f"127.0.0.1:{19200 + i}" for i in range(size))
    assert (demo.brokers, demo.voters, demo.replicas) == (size, 3, replicas)


def test_apache_kafka_as_the_store(tmp_path: Path) -> None:
    demo = plan(parse(tmp_path, "--store", "kafka", "--cluster", "3"))
    assert demo.parts[:4] == ("kafka-1", "kafka-2", "kafka-3", "mosquitto")
    assert (demo.store, demo.bootstrap) == ("kafka", "127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094")


def test_an_external_cluster_starts_no_store_and_sets_its_own_replication(tmp_path: Path) -> None:
    demo = plan(parse(tmp_path, "--external", "kafka-1:9092", "-X", "security.protocol=SASL_SSL"))
    assert demo.parts[0] == "mosquitto"
    assert (demo.store, demo.brokers, demo.bootstrap, demo.replicas) == ("external", 0, "kafka-1:9092", None)
    assert demo.external is not None
    assert demo.external.security() == {"security.protocol": "SASL_SSL"}


def test_avro_adds_the_registry_before_the_gateway(tmp_path: Path) -> None:
    demo = plan(parse(tmp_path, "--format", "avro", "--registry-port", "18081", "--secure"))
    assert demo.parts == (
        "store",
        "mosquitto",
        "registry",
        "gateway",
        "spark",
        "dashboard",
        "sensors",
        "devices",
    )
    assert (demo.avro, demo.registry_port, demo.secure) == (True, 18081, True)


def test_without_spark_nor_mqtt_devices_and_no_backfill_by_default(tmp_path: Path) -> None:
    demo = plan(parse(tmp_path, "--no-spark", "--mqtt-devices", "0", "--sensors", "20"))
    assert demo.parts == ("store", "mosquitto", "gateway", "dashboard", "sensors")
    assert (demo.backfill, demo.sensors, demo.mqtt_devices) == ("0", 20, 0)
    assert plan(parse(tmp_path, "--no-spark", "--backfill", "1h")).backfill == "1h"


@pytest.mark.parametrize(
    ("argv", "refused"),
    [
        (("--cluster", "2"), "--cluster 2"),
        (("--secure", "--store", "kafka"), "--secure runs the embedded store"),
        (("--secure", "--external", "kafka-1:9092"), "--secure runs the embedded store"),
        (("--external", "kafka-1:9092", "--cluster", "3"), "--external uses a running cluster"),
        (("--command-config", "client.properties"), "give --external HOST:PORT"),
    ],
)
def test_contradicting_arguments_are_refused_before_anything(
    tmp_path: Path, argv: tuple[str, ...], refused: str
) -> None:
    with pytest.raises(StoreError, match=refused):
        plan(parse(tmp_path, *argv))
    assert not (tmp_path / "data").exists()
