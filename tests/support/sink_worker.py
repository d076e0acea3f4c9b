"""A streaming query's result writer (pipelines.sink.TransactionalSink) as its own process, so
a test can SIGKILL it between the sink and the ledger.

For each BATCH_ID given it writes that batch's windows (segments ``a`` and ``b``, window
``w<BATCH_ID>``) to the ``traffic_aggregates`` topic and the batch id to the ledger, as the
aggregates query's ``foreachBatch`` sink does, and prints ``W <id>`` (written and committed)
or ``S <id>`` (committed before: skipped), flushed. With
``$SFTRAFFIC_PIPELINE_KILL_BEFORE_COMMIT=aggregates`` it kills itself before the first commit.
usage: python -m tests.support.sink_worker BOOTSTRAP CHECKPOINT_DIR BATCH_ID...
"""

from __future__ import annotations

import json
import sys

from pipelines.sink import TransactionalSink
from sensors.layout import topic


def main() -> None:
    bootstrap, checkpoint = sys.argv[1:3]
    out = TransactionalSink(bootstrap, "aggregates", checkpoint)
    for batch_id in map(int, sys.argv[3:]):
        rows = [(seg, json.dumps({"segment_id": seg, "window_start": f"w{batch_id}"})) for seg in "ab"]
        wrote = out.write(batch_id, lambda tx, rows=rows: tx.send(topic("traffic_aggregates"), rows))
        print(f"{'W' if wrote else 'S'} {batch_id}", flush=True)
    out.close()


if __name__ == "__main__":
    main()
