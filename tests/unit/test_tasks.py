"""The task owner (openab_voice/tasks.py) and the clock's deadline waits, on gates and a fake clock."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from openab_voice.clock import FakeClock, bounded, first_done, wait_for
from openab_voice.tasks import OwnerPhase, TaskOwner


async def until(future: asyncio.Future[Any]) -> Any:
    """A coroutine that ends when ``future`` does (shielded: cancelling it leaves ``future`` alone)."""
    return await asyncio.shield(future)


async def settle() -> None:
    """Let every ready callback and task step run (no time passes)."""
    for _ in range(20):
        await asyncio.sleep(0)


class Reported:
    """Collects what reaches the loop's exception handler while installed."""

    def __init__(self) -> None:
        self.contexts: list[dict[str, Any]] = []

    def __call__(self, _loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        self.contexts.append(context)


@pytest.fixture
async def reported() -> AsyncIterator[Reported]:
    loop = asyncio.get_running_loop()
    handler = Reported()
    loop.set_exception_handler(handler)
    yield handler
    loop.set_exception_handler(None)


async def test_a_task_is_kept_until_it_ends_then_on_done_sees_it_gone() -> None:
    owner = TaskOwner("t")
    gate: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    seen: list[tuple[int, int]] = []

    async def work() -> int:
        return await gate

    task = owner.spawn(work(), name="work", on_done=lambda t: seen.append((t.result(), len(owner))))
    await settle()
    assert len(owner) == 1 and owner.tasks == {task}
    assert task.get_name() == "work"
    gate.set_result(7)
    await settle()
    assert seen == [(7, 0)]
    assert len(owner) == 0


async def test_an_unexpected_exception_is_reported_at_once_with_both_names(reported: Reported) -> None:
    owner = TaskOwner("engine")

    async def boom() -> None:
        raise RuntimeError("bug")

    task = owner.spawn(boom(), name="response-1")
    await settle()
    assert task.done() and len(owner) == 0
    assert len(reported.contexts) == 1
    context = reported.contexts[0]
    assert context["message"] == "engine: task response-1 failed"
    assert isinstance(context["exception"], RuntimeError)
    assert context["task"] is task


async def test_a_cancelled_or_successful_task_is_not_reported(reported: Reported) -> None:
    owner = TaskOwner("t")
    never: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def fine() -> None:
        return None

    owner.spawn(fine(), name="fine")
    waiting = owner.spawn(until(never), name="waiting")
    await settle()
    waiting.cancel()
    await settle()
    assert reported.contexts == []


async def test_aclose_cancels_and_awaits_what_is_left_and_is_idempotent() -> None:
    owner = TaskOwner("t")
    never: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    unwound: list[str] = []

    async def wait_forever(name: str) -> None:
        try:
            await never
        finally:
            unwound.append(name)

    a = owner.spawn(wait_forever("a"), name="a")
    b = owner.spawn(wait_forever("b"), name="b")
    await settle()
    await owner.aclose()
    assert a.cancelled() and b.cancelled()
    assert sorted(unwound) == ["a", "b"]
    assert owner.phase is OwnerPhase.CLOSED and len(owner) == 0
    await owner.aclose()  # again: nothing left, no error


async def test_a_task_spawned_while_closing_is_taken_down_too() -> None:
    owner = TaskOwner("t")
    never: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    late: list[asyncio.Task[None]] = []

    async def spawns_on_cancel() -> None:
        try:
            await never
        except asyncio.CancelledError:
            late.append(owner.spawn(until(never), name="late"))
            raise

    owner.spawn(spawns_on_cancel(), name="first")
    await settle()
    await owner.aclose()
    assert len(late) == 1 and late[0].cancelled()
    assert len(owner) == 0


async def test_spawning_on_a_closed_owner_is_refused_and_the_coroutine_closed() -> None:
    owner = TaskOwner("t")
    await owner.aclose()
    ran: list[bool] = []

    async def work() -> None:
        ran.append(True)

    coro = work()
    with pytest.raises(RuntimeError, match="t is closed"):
        owner.spawn(coro, name="late")
    assert coro.cr_frame is None  # closed, so no "never awaited" warning
    assert ran == []


async def test_the_close_grace_runs_on_the_injected_clock() -> None:
    clock = FakeClock()
    owner = TaskOwner("t", clock=clock)
    loop = asyncio.get_running_loop()
    quick: asyncio.Future[None] = loop.create_future()
    slow: asyncio.Future[None] = loop.create_future()
    a = owner.spawn(until(quick), name="quick")
    b = owner.spawn(until(slow), name="slow")
    closing = asyncio.ensure_future(owner.aclose(grace_s=2.0))
    await settle()
    assert owner.phase is OwnerPhase.CLOSING and not closing.done()
    quick.set_result(None)  # ends by itself within the grace
    await settle()
    assert a.done() and not a.cancelled()
    clock.advance(1.9)
    await settle()
    assert not b.done() and not closing.done()  # no real time counts, only the fake clock's
    clock.advance(0.1)
    await settle()
    assert closing.done() and b.cancelled()
    assert owner.phase is OwnerPhase.CLOSED


async def test_a_grace_ends_early_when_every_task_ended() -> None:
    clock = FakeClock()
    owner = TaskOwner("t", clock=clock)
    gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    task = owner.spawn(until(gate), name="w")
    closing = asyncio.ensure_future(owner.aclose(grace_s=60.0))
    await settle()
    gate.set_result(None)
    await settle()
    assert closing.done() and not task.cancelled()


async def test_a_grace_needs_a_clock() -> None:
    owner = TaskOwner("t")
    gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    owner.spawn(until(gate), name="w")
    with pytest.raises(ValueError, match="needs a clock"):
        await owner.aclose(grace_s=1.0)
    await owner.aclose()  # without a grace it still closes
    assert owner.phase is OwnerPhase.CLOSED


# --- the clock's deadline waits ---------------------------------------------------------------------


async def test_wait_for_times_out_on_the_fake_clock_and_cancels_the_work() -> None:
    clock = FakeClock()
    never: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    cancelled: list[bool] = []

    async def work() -> None:
        try:
            await never
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    waiting = asyncio.ensure_future(wait_for(clock, 5.0, work()))
    await settle()
    clock.advance(4.9)
    await settle()
    assert not waiting.done()
    clock.advance(0.1)
    await settle()
    with pytest.raises(TimeoutError):
        waiting.result()
    assert cancelled == [True]


async def test_wait_for_returns_the_result_and_passes_the_error() -> None:
    clock = FakeClock()

    async def answer() -> int:
        return 42

    async def fail() -> None:
        raise KeyError("x")

    assert await wait_for(clock, 1.0, answer()) == 42
    with pytest.raises(KeyError):
        await wait_for(clock, 1.0, fail())


async def test_bounded_and_first_done_leave_no_timer_behind() -> None:
    clock = FakeClock()
    loop = asyncio.get_running_loop()
    gate: asyncio.Future[str] = loop.create_future()
    waiting = asyncio.ensure_future(bounded(clock, 3.0, gate))
    await settle()
    gate.set_result("ok")
    assert await waiting == (True, "ok")
    other: asyncio.Future[None] = loop.create_future()
    picking = asyncio.ensure_future(first_done(clock, 1.0, other))
    await settle()
    clock.advance(1.0)
    assert await picking is None
    assert not other.cancelled()  # first_done leaves the caller's futures alone
