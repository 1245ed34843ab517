"""The realtime engine through the loopback Discord emulator: real Discord protocol, DAVE, receiver,
audio front end (APM, VAD, echo gate), faster-whisper for our turns, and the loopback realtime server
as the provider (the same faster-whisper hears the committed audio, a scripted responder answers, the
same Piper voice speaks, audio paced as it plays). The cascade's scenarios, on the other engine."""

from __future__ import annotations

from typing import Any

import pytest

from openab_voice.bus.events import LatencyMeasured
from openab_voice.config import load_settings
from openab_voice.engine.bundle import ConversationProviders
from openab_voice.engine.events import (
    BotUtteranceFinished,
    DialogueStateChanged,
    InterruptionDetected,
    ProviderTruncated,
)
from openab_voice.engine.realtime import RealtimeEngine, realtime_capabilities
from openab_voice.engine.settings import DialogueSettings
from openab_voice.providers.realtime import RealtimeConfig
from openab_voice.providers.realtime_openai import OpenAIRealtime
from openab_voice.testing.emulator import EchoPath, EmulatorConfig
from openab_voice.testing.events import EventLog
from openab_voice.testing.harness import BotOnEmulator
from openab_voice.testing.realtime import (
    LoopbackRealtimeServer,
    Pacing,
    PiperVoice,
    ScriptedResponder,
    Turn,
    WhisperListener,
)
from tests.fakes.voices import Voices
from tests.fakes.waiting import until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

ALICE = 1001
KEY = "sk-dialogue"
LONG_ANSWER = (
    "The Eiffel Tower is in Paris. It was finished in eighteen eighty nine for the World's Fair. "
    "It is about three hundred metres tall. Millions of people visit it every single year."
)
LINES = {
    "tower": "Tell me about the Eiffel Tower.",
    "stop": "Wait, stop please, I want to ask you something else instead.",
}


def _reply(turn: Turn) -> str:
    heard = turn.last_user_text.lower()
    return LONG_ANSWER if "tower" in heard or "eiffel" in heard else "Okay."


async def wait_for(events: EventLog, kind: type[Any], count: int = 1, within_s: float = 40.0) -> list[Any]:
    await until(
        lambda: len(events.of(kind)) >= count,
        lambda: f"{count} {kind.__name__}; transitions: {events.transitions()}",
        within_s=within_s,
        every_s=0.05,
    )
    return events.of(kind)


class Call:
    """A bot on the emulator whose conversation runs on the realtime engine."""

    def __init__(self, voices: Voices) -> None:
        stt, tts, _ = voices
        self.server = LoopbackRealtimeServer(
            api_key=KEY,
            responder=ScriptedResponder([_reply]),
            listener=WhisperListener(stt),
            voice=PiperVoice(tts),
            pacing=Pacing(first_audio_latency_s=0.2),
        )
        self.stt = stt
        self.events: EventLog
        self.h: BotOnEmulator | None = None

    async def __aenter__(self) -> BotOnEmulator:
        await self.server.start()
        dialogue = DialogueSettings(false_interruption_window_s=2.5, preemptive_generation=False)
        providers = ConversationProviders(
            stt=self.stt,
            dialogue=dialogue,
            capabilities=realtime_capabilities(dialogue.mode),
            realtime=OpenAIRealtime(RealtimeConfig(base_url=self.server.base_url, api_key=KEY)),
        )
        settings = load_settings({}, playback_enabled=True, dialogue_enabled=True)
        self.h = BotOnEmulator(
            settings,
            EmulatorConfig(dave=True, bot_name="Jarvis"),
            users={ALICE: "alice"},
            providers=providers,
        )
        self.events = EventLog(self.h.bus)
        await self.h.__aenter__()
        conversation = self.h.session.conversation
        assert conversation is not None and isinstance(conversation.engine, RealtimeEngine)
        engine = conversation.engine
        await until(lambda: engine.ready, "the realtime engine's session to be ready", every_s=0.05)
        return self.h

    async def __aexit__(self, *exc: object) -> None:
        if self.h is not None:
            await self.h.aclose()
        await self.server.aclose()


async def test_an_answer_over_discord_and_its_echo_never_interrupts_it(voices: Voices) -> None:
    call = Call(voices)
    async with call as h:
        speaker = h.emulator.speaker(ALICE)
        await speaker.say(voices[2]["tower"])
        await wait_for(call.events, DialogueStateChanged, count=3)  # listening -> thinking -> speaking
        await speaker.say_echo_only(12.0, EchoPath(delay_ms=80.0, gain_db=-6.0, reverb_ms=40.0, seed=4))
        done = await wait_for(call.events, BotUtteranceFinished)
    assert call.events.of(InterruptionDetected) == []
    assert not done[0].interrupted and done[0].spoken_text == LONG_ANSWER
    session = call.server.sessions[0]
    assert session.config.audio is not None and session.config.audio.input is not None
    assert session.config.audio.input.turn_detection is None
    assert "eiffel" in " ".join(r.turn.last_user_text.lower() for r in session.responses if r.turn)


async def test_a_barge_in_over_discord_truncates_at_what_the_listener_heard(voices: Voices) -> None:
    call = Call(voices)
    async with call as h:
        speaker = h.emulator.speaker(ALICE)
        sink = h.emulator.bot_audio
        before_ms = sink.ms
        await speaker.say(voices[2]["tower"])
        await wait_for(call.events, DialogueStateChanged, count=3)
        await until(lambda: sink.ms - before_ms >= 2500, "2.5 s of the answer heard (its second sentence)")
        await speaker.say(voices[2]["stop"])
        await wait_for(call.events, InterruptionDetected)
        [cut] = await wait_for(call.events, ProviderTruncated)
        heard_ms = sink.ms - before_ms
        done = await wait_for(call.events, BotUtteranceFinished)
        session = call.server.sessions[0]
        await until(lambda: session.conversation.truncations, "the server to apply the truncate")
    assert abs(cut.audio_end_ms - heard_ms) <= 40.0
    first = done[0]
    assert first.interrupted and first.spoken_text and LONG_ANSWER.startswith(first.spoken_text)
    assert first.spoken_text != LONG_ANSWER
    truncated = session.conversation.truncations
    assert session.errors_sent == []
    assert truncated and truncated[0].audio_end_ms == cut.audio_end_ms
    figures = {m.metric: m.value_ms for m in call.events.of(LatencyMeasured)}
    assert figures["truncate_sent_ms"] <= 20.0
