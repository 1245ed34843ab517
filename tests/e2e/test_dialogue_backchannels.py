"""Backchannels over the bot through the loopback Discord emulator, with real faster-whisper STT and
Piper speech (the lines in the bot's own voice): a "yeah, that's right" does not cut the answer,
"wait, stop" does."""

from __future__ import annotations

import asyncio

import pytest

from openab_voice.clock import SystemClock
from openab_voice.config import load_settings
from openab_voice.engine.bundle import ConversationProviders
from openab_voice.engine.events import (
    BotUtteranceFinished,
    DialogueStateChanged,
    InterruptionDetected,
    TurnAccepted,
    TurnIgnored,
)
from openab_voice.engine.settings import DialogueSettings, negotiate
from openab_voice.stt.events import TranscriptDiscarded, TranscriptFinal
from openab_voice.testing.chat import ScriptedChatModel
from openab_voice.testing.emulator import EmulatorConfig
from openab_voice.testing.events import EventLog
from openab_voice.testing.harness import BotOnEmulator
from tests.fakes.voices import Voices
from tests.fakes.waiting import until

pytestmark = pytest.mark.e2e

ALICE = 1001
LONG_ANSWER = (  # ~9 s: a backchannel 2 s in leaves most of it to be heard, and a stop after it
    "The Eiffel Tower is in Paris. It was finished in eighteen eighty nine for the World's Fair. "
    "It is about three hundred metres tall. Millions of people visit it every single year."
)
LAST = "Millions of people visit it every single year."
LINES = {
    "tower": "Tell me about the Eiffel Tower.",
    # About 1 s of speech: a voice starting while the bot talks is suppressed by the echo canceller
    # for ~0.7-0.9 s (docs/adr/0019-backchannels.md), so a bare "Yeah." (0.3 s) is at times not
    # heard, and with a core busy the start of "Okay, got it." was ("Okay, find it."). Every ending
    # of this one is a backchannel too ("that's right", "right").
    "backchannel": "Yeah, that's right.",
    "stop": "Wait, stop please, I want to ask you something else instead.",
}


def session(voices: Voices, replies: list[str]) -> tuple[BotOnEmulator, ScriptedChatModel, EventLog]:
    stt, tts, _ = voices
    chat = ScriptedChatModel(SystemClock(), replies, ttft_s=0.2, token_s=0.01)
    dialogue, caps = negotiate(
        DialogueSettings(), stt=stt.capabilities, tts=tts.capabilities, chat=chat.capabilities
    )
    providers = ConversationProviders(stt=stt, tts=tts, chat=chat, dialogue=dialogue, capabilities=caps)
    settings = load_settings({}, playback_enabled=True, dialogue_enabled=True)
    h = BotOnEmulator(
        settings, EmulatorConfig(dave=True, bot_name="Jarvis"), users={ALICE: "alice"}, providers=providers
    )
    return h, chat, EventLog(h.bus)


def heard(events: EventLog) -> str:
    kinds = ("Transcript", "Turn", "Speech", "Interruption", "DialogueState")
    shown = [(type(e).__name__, getattr(e, "text", getattr(e, "cause", ""))) for e in events.events]
    return str([s for s in shown if s[0].startswith(kinds)])


async def until_transcribed(events: EventLog, since: int) -> None:
    """Until alice's words said after event ``since`` were transcribed (or found to be none)."""
    await until(
        lambda: any(isinstance(e, TranscriptFinal | TranscriptDiscarded) for e in events.events[since:]),
        lambda: f"alice's words transcribed; {heard(events)}",
        within_s=15,
        every_s=0.05,
    )


async def test_a_backchannel_over_the_answer_does_not_cut_it(voices: Voices) -> None:
    h, chat, events = session(voices, [LONG_ANSWER, "This second answer must not be said."])
    async with h:
        speaker = h.emulator.speaker(ALICE)
        await speaker.say(voices[2]["tower"])
        await until(
            lambda: h.session.conversation.state.value == "speaking", lambda: heard(events), every_s=0.05
        )
        await asyncio.sleep(2.0)  # real time: 2 s into the answer
        since = len(events.events)
        await speaker.say(voices[2]["backchannel"])
        await until_transcribed(events, since)
        await until(  # the answer plays to its end, cut by nothing
            lambda: any(not u.interrupted for u in events.of(BotUtteranceFinished)),
            lambda: f"the answer played to its end; {heard(events)}",
            within_s=30,
            every_s=0.05,
        )
        await asyncio.sleep(1.0)  # real time: a window in which a second answer would start
        asked = len(chat.requests)
    said = [e for e in events.of(TranscriptFinal) if "right" in e.text.lower()]
    assert said, heard(events)  # the backchannel was heard (else this test would prove nothing)
    assert [(e.text, e.reason) for e in events.of(TurnIgnored)] == [(said[0].text, "backchannel")]
    assert [e.text for e in events.of(TurnAccepted)] == [events.of(TranscriptFinal)[0].text]
    # Nothing asked but the question (preemptive generation may ask it twice): no answer to "right".
    assert asked == len([r for r in chat.requests if "eiffel" in r[-1].content.lower()])
    finished = events.of(BotUtteranceFinished)
    assert finished[-1].spoken_text.endswith(LAST)  # heard to its last sentence
    if events.of(InterruptionDetected):  # the onset paused it: it went on from the cut sentence
        assert "backchannel" in [e.cause for e in events.of(DialogueStateChanged)]


async def test_wait_stop_after_a_backchannel_still_cuts_the_answer(voices: Voices) -> None:
    h, chat, events = session(voices, [LONG_ANSWER, "Okay, I stopped.", "Okay, I stopped."])
    async with h:
        speaker = h.emulator.speaker(ALICE)
        await speaker.say(voices[2]["tower"])
        await until(
            lambda: h.session.conversation.state.value == "speaking", lambda: heard(events), every_s=0.05
        )
        await asyncio.sleep(1.5)
        since = len(events.events)
        await speaker.say(voices[2]["backchannel"])
        await until_transcribed(events, since)
        await until(
            lambda: h.session.conversation.state.value == "speaking", lambda: heard(events), every_s=0.05
        )
        await asyncio.sleep(1.0)  # real time: the answer goes on, then alice stops it
        stop_at = len(events.events)
        await speaker.say(voices[2]["stop"])
        await until(
            lambda: any("something else" in r[-1].content.lower() for r in chat.requests[1:]),
            lambda: f"the stop asked of the model; {heard(events)}",
            within_s=20,
            every_s=0.05,
        )
    after = events.events[stop_at:]
    assert any(isinstance(e, InterruptionDetected) for e in after), heard(events)
    resumed = [
        e
        for e in after
        if isinstance(e, DialogueStateChanged) and e.cause in ("backchannel", "false_interruption")
    ]
    assert resumed == []  # the cut answer did not go on
    cut = [u for u in events.of(BotUtteranceFinished) if u.turn_id == "turn-1"]
    assert cut and cut[-1].interrupted and not cut[-1].spoken_text.endswith(LAST)
    assert "backchannel" in [e.reason for e in events.of(TurnIgnored)]  # the "yeah" before it was none
