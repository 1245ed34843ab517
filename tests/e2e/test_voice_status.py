"""``OPENAB_VOICE_STATUS``: the bot's state as its voice channel's status, through the loopback
emulator with an unmodified discord.py (``VoiceChannel.edit(status=...)`` -> ``PUT
/channels/{id}/voice-status``), read back from what the emulator recorded.

A real turn (faster-whisper, Piper, a scripted chat model) shows Listening -> Thinking -> Speaking ->
Listening; the rate limit is checked in virtual time (one FakeClock for the bot and the emulator), so
the recorded times are exact; off, nothing is ever sent.
"""

from __future__ import annotations

import asyncio

import discord
import pytest

from openab_voice.actions.events import ActionChanged
from openab_voice.bus import EventBus
from openab_voice.clock import FakeClock, SystemClock
from openab_voice.config import load_settings
from openab_voice.engine.bundle import ConversationProviders
from openab_voice.engine.events import BotUtteranceFinished, DialogueStateChanged
from openab_voice.engine.settings import DialogueSettings, negotiate
from openab_voice.testing.chat import ScriptedChatModel
from openab_voice.testing.emulator import EmulatorConfig
from openab_voice.testing.harness import BotOnEmulator
from tests.fakes.waiting import until

pytestmark = pytest.mark.e2e

ALICE = 1001
LINES = {"question": "What is the capital of France?"}  # spoken by the `voices` fixture
ANSWER = "Paris is the capital of France. It is a large city on the river Seine."
INTERVAL_S = 1.0  # the least the setting allows; the turn's states below each last longer


def statuses(h: BotOnEmulator) -> list[str | None]:
    return [entry["status"] for entry in h.emulator.voice_statuses]


async def test_a_turn_shows_listening_thinking_speaking_listening(voices) -> None:
    stt, tts, speech = voices
    # The model thinks for 1.5 s and the answer plays for seconds: each state outlasts the interval.
    chat = ScriptedChatModel(SystemClock(), [ANSWER], ttft_s=1.5, token_s=0.01)
    dialogue, caps = negotiate(
        DialogueSettings(), stt=stt.capabilities, tts=tts.capabilities, chat=chat.capabilities
    )
    providers = ConversationProviders(stt=stt, tts=tts, chat=chat, dialogue=dialogue, capabilities=caps)
    settings = load_settings(
        {"OPENAB_VOICE_STATUS": "true", "OPENAB_VOICE_STATUS_INTERVAL_S": str(INTERVAL_S)},
        playback_enabled=True,
        dialogue_enabled=True,
    )
    async with BotOnEmulator(
        settings, EmulatorConfig(dave=True), users={ALICE: "alice"}, providers=providers
    ) as h:
        done: list[BotUtteranceFinished] = []
        h.bus.subscribe(BotUtteranceFinished, done.append)
        await until(lambda: statuses(h) == ["Listening"], lambda: f"Listening; statuses {statuses(h)}")
        await h.emulator.speaker(ALICE).say(speech["question"])
        await until(lambda: bool(done), lambda: f"the answer; statuses {statuses(h)}")
        await until(
            lambda: statuses(h)[-1:] == ["Listening"] and len(statuses(h)) > 1,
            lambda: f"Listening again; statuses {statuses(h)}",
        )
        # The emulator records an update when the request arrives; the bot counts it once the answer
        # is back: wait for the bot's side too before asking it.
        shown = h.session.voice_status
        assert shown is not None
        await until(lambda: shown.sent == len(statuses(h)), lambda: f"the bot's count; {shown.snapshot()}")
        reply = await h.command("status")
        await h.bot.voice.leave(h.emulator.guild_id)
        log = h.emulator.voice_statuses
    assert statuses(h) == ["Listening", "Thinking", "Speaking", "Listening", None]  # None: cleared
    assert "Channel status: Listening · 4 set, 0 failed" in reply
    assert {entry["channel_id"] for entry in log} == {str(h.emulator.voice_channel_id)}
    gaps = [b["at"] - a["at"] for a, b in zip(log, log[1:-1], strict=False)]
    assert min(gaps) >= INTERVAL_S - 0.01


async def test_updates_coalesce_in_virtual_time_and_a_running_task_wins() -> None:
    clock = FakeClock()
    settings = load_settings({"OPENAB_VOICE_STATUS": "true"})  # the default interval: 5 s
    interval = settings.voice_status_interval_s
    bus = EventBus()
    async with BotOnEmulator(settings, EmulatorConfig(), users={ALICE: "alice"}, clock=clock, bus=bus) as h:
        session_id = h.session.id

        def state(name: str) -> None:
            bus.publish(
                DialogueStateChanged(
                    at=clock.monotonic(), session_id=session_id, previous="", state=name, cause="test"
                )
            )

        async def advance(seconds: float) -> None:
            clock.advance(seconds)
            await asyncio.sleep(0.2)  # real time: what is due goes out; the REST round trip is real I/O

        await until(lambda: statuses(h) == ["Listening"], lambda: f"Listening; statuses {statuses(h)}")
        start = h.emulator.voice_statuses[0]["at"]
        for name in ("thinking", "speaking", "listening", "thinking", "speaking"):
            state(name)
            await advance(0.5)
        assert statuses(h) == ["Listening"]  # all within the interval: held back
        await advance(interval - 2.5)
        await until(  # one update, the latest state
            lambda: statuses(h) == ["Listening", "Speaking"], lambda: f"Speaking; statuses {statuses(h)}"
        )
        bus.publish(
            ActionChanged(
                at=clock.monotonic(),
                action_id="a1",
                status="running",
                previous="confirmed",
                actor="system",
                session_id=session_id,
            )
        )
        state("listening")
        await advance(interval)
        await until(lambda: len(statuses(h)) == 3, lambda: f"a third status; statuses {statuses(h)}")
        await h.bot.voice.leave(h.emulator.guild_id)
        log = h.emulator.voice_statuses
    assert statuses(h) == ["Listening", "Speaking", "Running a task", None]
    assert [round(entry["at"] - start, 3) for entry in log] == [0.0, interval, 2 * interval, 2 * interval]


async def test_off_nothing_is_sent() -> None:
    settings = load_settings({})
    assert settings.voice_status is False
    async with BotOnEmulator(settings, EmulatorConfig(), users={ALICE: "alice"}) as h:
        h.bus.publish(
            DialogueStateChanged(at=0.0, session_id=h.session.id, previous="", state="thinking", cause="t")
        )
        await asyncio.sleep(0.3)  # real time: a window in which nothing may be sent
        await h.bot.voice.leave(h.emulator.guild_id)
        assert h.emulator.voice_statuses == []


async def test_the_emulator_refuses_what_discord_refuses() -> None:
    async with BotOnEmulator(load_settings({}), EmulatorConfig(), users={ALICE: "alice"}) as h:
        http = h.bot.http
        with pytest.raises(discord.HTTPException) as wrong_type:
            await http.edit_voice_channel_status("x", channel_id=h.emulator.text_channel_id)
        with pytest.raises(discord.HTTPException) as too_long:
            await http.edit_voice_channel_status("x" * 501, channel_id=h.emulator.voice_channel_id)
        await http.edit_voice_channel_status("", channel_id=h.emulator.voice_channel_id)  # a clear
    assert (wrong_type.value.status, wrong_type.value.code) == (400, 50024)
    assert (too_long.value.status, too_long.value.code) == (400, 50035)
    assert statuses(h) == [None]
