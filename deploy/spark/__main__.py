"""``python -m deploy.spark resolve``: resolve Spark's Kafka connector with Maven, print its folder."""

from __future__ import annotations

import argparse
import sys
import time

from deploy.kafka.resolve import MavenError
from deploy.spark.connector import SPARK_VERSION, ConnectorMissing, jars, lib_dir, resolved


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m deploy.spark", description=__doc__)
    p.add_argument("cmd", choices=["resolve"])
    p.parse_args(argv)
    cold = not resolved()
    t0 = time.monotonic()
    if cold:
        print(f"resolving spark-sql-kafka-0-10 {SPARK_VERSION} into {lib_dir().parent} ...", file=sys.stderr)
    try:
        found = jars()
    except (ConnectorMissing, MavenError) as exc:
        print(exc, file=sys.stderr)
        return 2
    state = f"resolved in {time.monotonic() - t0:.1f}s" if cold else "already resolved"
    print(f"Spark's Kafka connector {SPARK_VERSION}: {len(found)} jars ({state})", file=sys.stderr)
    print(lib_dir())
    return 0


if __name__ == "__main__":
    sys.exit(main())
