"""The voice channel status line in virtual time: what it shows for each state, the coalescing rate
limit (latest state wins, never the same status twice), failures counted and never raised, the clear
on close."""

from __future__ import annotations

import asyncio
import logging

import pytest

from openab_voice.actions.events import ActionChanged
from openab_voice.bus import EventBus
from openab_voice.clock import FakeClock
from openab_voice.discord.host.voice_status import (
    LISTENING,
    RUNNING_TASK,
    SPEAKING,
    THINKING,
    VoiceStatus,
    status_for,
)
from openab_voice.engine.events import DialogueStateChanged

SESSION, INTERVAL = "s1", 5.0


class FakeChannel:
    """Records each status set, with the clock's time; can fail or hang on demand."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.sets: list[tuple[float, str | None]] = []
        self.fail: Exception | None = None
        self.hang = False

    async def __call__(self, status: str | None) -> None:
        if self.hang:
            await asyncio.Event().wait()
        if self.fail is not None:
            raise self.fail
        self.sets.append((self.clock.monotonic() - 1000.0, status))


async def settle() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


def dialogue(bus: EventBus, state: str, *, session_id: str = SESSION) -> None:
    bus.publish(DialogueStateChanged(at=0.0, session_id=session_id, previous="", state=state, cause="test"))


def action(bus: EventBus, status: str, *, action_id: str = "a1", session: str | None = SESSION) -> None:
    bus.publish(
        ActionChanged(
            at=0.0, session_id=session, action_id=action_id, status=status, previous=None, actor="t"
        )
    )


@pytest.fixture
def rig() -> tuple[FakeClock, EventBus, FakeChannel, VoiceStatus]:
    clock, bus = FakeClock(), EventBus()
    channel = FakeChannel(clock)
    status = VoiceStatus(channel, bus=bus, clock=clock, session_id=SESSION, interval_s=INTERVAL)
    return clock, bus, channel, status


@pytest.mark.parametrize(
    ("state", "running", "shown"),
    [
        ("idle", False, None),
        ("listening", False, LISTENING),
        ("thinking", False, THINKING),
        ("tool_running", False, THINKING),
        ("speaking", False, SPEAKING),
        ("interrupted", False, LISTENING),
        ("recovering", False, LISTENING),
        ("speaking", True, RUNNING_TASK),
        ("idle", True, RUNNING_TASK),
    ],
)
def test_status_for_each_state(state: str, running: bool, shown: str | None) -> None:
    assert status_for(state, task_running=running) == shown


async def test_each_state_is_shown_once_the_interval_allows(rig) -> None:
    clock, bus, channel, status = rig
    status.start()
    await settle()
    assert channel.sets == [(0.0, LISTENING)]  # at once on start
    dialogue(bus, "thinking")
    await settle()
    assert len(channel.sets) == 1  # waits out the interval
    clock.advance(INTERVAL)
    await settle()
    dialogue(bus, "tool_running")  # still "Thinking": never sent twice in a row
    clock.advance(INTERVAL)
    await settle()
    dialogue(bus, "speaking")  # the interval since the last set has passed: at once
    await settle()
    assert channel.sets == [(0.0, LISTENING), (5.0, THINKING), (10.0, SPEAKING)]
    assert status.shown == SPEAKING and status.sent == 3 and status.failures == 0
    await status.aclose()


async def test_changes_within_the_interval_coalesce_and_the_latest_wins(rig) -> None:
    clock, bus, channel, status = rig
    status.start()
    await settle()
    for state in ("thinking", "speaking", "listening", "thinking", "speaking"):
        dialogue(bus, state)
        clock.advance(0.5)
        await settle()
    assert channel.sets == [(0.0, LISTENING)]
    clock.advance(INTERVAL - 2.5)
    await settle()
    assert channel.sets == [(0.0, LISTENING), (5.0, SPEAKING)]  # one update, the latest state
    # Back where it was shown within the interval: nothing to send at all.
    dialogue(bus, "listening")
    dialogue(bus, "speaking")
    clock.advance(INTERVAL)
    await settle()
    assert len(channel.sets) == 2
    await status.aclose()


async def test_a_running_task_of_this_session_takes_precedence(rig) -> None:
    clock, bus, channel, status = rig
    status.start()
    await settle()
    action(bus, "running", action_id="other", session="s2")  # another session's task
    dialogue(bus, "speaking", session_id="another-session")  # another session's state
    clock.advance(INTERVAL)
    await settle()
    assert [s for _, s in channel.sets] == [LISTENING]
    action(bus, "running", action_id="a1")
    action(bus, "running", action_id="a2")
    await settle()
    dialogue(bus, "speaking")
    action(bus, "succeeded", action_id="a1")  # a2 still runs
    clock.advance(INTERVAL)
    await settle()
    assert [s for _, s in channel.sets] == [LISTENING, RUNNING_TASK]
    action(bus, "failed", action_id="a2")
    clock.advance(INTERVAL)
    await settle()
    assert [s for _, s in channel.sets] == [LISTENING, RUNNING_TASK, SPEAKING]
    await status.aclose()


async def test_failures_are_counted_and_logged_never_raised(rig, caplog) -> None:
    clock, bus, channel, status = rig
    channel.fail = RuntimeError("403 Forbidden")
    with caplog.at_level(logging.DEBUG, logger="openab_voice.discord.host.voice_status"):
        status.start()
        await settle()
        dialogue(bus, "thinking")
        clock.advance(INTERVAL)
        await settle()
    assert status.failures == 2 and status.shown is None and channel.sets == []
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "403 Forbidden" in warnings[0].getMessage()  # once per run
    channel.fail = None
    dialogue(bus, "speaking")  # the next change tries again
    clock.advance(INTERVAL)
    await settle()
    assert channel.sets == [(10.0, SPEAKING)]
    assert status.snapshot() == {"shown": SPEAKING, "sent": 1, "failures": 2}
    await status.aclose()


async def test_a_hung_update_is_bounded(rig) -> None:
    clock, _, channel, status = rig
    channel.hang = True
    status.start()
    await settle()
    clock.advance(10.0)
    await settle()
    assert status.failures == 1 and status.shown is None
    await status.aclose()


async def test_close_clears_at_once_and_stops_following(rig) -> None:
    clock, bus, channel, status = rig
    status.start()
    await settle()
    dialogue(bus, "thinking")  # pending behind the interval
    await settle()
    await status.aclose()  # no wait for the interval
    assert channel.sets == [(0.0, LISTENING), (0.0, None)]
    dialogue(bus, "speaking")
    clock.advance(INTERVAL)
    await settle()
    await status.aclose()  # idempotent
    assert channel.sets == [(0.0, LISTENING), (0.0, None)]


async def test_close_with_nothing_shown_sends_nothing(rig) -> None:
    _, _, channel, status = rig
    await status.aclose()
    assert channel.sets == []
