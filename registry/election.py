"""Which registry instance writes: the one a consumer group gives ``_schemas``' only partition.

Every instance that may lead (``leader.eligibility``) joins consumer group ``group_id``
subscribed to the registry's one-partition topic; the group's assignor gives that partition to
exactly one member, which is the leader until a rebalance takes it away (it stopped, or missed
its session timeout). The partition is paused at once: the election consumer never fetches.
Its ``client.id`` carries the instance's advertised URL, so any instance finds the leader with
DescribeConsumerGroups (the member holding the partition). This is Confluent's and Karapace's
approach (a Kafka group elects the writer) with the stock assignor instead of a custom
protocol, so it needs nothing beyond a Kafka client.

Thread-safety: a thread of its own polls the consumer (rebalance callbacks run there);
:attr:`is_leader` is a flag read anywhere; :meth:`leader_url` blocks (call it off the loop).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaException
from confluent_kafka.admin import AdminClient

__all__ = ["Election"]

log = logging.getLogger("sftraffic.registry.election")
CLIENT_ID_PREFIX = "schema-registry "


class Election:
    def __init__(
        self,
        bootstrap: str,
        topic: str,
        group_id: str,
        advertised_url: str,
        client_config: Mapping[str, Any] | None = None,
        eligible: bool = True,
        session_timeout_ms: int = 10_000,
    ) -> None:
        self.topic = topic
        self.group_id = group_id
        self.url = advertised_url
        self.eligible = eligible
        self.common: dict[str, Any] = {"bootstrap.servers": bootstrap, **(client_config or {})}
        self.session_timeout_ms = session_timeout_ms
        self.is_leader = False
        self.elected = threading.Event()  # set once this instance has joined (as leader or not)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._admin = AdminClient(dict(self.common))
        self._cached: tuple[float, str | None] = (0.0, None)

    def start(self) -> None:
        if not self.eligible:
            self.elected.set()
            return
        self._thread = threading.Thread(target=self._run, name="registry-election", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=15)

    def _run(self) -> None:
        consumer = Consumer(
            {
                **self.common,
                "group.id": self.group_id,
                "client.id": CLIENT_ID_PREFIX + self.url,
                "enable.auto.commit": False,
                "session.timeout.ms": self.session_timeout_ms,
                "heartbeat.interval.ms": max(500, self.session_timeout_ms // 5),
                "partition.assignment.strategy": "range",
            }
        )

        def on_assign(c: Any, partitions: list[Any]) -> None:
            c.pause(partitions)
            self.is_leader = any(p.partition == 0 for p in partitions)
            self._cached = (time.monotonic(), self.url if self.is_leader else None)
            log.info("registry %s is %s", self.url, "the leader" if self.is_leader else "a follower")
            self.elected.set()

        def on_revoke(c: Any, partitions: list[Any]) -> None:
            self.is_leader = False
            self._cached = (0.0, None)

        consumer.subscribe([self.topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
        try:
            while not self._stop.is_set():
                consumer.poll(0.2)
        finally:
            self.is_leader = False
            consumer.close()  # leaves the group: another instance takes over at once

    def forget(self) -> None:
        """Drop the cached leader (it did not answer): the next look-up asks the group."""
        self._cached = (0.0, None)

    def leader_url(self, max_age: float = 2.0) -> str | None:
        """The leader's advertised URL (ours when we lead), or None when no member holds it."""
        if self.is_leader:
            return self.url
        at, url = self._cached
        if url is not None and time.monotonic() - at < max_age:
            return url
        try:
            desc = self._admin.describe_consumer_groups([self.group_id], request_timeout=10)[
                self.group_id
            ].result()
        except KafkaException as exc:
            log.warning("cannot describe group %s: %s", self.group_id, exc)
            return None
        for member in desc.members:
            tps = member.assignment.topic_partitions if member.assignment is not None else []
            if any(tp.topic == self.topic and tp.partition == 0 for tp in tps):
                cid = str(member.client_id)
                url = cid[len(CLIENT_ID_PREFIX) :] if cid.startswith(CLIENT_ID_PREFIX) else None
                self._cached = (time.monotonic(), url)
                return url
        return None
