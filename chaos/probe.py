"""Clients to run *inside* a broker's network namespace, on the far side of a cut.

A test or a chaos run in the root namespace cannot reach a broker it has cut off; this module
runs there instead (``ip netns exec NS python -m chaos.probe ...``, see
``Network.exec_prefix``) and reports on stdout, one JSON object per line, with wall-clock
times (``time.time()``, comparable with the caller's):

* ``produce``: ``--count`` values ``"<prefix>:<i>"`` to one partition, one every
  ``--every`` seconds; a line per delivery report ``{"value", "error", "offset", "t"}``,
  then ``{"done": true, "undelivered": N}``;
* ``metadata``: every ``--every`` seconds, the broker's own Metadata answer (no client
  cache: one request on one connection) ``{"t", "brokers", "partitions": {"P": [leader,
  leader_epoch, isr]}}``, or ``{"t", "error"}``, until ``--duration`` has passed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from confluent_kafka import Producer

from chaos.workload import quiet_logger
from framework.client.wire import WireClient
from framework.errors import StoreError
from framework.protocol.messages.metadata import MetadataRequest, MetadataResponse


def _emit(doc: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(doc) + "\n")
    sys.stdout.flush()


def produce(args: argparse.Namespace) -> int:
    p = Producer(
        {
            "bootstrap.servers": args.bootstrap,
            "acks": args.acks,
            "enable.idempotence": args.acks == "all",
            "message.timeout.ms": args.timeout_ms,
            "request.timeout.ms": min(args.timeout_ms, 5000),
            "linger.ms": 0,
            "logger": quiet_logger(),
        }
    )

    def report(err: Any, msg: Any) -> None:
        _emit(
            {
                "value": msg.value().decode(),
                "error": None if err is None else err.name(),
                "offset": msg.offset() if err is None else None,
                "t": time.time(),
            }
        )

    for i in range(args.count):
        p.produce(
            args.topic, value=f"{args.prefix}:{i}".encode(), partition=args.partition, on_delivery=report
        )
        p.poll(args.every)
    left = p.flush(args.timeout_ms / 1000 + 10)
    _emit({"done": True, "undelivered": left})
    return 0


def metadata(args: argparse.Namespace) -> int:
    end = time.monotonic() + args.duration
    while time.monotonic() < end:
        t = time.time()
        try:
            with WireClient(args.bootstrap, timeout=2) as c:
                md = c.send(MetadataRequest(topics=None, allow_auto_topic_creation=False), MetadataResponse)
            parts = {
                str(p.partition_index): [p.leader_id, p.leader_epoch, sorted(p.isr_nodes)]
                for tm in md.topics
                if tm.name == args.topic
                for p in tm.partitions
            }
            _emit({"t": t, "brokers": sorted(b.node_id for b in md.brokers), "partitions": parts})
        except (OSError, StoreError) as exc:
            _emit({"t": t, "error": str(exc)})
        time.sleep(args.every)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m chaos.probe", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    pp = sub.add_parser("produce")
    pp.add_argument("--bootstrap", required=True)
    pp.add_argument("--topic", required=True)
    pp.add_argument("--partition", type=int, default=0)
    pp.add_argument("--count", type=int, default=10)
    pp.add_argument("--every", type=float, default=0.5)
    pp.add_argument("--acks", default="all")
    pp.add_argument("--timeout-ms", type=int, default=5000)
    pp.add_argument("--prefix", default="probe")
    pp.set_defaults(func=produce)
    mp = sub.add_parser("metadata")
    mp.add_argument("--bootstrap", required=True)
    mp.add_argument("--topic", required=True)
    mp.add_argument("--every", type=float, default=0.5)
    mp.add_argument("--duration", type=float, default=30)
    mp.set_defaults(func=metadata)
    args = ap.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
