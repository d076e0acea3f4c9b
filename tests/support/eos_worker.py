"""A consume-transform-produce loop with exactly-once semantics, as its own process (so tests
can SIGKILL it at any point).

Reads INPUT (read_committed, group GROUP with a fixed ``group.instance.id`` so a restarted
worker takes its place at once), and for each batch, in one transaction: produces
``<value>-out`` to OUTPUT and sends the consumed positions with ``send_offsets_to_transaction``,
then commits. Prints ``C <count>`` after each commit (flushed). Exits 0 after IDLE_S seconds
without input once it has its partitions.
usage: python -m tests.support.eos_worker BOOTSTRAP GROUP INPUT OUTPUT TRANSACTIONAL_ID [IDLE_S [BATCH]]
"""

from __future__ import annotations

import logging
import sys
import time

from confluent_kafka import Consumer, Producer


def main() -> None:
    bootstrap, group, src, out, tid = sys.argv[1:6]
    idle_s = float(sys.argv[6]) if len(sys.argv) > 6 else 3.0
    batch = int(sys.argv[7]) if len(sys.argv) > 7 else 100
    lg = logging.getLogger("quiet")
    lg.addHandler(logging.NullHandler())
    lg.propagate = False
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.instance.id": f"{group}-worker",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "logger": lg,
        }
    )
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 2, "logger": lg})
    p.init_transactions(60)
    c.subscribe([src])
    last = time.monotonic()
    while time.monotonic() - last < idle_s:
        msgs = [m for m in c.consume(batch, timeout=0.3) if m.error() is None]
        if not c.assignment():
            last = time.monotonic()  # idle counts once the group assigned us the input
        if not msgs:
            continue
        last = time.monotonic()
        p.begin_transaction()
        for m in msgs:
            p.produce(out, key=m.key(), value=(m.value() or b"") + b"-out")
        p.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(), 60)
        p.commit_transaction(60)
        print(f"C {len(msgs)}", flush=True)
    c.close()


if __name__ == "__main__":
    main()
