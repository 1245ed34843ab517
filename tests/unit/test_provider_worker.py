import asyncio
import threading

import pytest

from openab_voice.errors import WorkerFailed
from openab_voice.providers.worker import Emit, WorkerThread


async def test_items_arrive_in_order_and_failures_are_raised() -> None:
    worker = WorkerThread("t")

    def count(stop: threading.Event, emit: Emit) -> None:
        for i in range(5):
            emit(i)

    assert [i async for i in worker.stream(count)] == [0, 1, 2, 3, 4]

    def boom(stop: threading.Event, emit: Emit) -> None:
        emit("first")
        raise ValueError("model crashed")

    got: list[object] = []
    with pytest.raises(WorkerFailed) as info:
        async for item in worker.stream(boom):
            got.append(item)
    assert got == ["first"] and isinstance(info.value.error, ValueError)
    await worker.aclose()


async def test_closing_the_stream_stops_the_job() -> None:
    worker = WorkerThread("t")
    stopped = threading.Event()

    def endless(stop: threading.Event, emit: Emit) -> None:
        while not stop.wait(0.005):
            emit("tick")
        stopped.set()

    stream = worker.stream(endless)
    assert await anext(stream) == "tick"
    await stream.aclose()
    await worker.aclose()
    assert stopped.is_set()


def test_aclose_does_not_wait_for_jobs_of_a_closed_loop() -> None:
    worker = WorkerThread("t", close_timeout_s=5.0)

    def slow(stop: threading.Event, emit: Emit) -> None:
        emit("x")
        stop.wait(0.5)

    async def start() -> None:
        stream = worker.stream(slow)
        await anext(stream)  # leave the job running when this loop ends

    asyncio.run(start())
    asyncio.run(asyncio.wait_for(worker.aclose(), 2.0))  # a hang here would be a TimeoutError
