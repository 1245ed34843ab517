"""The event log's expect-style checks and its waits, in virtual and in real time."""

from __future__ import annotations

import asyncio

import pytest

from openab_voice.bus import EventBus
from openab_voice.bus.events import ErrorRaised, LatencyMeasured
from openab_voice.clock import SystemClock
from openab_voice.testing.events import EventLog, match
from openab_voice.testing.virtual_time import VirtualClock


def latency(metric: str, value: float = 1.0) -> LatencyMeasured:
    return LatencyMeasured(at=0.0, session_id="s", metric=metric, value_ms=value)


def error(code: str) -> ErrorRaised:
    return ErrorRaised(at=0.0, session_id="s", stage="stt", code=code, message="m", retryable=False)


def test_it_keeps_the_events_in_order_and_queries_them() -> None:
    bus = EventBus()
    log = EventLog(bus)
    bus.publish(latency("a"))
    start = log.mark()
    bus.publish(error("E1"))
    bus.publish(latency("b", 2.0))
    assert len(log) == 3 and [type(e) for e in log] == [LatencyMeasured, ErrorRaised, LatencyMeasured]
    assert [e.metric for e in log.of(LatencyMeasured)] == ["a", "b"]
    assert [e.metric for e in log.of(LatencyMeasured, since=start)] == ["b"]
    last = log.last(LatencyMeasured)
    assert last is not None and last.metric == "b"
    assert log.last(LatencyMeasured, metric="zzz") is None
    assert log.expect(LatencyMeasured, metric="b").value_ms == 2.0
    log.close()
    bus.publish(error("E2"))
    assert len(log) == 3


def test_failed_expectations_list_the_events_seen() -> None:
    bus = EventBus()
    log = EventLog(bus)
    bus.publish(latency("a"))
    bus.publish(error("E1"))
    with pytest.raises(
        AssertionError, match=r"expected LatencyMeasured\(metric='x'\).*2 events seen"
    ) as info:
        log.expect(LatencyMeasured, metric="x")
    assert "E1" in str(info.value)
    with pytest.raises(AssertionError, match="expected no ErrorRaised"):
        log.expect_none(ErrorRaised)
    log.expect_none(ErrorRaised, code="E2")


def test_order_is_a_subsequence() -> None:
    bus = EventBus()
    log = EventLog(bus)
    for event in (latency("a"), error("E1"), latency("b"), error("E2")):
        bus.publish(event)
    log.expect_order(LatencyMeasured, match(ErrorRaised, code="E2"))
    log.expect_order(match(LatencyMeasured, metric="a"), ErrorRaised, match(LatencyMeasured, metric="b"))
    assert not log.in_order(match(ErrorRaised, code="E2"), match(LatencyMeasured, metric="a"))
    with pytest.raises(
        AssertionError, match=r"expected in order ErrorRaised\(code='E2'\) -> LatencyMeasured"
    ):
        log.expect_order(match(ErrorRaised, code="E2"), LatencyMeasured)


async def test_wait_for_runs_virtual_time_until_the_event() -> None:
    clock = VirtualClock(start=0.0)
    bus = EventBus()
    log = EventLog(bus)

    async def later() -> None:
        await clock.sleep(0.25)
        bus.publish(latency("a"))
        await clock.sleep(0.25)
        bus.publish(latency("b"))

    task = asyncio.ensure_future(later())
    found = await log.wait_for(LatencyMeasured, lambda e: e.metric == "b", clock=clock, limit_s=1.0)
    assert [e.metric for e in found] == ["b"] and clock.monotonic() == 0.5
    await task
    with pytest.raises(AssertionError, match=r"2 x ErrorRaised not within 1 s \(saw 0\)"):
        await log.wait_for(ErrorRaised, clock=clock, limit_s=1.0, count=2)


async def test_wait_for_on_the_real_clock_wakes_on_the_event() -> None:
    bus = EventBus()
    log = EventLog(bus)
    asyncio.get_running_loop().call_soon(bus.publish, error("E1"))
    [found] = await log.wait_for(ErrorRaised, clock=SystemClock(), limit_s=5.0)
    assert found.code == "E1"
    with pytest.raises(AssertionError, match="not within"):
        await log.wait_for(LatencyMeasured, clock=SystemClock(), limit_s=0.05)
