"""SparkSession for the pipeline: local[*] by default, any cluster by configuration.

``SFTRAFFIC_SPARK_MASTER`` (or ``--master``) picks the master (``local[2]``,
``spark://host:7077``, ``k8s://...``); ``SFTRAFFIC_SPARK_CONF`` adds settings as
``key=value,key=value``; ``kafka_connector=True`` adds Spark's own Kafka connector
(``deploy/spark``) to ``spark.jars``. Workers run this interpreter (``PYSPARK_PYTHON``), so the project
must be installed where the executors run (``pip install sftraffic`` in the image).
"""

from __future__ import annotations

import os
import sys
from typing import Any


def _local_cores(master: str) -> int | None:
    """N of ``local[N]`` (the machine's cores for ``local[*]``), None for a cluster master."""
    import re

    m = re.fullmatch(r"local(?:\[(\*|\d+)(?:,\d+)?\])?", master.strip())
    if not m:
        return None
    n = m.group(1)
    return max(1, os.cpu_count() or 1) if n in (None, "*") and "[" in master else int(n) if n else 1


def session(
    app: str = "sftraffic",
    master: str | None = None,
    conf: dict[str, str] | None = None,
    kafka_connector: bool = False,
) -> Any:
    """The session (``getOrCreate``: an existing one is returned as it is). ``kafka_connector``:
    Spark's own Kafka source and sink (format ``kafka``) are loaded from the jars of
    :mod:`deploy.spark` (resolved with Maven first if needed; ``ConnectorMissing`` with what to
    run otherwise), added to ``spark.jars`` as local files."""
    from pyspark.sql import SparkSession

    from pipelines.source import register

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    master = master or os.environ.get("SFTRAFFIC_SPARK_MASTER", "local[*]")
    b = SparkSession.builder.appName(app).master(master)
    settings = {
        # one shuffle partition per local core: each is a state store per stateful operator,
        # and their per-batch commits are most of a small micro-batch's fixed cost
        "spark.sql.shuffle.partitions": str(_local_cores(master) or 4),
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.streaming.noDataMicroBatches.enabled": "true",
        "spark.driver.memory": "2g",
        "spark.python.worker.reuse": "true",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
    }
    for item in filter(None, os.environ.get("SFTRAFFIC_SPARK_CONF", "").split(",")):
        k, _, v = item.partition("=")
        settings[k.strip()] = v.strip()
    settings.update(conf or {})
    if kafka_connector:
        from deploy.spark.connector import spark_conf

        jars = spark_conf()["spark.jars"]
        settings["spark.jars"] = ",".join(filter(None, [settings.get("spark.jars", ""), jars]))
    for k, v in settings.items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark
