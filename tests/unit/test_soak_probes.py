"""The soak's probes: queues found by shape through our own objects, the loop's exception handler
counting what nobody handled, the lag monitor on a fake clock, and RSS read from /proc."""

from __future__ import annotations

import asyncio
import collections
import gc

from openab_voice.bench.soak_probes import (
    ExceptionCounter,
    LoopLagMonitor,
    QueueDepth,
    queue_depths,
    rss_bytes,
)
from openab_voice.discord.wire.inbox import Inbox
from openab_voice.testing.virtual_time import VirtualClock


class Part:
    """Stands in for one of the bot's parts (the probe only walks objects of openab_voice)."""

    def __init__(self) -> None:
        self._bounded: collections.deque[int] = collections.deque([1, 2], maxlen=3)
        self.queue: asyncio.Queue[int] = asyncio.Queue()
        self.queue.put_nowait(7)
        self.per_speaker = {"alice": Inbox[int](max_packets=4)}
        self.per_speaker["alice"].offer(1)
        self.name = "not a queue"


Part.__module__ = "openab_voice.testing.fake_part"


def test_queues_are_found_by_shape_and_named_by_path() -> None:
    root = Part()
    root.child = Part()  # type: ignore[attr-defined]
    found = queue_depths(root, "s")
    assert found["s.bounded"] == QueueDepth(2, 3)
    assert found["s.queue"] == QueueDepth(1, None)
    assert found["s.per_speaker[alice]"] == QueueDepth(1, 4)
    assert found["s.child.bounded"] == QueueDepth(2, 3)
    assert not any(name.endswith("name") for name in found)


def test_objects_outside_the_package_are_not_walked() -> None:
    class Foreign:
        def __init__(self) -> None:
            self.hidden: collections.deque[int] = collections.deque(maxlen=1)

    assert queue_depths({"x": Foreign()}, "s") == {}


async def test_an_exception_nobody_retrieved_is_counted() -> None:
    counter = ExceptionCounter()
    counter.install(asyncio.get_running_loop())
    try:

        async def fail() -> None:
            raise RuntimeError("boom")

        task = asyncio.ensure_future(fail())
        await asyncio.wait({task})
        del task
        gc.collect()  # "Task exception was never retrieved" is reported when the task is collected
        await asyncio.sleep(0)
        assert counter.count == 1 and "RuntimeError: boom" in counter.messages[0]
    finally:
        counter.uninstall()


async def test_the_lag_monitor_records_late_wake_ups() -> None:
    clock = VirtualClock()
    monitor = LoopLagMonitor(clock, interval_s=0.05)
    task = asyncio.ensure_future(monitor.run())
    await clock.run_for(0.5)
    on_time = monitor.take()
    assert on_time and max(on_time) < 1e-6
    clock.advance(0.2)  # the loop "stalls": one wake-up 150 ms late
    await clock.settle()
    late = monitor.take()
    task.cancel()
    assert late and abs(max(late) - 150.0) < 1e-3


def test_rss_is_read() -> None:
    assert rss_bytes() > 10 * 2**20
