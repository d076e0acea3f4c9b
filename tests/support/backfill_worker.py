"""The backfill (pipelines.jobs.run_backfill) in a process of its own, so a test can SIGKILL it
before its transaction commits (``$SFTRAFFIC_PIPELINE_KILL_BEFORE_COMMIT=backfill``). A small
local Spark session (no Kafka connector, no warm-up: cheaper than ``sftraffic pipeline``'s).
Prints the summary as JSON.

usage: python -m tests.support.backfill_worker BOOTSTRAP CHECKPOINT_DIR OUTPUT_DIR FROM_MS UNTIL_MS
"""

from __future__ import annotations

import json
import sys

from pipelines import jobs
from pipelines.spark import session


def main() -> None:
    bootstrap, checkpoint, output, from_ms, until_ms = sys.argv[1:6]
    spark = session("backfill-worker", master="local[2]", conf={"spark.sql.shuffle.partitions": "2"})
    cfg = jobs.JobConfig(bootstrap=bootstrap, checkpoint_dir=checkpoint, output_dir=output)
    print(json.dumps(jobs.run_backfill(spark, cfg, int(from_ms), int(until_ms)), default=str), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
