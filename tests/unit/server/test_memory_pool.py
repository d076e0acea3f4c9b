"""framework/server/memory_pool.py: queued.max.request.bytes' accounting and wake-ups."""

from __future__ import annotations

from framework.server.memory_pool import RequestMemoryPool


def test_unbounded_pool_always_gives() -> None:
    pool = RequestMemoryPool(-1)
    assert all(pool.try_reserve(2**30) for _ in range(4))
    assert pool.used == pool.peak == 4 * 2**30


def test_a_full_pool_refuses_until_memory_comes_back_and_wakes_in_order() -> None:
    pool = RequestMemoryPool(100)
    assert pool.try_reserve(60)
    assert not pool.try_reserve(50) and pool.used == 60  # a refusal takes nothing
    woken: list[str] = []

    def waiter(name: str, size: int) -> None:
        def wake() -> None:
            if pool.try_reserve(size):
                woken.append(name)
            else:
                pool.wait(wake)  # still too big: waits again, behind the others

        pool.wait(wake)

    waiter("a", 50)
    waiter("b", 30)
    waiter("c", 90)
    pool.release(60)  # room for a (50) and b (30); c waits
    assert woken == ["a", "b"] and pool.used == 80
    pool.release(50)
    assert woken == ["a", "b"]  # 30 + 90 > 100: c still waits
    pool.release(30)  # empty: c is taken
    assert woken == ["a", "b", "c"] and pool.used == 90
    assert pool.peak == 90


def test_one_frame_larger_than_the_pool_is_served_alone() -> None:
    pool = RequestMemoryPool(100)
    assert pool.try_reserve(500)  # nothing held: never stuck
    assert not pool.try_reserve(1)
    pool.release(500)
    assert pool.try_reserve(1)


def test_a_forgotten_waiter_is_not_woken() -> None:
    pool = RequestMemoryPool(10)
    pool.try_reserve(10)
    calls: list[int] = []

    def wake() -> None:
        calls.append(1)

    pool.wait(wake)
    pool.forget(wake)
    pool.forget(wake)  # twice is harmless
    pool.release(10)
    assert calls == []
