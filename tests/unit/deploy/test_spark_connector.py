"""deploy/spark without a JVM: the connector's pom matches the installed PySpark, and a missing
connector is one line saying what to run."""

from __future__ import annotations

from pathlib import Path

import pytest

from deploy.spark import connector


def test_the_pom_pins_the_installed_pyspark_version() -> None:
    import pyspark

    assert pyspark.__version__ == connector.SPARK_VERSION
    pom = connector.POM.read_text()
    assert "<artifactId>spark-sql-kafka-0-10_2.13</artifactId>" in pom
    assert "<version>${spark.version}</version>" in pom


def test_an_unresolved_connector_fails_with_one_line_naming_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SFTRAFFIC_MAVEN_CACHE", str(tmp_path))
    assert connector.lib_dir() == tmp_path / f"spark-sql-kafka-{connector.SPARK_VERSION}" / "lib"
    assert not connector.resolved()
    with pytest.raises(connector.ConnectorMissing) as err:
        connector.spark_conf(auto_resolve=False)
    text = str(err.value)
    assert "\n" not in text and "python -m deploy.spark resolve" in text


def test_maven_failing_is_one_line_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SFTRAFFIC_MAVEN_CACHE", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))  # no mvn, no java
    with pytest.raises(connector.ConnectorMissing) as err:
        connector.jars()
    assert "\n" not in str(err.value) and "python -m deploy.spark resolve" in str(err.value)


def test_the_jars_are_local_paths_once_resolved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SFTRAFFIC_MAVEN_CACHE", str(tmp_path))
    lib = connector.lib_dir()
    lib.mkdir(parents=True)
    v = connector.SPARK_VERSION
    for name in (f"spark-sql-kafka-0-10_2.13-{v}.jar", "kafka-clients-3.9.2.jar"):
        (lib / name).write_bytes(b"")
    monkeypatch.setattr(connector, "resolved", lambda: True)
    jars = connector.spark_conf(auto_resolve=False)["spark.jars"].split(",")
    assert [Path(j).name for j in jars] == ["kafka-clients-3.9.2.jar", f"spark-sql-kafka-0-10_2.13-{v}.jar"]
    assert all(Path(j).is_absolute() for j in jars)
