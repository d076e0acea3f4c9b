"""A consumer-group member as its own process (so tests can SIGKILL it).

Prints one line per event on stdout, flushed:  ``A p,p,p`` (assignment now), ``M p offset value``.
Auto-commits every 200 ms. Runs until SIGTERM (clean close: leaves the group) or SIGKILL.
usage: python -m tests.support.group_consumer BOOTSTRAP GROUP TOPIC [SESSION_MS]
"""

from __future__ import annotations

import logging
import signal
import sys

from confluent_kafka import Consumer


def main() -> None:
    bootstrap, group, topic = sys.argv[1:4]
    session = int(sys.argv[4]) if len(sys.argv) > 4 else 6000
    lg = logging.getLogger("quiet")
    lg.addHandler(logging.NullHandler())
    lg.propagate = False
    out = sys.stdout
    running = [True]
    signal.signal(signal.SIGTERM, lambda *_: running.__setitem__(0, False))
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": session,
            "heartbeat.interval.ms": 500,
            "auto.commit.interval.ms": 200,
            "enable.auto.commit": True,
            "logger": lg,
        }
    )
    assigned: set[int] = set()

    def show() -> None:
        out.write("A " + ",".join(str(p) for p in sorted(assigned)) + "\n")
        out.flush()

    def on_assign(cons: Consumer, parts: list) -> None:  # type: ignore[type-arg]
        assigned.update(p.partition for p in parts)
        show()

    def on_revoke(cons: Consumer, parts: list) -> None:  # type: ignore[type-arg]
        assigned.difference_update(p.partition for p in parts)
        show()

    c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
    while running[0]:
        msgs = c.consume(500, timeout=0.2)
        lines = [f"M {m.partition()} {m.offset()} {m.value().decode()}\n" for m in msgs if m.error() is None]
        if lines:
            out.write("".join(lines))
            out.flush()
    c.close()


if __name__ == "__main__":
    main()
