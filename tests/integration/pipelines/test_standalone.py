"""The pipelines past one machine: a Spark standalone master and worker, started as
``deploy/compose/compose.yaml`` starts them (its ``spark-master`` and ``spark-worker``
commands, on loopback addresses and free ports), and ``sftraffic pipeline --master spark://...``
running a batch job on them as a separate driver process, its executors on the worker reading
the store through our data source.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from testing import ManagedProcess, free_port, sftraffic
from tests.support import deployfiles as df
from tests.support.brokers import BrokerFactory
from tests.support.pipelines import minute_events, produce, store

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.timeout(300)]


def _standalone(command: list[str], values: dict[str, str]) -> list[str]:
    """A compose service's spark-class command with each flag in ``values`` set to its value
    here (and the master URL, the one positional argument of a worker, likewise)."""
    out = list(command)
    for flag, value in values.items():
        if flag in out:
            out[out.index(flag) + 1] = value
        elif flag.startswith("spark://"):
            out = [value if a.startswith("spark://") else a for a in out]
        else:
            out += [flag, value]
    return out


def _spark_env() -> dict[str, str]:
    import pyspark

    env = dict(os.environ)
    env.update(
        SPARK_HOME=str(Path(pyspark.__file__).parent),  # what find-spark-home works out in the image
        SPARK_LOCAL_IP="127.0.0.1",
        # no REST submission server (port 6066 for every master)
        SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false",
        PYSPARK_PYTHON=sys.executable,
    )
    return env


def _master_state(ui_port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as r:
        state: dict[str, Any] = json.load(r)
    return state


def test_pipeline_batch_runs_on_a_spark_standalone_cluster(
    broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    b = store(broker_factory)
    produce(b.bootstrap, minute_events(0, 4))  # 2 segments x 5 minutes
    commands = df.compose_spark_commands()
    spark_class = str(Path(sys.executable).parent / "spark-class")
    port, ui, worker_ui = free_port(), free_port(), free_port()
    url = f"spark://127.0.0.1:{port}"
    env = _spark_env()
    master = ManagedProcess(
        "spark-master",
        [
            spark_class,
            *_standalone(
                commands["spark-master"],
                {"--host": "127.0.0.1", "--port": str(port), "--webui-port": str(ui)},
            ),
        ],
        ready="I have been elected leader",
        env=env,
    )
    worker = ManagedProcess(
        "spark-worker",
        [
            spark_class,
            *_standalone(
                commands["spark-worker"],
                {
                    "spark://": url,
                    "--host": "127.0.0.1",
                    "--cores": "1",
                    "--webui-port": str(worker_ui),
                    "--work-dir": str(tmp_path / "work"),
                },
            ),
        ],
        ready="Successfully registered with master",
        env=env,
    )
    try:
        # both at once: the worker retries the master until it answers
        master.launch()
        worker.launch()
        master.wait_ready(60)
        worker.wait_ready(60)
        assert len(_master_state(ui)["workers"]) == 1
        driver_env = dict(env)
        driver_env["SFTRAFFIC_SPARK_CONF"] = (
            "spark.driver.host=127.0.0.1,spark.driver.bindAddress=127.0.0.1,"
            "spark.executor.memory=512m,spark.cores.max=1,spark.sql.shuffle.partitions=2"
        )
        driver = ManagedProcess(
            "pipeline",
            sftraffic(
                "pipeline",
                "aggregates",
                "--batch",
                "--master",
                url,
                "-b",
                b.bootstrap,
                "--checkpoint-dir",
                str(tmp_path / "ck"),
                "--output-dir",
                str(tmp_path / "out"),
            ),
            ready=lambda line: line.startswith('{"aggregates"'),  # its summary, on stdout
            env=driver_env,
        )
        driver.start(timeout=180)
        assert driver.proc is not None and driver.proc.wait(30) == 0, driver.tail(40)
        summary = json.loads(next(x for x in driver.logs().splitlines() if x.startswith('{"aggregates"')))
        assert summary["aggregates"] == 10
        # it ran on the cluster: the master lists it as finished, the worker ran its executor
        apps = _master_state(ui)["completedapps"]
        assert [a["name"] for a in apps] == ["sftraffic-aggregates"]
        assert "Asked to launch executor" in worker.logs()
        assert list((tmp_path / "out").rglob("*.parquet"))
    finally:
        worker.stop()
        master.stop()
