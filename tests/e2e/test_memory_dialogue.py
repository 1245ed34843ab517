"""A remembered fact comes back in a later turn, through the loopback emulator: real Discord protocol,
receiver, faster-whisper STT, Piper TTS, the offline MiniLM embedder and FAISS; only the LLM is
scripted. Alice says "remember that ..." (the spoken path: no model involved), the bot acknowledges;
her later question reaches the model with the memory as its own system message, never as history."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from openab_voice.app.records import build_record_parts
from openab_voice.bus.events import Event
from openab_voice.clock import SystemClock
from openab_voice.config import load_settings
from openab_voice.engine.bundle import ConversationProviders
from openab_voice.engine.events import BotUtteranceFinished
from openab_voice.engine.settings import DialogueSettings, negotiate
from openab_voice.memory.intake import ACK_SAVED
from openab_voice.providers.chat import ChatMessage
from openab_voice.stt.events import TranscriptFinal
from openab_voice.testing.chat import ScriptedChatModel
from openab_voice.testing.emulator import EmulatorConfig
from openab_voice.testing.harness import BotOnEmulator
from tests.fakes import waiting

pytestmark = pytest.mark.e2e

ALICE = 1001
LINES = {"remember": "Remember that Alice prefers green tea.", "ask": "What should I make Alice to drink?"}


def answer(messages: Sequence[ChatMessage]) -> str:
    memory = [m.content for m in messages if m.role == "system" and "long-term memory" in m.content]
    return "Green tea, she likes it." if memory and "green tea" in memory[0].lower() else "I do not know."


async def until(events: list[Event], condition: Any, what: str, within_s: float = 40.0) -> None:
    def described() -> str:
        said = [
            getattr(e, "text", "") for e in events if isinstance(e, (TranscriptFinal, BotUtteranceFinished))
        ]
        return f"{what}; heard and said: {said}"

    await waiting.until(condition, described, within_s=within_s, every_s=0.05)


async def test_a_remembered_fact_is_recalled_into_a_later_turn(voices: Any, tmp_path: Path) -> None:
    stt, tts, speech = voices
    chat = ScriptedChatModel(SystemClock(), [answer], ttft_s=0.1, token_s=0.01)
    dialogue, caps = negotiate(
        DialogueSettings(), stt=stt.capabilities, tts=tts.capabilities, chat=chat.capabilities
    )
    providers = ConversationProviders(stt=stt, tts=tts, chat=chat, dialogue=dialogue, capabilities=caps)
    settings = load_settings(
        {}, playback_enabled=True, dialogue_enabled=True, memory_enabled=True, data_dir=tmp_path / "data"
    )
    records = build_record_parts(settings)
    assert records is not None and records.memory is not None and records.memory.health.ok
    events: list[Event] = []
    try:
        h = BotOnEmulator(
            settings,
            EmulatorConfig(dave=False, bot_name="Jarvis"),
            users={ALICE: "alice"},
            providers=providers,
            records=records,
        )
        h.bus.subscribe(Event, events.append)

        def said() -> list[str]:
            return [e.spoken_text for e in events if isinstance(e, BotUtteranceFinished)]

        async with h:
            await h.emulator.speaker(ALICE).say(speech["remember"])
            await until(events, lambda: ACK_SAVED in said(), "the acknowledgment")
            assert chat.requests == []  # the phrase is not a dialogue turn
            (saved,) = records.memory.recent(guild_id=h.emulator.guild_id)
            assert saved.speaker_id == str(ALICE) and "green tea" in saved.text.lower()
            assert saved.kind == "preference" and saved.source == "phrase"

            await h.emulator.speaker(ALICE).say(speech["ask"])
            await until(events, lambda: "Green tea, she likes it." in said(), "the answer from memory")
            assert h.session.conversation is not None
            history = h.session.conversation.context.dump()
    finally:
        records.close()
    (request,) = chat.requests
    notes = [m.content for m in request if m.role == "system" and "long-term memory" in m.content]
    assert len(notes) == 1 and "preference:" in notes[0] and "(saved by alice)" in notes[0]
    assert [m.role for m in request][-1] == "user"
    assert all("long-term memory" not in row["text"] for row in history)  # never recorded as history
