"""The engine seam: the cascade behind DuplexVoiceEngine, capabilities, and provider-loss recovery."""

from __future__ import annotations

from typing import cast

import pytest

from openab_voice.bus import EventBus
from openab_voice.clock import FakeClock
from openab_voice.engine.bundle import ConversationProviders
from openab_voice.engine.cascade import CascadeEngine
from openab_voice.engine.duplex import DISCORD_PCM, AudioFormat, DuplexVoiceEngine, EngineCapabilities
from openab_voice.engine.realtime import RealtimeEngine, realtime_capabilities
from openab_voice.engine.settings import DialogueMode, DialogueSettings, negotiate
from openab_voice.engine.state import (
    DialogueState,
    DiscardResponse,
    ProviderLost,
    Recovered,
    Snapshot,
    transition,
)
from openab_voice.errors import IllegalTransition
from openab_voice.providers.chat import ChatCapabilities
from openab_voice.providers.realtime import RealtimeLink
from openab_voice.providers.tts import TtsCapabilities
from openab_voice.stt.base import SpeechToText, SttCapabilities
from openab_voice.testing.rig import Rig
from tests.unit.test_app_sessions import SilentStt, channel, factory

LOST = ProviderLost(code="REALTIME_CONNECTION_LOST", message="websocket closed")


def test_a_lost_provider_while_listening_recovers_without_effects() -> None:
    snap, effects = transition(Snapshot(state=DialogueState.LISTENING), LOST)
    assert snap.state is DialogueState.RECOVERING and effects == ()
    snap, effects = transition(snap, Recovered())
    assert snap.state is DialogueState.LISTENING and effects == ()


@pytest.mark.parametrize(
    "state", [DialogueState.THINKING, DialogueState.SPEAKING, DialogueState.TOOL_RUNNING]
)
def test_a_lost_provider_discards_the_running_response(state: DialogueState) -> None:
    snap, effects = transition(Snapshot(state=state, turn_id="t1", response_id="t1"), LOST)
    assert snap.state is DialogueState.RECOVERING
    assert effects == (
        DiscardResponse(response_id="t1", code=LOST.code, message=LOST.message, retryable=True),
    )


@pytest.mark.parametrize("state", [DialogueState.IDLE, DialogueState.RECOVERING])
def test_a_lost_provider_changes_nothing_where_nobody_listens_or_recovery_runs(
    state: DialogueState,
) -> None:
    assert transition(Snapshot(state=state), LOST) == (Snapshot(state=state), ())


def test_recovered_is_still_illegal_outside_recovering() -> None:
    with pytest.raises(IllegalTransition):
        transition(Snapshot(state=DialogueState.LISTENING), Recovered())


async def test_the_manager_drives_the_cascade_through_the_seam() -> None:
    async with Rig(replies=[]) as rig:
        engine: DuplexVoiceEngine = rig.manager.engine
        assert isinstance(engine, CascadeEngine)
        assert engine.ready and engine.output is rig.output
        caps = engine.capabilities
        assert caps.engine == "cascade" and caps.exact_speech_output
        assert caps.full_duplex and caps.continuous_duplex and caps.interruption
        assert caps.output_format == DISCORD_PCM


def _stt(streaming: bool) -> SttCapabilities:
    return SttCapabilities(
        name="whisper", streaming=streaming, sample_rate=16000, languages=("en",), model="tiny"
    )


def test_a_batch_stt_tts_pair_is_a_half_duplex_engine_and_says_so() -> None:
    tts = TtsCapabilities(name="piper", streaming=False, voice="v", native_rate=22050)
    chat = ChatCapabilities(name="fake", streaming=True, tools=True, model="m")
    settings, caps = negotiate(
        DialogueSettings(allow_half_duplex_fallback=True), stt=_stt(False), tts=tts, chat=chat
    )
    assert settings.mode is DialogueMode.TURN_BASED
    assert isinstance(caps, EngineCapabilities)
    assert caps.half_duplex and not caps.continuous_duplex and not caps.interruption
    assert caps.engine == "cascade" and caps.input_format == AudioFormat(rate=16000, channels=1)


class _NeverConnects:
    """A realtime connector for wiring tests: nothing here connects."""

    model = "gpt-realtime"

    async def connect(self) -> RealtimeLink:
        raise AssertionError("the session was never started")


async def test_the_session_factory_builds_the_realtime_engine_when_configured() -> None:
    clock, bus = FakeClock(), EventBus()
    providers = ConversationProviders(
        stt=cast(SpeechToText, SilentStt()),  # never decodes here
        dialogue=DialogueSettings(preemptive_generation=False),
        capabilities=realtime_capabilities(DialogueMode.FULL_DUPLEX),
        realtime=_NeverConnects(),
        realtime_voice="cedar",
    )
    session = factory(clock, bus, providers=providers, playback=True)(
        channel(), generation=1, text_channel_id=None
    )
    try:
        assert session.conversation is not None
        engine = session.conversation.engine
        assert isinstance(engine, RealtimeEngine)
        caps = engine.capabilities
        assert caps.engine == "realtime" and not caps.exact_speech_output and caps.full_duplex
        assert caps.provider_input_format == AudioFormat(rate=24_000, channels=1)
        assert caps.output_format == DISCORD_PCM
        assert engine.output is session.playback  # the same playback path as the cascade's
    finally:
        await session.aclose()
