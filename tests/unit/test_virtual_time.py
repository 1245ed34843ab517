"""The self-advancing virtual clock: exact deadlines, whole chains settled, livelocks reported."""

from __future__ import annotations

import asyncio
import threading

import pytest

from openab_voice.clock import wait_for
from openab_voice.errors import SettleError
from openab_voice.testing.virtual_time import VirtualClock


async def test_every_sleeper_wakes_exactly_at_its_deadline() -> None:
    clock = VirtualClock(start=0.0)
    woke: list[tuple[str, float]] = []

    async def sleeper(name: str, *delays: float) -> None:
        for delay in delays:
            await clock.sleep(delay)
            woke.append((name, clock.monotonic()))

    tasks = [asyncio.ensure_future(sleeper("a", 0.013, 0.5)), asyncio.ensure_future(sleeper("b", 0.2))]
    await clock.run_for(0.3)
    assert woke == [("a", 0.013), ("b", 0.2)]
    assert clock.monotonic() == 0.3
    await clock.run_for(1.0)
    assert woke[-1] == ("a", 0.513) and clock.monotonic() == 1.3
    await asyncio.gather(*tasks)


async def test_time_never_passes_the_target() -> None:
    clock = VirtualClock(start=0.0)
    task = asyncio.ensure_future(clock.sleep(5.0))
    await clock.run_for(4.0)
    assert clock.monotonic() == 4.0 and not task.done()
    await clock.run_for(1.0)
    assert task.done()


async def test_a_chain_of_a_thousand_ready_callbacks_completes_in_one_settle() -> None:
    clock = VirtualClock()
    loop = asyncio.get_running_loop()
    done = asyncio.Event()

    def step(n: int) -> None:
        if n == 0:
            done.set()
        else:
            loop.call_soon(step, n - 1)

    loop.call_soon(step, 1000)
    start = clock.monotonic()
    await clock.settle()
    assert done.is_set() and clock.monotonic() == start


async def test_a_chain_of_awaits_completes_before_time_moves() -> None:
    clock = VirtualClock()
    hops = 0

    async def hop(n: int) -> None:
        nonlocal hops
        hops += 1
        if n:
            await asyncio.ensure_future(hop(n - 1))

    task = asyncio.ensure_future(hop(500))
    await clock.settle()
    assert task.done() and hops == 501


async def test_a_livelock_is_reported() -> None:
    clock = VirtualClock(max_turns=1000)
    stop = False

    async def spin() -> None:
        while not stop:
            await clock.sleep(0)

    task = asyncio.ensure_future(spin())
    with pytest.raises(SettleError, match="1000 turns"):
        await clock.run_for(1.0)
    stop = True
    await task


async def test_run_until_returns_false_at_the_limit_and_true_when_it_holds() -> None:
    clock = VirtualClock(start=0.0)
    assert not await clock.run_until(lambda: False, limit_s=2.5)
    assert clock.monotonic() == 2.5
    flag = asyncio.Event()

    async def later() -> None:
        await clock.sleep(0.7)
        flag.set()

    task = asyncio.ensure_future(later())
    assert await clock.run_until(flag.is_set, limit_s=10.0)
    assert clock.monotonic() == pytest.approx(3.2)  # the exact moment it held, not a step later
    await task


async def test_a_timeout_on_the_clock_fires_at_its_deadline() -> None:
    clock = VirtualClock(start=0.0)
    never: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    task = asyncio.ensure_future(wait_for(clock, 1.5, never))
    await clock.run_for(1.49)
    assert not task.done()
    await clock.run_for(0.01)
    with pytest.raises(TimeoutError):
        await task


async def test_worker_threads_finish_before_time_moves() -> None:
    clock = VirtualClock(start=0.0)
    release = threading.Event()

    def work() -> float:
        release.wait(5)
        return clock.monotonic()

    with clock.threads():
        task = asyncio.ensure_future(wait_for(clock, 0.1, asyncio.to_thread(work)))
        threading.Timer(0.05, release.set).start()  # real time: the virtual timeout must not fire
        await clock.run_for(1.0)
    assert release.is_set() and task.result() == 0.0
