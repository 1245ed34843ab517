"""The providers every voice session shares, built once from settings (models load here)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace

from openab_voice.audio.frontend import FrontEnd
from openab_voice.audio.settings import FrontEndSettings
from openab_voice.bus import EventBus
from openab_voice.bus.events import ErrorRaised
from openab_voice.clock import Clock
from openab_voice.config import Settings
from openab_voice.engine.bundle import ConversationProviders
from openab_voice.engine.live import live_capabilities
from openab_voice.engine.realtime import realtime_capabilities
from openab_voice.engine.settings import (
    SMALL_MODEL_PROMPT,
    SMALL_MODEL_SENTENCES,
    DialogueMode,
    DialogueSettings,
    language_instruction,
    negotiate,
)
from openab_voice.errors import OpenabError
from openab_voice.providers.chat import ChatConfig, chat_registry
from openab_voice.providers.live import LiveConfig
from openab_voice.providers.live_openai import OpenAILive
from openab_voice.providers.live_openai import probe as probe_live
from openab_voice.providers.realtime_openai import OpenAIRealtime, probe, realtime_config
from openab_voice.providers.tts import TextToSpeech, TtsConfig, tts_registry
from openab_voice.providers.turn import TurnConfig, turn_registry
from openab_voice.stt.base import SpeechToText, SttConfig, stt_registry
from openab_voice.stt.endpointing import EndOfTurnSettings

log = logging.getLogger(__name__)


def frontend_settings(settings: Settings) -> FrontEndSettings:
    return FrontEndSettings(
        internal_rate=settings.audio_rate,
        apm_provider=settings.apm_provider,
        vad_provider=settings.vad_provider,
        echo_cancellation=settings.echo_cancellation,
        noise_suppression=settings.noise_suppression,
        auto_gain_control=settings.auto_gain_control,
        vad_min_silence_ms=settings.vad_min_silence_ms,
        drift_tolerance_ms=settings.audio_drift_tolerance_ms,
        workers=settings.audio_workers,
    )


def end_of_turn_settings(settings: Settings) -> EndOfTurnSettings:
    return EndOfTurnSettings(
        decide_after_ms=settings.turn_decide_after_ms,
        max_silence_ms=settings.turn_max_silence_ms,
        threshold=settings.turn_threshold,
    )


def check_providers(settings: Settings, *, bus: EventBus, clock: Clock) -> None:
    """Start the configured audio providers once, so a missing one fails at start-up, not at /voice join.

    Raises:
        ProviderUnavailable: naming the provider and the extra to install.
    """
    FrontEnd(frontend_settings(settings), bus=bus, clock=clock)  # probes each provider in __init__


def build_providers(settings: Settings) -> ConversationProviders:
    """Create the configured providers (loads models: call once, at start-up).

    Raises:
        ProviderUnavailable: a configured provider cannot start; ``ENGINE_FULL_DUPLEX_UNAVAILABLE``
            when full duplex was asked of providers that cannot do it.
    """
    providers = ConversationProviders()
    if not settings.transcription_enabled:
        return providers
    language = None if settings.language == "auto" else settings.language  # None: detected per decode
    providers.stt = stt_registry().create(
        settings.stt_provider, SttConfig(model=settings.stt_model, language=language)
    )
    if settings.end_of_turn == "semantic":
        providers.turn_detector = turn_registry().create(
            "smart-turn", TurnConfig(model_path=settings.turn_model_path)
        )
        providers.turns = end_of_turn_settings(settings)
    if not settings.dialogue_enabled:
        return providers
    key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
    # The cascade's voice; with a speech-to-speech engine (realtime, live), its exact voice (status
    # lines are never left to the model's words).
    providers.tts = tts_registry().create(
        settings.tts_provider,
        TtsConfig(
            base_url=settings.openai_base_url,
            api_key=key,
            voice=settings.tts_voice,
            first_chunk_words=settings.tts_first_chunk_words,
        ),
    )
    if settings.engine == "realtime":
        return _realtime(settings, providers)
    if settings.engine == "live":
        return _live(settings, providers)
    return _cascade(settings, providers, key=key, stt=providers.stt, tts=providers.tts)


def _cascade(
    settings: Settings,
    providers: ConversationProviders,
    *,
    key: str | None,
    stt: SpeechToText,
    tts: TextToSpeech,
) -> ConversationProviders:
    """``OPENAB_ENGINE=cascade``: the chat model answers, ``tts`` speaks; the dialogue is negotiated
    from what the recognizer, the voice and the chat model can do."""
    providers.chat = chat_registry().create(
        settings.chat_provider,
        ChatConfig(
            temperature=0.3,
            model=settings.chat_model,
            base_url=settings.openai_base_url,
            api_key=key,
            max_tokens=settings.chat_max_tokens,
        ),
    )
    dialogue = DialogueSettings(
        mode=DialogueMode(settings.assistant_mode),
        wake_name=settings.wake_name,
        preemptive_generation=settings.preemptive_generation,
        ignore_backchannels=settings.ignore_backchannels,
    )
    if settings.system_prompt:
        dialogue = replace(dialogue, system_prompt=settings.system_prompt)
    elif settings.chat_provider == "llama":
        # The offline 135M model follows a short, concrete instruction far better than the full prompt.
        dialogue = replace(dialogue, system_prompt=SMALL_MODEL_PROMPT)
    if settings.chat_provider == "llama":
        dialogue = replace(dialogue, max_response_sentences=SMALL_MODEL_SENTENCES)
    dialogue = _in_language(dialogue, settings.language)
    providers.dialogue, providers.capabilities = negotiate(
        dialogue,
        stt=stt.capabilities,
        tts=tts.capabilities,
        chat=providers.chat.capabilities,
    )
    return providers


def live_config(settings: Settings) -> LiveConfig:
    """Where ``OPENAB_ENGINE=live`` connects (``OPENAI_*``); the key never leaves this object."""
    key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
    return LiveConfig(
        model=settings.openai_live_model,
        voice=settings.openai_live_voice,
        base_url=settings.openai_base_url,
        api_key=key,
    )


def _realtime(settings: Settings, providers: ConversationProviders) -> ConversationProviders:
    """``OPENAB_ENGINE=realtime``: the provider speaks; our STT still decides the turns (wake name)."""
    providers.realtime = OpenAIRealtime(realtime_config(settings))
    providers.realtime_voice = settings.openai_realtime_voice
    providers.dialogue = _speech_to_speech_dialogue(settings)
    providers.capabilities = realtime_capabilities(providers.dialogue.mode)
    return providers


def _live(settings: Settings, providers: ConversationProviders) -> ConversationProviders:
    """``OPENAB_ENGINE=live``: GPT-Live speaks; our STT still decides the turns (docs/adr/0022)."""
    providers.live = OpenAILive(live_config(settings))
    providers.live_voice = settings.openai_live_voice
    providers.live_backend_model = settings.openai_live_backend_model
    providers.dialogue = _speech_to_speech_dialogue(settings)
    providers.capabilities = live_capabilities(providers.dialogue.mode)
    return providers


def _speech_to_speech_dialogue(settings: Settings) -> DialogueSettings:
    """The dialogue of an engine whose provider speaks (realtime, live)."""
    dialogue = DialogueSettings(
        mode=DialogueMode(settings.assistant_mode),
        wake_name=settings.wake_name,
        preemptive_generation=False,  # a provider response cannot be held unheard
        ignore_backchannels=settings.ignore_backchannels,
    )
    if settings.system_prompt:
        dialogue = replace(dialogue, system_prompt=settings.system_prompt)
    return _in_language(dialogue, settings.language)


def _in_language(dialogue: DialogueSettings, language: str) -> DialogueSettings:
    """The system prompt with the users' language said (``OPENAB_LANGUAGE``; nothing for English)."""
    instruction = language_instruction(language)
    if instruction is None:
        return dialogue
    return replace(dialogue, system_prompt=f"{dialogue.system_prompt} {instruction}")


