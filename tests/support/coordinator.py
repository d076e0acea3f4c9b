"""Fakes for the coordinators' unit tests: a manual clock, an in-memory offset store and a
transaction marker writer.

Nothing here sleeps: :class:`FakeScheduler` keeps a heap of timers that :meth:`advance` fires in
order on the running asyncio loop, yielding to the loop after each one so that tasks waiting on
JoinGroup / SyncGroup futures see the outcome before the next timer fires.
"""

from __future__ import annotations

import asyncio
import functools
import heapq
import itertools
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from framework.coordinator.groups import CommittedOffset, Group
from framework.coordinator.transactions import TP, TxnMarker
from framework.protocol.error_codes import ErrorCode as E

T = TypeVar("T")

EPS = 1e-6  # float slack when a timer is due exactly at the end of an advance


async def settle(rounds: int = 20) -> None:
    """Let every ready task run (yield to the loop; no wall-clock wait)."""
    for _ in range(rounds):
        await asyncio.sleep(0)


def run_async(fn: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    """Run an ``async def`` test body on a fresh loop (no pytest-asyncio needed)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        asyncio.run(fn(*args, **kwargs))

    return wrapper


@dataclass(eq=False)
class FakeTimer:
    when: float
    fn: Callable[[], None]
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True


class FakeScheduler:
    """The coordinator's Scheduler with a clock that moves only when a test says so."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self._heap: list[tuple[float, int, FakeTimer]] = []
        self._seq = itertools.count()

    def time(self) -> float:
        return self.now

    # the coordinators' Clock (framework.clock): the same manual time, in wall milliseconds
    def wall_ms(self) -> int:
        return round(self.now * 1000)

    def monotonic(self) -> float:
        return self.now

    def call_later(self, delay: float, fn: Callable[[], None]) -> FakeTimer:
        t = FakeTimer(self.now + max(delay, 0.0), fn)
        heapq.heappush(self._heap, (t.when, next(self._seq), t))
        return t

    def create_future(self) -> asyncio.Future[Any]:
        return asyncio.get_running_loop().create_future()

    def pending(self) -> list[float]:
        """Due times of live timers (for assertions about what is armed)."""
        return sorted(t.when for _, _, t in self._heap if not t.cancelled)

    async def advance(self, seconds: float) -> None:
        """Move the clock forward, firing due timers in order and letting tasks react."""
        end = self.now + seconds
        await settle()
        while self._heap and self._heap[0][0] <= end + EPS:
            when, _, t = heapq.heappop(self._heap)
            if t.cancelled:
                continue
            self.now = max(self.now, when)
            t.fn()
            await settle()
        self.now = max(self.now, end)
        await settle()


@dataclass
class FakeStore:
    """OffsetStore in memory; records every call so tests can check what was persisted."""

    offsets: dict[str, dict[tuple[str, int], CommittedOffset]] = field(default_factory=dict)
    groups: dict[str, tuple[str | None, int, str | None, int]] = field(default_factory=dict)
    calls: list[tuple[Any, ...]] = field(default_factory=list)

    async def write_offsets(self, group_id: str, offsets: dict[tuple[str, int], CommittedOffset]) -> None:
        self.calls.append(("write_offsets", group_id, dict(offsets)))
        self.offsets.setdefault(group_id, {}).update(offsets)

    async def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]]) -> None:
        self.calls.append(("delete_offsets", group_id, sorted(partitions)))
        for tp in partitions:
            self.offsets.get(group_id, {}).pop(tp, None)

    async def write_group(self, group: Group) -> None:
        snap = (group.protocol_name, group.generation, group.leader_id, len(group.members))
        self.calls.append(("write_group", group.group_id, snap))
        self.groups[group.group_id] = snap

    async def write_txn_offsets(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        offsets: dict[tuple[str, int], CommittedOffset],
    ) -> None:
        self.calls.append(("write_txn_offsets", group_id, producer_id, dict(offsets)))

    async def delete_group(self, group_id: str) -> None:
        self.calls.append(("delete_group", group_id))
        self.groups.pop(group_id, None)

    def names(self) -> list[str]:
        return [c[0] for c in self.calls]


async def result(task: Awaitable[T]) -> T:
    """The result of an already-finished task (fails the test instead of hanging)."""
    assert isinstance(task, asyncio.Future)
    assert task.done(), "expected the request to be answered by now"
    return task.result()  # type: ignore[no-any-return]


@dataclass
class FakeMarkers:
    """Sends no markers: keeps them in ``sent`` and answers from ``script`` (else NONE for all)."""

    sent: list[TxnMarker] = field(default_factory=list)
    script: list[dict[TP, int]] = field(default_factory=list)  # answers for the next calls

    async def write_markers(self, marker: TxnMarker) -> dict[TP, int]:
        self.sent.append(marker)
        return self.script.pop(0) if self.script else dict.fromkeys(marker.partitions, E.NONE)
