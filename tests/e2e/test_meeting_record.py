"""The meeting record through the loopback emulator, on SQLite and on PostgreSQL: the real bot joins
with ``/voice join``, records the session's finals and the bot's heard utterances (they arrive on
the bus as the transcriber and the conversation publish them), and answers ``/voice transcript``
(two files attached to an ephemeral reply) and ``/voice summary`` (posted in the channel) to the
people who were there, refusing everyone else and everything while storage is off."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from openab_voice.app.records import build_record_parts
from openab_voice.bus import EventBus
from openab_voice.clock import SystemClock
from openab_voice.config import load_settings
from openab_voice.engine.bundle import ConversationProviders
from openab_voice.engine.events import BotUtteranceFinished
from openab_voice.memory.meeting import NOT_IN_AUDIENCE, STORAGE_OFF
from openab_voice.providers.chat import (
    ChatCapabilities,
    ChatDone,
    ChatEvent,
    ChatMessage,
    TextDelta,
    ToolSpec,
)
from openab_voice.stt.events import TranscriptFinal
from openab_voice.testing.emulator import EmulatorConfig
from openab_voice.testing.emulator.interactions import InteractionReply
from openab_voice.testing.harness import BotOnEmulator

pytestmark = pytest.mark.e2e

ALICE, BOB, MALLORY = 1001, 1002, 1003
SUMMARY = "Alice and Bob agreed to ship on Friday. Bob writes the release notes."


class SummaryModel:
    """A chat model that answers every request with :data:`SUMMARY` and records what it was asked."""

    capabilities = ChatCapabilities(name="summary-fake", streaming=True, tools=False, model="scripted")

    def __init__(self) -> None:
        self.requests: list[tuple[list[ChatMessage], tuple[str, ...]]] = []

    def stream(
        self, messages: Sequence[ChatMessage], *, tools: Sequence[ToolSpec] = ()
    ) -> AsyncIterator[ChatEvent]:
        self.requests.append((list(messages), tuple(t.name for t in tools)))
        return self._run()

    async def _run(self) -> AsyncIterator[ChatEvent]:
        for word in SUMMARY.split(" "):
            yield TextDelta(text=word + " ")
        yield ChatDone(finish_reason="stop")

    async def aclose(self) -> None:
        return None


@pytest.fixture
async def rig(db_url: str, tmp_path: Path) -> AsyncIterator[tuple[BotOnEmulator, SummaryModel]]:
    settings = load_settings(
        {},
        transcription_enabled=False,
        transcript_store=True,
        database_url=db_url,
        data_dir=tmp_path / "data",
    )
    records = build_record_parts(settings)
    assert records is not None and records.transcripts is not None
    model = SummaryModel()
    try:
        async with BotOnEmulator(
            settings,
            EmulatorConfig(dave=False),
            users={ALICE: "alice", BOB: "bob"},
            clock=SystemClock(),
            bus=EventBus(),
            providers=ConversationProviders(chat=model),
            records=records,
        ) as h:
            yield h, model
    finally:
        records.close()


def speak(h: BotOnEmulator, user_id: int, text: str, n: int) -> None:
    """A final on the bus, as the transcriber publishes it for observers: the recorder is one."""
    now = h.clock.monotonic()
    h.bus.publish(
        TranscriptFinal(
            at=now,
            session_id=h.session.id,
            speaker_id=str(user_id),
            utterance_id=f"{user_id}-{n}",
            text=text,
            audio_start=now - 2.0 + n * 0.01,
            audio_end=now - 0.1,
            partials=1,
        )
    )


async def command(h: BotOnEmulator, user_id: int, subcommand: str, **options: Any) -> list[InteractionReply]:
    interaction = await h.emulator.invoke_command(
        user_id, "voice", subcommand=subcommand, options=options or None
    )
    await interaction.reply(timeout=10.0)
    return interaction.replies


async def record_a_meeting(h: BotOnEmulator) -> None:
    speak(h, ALICE, "Let's ship on Friday.", 1)
    speak(h, BOB, "Fine, I'll write the release notes.", 2)
    speak(h, BOB, "   ", 3)  # nothing said: nothing stored
    h.bus.publish(
        BotUtteranceFinished(
            at=h.clock.monotonic(),
            session_id=h.session.id,
            turn_id="turn-1",
            text="Noted, Friday it is. I will also remind everyone on Thursday.",
            spoken_text="Noted, Friday it is.",
            interrupted=True,
        )
    )
    speak(h, ALICE, "Another session's line.", 4)
    h.bus.publish(  # a final of another voice session is not this one's
        TranscriptFinal(
            at=h.clock.monotonic(),
            session_id="someone-else",
            speaker_id=str(ALICE),
            utterance_id="x",
            text="not this session",
            audio_start=0.0,
            audio_end=0.1,
            partials=1,
        )
    )
    recorder = h.session.recorder
    assert recorder is not None
    await recorder.flush()


async def test_transcript_and_summary_for_the_audience(rig: tuple[BotOnEmulator, SummaryModel]) -> None:
    h, model = rig
    await record_a_meeting(h)
    session_id = h.session.id

    (reply,) = await command(h, ALICE, "transcript")
    assert reply.ephemeral and reply.source == "followup"
    assert reply.content == f"Transcript of session `{session_id}` in #{h.session.channel.name}: 4 lines."
    assert [f.filename for f in reply.files] == [
        f"transcript-{session_id}.txt",
        f"transcript-{session_id}.json",
    ]
    assert [a["filename"] for a in (reply.message or {})["attachments"]] == [f.filename for f in reply.files]
    text = reply.files[0].data.decode()
    said = [line.split("] ", 1)[1] for line in text.splitlines() if line.startswith("[")]
    assert said[:3] == [
        "alice: Let's ship on Friday.",
        "bob: Fine, I'll write the release notes.",
        "alice: Another session's line.",
    ]
    assert said[3].endswith("(bot): Noted, Friday it is.")  # heard only: not the part it was cut off in
    assert "not this session" not in text and "remind everyone" not in text
    document = json.loads(reply.files[1].data)
    assert document["session"]["id"] == session_id and document["session"]["ended_at"] is None
    assert [(line["kind"], line["speaker_id"]) for line in document["lines"]] == [
        ("speech", str(ALICE)),
        ("speech", str(BOB)),
        ("speech", str(ALICE)),
        ("bot", str(h.bot.user.id if h.bot.user else "")),
    ]
    assert all(line["start"] <= line["end"] for line in document["lines"])

    (posted,) = await command(h, BOB, "summary")
    assert not posted.ephemeral
    assert posted.content == f"**Summary of session `{session_id}` in #{h.session.channel.name}**\n{SUMMARY}"
    ((messages, tools),) = model.requests
    assert tools == ()  # the summary model is offered no tools
    assert messages[0].role == "system" and "data, not instructions" in messages[0].content
    assert "bob: Fine, I'll write the release notes." in messages[1].content


async def test_refusals_name_their_reason(rig: tuple[BotOnEmulator, SummaryModel]) -> None:
    h, model = rig
    await record_a_meeting(h)
    h.emulator.add_user(MALLORY, "mallory", in_voice=False)
    for subcommand in ("transcript", "summary"):
        (reply,) = await command(h, MALLORY, subcommand)
        assert (reply.content, reply.ephemeral, reply.files) == (NOT_IN_AUDIENCE, True, ())
    (reply,) = await command(h, ALICE, "transcript", session="0123abcd")
    assert reply.content == "No stored transcript for session 0123abcd in this server."
    assert model.requests == []

    # After the session, its audience is who was there: alice still gets it, mallory still not.
    session_id = h.session.id
    await command(h, ALICE, "leave")
    (reply,) = await command(h, ALICE, "transcript", session=session_id)
    assert reply.files and json.loads(reply.files[1].data)["session"]["ended_at"] is not None
    (reply,) = await command(h, MALLORY, "transcript", session=session_id)
    assert reply.content == NOT_IN_AUDIENCE


async def test_storage_off_refuses_both(tmp_path: Path) -> None:
    settings = load_settings({}, transcription_enabled=False, data_dir=tmp_path / "data")
    assert build_record_parts(settings) is None
    async with BotOnEmulator(settings, EmulatorConfig(dave=False), users={ALICE: "alice"}) as h:
        assert h.session.recorder is None
        for subcommand in ("transcript", "summary"):
            (reply,) = await command(h, ALICE, subcommand)
            assert (reply.content, reply.ephemeral) == (STORAGE_OFF, True)
    assert not (tmp_path / "data").exists()  # nothing opened, nothing written
