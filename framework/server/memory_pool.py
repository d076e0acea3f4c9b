"""The memory the listener may hold in requests read but not yet answered
(``queued.max.request.bytes``, Kafka's ``SimpleMemoryPool`` for its socket server).

A connection reserves a frame's size before it copies the frame out of its ring buffer (or
allocates a large one), and gives it back once the request's answer is written or the
connection is gone. When the pool cannot give a connection what its next frame needs, the
connection stops reading and waits in line; each release wakes waiters, in the order they came,
while there is room.

Invariant: ``used`` is the sum of the reservations not yet released; it exceeds ``limit`` only
by one frame, the one a connection may always take while the pool is empty (so a frame larger
than the whole pool, which ``socket.request.max.bytes`` allows, is served alone rather than
never). ``limit`` <= 0 means unbounded (Kafka's default, -1). Event-loop thread only.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable


class RequestMemoryPool:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self.peak = 0
        self._waiters: deque[Callable[[], None]] = deque()

    @property
    def bounded(self) -> bool:
        return self.limit > 0

    def try_reserve(self, size: int) -> bool:
        """Take ``size`` bytes if the pool has them (or is empty); False leaves it unchanged."""
        if self.bounded and self.used and self.used + size > self.limit:
            return False
        self.used += size
        self.peak = max(self.peak, self.used)
        return True

    def wait(self, wake: Callable[[], None]) -> None:
        """Call ``wake`` once memory was released (the caller then tries again)."""
        self._waiters.append(wake)

    def forget(self, wake: Callable[[], None]) -> None:
        """A waiter that went away (its connection closed)."""
        try:
            self._waiters.remove(wake)
        except ValueError:
            pass

    def release(self, size: int) -> None:
        """Give ``size`` bytes back; wake waiters in order while there is room (a woken one that
        still does not fit waits again, behind the others)."""
        self.used -= size
        waiting, self._waiters = self._waiters, deque()
        while waiting:
            if self.bounded and self.used and self.used >= self.limit:
                break
            waiting.popleft()()
        waiting.extend(self._waiters)
        self._waiters = waiting
