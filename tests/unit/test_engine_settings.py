"""Dialogue settings validation and honest capability negotiation."""

from __future__ import annotations

import pytest

from openab_voice.engine.settings import DialogueMode, DialogueSettings, negotiate
from openab_voice.errors import ConfigError, ProviderUnavailable
from openab_voice.providers.chat import ChatCapabilities
from openab_voice.providers.tts import TtsCapabilities
from openab_voice.stt.base import SttCapabilities

CHAT = ChatCapabilities(name="fake", streaming=True, tools=True, model="m")
TTS = TtsCapabilities(name="piper", streaming=False, voice="v", native_rate=22050)


def stt(streaming: bool) -> SttCapabilities:
    return SttCapabilities(
        name="whisper", streaming=streaming, sample_rate=16000, languages=("en",), model="tiny"
    )


def test_streaming_stt_is_full_duplex() -> None:
    settings, caps = negotiate(DialogueSettings(), stt=stt(True), tts=TTS, chat=CHAT)
    assert settings.mode is DialogueMode.FULL_DUPLEX
    assert caps.full_duplex and caps.interruption and caps.partials and caps.semantic_tools
    assert caps.streaming_output and not caps.tts_streaming


def test_batch_stt_cannot_be_full_duplex() -> None:
    with pytest.raises(ProviderUnavailable) as info:
        negotiate(DialogueSettings(), stt=stt(False), tts=TTS, chat=CHAT)
    assert info.value.code == "ENGINE_FULL_DUPLEX_UNAVAILABLE"
    assert info.value.to_dict()["stt"] == "whisper"


def test_allowed_fallback_is_reported_as_half_duplex() -> None:
    settings, caps = negotiate(
        DialogueSettings(allow_half_duplex_fallback=True), stt=stt(False), tts=TTS, chat=CHAT
    )
    assert settings.mode is DialogueMode.TURN_BASED
    assert caps.mode is DialogueMode.TURN_BASED and not caps.full_duplex and not caps.interruption


def test_turn_based_is_never_reported_full_duplex() -> None:
    _, caps = negotiate(DialogueSettings(mode=DialogueMode.TURN_BASED), stt=stt(True), tts=TTS, chat=CHAT)
    assert not caps.full_duplex and not caps.interruption


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_context_turns", 0),
        ("max_response_sentences", 0),
        ("max_tool_rounds", 0),
        ("max_channel_notes", -1),
        ("false_interruption_window_s", 0.0),
        ("cancel_timeout_s", -1.0),
        ("wake_name", "  "),
    ],
)
def test_invalid_settings(field: str, value: object) -> None:
    with pytest.raises(ConfigError) as info:
        DialogueSettings(**{field: value})  # type: ignore[arg-type]
    assert info.value.setting == field
