"""A partition as the broker serves it: its log, its leader state and its high watermark.

The partition decides what consumers may see (the high watermark) and wakes fetchers that are
long-polling for new data. With one replica the high watermark follows the log end at once;
the replication layer raises it only when the in-sync replicas have the data.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from framework.errors import NotEnoughReplicas, StoreError
from framework.protocol.errors import ErrorCode
from framework.storage.log import AppendInfo, Log


class FencedLeaderEpoch(StoreError):
    code = ErrorCode.FENCED_LEADER_EPOCH


class UnknownLeaderEpoch(StoreError):
    code = ErrorCode.UNKNOWN_LEADER_EPOCH


@dataclass(eq=False)
class Partition:
    topic: str
    index: int
    topic_id: bytes
    log: Log
    replicas: list[int]
    leader_id: int
    leader_epoch: int = 0
    isr: list[int] = field(default_factory=list)
    deleted: bool = False
    _waiters: list[asyncio.Future[None]] = field(default_factory=list)

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    def check_epoch(self, epoch: int) -> None:
        if epoch < 0 or epoch == self.leader_epoch:
            return
        if epoch < self.leader_epoch:
            raise FencedLeaderEpoch(f"{self.topic}-{self.index}: epoch {epoch} < {self.leader_epoch}")
        raise UnknownLeaderEpoch(f"{self.topic}-{self.index}: epoch {epoch} > {self.leader_epoch}")

    def append_records(self, payload: memoryview, acks: int, now_ms: int) -> AppendInfo:
        """Validate, then append a producer's record set as leader (check, then apply)."""
        lg = self.log
        if acks == -1 and len(self.isr) < lg.config.min_insync_replicas:
            raise NotEnoughReplicas(
                f"{self.topic}-{self.index}: {len(self.isr)} in-sync replica(s), "
                f"min.insync.replicas={lg.config.min_insync_replicas}"
            )
        info = lg.append_as_leader(payload, now_ms)
        if len(self.isr) <= 1:
            self.advance_high_watermark(lg.log_end_offset)
        return info

    def advance_high_watermark(self, offset: int) -> None:
        if offset > self.log.high_watermark:
            self.log.high_watermark = offset
            self.wake()

    def wake(self) -> None:
        if self._waiters:
            waiters, self._waiters = self._waiters, []
            for w in waiters:
                if not w.done():
                    w.set_result(None)

    def add_waiter(self, fut: asyncio.Future[None]) -> None:
        if len(self._waiters) > 64:
            self._waiters = [w for w in self._waiters if not w.done()]
        self._waiters.append(fut)
