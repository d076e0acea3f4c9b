"""Spark's own Kafka connector (``spark-sql-kafka-0-10_2.13``) from Maven Central.

``deploy/spark/pom.xml`` names it at the installed PySpark's version; :func:`resolve` copies it
and what PySpark does not ship (``spark-token-provider-kafka-0-10``, ``kafka-clients``,
``commons-pool2``) into ``<cache>/spark-sql-kafka-<version>/lib`` with
:func:`deploy.kafka.resolve.resolve_pom` (``<cache>`` is ``.cache/maven``, ignored by git, or
``$SFTRAFFIC_MAVEN_CACHE``). :func:`spark_conf` hands the jars to a SparkSession as local file
paths (``spark.jars``): Spark itself fetches nothing at start.

    python -m deploy.spark resolve      # resolve (Maven), print the jars' folder
"""

from __future__ import annotations

import re
from pathlib import Path

from deploy.kafka.resolve import MavenError, cache_dir, pom_resolved, resolve_pom

HERE = Path(__file__).resolve().parent
POM = HERE / "pom.xml"
RESOLVE_CMD = ".venv/bin/python -m deploy.spark resolve"


def _pom_version() -> str:
    m = re.search(r"<spark\.version>([^<]+)</spark\.version>", POM.read_text())
    if m is None:
        raise RuntimeError(f"{POM} declares no <spark.version>")
    return m.group(1).strip()


SPARK_VERSION = _pom_version()


class ConnectorMissing(RuntimeError):
    """The connector's jars are not resolved (or not for this PySpark); the message is one line
    saying what to run."""


def lib_dir() -> Path:
    return cache_dir() / f"spark-sql-kafka-{SPARK_VERSION}" / "lib"


def resolved() -> bool:
    return pom_resolved(POM, lib_dir())


def _check_pyspark() -> None:
    import pyspark

    if pyspark.__version__ != SPARK_VERSION:
        raise ConnectorMissing(
            f"Spark's Kafka connector is pinned to {SPARK_VERSION} (deploy/spark/pom.xml) but PySpark "
            f"{pyspark.__version__} is installed: pip install -e '.[app]' (pyproject pins it)"
        )


def resolve(quiet: bool = True) -> Path:
    """The connector's jar folder, resolved with Maven first when needed (MavenError if that fails)."""
    return resolve_pom(POM, lib_dir(), quiet=quiet)


def jars(auto_resolve: bool = True) -> list[Path]:
    """The jars to put on ``spark.jars``; ``auto_resolve=False`` raises :class:`ConnectorMissing`
    instead of running Maven when they are not there yet."""
    _check_pyspark()
    if not resolved():
        if not auto_resolve:
            raise ConnectorMissing(f"Spark's Kafka connector is not resolved: run {RESOLVE_CMD}")
        try:
            resolve()
        except MavenError as exc:
            first = str(exc).splitlines()[0]
            raise ConnectorMissing(
                f"Spark's Kafka connector could not be resolved ({first}): run {RESOLVE_CMD}"
            ) from None
    found = sorted(lib_dir().glob("*.jar"))
    if not any(p.name.startswith(f"spark-sql-kafka-0-10_2.13-{SPARK_VERSION}") for p in found):
        raise ConnectorMissing(f"{lib_dir()} holds no spark-sql-kafka jar: run {RESOLVE_CMD}")
    return found


def spark_conf(auto_resolve: bool = True) -> dict[str, str]:
    """SparkSession settings that load the connector: ``{"spark.jars": "<jar>,<jar>,..."}``."""
    return {"spark.jars": ",".join(str(p) for p in jars(auto_resolve))}
