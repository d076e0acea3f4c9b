"""Replication throttles: the bytes/s a broker moves for replicas that are catching up
(Kafka's ReplicationQuotaManager, one for the leader side and one for the follower side).

What is throttled: the partitions a topic lists for this broker in
``leader.replication.throttled.replicas`` (leader side) or
``follower.replication.throttled.replicas`` (follower side), as ``PARTITION:BROKER`` pairs or
``*`` (every partition), and only while the follower is out of the ISR: an in-sync follower is
never slowed down. ``kafka-reassign-partitions --throttle`` lists the moving partitions' source
replicas (leader side) and their new replicas (follower side), and sets the rates
(``leader.replication.throttled.rate`` / ``follower.replication.throttled.rate``, dynamic broker
configs) on every broker involved.

How: the rate is measured over the last ``SAMPLES`` windows of ``WINDOW_S`` seconds. When it is
above the limit, a leader answers a throttled partition without its records (the follower asks
again), and a follower leaves a throttled partition out of its next fetch; the bytes of
throttled partitions that were sent or received are recorded. One fetch may overshoot the
limit by what it carries; the average over a reassignment stays at the limit. Unlike Kafka,
whose quota metric assumes at least ``SAMPLES - 1`` windows have passed (and so lets a new
throttle move ten seconds' worth at once), the measured time here starts at one window: a
move's duration is its size over the rate from the first second.

Counters (``throttled_bytes``, ``throttled_skips``) say what the throttle did; the broker
exports them as metrics.

Thread-safety: event-loop only.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

WINDOW_S = 1.0  # Kafka's replication.quota.window.size.seconds
SAMPLES = 11  # Kafka's replication.quota.window.num
UNLIMITED = 9223372036854775807  # Long.MAX_VALUE, the rates' default: no throttle

ALL = -1  # "*": every partition of the topic


def throttled_partitions(entries: Iterable[str], node_id: int) -> frozenset[int]:
    """The partitions a throttled-replicas list names for broker ``node_id`` ({ALL} for ``*``)."""
    out: set[int] = set()
    for item in entries:
        item = item.strip()
        if item == "*":
            return frozenset({ALL})
        part, _, broker = item.partition(":")
        if broker.strip().isdigit() and int(broker) == node_id and part.strip().isdigit():
            out.add(int(part))
    return frozenset(out)


@dataclass
class ReplicationQuota:
    side: str  # "leader" or "follower"
    rate: int = UNLIMITED  # bytes/s
    throttled: dict[str, frozenset[int]] = field(default_factory=dict)  # topic -> partitions
    throttled_bytes: int = 0  # bytes of throttled partitions moved (recorded)
    throttled_skips: int = 0  # times a throttled partition was left out: the quota was exceeded
    _samples: deque[list[float]] = field(default_factory=deque)  # [window start, bytes]

    @property
    def active(self) -> bool:
        return self.rate < UNLIMITED and bool(self.throttled)

    def is_throttled(self, topic: str, index: int) -> bool:
        parts = self.throttled.get(topic)
        return parts is not None and (index in parts or ALL in parts)

    def _purge(self, now: float) -> None:
        while self._samples and self._samples[0][0] <= now - SAMPLES * WINDOW_S:
            self._samples.popleft()

    def measured(self, now: float) -> float:
        """Bytes/s over the retained windows (the time counted from the oldest, at least one window)."""
        self._purge(now)
        if not self._samples:
            return 0.0
        elapsed = max(now - self._samples[0][0], WINDOW_S)
        return sum(b for _, b in self._samples) / elapsed

    def exceeded(self, now: float) -> bool:
        """Whether a throttled partition must wait (counted as a skip when it must)."""
        if self.rate >= UNLIMITED:
            return False
        if self.measured(now) > self.rate:
            self.throttled_skips += 1
            return True
        return False

    def record(self, n: int, now: float) -> None:
        if n <= 0:
            return
        self.throttled_bytes += n
        if self.rate >= UNLIMITED:
            return
        if not self._samples or now >= self._samples[-1][0] + WINDOW_S:
            self._samples.append([now, 0.0])
        self._samples[-1][1] += n