async def probe_engine(
    providers: ConversationProviders, *, bus: EventBus, clock: Clock
) -> OpenabError | None:
    """At start-up, open one session of the speech-to-speech engine (realtime or live): a refused key
    or an unknown model is reported now (``ErrorRaised``, logged) and the dialogue is switched off,
    so every call stays up receive-only.

    A failure worth retrying (the server unreachable) keeps the engine: each call reconnects.
    Returns the error, or None when the provider accepted the session (or there is none).
    """
    target = _speech_provider(providers)
    if target is None:
        return None
    engine, model, check = target
    try:
        await check()
    except OpenabError as exc:
        log.error("%s engine unavailable: %s", engine, exc)
        bus.publish(
            ErrorRaised(
                at=clock.monotonic(),
                code=exc.code,
                message=exc.message,
                retryable=exc.retryable,
                details={"engine": engine, "model": model},
            )
        )
        if not exc.retryable:
            providers.dialogue = None  # receive-only: transcription goes on, nobody is answered
        return exc
    return None


"""The name :func:`probe_engine` had before the live engine (``openab_voice.app`` exports it)."""


def _speech_provider(
    providers: ConversationProviders,
) -> tuple[str, str, Callable[[], Awaitable[object]]] | None:
    """The speech-to-speech provider to probe: (engine, model, probe), or None for the cascade."""
    if (realtime := providers.realtime) is not None:
        return "realtime", realtime.model, lambda: probe(realtime)
    if (live := providers.live) is not None:
        return "live", live.model, lambda: probe_live(live)
    return None
