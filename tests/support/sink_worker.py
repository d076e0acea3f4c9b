"""A streaming query's result writer (pipelines.sink.TransactionalSink) as its own process, so
a test can SIGKILL it between the sink and the ledger.

For each BATCH_ID given it writes that batch's windows (segments ``a`` and ``b``, window
``w<BATCH_ID>``) to the ``traffic_aggregates`` topic, a file ``part-00000-w<BATCH_ID>`` to the
Parquet history in OUTPUT_DIR (staged, as Spark's writer would) and the batch id to the
ledger, as the aggregates query's ``foreachBatch`` sink does, and prints ``W <id>`` (written and committed)
or ``S <id>`` (committed before: skipped), flushed. With
``$SFTRAFFIC_PIPELINE_KILL_BEFORE_COMMIT=aggregates`` it kills itself before the first commit.
usage: python -m tests.support.sink_worker BOOTSTRAP CHECKPOINT_DIR OUTPUT_DIR BATCH_ID...
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pipelines.sink import TransactionalSink
from sensors.layout import topic


def main() -> None:
    bootstrap, checkpoint, output = sys.argv[1:4]
    out = TransactionalSink(bootstrap, "aggregates", checkpoint, output)
    for batch_id in map(int, sys.argv[4:]):
        rows = [(seg, json.dumps({"segment_id": seg, "window_start": f"w{batch_id}"})) for seg in "ab"]

        def fill(tx: TransactionalSink, rows: list[tuple[str | None, str]] = rows, n: int = batch_id) -> None:
            staged = Path(str(tx.stage("aggregates")))
            staged.mkdir(parents=True, exist_ok=True)
            (staged / f"part-00000-w{n}").write_text(f"w{n}")
            tx.send(topic("traffic_aggregates"), rows)

        wrote = out.write(batch_id, fill)
        print(f"{'W' if wrote else 'S'} {batch_id}", flush=True)
    out.close()


if __name__ == "__main__":
    main()
