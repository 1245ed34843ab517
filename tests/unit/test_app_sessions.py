"""The session factory: which parts a voice session gets for which configuration, and how they are
wired (finals reach the intake through the session's desk, not the bus; the acknowledgment reaches
the conversation; the configured control channel wins)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

import discord

from openab_voice.actions.broker import ActionBroker
from openab_voice.app.sessions import SessionFactory, SessionOptions
from openab_voice.audio.settings import FrontEndSettings
from openab_voice.bus import EventBus
from openab_voice.clock import FakeClock
from openab_voice.discord.host.session import VoiceSession
from openab_voice.discord.wire.receiver import ReceiverSettings
from openab_voice.engine.bundle import ConversationProviders
from openab_voice.engine.settings import DialogueSettings
from openab_voice.stt.events import TranscriptFinal
from openab_voice.testing.dialogue_fakes import FakeChatModel, FakeTextToSpeech
from tests.fakes.sessions import RecordingBroker, SilentStt

GUILD, VOICE, JOIN_TEXT, CONFIGURED_TEXT, BOT, ALICE = 10, 20, 30, 40, 99, 1001


def channel() -> discord.VoiceChannel:
    me = SimpleNamespace(id=BOT, display_name="Jarvis")
    guild = SimpleNamespace(id=GUILD, me=me)
    return cast(discord.VoiceChannel, SimpleNamespace(id=VOICE, name="general", guild=guild, members=[]))


def factory(
    clock: FakeClock,
    bus: EventBus,
    *,
    providers: ConversationProviders | None = None,
    playback: bool = False,
    broker: RecordingBroker | None = None,
    action_channel_id: int | None = None,
) -> SessionFactory:
    options = SessionOptions(
        receiver=ReceiverSettings(),
        frontend=FrontEndSettings(),
        playback_enabled=playback,
        playback_buffer_ms=200,
    )
    return SessionFactory(
        bus=bus,
        clock=clock,
        options=options,
        providers=providers or ConversationProviders(),
        broker=cast(ActionBroker, broker),
        action_channel_id=action_channel_id,
    )


def dialogue(clock: FakeClock) -> ConversationProviders:
    return ConversationProviders(
        stt=SilentStt(),
        tts=FakeTextToSpeech(clock),
        chat=FakeChatModel(clock, []),
        dialogue=DialogueSettings(),
    )


def final(session: VoiceSession, text: str) -> TranscriptFinal:
    return TranscriptFinal(
        at=0.0,
        session_id=session.id,
        speaker_id=str(ALICE),
        utterance_id="1001-1",
        text=text,
        audio_start=0.0,
        audio_end=1.0,
        partials=1,
    )


async def test_receive_only_is_a_receiver_and_a_front_end() -> None:
    clock, bus = FakeClock(), EventBus()
    session = factory(clock, bus)(channel(), generation=3, text_channel_id=JOIN_TEXT)
    try:
        assert session.generation == 3 and len(session.id) == 12
        assert session.receiver is not None and session.frontend is not None
        assert (session.playback, session.transcriber, session.conversation, session.intake) == (None,) * 4
        assert await session.say("hello") is False
    finally:
        await session.aclose()


async def test_each_join_is_a_new_session_id() -> None:
    clock, bus = FakeClock(), EventBus()
    build = factory(clock, bus)
    first = build(channel(), generation=1, text_channel_id=None)
    second = build(channel(), generation=2, text_channel_id=None)
    try:
        assert first.id != second.id
    finally:
        await first.aclose()
        await second.aclose()


async def test_dialogue_needs_playback() -> None:
    clock, bus = FakeClock(), EventBus()
    session = factory(clock, bus, providers=dialogue(clock))(channel(), generation=1, text_channel_id=None)
    try:
        assert session.transcriber is not None
        assert session.conversation is None  # it could not be heard
    finally:
        await session.aclose()


async def test_the_full_session_and_the_configured_control_channel() -> None:
    clock, bus = FakeClock(), EventBus()
    broker = RecordingBroker()
    build = factory(
        clock, bus, providers=dialogue(clock), playback=True, broker=broker, action_channel_id=CONFIGURED_TEXT
    )
    session = build(channel(), generation=5, text_channel_id=JOIN_TEXT)
    try:
        assert session.playback is not None and session.transcriber is not None
        assert session.conversation is not None and session.intake is not None
        assert await session.say("the result is in the text channel") is True
        session.desk.route(final(session, "Jarvis, start a task: write the release notes"))
        await clock.sleep(0)  # the intake proposes from a task of its own
        await clock.sleep(0)
        (request,) = broker.requests
        assert request.goal == "write the release notes"
        assert request.text_channel_id == CONFIGURED_TEXT  # not where the join was asked
        assert (request.session_generation, request.voice_session_id) == (5, session.id)
        assert (request.guild_id, request.voice_channel_id, request.speaker_id) == (GUILD, VOICE, ALICE)
    finally:
        await session.aclose()


async def test_without_a_configured_channel_actions_go_where_the_join_was_asked() -> None:
    clock, bus = FakeClock(), EventBus()
    broker = RecordingBroker()
    session = factory(clock, bus, broker=broker)(channel(), generation=1, text_channel_id=JOIN_TEXT)
    try:
        assert session.conversation is None and session.intake is not None
        session.desk.route(final(session, "start a task: tidy the changelog"))
        await clock.sleep(0)
        await clock.sleep(0)
        assert [r.text_channel_id for r in broker.requests] == [JOIN_TEXT]
    finally:
        await session.aclose()


async def test_a_final_on_the_bus_proposes_nothing() -> None:
    """The bus is for observers: only the session's desk hands finals to the intake."""
    clock, bus = FakeClock(), EventBus()
    broker = RecordingBroker()
    session = factory(clock, bus, broker=broker)(channel(), generation=1, text_channel_id=JOIN_TEXT)
    try:
        bus.publish(final(session, "start a task: tidy the changelog"))
        await clock.sleep(0)
        await clock.sleep(0)
        assert broker.requests == []
    finally:
        await session.aclose()


async def test_no_control_channel_no_intake() -> None:
    clock, bus = FakeClock(), EventBus()
    session = factory(clock, bus, broker=RecordingBroker())(channel(), generation=1, text_channel_id=None)
    try:
        assert session.intake is None
    finally:
        await session.aclose()
