"""A rolling restart of a Kafka-API cluster, one broker at a time.

Kafka's procedure (its documentation, "Rolling restart"), automated over the Kafka protocol, so
it drives our brokers and Apache Kafka's alike:

1. wait until every broker is registered and every partition is fully in sync (ISR = replicas);
2. restart one broker (``restart(node_id)``: a systemd unit, a pod delete, a process the caller
   owns). Its SIGTERM is a controlled shutdown: its leaderships move to in-sync followers
   before it stops, so producers see NOT_LEADER (retriable), never a failed write;
3. wait until it is registered again and back in every ISR it belongs to;
4. move leadership back to the preferred replicas (ElectLeaders, PREFERRED), then the next
   broker. The controller goes last (one controller move instead of several).

A roll stops at the first step that does not finish within ``timeout`` with a RollError
naming the step and what is missing (the cluster is left as it is: nothing is forced).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import ElectionType, KafkaError
from confluent_kafka.admin import AdminClient

from framework.errors import StoreError


class RollError(StoreError):
    """A rolling restart that stopped: which step, and what it waited for."""


@dataclass(frozen=True)
class ClusterView:
    brokers: frozenset[int]
    controller: int
    # (topic, partition) -> (replicas, isr)
    partitions: dict[tuple[str, int], tuple[tuple[int, ...], tuple[int, ...]]]

    def out_of_sync(self) -> list[tuple[str, int]]:
        return sorted(tp for tp, (replicas, isr) in self.partitions.items() if set(isr) != set(replicas))


def view(admin: Any, timeout: float = 10.0) -> ClusterView:
    md = admin.list_topics(timeout=timeout)
    parts = {
        (t, p.id): (tuple(p.replicas), tuple(p.isrs))
        for t, tm in md.topics.items()
        if tm.error is None
        for p in tm.partitions.values()
    }
    return ClusterView(frozenset(md.brokers), md.controller_id, parts)


def order(v: ClusterView) -> list[int]:
    """Brokers in restart order: by id, the controller last."""
    return sorted(v.brokers, key=lambda b: (b == v.controller, b))


def wait_healthy(
    admin: Any,
    brokers: frozenset[int],
    timeout: float,
    what: str,
    poll: float = 0.5,
) -> ClusterView:
    """Wait until ``brokers`` are all registered and no partition is under-replicated."""
    deadline = time.monotonic() + timeout
    last = "no metadata"
    while True:
        try:
            v = view(admin)
        except Exception as exc:  # a broker restarting: ask again
            last = f"metadata: {exc}"
        else:
            missing = sorted(brokers - v.brokers)
            lagging = v.out_of_sync()
            if not missing and not lagging:
                return v
            last = (
                f"brokers not registered: {missing}"
                if missing
                else f"{len(lagging)} partitions not fully in sync, e.g. {lagging[:3]}"
            )
        if time.monotonic() >= deadline:
            raise RollError(f"{what}: not healthy after {timeout:.0f} s ({last})")
        time.sleep(poll)


def elect_preferred(admin: Any, timeout: float = 30.0) -> list[str]:
    """ElectLeaders(PREFERRED) for every partition; the partitions that could not move (an
    ELECTION_NOT_NEEDED or a preferred replica not in sync is not a failure of the roll)."""
    try:
        results = admin.elect_leaders(ElectionType.PREFERRED, None).result(timeout)
    except Exception as exc:  # the whole request refused
        raise RollError(f"preferred leader election failed: {exc}") from None
    stuck = []
    for tp, err in results.items():
        if err is None:
            continue
        e = err if isinstance(err, KafkaError) else (err.args[0] if err.args else None)
        if isinstance(e, KafkaError) and e.code() == KafkaError.ELECTION_NOT_NEEDED:
            continue
        stuck.append(f"{tp.topic}-{tp.partition}: {err}")
    return stuck


def roll(
    admin_conf: dict[str, Any],
    restart: Callable[[int], None],
    *,
    timeout: float = 300.0,
    elect: bool = True,
    only: list[int] | None = None,
    say: Callable[[str], None] = print,
) -> list[int]:
    """Restart the cluster's brokers one at a time (``only``: those); the ids restarted."""
    admin = AdminClient(admin_conf)
    v = wait_healthy(admin, view(admin).brokers, timeout, "before the roll")
    everyone = v.brokers
    todo = [b for b in order(v) if only is None or b in only]
    unknown = sorted(set(only or []) - everyone)
    if unknown:
        raise RollError(f"no such brokers in the cluster: {unknown} (it has {sorted(everyone)})")
    say(f"restart order {', '.join(map(str, todo))} (controller {v.controller} last)")
    done: list[int] = []
    for b in todo:
        say(f"broker {b}: restarting ({len(v.partitions)} partitions in sync)")
        t0 = time.monotonic()
        restart(b)
        v = wait_healthy(admin, everyone, timeout, f"after restarting broker {b}")
        if elect:
            for line in elect_preferred(admin)[:5]:
                say(f"  preferred leader not elected: {line}")
        say(f"broker {b}: back and in sync after {time.monotonic() - t0:.1f} s")
        done.append(b)
    return done
