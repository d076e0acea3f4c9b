"""The streaming sinks' exactly-once writes (pipelines/sink.py), without Spark.

The case a ledger file written after the results cannot cover: the results of a micro-batch produced and
acknowledged, then the process SIGKILLed before the batch id was recorded. Spark replays that
batch (same id, same rows) after the restart. With the results and the batch id in one
transaction the killed attempt is aborted (the restarted writer's ``init_transactions`` fences
it) and the replay writes the windows once; a batch committed before is skipped. The Parquet
history, staged per batch and moved in after the commit, holds each batch once as well.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from pipelines import jobs, sink
from sensors.layout import ensure_layout
from tests.support.brokers import BrokerFactory
from tests.support.pipelines import results

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]


def worker(bootstrap: str, ck: Path, *batches: int, kill: bool = False) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != sink.KILL_ENV}
    if kill:
        env[sink.KILL_ENV] = "aggregates"
    out = ck.parent.parent / "out"
    cmd = [sys.executable, "-m", "tests.support.sink_worker", bootstrap, str(ck), str(out)]
    cmd += map(str, batches)
    return subprocess.run(cmd, check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def test_a_batch_killed_between_the_sink_and_the_ledger_is_emitted_once_after_restart(
    broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    broker = broker_factory()  # its own: the result topics' names are the application's
    ensure_layout(broker.bootstrap, partitions=2, extra_topics=jobs.result_topics())
    ck = tmp_path / "ck" / "aggregates"
    first = worker(broker.bootstrap, ck, 0)
    assert first.returncode == 0 and first.stdout.split() == ["W", "0"], first.stderr[-2000:]
    killed = worker(broker.bootstrap, ck, 1, kill=True)  # results of batch 1 acknowledged, then SIGKILL
    assert killed.returncode == -9, (killed.returncode, killed.stderr[-2000:])
    # the restart: Spark replays batch 1 (not in its checkpoint); batch 0 again as a replay of a
    # committed batch would be; then a new batch
    again = worker(broker.bootstrap, ck, 0, 1, 2)
    assert again.returncode == 0, again.stderr[-2000:]
    assert again.stdout.split() == ["S", "0", "W", "1", "W", "2"]
    rows = results(broker.bootstrap, "traffic_aggregates")
    got = Counter((r["segment_id"], r["window_start"]) for r in rows)
    assert got == {(s, f"w{b}"): 1 for s in "ab" for b in range(3)}, got
    # the Parquet history too: each batch's file once, nothing left staged
    history = tmp_path / "out" / "aggregates"
    assert sorted(f.read_text() for f in history.glob("*-part-*")) == ["w0", "w1", "w2"]
    assert not list(history.glob("_pending/*"))


def test_transactional_ids_are_stable_per_query_and_checkpoint(tmp_path: Path) -> None:
    a = sink.transactional_id("aggregates", str(tmp_path / "ck" / "aggregates"))
    assert a == sink.transactional_id("aggregates", str(tmp_path / "ck" / "." / "aggregates"))
    assert a.startswith("sftraffic-pipeline-aggregates-")
    assert a != sink.transactional_id("aggregates", str(tmp_path / "other" / "aggregates"))
    assert a != sink.transactional_id("correlation", str(tmp_path / "ck" / "aggregates"))


def test_a_new_checkpoint_starts_again_at_batch_zero(broker_factory: BrokerFactory, tmp_path: Path) -> None:
    """The markers of a deleted checkpoint do not skip the batches of the query that replaces it
    (same path, so the same transactional id; Spark's query id in ``metadata`` differs)."""
    broker = broker_factory()
    ensure_layout(broker.bootstrap, partitions=2, extra_topics=jobs.result_topics())
    ck = tmp_path / "ck" / "aggregates"
    ck.mkdir(parents=True)
    (ck / "metadata").write_text('{"id":"11111111-old"}\n')
    assert worker(broker.bootstrap, ck, 0, 1).stdout.split() == ["W", "0", "W", "1"]
    assert worker(broker.bootstrap, ck, 1).stdout.split() == ["S", "1"]
    (ck / "metadata").write_text('{"id":"22222222-new"}\n')  # the checkpoint deleted and made again
    assert worker(broker.bootstrap, ck, 0).stdout.split() == ["W", "0"]


def test_the_spark_user_of_the_secured_demo_writes_in_transactions(tmp_path: Path) -> None:
    """``sftraffic up --secure``'s ACLs let the ``spark`` user (SCRAM over TLS) use its
    transactional ids and read the ledger back."""
    from deploy.local import secure
    from framework.client.security import ENV
    from testing import BrokerProcess, free_port

    s, _ = secure.ensure(tmp_path, [])
    secure.prepare_store(tmp_path / "store", s)
    port = free_port()
    overrides = secure.broker_settings(s, f"127.0.0.1:{port}")
    b = BrokerProcess(tmp_path / "store", port=port, overrides=overrides).start()
    try:
        os.environ[ENV] = str(s.properties(secure.ADMIN))
        try:
            ensure_layout(b.bootstrap, partitions=2, extra_topics=jobs.result_topics())
        finally:
            del os.environ[ENV]
        ck = tmp_path / "ck" / "aggregates"
        env = {**os.environ, ENV: str(s.properties(secure.SPARK))}
        cmd = [sys.executable, "-m", "tests.support.sink_worker", b.bootstrap, str(ck), str(tmp_path / "out")]

        def run(*batches: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [*cmd, *batches], check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
            )

        first = run("0")
        assert first.stdout.split() == ["W", "0"], first.stderr[-2000:]
        again = run("0", "1")
        assert again.stdout.split() == ["S", "0", "W", "1"], again.stderr[-2000:]
    finally:
        b.stop()


@pytest.mark.slow
@pytest.mark.spark
def test_the_pipeline_driver_killed_before_its_commit_emits_each_window_once(
    broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    """The same crash with Spark in the loop: ``sftraffic pipeline aggregates`` SIGKILLs itself
    in its first micro-batch with windows, after their records were acknowledged and before the
    commit; restarted on the same checkpoint, Spark replays that batch and the windows are
    emitted once (``--runslow``: two Spark drivers, ~1-2 minutes)."""
    from testing import sftraffic
    from tests.support.history import KEEP_TTL_MS
    from tests.support.pipelines import minute_events, produce, windows, wstart

    b = broker_factory()
    ensure_layout(b.bootstrap, partitions=2, ttl_ms=KEEP_TTL_MS, extra_topics=jobs.result_topics())
    produce(b.bootstrap, minute_events(0, 4))
    args = ["pipeline", "aggregates", "-b", b.bootstrap, "--checkpoint-dir", str(tmp_path / "ck")]
    args += ["--output-dir", str(tmp_path / "out"), "--trigger", "500 milliseconds"]
    args += ["--watermark", "1 minute"]
    env = {**os.environ, "SFTRAFFIC_SPARK_CONF": "spark.sql.shuffle.partitions=2"}
    env[sink.KILL_ENV] = "aggregates"

    def pipeline(timeout_s: str) -> subprocess.CompletedProcess[str]:
        cmd = sftraffic(*args, "--timeout", timeout_s)
        return subprocess.run(cmd, check=False, env=env, capture_output=True, text=True, timeout=300)

    killed = pipeline("240")
    assert killed.returncode == -9, killed.stderr[-3000:]
    assert windows(b.bootstrap) == {}  # produced, never committed: invisible at read_committed
    del env[sink.KILL_ENV]
    again = pipeline("45")
    assert again.returncode == 0, again.stderr[-3000:]
    got = windows(b.bootstrap)
    assert {(s, wstart(m)) for s in "ab" for m in range(3)} <= set(got), got
    assert all(n == 1 for n in got.values()), got
