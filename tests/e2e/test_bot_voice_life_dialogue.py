"""The bot is talking when its voice server crashes: it stops at the played position, the context
keeps only what was heard, and after the RESUME it answers the next question normally. Real receiver,
front end, faster-whisper and Piper; the model is scripted."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from openab_voice.bus.events import Event
from openab_voice.clock import SystemClock
from openab_voice.config import load_settings
from openab_voice.discord.wire.events import PlaybackFinished, VoiceGap
from openab_voice.engine.bundle import ConversationProviders
from openab_voice.engine.events import BotUtteranceFinished, DialogueStateChanged
from openab_voice.engine.settings import DialogueSettings, negotiate
from openab_voice.providers.chat import ChatMessage
from openab_voice.providers.tts import TextToSpeech
from openab_voice.stt.base import SpeechToText
from openab_voice.testing.chat import ScriptedChatModel
from openab_voice.testing.emulator import EmulatorConfig
from openab_voice.testing.harness import BotOnEmulator
from tests.e2e.test_emulator import until

pytestmark = pytest.mark.e2e

ALICE = 1201
LONG_ANSWER = (
    "The Eiffel Tower is in Paris. It was finished in eighteen eighty nine for the World's Fair. "
    "It is about three hundred metres tall. Millions of people visit it every single year."
)
SHORT_ANSWER = "Paris is the capital of France."
LINES = {
    "tower": "Jarvis, tell me about the Eiffel Tower.",
    "question": "Jarvis, what is the capital of France?",
}


def _answer(messages: Sequence[ChatMessage]) -> str:
    """The reply by what was asked, not by the request's number: the comma pause after "Jarvis," may
    be long enough for a withdrawn speculative request on "Jarvis" alone, which would otherwise take
    the long answer's turn in the script."""
    return LONG_ANSWER if "eiffel" in messages[-1].content.lower() else SHORT_ANSWER


class Events:
    def __init__(self) -> None:
        self.events: list[Event] = []

    def __call__(self, event: Event) -> None:
        self.events.append(event)

    def of(self, kind: type[Any]) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]


async def test_gap_while_the_bot_speaks(voices: tuple[SpeechToText, TextToSpeech, dict[str, bytes]]) -> None:
    stt, tts, speech = voices
    chat = ScriptedChatModel(SystemClock(), [_answer], ttft_s=0.2, token_s=0.01)
    dialogue, caps = negotiate(
        DialogueSettings(), stt=stt.capabilities, tts=tts.capabilities, chat=chat.capabilities
    )
    providers = ConversationProviders(stt=stt, tts=tts, chat=chat, dialogue=dialogue, capabilities=caps)
    settings = load_settings({}, playback_enabled=True, dialogue_enabled=True)
    h = BotOnEmulator(
        settings, EmulatorConfig(dave=True, bot_name="Jarvis"), users={ALICE: "alice"}, providers=providers
    )
    events = Events()
    h.bus.subscribe(Event, events)
    async with h:
        await h.emulator.speaker(ALICE).say(speech["tower"])
        await until(
            lambda: h.emulator.bot_audio.ms >= 2500, "2.5 s of the answer", timeout=20
        )  # 2nd sentence
        outage = asyncio.create_task(h.emulator.udp_blackout(0.3))
        await h.emulator.close_voice(4015)
        await outage
        await until(lambda: bool(events.of(VoiceGap)) and bool(events.of(BotUtteranceFinished)), "the gap")
        gap = events.of(VoiceGap)[0]
        cut = events.of(BotUtteranceFinished)[0]
        heard_at_gap = h.emulator.bot_audio.ms
        assert h.session.conversation is not None
        rows = h.session.conversation.context.dump()

        # After the RESUME the bot hears and answers the next question; the cut answer's rest is
        # never played (the emulator hears only the short answer from here on).
        await h.emulator.speaker(ALICE).say(speech["question"])
        await until(lambda: len(events.of(BotUtteranceFinished)) >= 2, "the second answer", timeout=20)
        second = events.of(BotUtteranceFinished)[1]
        finished = events.of(PlaybackFinished)
    assert (gap.cause, gap.recovery, gap.recovered, gap.playback_interrupted) == (
        "voice_server_crash",
        "resume",
        True,
        True,
    )
    assert cut.interrupted and cut.spoken_text and LONG_ANSWER.startswith(cut.spoken_text)
    assert len(cut.spoken_text) < len(LONG_ANSWER)  # whole sentences only, up to where it was cut
    assistant = [r["text"] for r in rows if r["role"] == "assistant"]
    assert assistant == [cut.spoken_text]  # heard-only context
    assert finished[0].interrupted and 2000 <= finished[0].played_ms <= 4000
    assert second.spoken_text == SHORT_ANSWER and not second.interrupted
    assert "speaking->listening" in [f"{e.previous}->{e.state}" for e in events.of(DialogueStateChanged)]
    short_ms = finished[1].played_ms
    assert h.emulator.bot_audio.ms - heard_at_gap == pytest.approx(short_ms, abs=400)
