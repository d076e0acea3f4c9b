"""The listener's eager run of a handler (framework/server/listener.py): a coroutine run in the
listener's callback until it suspends goes on in a Task exactly as if the Task had started it:
results, exceptions and cancellation reach it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from framework.server.listener import _resumed


def started(coro: Any) -> Any:
    """Run ``coro`` as the listener does until it first suspends; what it suspended on."""
    return coro.send(None)


def test_a_suspended_handler_goes_on_in_a_task_with_what_it_waits_for() -> None:
    async def main() -> None:
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        steps: list[str] = []

        async def handler() -> int:
            steps.append("eager")
            got = await fut
            steps.append("resumed")
            await asyncio.sleep(0)  # a bare yield to the loop, then another future
            return got + await asyncio.sleep(0.001, result=1)

        coro = handler()
        waiting = started(coro)
        assert waiting is fut and steps == ["eager"]
        task = asyncio.get_running_loop().create_task(_resumed(coro, waiting))
        await asyncio.sleep(0)
        assert not task.done()
        fut.set_result(41)
        assert await task == 42 and steps == ["eager", "resumed"]

    asyncio.run(main())


def test_exceptions_and_cancellation_reach_the_handler() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[int] = loop.create_future()

        async def failing() -> int:
            return await fut

        coro = failing()
        task = loop.create_task(_resumed(coro, started(coro)))
        fut.set_exception(ValueError("bad"))
        with pytest.raises(ValueError, match="bad"):
            await task

        cleaned: list[bool] = []
        never: asyncio.Future[int] = loop.create_future()

        async def waiting() -> int:
            try:
                return await never
            finally:
                cleaned.append(True)

        coro = waiting()
        task = loop.create_task(_resumed(coro, started(coro)))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert cleaned == [True] and never.cancelled()

    asyncio.run(main())
